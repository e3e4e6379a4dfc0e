#pragma once
/// Minimal levelled logging to stderr. The level comes from `NIXL_LOG_LEVEL`
/// (error, warn, info, debug, trace; default warn). A program may route the messages elsewhere
/// with `set_sink` (the Python module sends them to its `nixl` logger).

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

namespace nixl::log {

enum class level : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

/// Receives every message that passes the level, instead of stderr. Must not throw.
using sink_fn = void (*)(level, std::string_view) noexcept;

namespace detail {
inline std::atomic<sink_fn>& sink() noexcept {
  static std::atomic<sink_fn> s{nullptr};
  return s;
}
inline level parse_level(const char* s) noexcept {
  if (s == nullptr) return level::warn;
  std::string_view v{s};
  auto is = [&](std::string_view a, std::string_view b) { return v == a || v == b; };
  if (is("error", "ERROR")) return level::error;
  if (is("info", "INFO")) return level::info;
  if (is("debug", "DEBUG")) return level::debug;
  if (is("trace", "TRACE")) return level::trace;
  return level::warn;
}
inline level& current() noexcept {
  static level l = parse_level(std::getenv("NIXL_LOG_LEVEL"));
  return l;
}
inline void emit(level l, std::string_view msg) noexcept {
  if (sink_fn s = sink().load(std::memory_order_acquire)) {
    s(l, msg);
    return;
  }
  static constexpr const char* tags[] = {"E", "W", "I", "D", "T"};
  std::fprintf(stderr, "[nixl %s] %.*s\n", tags[static_cast<int>(l)], static_cast<int>(msg.size()),
               msg.data());
}
}  // namespace detail

/// Sets the level for the whole process.
inline void set_level(level l) noexcept {
  detail::current() = l;
}
/// Sends the messages to `s` from now on; nullptr: back to stderr.
inline void set_sink(sink_fn s) noexcept {
  detail::sink().store(s, std::memory_order_release);
}
/// True when messages of level `l` are printed.
inline bool enabled(level l) noexcept {
  return l <= detail::current();
}

template <class... Args>
void write(level l, fmt::format_string<Args...> f, Args&&... args) noexcept {
  if (!enabled(l)) return;
  try {
    detail::emit(l, fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) noexcept {
  write(level::error, f, std::forward<Args>(args)...);
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) noexcept {
  write(level::warn, f, std::forward<Args>(args)...);
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) noexcept {
  write(level::info, f, std::forward<Args>(args)...);
}
template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) noexcept {
  write(level::debug, f, std::forward<Args>(args)...);
}

}  // namespace nixl::log
