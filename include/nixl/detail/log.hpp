#pragma once
/// Minimal levelled logging to stderr, as NIXL's (absl) is: each message is one line
/// `W1201 21:25:28.123456   4242 peers.cpp:69] text` (I, W or E, date, time, thread id, the
/// caller's file and line), written with one write(2), so lines of two threads never mix. The
/// level comes from `NIXL_LOG_LEVEL` (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, any case;
/// default WARN; FATAL prints none of these). A program may route the messages elsewhere with
/// `set_sink`.

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

namespace nixl::log {

enum class level : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

/// Receives every message that passes the level, instead of stderr. Must not throw.
using sink_fn = void (*)(level, std::string_view) noexcept;

namespace detail {
/// Where a message was written (clang 14 has no std::source_location; both compilers have these
/// builtins).
struct where_t {
  const char* file = "";
  unsigned line = 0;
  static constexpr where_t current(const char* f = __builtin_FILE(),
                                   unsigned l = __builtin_LINE()) noexcept {
    return {f, l};
  }
  const char* file_name() const noexcept { return file; }
  unsigned line_no() const noexcept { return line; }
};
/// A format string and where it was written (the caller's file and line).
template <class... Args>
struct located {
  fmt::format_string<Args...> text;
  where_t where;
  template <class S>
  requires std::is_convertible_v<const S&, std::string_view>
  consteval located(const S& s, where_t w = where_t::current()) : text(s), where(w) {}
};
template <class... Args>
using located_t = located<std::type_identity_t<Args>...>;

inline std::atomic<sink_fn>& sink() noexcept {
  static std::atomic<sink_fn> s{nullptr};
  return s;
}
inline level parse_level(const char* s) noexcept {
  if (s == nullptr) return level::warn;
  std::string_view v{s};
  auto is = [&](std::string_view name) {
    if (v.size() != name.size()) return false;
    for (std::size_t i = 0; i < v.size(); ++i)
      if ((v[i] | 0x20) != name[i]) return false;
    return true;
  };
  if (is("fatal")) return static_cast<level>(-1);  // none of the levels below
  if (is("error")) return level::error;
  if (is("info")) return level::info;
  if (is("debug")) return level::debug;
  if (is("trace")) return level::trace;
  return level::warn;
}
inline level& current() noexcept {
  static level l = parse_level(std::getenv("NIXL_LOG_LEVEL"));
  return l;
}
/// The whole line, with one write(2) (a short write of a pipe is finished by the next).
inline void to_stderr(level l, std::string_view msg, const where_t& w) {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  ::localtime_r(&ts.tv_sec, &t);
  std::string_view file = w.file_name();
  file = file.substr(file.find_last_of('/') + 1);
  std::string line = fmt::format("{}{:02}{:02} {:02}:{:02}:{:02}.{:06} {:>7} {}:{}] {}\n",
                                 "EWIII"[static_cast<int>(l)], t.tm_mon + 1, t.tm_mday, t.tm_hour,
                                 t.tm_min, t.tm_sec, ts.tv_nsec / 1000,
                                 static_cast<long>(::syscall(SYS_gettid)), file, w.line_no(), msg);
  for (std::string_view rest = line; !rest.empty();) {
    ssize_t n = ::write(2, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}
inline void emit(level l, std::string_view msg, const where_t& w) noexcept {
  if (sink_fn s = sink().load(std::memory_order_acquire)) {
    s(l, msg);
    return;
  }
  try {
    to_stderr(l, msg, w);
  } catch (...) {
  }
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
void write(level l, detail::located_t<Args...> f, Args&&... args) noexcept {
  if (!enabled(l)) return;
  try {
    detail::emit(l, fmt::format(f.text, std::forward<Args>(args)...), f.where);
  } catch (...) {
  }
}
template <class... Args>
void error(detail::located_t<Args...> f, Args&&... args) noexcept {
  write(level::error, f, std::forward<Args>(args)...);
}
template <class... Args>
void warn(detail::located_t<Args...> f, Args&&... args) noexcept {
  write(level::warn, f, std::forward<Args>(args)...);
}
template <class... Args>
void info(detail::located_t<Args...> f, Args&&... args) noexcept {
  write(level::info, f, std::forward<Args>(args)...);
}
template <class... Args>
void debug(detail::located_t<Args...> f, Args&&... args) noexcept {
  write(level::debug, f, std::forward<Args>(args)...);
}

}  // namespace nixl::log
