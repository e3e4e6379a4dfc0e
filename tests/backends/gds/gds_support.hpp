#pragma once
// What the GDS tests share: the settings of GDS and GDS_MT over the fake cuFile, for the backend
// contract driven without an agent (nixl_test/file_rig.hpp), for GDS and GDS_MT alike.

#include <string>

#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds_mt.hpp>

#include "nixl_test/buffer.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/file_rig.hpp"
#include "nixl_test/temp_file.hpp"

namespace gds_test {

namespace fs = std::filesystem;
using namespace nixl::test;  // buffer, scratch, fd_guard, file_rig, piece, scattered, wait
template <class B>
using rig = file_rig<B>;

/// One backend's settings for a test: GDS or GDS_MT, over the library at `lib`; cuFile's
/// compatibility mode off unless `extra` says otherwise, whatever the machine has.
template <class B>
nixl::params params_for(const std::string& lib, nixl::params extra = {}) {
  extra["cufile_path"] = lib;
  extra.try_emplace("compat_mode", "false");
  return extra;
}

/// A bare backend, as if of an agent of its own ("gds-test-GDS" or "gds-test-GDS_MT": one agent
/// may not hold both).
/// With `dram_batch`, host memory goes through the batch API in compatibility mode too (a
/// config field, not a parameter): the fake's batch path is what such tests drive.
template <class B>
B make(const nixl::params& p) {
  auto c = B::config::from_params(p);
  if constexpr (requires { c.host_batch_in_compat; }) c.host_batch_in_compat = c.dram_batch;
  return B(std::move(c), nixl::backend_context{"gds-test-" + std::string(B::name)});
}

}  // namespace gds_test
