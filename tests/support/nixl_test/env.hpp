#pragma once
// Environment variables set by a test and unset at scope exit (the telemetry tests).

#include <stdlib.h>

#include <string>
#include <vector>

namespace nixl::test {

/// Sets variables; unsets every one it set when it goes.
struct env_guard {
  std::vector<std::string> names;
  void set(const char* n, const std::string& v) {
    ::setenv(n, v.c_str(), 1);
    names.emplace_back(n);
  }
  ~env_guard() {
    for (const auto& n : names) ::unsetenv(n.c_str());
  }
};

}  // namespace nixl::test
