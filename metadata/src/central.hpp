#pragma once
// The central-store part of an exchange (private header): our etcd lease and published keys,
// fetches that wait for a key, and watches that drop peers whose keys go away, all driven by
// the etcd thread. The HTTP client itself is etcd.hpp.

#include <future>
#include <memory>
#include <string>
#include <string_view>

#include "common.hpp"

namespace nixl::metadata::detail {

class central_store {
 public:
  /// Connects to ctx.cfg.etcd_endpoints and starts the etcd thread. `ctx` must outlive it.
  explicit central_store(const context& ctx);
  /// Stops the etcd thread (waiting fetches fail with status::canceled) and revokes our
  /// lease, so our keys disappear at once.
  ~central_store();
  central_store(const central_store&) = delete;
  central_store& operator=(const central_store&) = delete;

  std::future<void> publish(std::string_view label, std::string blob);
  std::future<void> fetch(std::string_view agent, std::string_view label);
  std::future<void> unpublish();
  std::string key(std::string_view agent, std::string_view label) const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

}  // namespace nixl::metadata::detail
