#pragma once
// What the POSIX backend's tests share: the parameters of each engine, and the backend contract
// driven without an agent over a backend of its own (the rig itself: nixl_test/file_rig.hpp).

#include <string>
#include <vector>

#include <nixl/backends/posix.hpp>

#include "nixl_test/buffer.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/file_rig.hpp"
#include "nixl_test/temp_file.hpp"

namespace posix_test {

namespace fs = std::filesystem;
using namespace nixl::test;  // buffer, scratch, fd_guard, file_rig, scattered, wait
using nixl::posix::backend;

inline nixl::params engine_params(const std::string& e) {
  if (e == "URING") return {{"use_uring", "true"}};
  if (e == "AIO") return {{"use_aio", "true"}};
  if (e == "POSIX") return {{"use_posix", "true"}};
  if (e == "POSIX-inline") return {{"use_posix", "true"}, {"num_threads", "0"}};
  return {};
}

/// A backend of its own with parameters `p`.
struct own_backend {
  backend b;
  explicit own_backend(const nixl::params& p)
      : b(backend::config::from_params(p), nixl::backend_context{"test"}) {}
};

/// The backend contract without an agent: DRAM `buf` and the file `fd`.
struct direct_rig : own_backend, file_rig<backend> {
  direct_rig(const nixl::params& p, const buffer& buf, int fd)
      : own_backend(p),
        file_rig(own_backend::b, nixl::mem_kind::dram, buf.addr(), buf.size(), 0, fd) {}
  using file_rig::b;
  void prepare(backend::request& r, nixl::xfer_op op, const buffer&,
               const std::vector<piece>& pieces) {
    file_rig::prepare(r, op, pieces);
  }
  nixl::status run(nixl::xfer_op op, const buffer&, const std::vector<piece>& pieces) {
    return file_rig::run(op, pieces);
  }
};

}  // namespace posix_test
