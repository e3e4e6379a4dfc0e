#pragma once
// What the listener and the central store of one exchange share (private header).

#include <chrono>
#include <cstddef>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <nixl/metadata/exchange.hpp>
#include <nixl/status.hpp>

namespace nixl::metadata::detail {

using clock = std::chrono::steady_clock;

/// Who an exchange serves: the agent's name, the resolved config and the hooks.
struct context {
  std::string name;
  config cfg;
  hooks h;
};

inline std::exception_ptr make_error(status s, std::string msg) {
  return std::make_exception_ptr(nixl::error(s, std::move(msg)));
}

/// The status and message of an exception thrown by a hook.
inline std::pair<status, std::string> describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const nixl::error& x) {
    return {x.status_code(), x.what()};
  } catch (const std::exception& x) {
    return {status::unknown, x.what()};
  } catch (...) {
    return {status::unknown, "unknown exception"};
  }
}

inline std::span<const std::byte> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

inline void check_name(std::string_view what, std::string_view call, std::string_view v) {
  if (v.empty() || v.find('/') != std::string_view::npos) {
    nixl::raise(status::invalid_param,
                "{}: {} '{}' cannot be used in an etcd key; it must be non-empty and contain no "
                "'/'",
                call, what, v);
  }
}

}  // namespace nixl::metadata::detail
