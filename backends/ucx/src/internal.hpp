#pragma once
// What the source files of the UCX backend share and users do not see (not installed).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nixl/backends/ucx.hpp>

namespace nixl::ucx::detail {

inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Backends of this process, by id: agents of one process watch each other through it.
struct local_registry {
  std::mutex mu;
  std::unordered_map<std::uint64_t, std::weak_ptr<std::atomic<bool>>> live;
  static local_registry& get() {
    static local_registry r;
    return r;
  }
};

/// UCX's configuration (environment and defaults) with the backend's parameters applied:
/// `device_list`, `engine_config`, and the defaults this backend chooses. Throws
/// `nixl::error(invalid_param)` naming a setting UCX rejects.
config_handle read_ucp_config(const config& cfg);

}  // namespace nixl::ucx::detail
