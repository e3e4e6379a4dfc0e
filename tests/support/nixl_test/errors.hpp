#pragma once
// Turns a setup call that may throw nixl::error into the status or the message it carries.
#include <string>

#include <nixl/status.hpp>

namespace nixl::test {

/// Runs `f`; returns `read(e)` for the nixl::error `e` it threw, or `none` when it threw none.
template <class R, class F, class Read>
R caught(F&& f, Read&& read, R none) {
  try {
    f();
  } catch (const nixl::error& e) {
    return read(e);
  }
  return none;
}

/// Runs `f`; returns the status of the nixl::error it threw, or success.
template <class F>
nixl::status code_of(F&& f) {
  return caught(
      f, [](const nixl::error& e) { return e.status_code(); }, nixl::status::success);
}

/// Runs `f`; returns the message of the nixl::error it threw, or "" when it threw none.
template <class F>
std::string what_of(F&& f) {
  return caught(
      f, [](const nixl::error& e) { return std::string(e.what()); }, std::string());
}

}  // namespace nixl::test
