#pragma once
// A central store of an exchange (private header): one class per kind of store (etcd, TCPStore)
// with the same face, each with its own state in its .cpp; the state's common part and the
// argument checks of the requests.

#include <future>
#include <memory>
#include <string>
#include <string_view>

#include <nixl/status.hpp>
#include "common.hpp"

namespace nixl::metadata::detail {

template <class Kind>
class store {
 public:
  explicit store(const context& ctx);
  ~store();
  store(const store&) = delete;
  store& operator=(const store&) = delete;

  std::future<void> publish(std::string_view label, std::string blob);
  std::future<void> fetch(std::string_view agent, std::string_view label);
  std::future<void> unpublish();
  std::string key(std::string_view agent, std::string_view label) const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// What every store's state keeps of its exchange: our name, the settings and the hooks.
struct store_context {
  const std::string& name;
  const config& cfg;
  const hooks& h;

  explicit store_context(const context& ctx) : name(ctx.name), cfg(ctx.cfg), h(ctx.h) {}
};

/// The checks of publish(): the label, our name and a non-empty blob.
inline void check_publish(std::string_view label, std::string_view name, const std::string& blob) {
  check_name("label", "send_local_metadata", label);
  check_name("agent name", "send_local_metadata", name);
  if (blob.empty()) nixl::raise(status::invalid_param, "send_local_metadata: empty metadata blob");
}

/// The checks of fetch(): the agent's name and the label.
inline void check_fetch(std::string_view agent, std::string_view label) {
  check_name("agent name", "fetch_remote_metadata", agent);
  check_name("label", "fetch_remote_metadata", label);
}

}  // namespace nixl::metadata::detail
