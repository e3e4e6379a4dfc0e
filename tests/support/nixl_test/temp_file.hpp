#pragma once
// Files in tests: a scratch folder removed at the end, and an open descriptor closed at scope
// exit (the file backends' tests: POSIX, GDS, GDS_MT).

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "nixl_test/catch.hpp"

namespace nixl::test {

/// A fresh folder `<base>/<prefix>-XXXXXX` (default: under the temporary folder), removed with
/// all it holds at the end.
struct scratch {
  std::filesystem::path dir;
  explicit scratch(const std::filesystem::path& base = std::filesystem::temp_directory_path(),
                   const std::string& prefix = "nixl-test") {
    std::string tmpl = (base / (prefix + "-XXXXXX")).string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  std::filesystem::path operator/(const std::string& n) const { return dir / n; }
};

/// An open file descriptor (REQUIREd valid), closed at scope exit.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f) : fd(f) { REQUIRE(fd >= 0); }
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
};

}  // namespace nixl::test
