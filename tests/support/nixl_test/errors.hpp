#pragma once
// Turns a setup call that may throw nixl::error into the status it carries.
#include <nixl/status.hpp>

namespace nixl::test {

/// Runs `f`; returns the status of the nixl::error it threw, or success.
template <class F>
nixl::status code_of(F&& f) {
  try {
    f();
  } catch (const nixl::error& e) {
    return e.status_code();
  }
  return nixl::status::success;
}

}  // namespace nixl::test
