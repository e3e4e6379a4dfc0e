// OBJ and AZURE_BLOB VRAM where there is no CUDA driver (no server needed): a VRAM registration
// is refused with not_supported and a message naming libcuda.so.1, never a crash; the backend
// keeps working for DRAM. The parameter vram_staging_bytes is parsed and checked. With a GPU,
// obj_vram_gpu_test.cpp moves VRAM <-> objects.

#include <dlfcn.h>

#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/azure_blob.hpp>
#include <nixl/backends/obj.hpp>

#include "obj_test_support.hpp"

namespace {

/// Why the driver is present (the cases below then skip), or empty.
std::string driver_present() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return {};
  ::dlclose(h);
  return "libcuda.so.1 loads here: the GPU tests (nixl_obj_gpu_tests) cover VRAM";
}

nixl::params s3_params() {
  return {{"endpoint_override", "127.0.0.1:9"},
          {"scheme", "http"},
          {"bucket", "nixl-test"},
          {"access_key", "S3RVER"},
          {"secret_key", "S3RVER"}};
}

nixl::params az_params() {
  return {{"connection_string", "UseDevelopmentStorage=true"},
          {"container_name", "nixl-test"},
          {"account_url", "http://127.0.0.1:9/devstoreaccount1"}};
}

/// Where some libcuda.so.1 loads (a GPU machine, or the toolkit's stub on the library path):
/// host memory registered as VRAM is still refused with a nixl::error, never a crash.
template <class B>
void refused_with_driver(const nixl::params& p) {
  nixl::agent<B> ag{"obj-vram"};
  ag.template create_backend<B>(p);
  std::vector<std::byte> host(4096);
  try {
    ag.register_memory(nixl::reg_list<nixl::vram_t>{
        {{reinterpret_cast<std::uintptr_t>(host.data()), 4096, 0}, ""}});
    FAIL("host memory registered as VRAM");
  } catch (const nixl::error& e) {
    INFO(e.what());
    CHECK((e.status_code() == nixl::status::not_supported ||
           e.status_code() == nixl::status::invalid_param));
    CHECK(obj_test::contains(e.what(), std::string(B::name)));
  }
}

template <class B>
void refused_without_driver(const nixl::params& p) {
  if (auto why = driver_present(); !why.empty()) {
    refused_with_driver<B>(p);
    NIXL_SKIP(why);
  }
  nixl::agent<B> ag{"obj-vram"};
  ag.template create_backend<B>(p);
  std::vector<std::byte> fake(4096);  // host memory, never touched as VRAM
  const auto at = reinterpret_cast<std::uintptr_t>(fake.data());
  for (int round = 0; round < 2; ++round) {  // the second time from the cached answer
    try {
      ag.register_memory(nixl::reg_list<nixl::vram_t>{{{at, fake.size(), 0}, ""}});
      FAIL("VRAM registration succeeded without a CUDA driver");
    } catch (const nixl::error& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK(e.status_code() == nixl::status::not_supported);
      CHECK(obj_test::contains(what, "VRAM needs the CUDA driver (libcuda.so.1), not found"));
      CHECK(obj_test::contains(what, std::string(B::name)));
    }
  }
  // DRAM and objects still register.
  ag.register_memory(nixl::reg_list<nixl::dram_t>{{{at, fake.size(), 0}, ""}});
  ag.register_memory(nixl::reg_list<nixl::object_t>{{{0, 0, 1}, "key"}});
}

}  // namespace

TEST_CASE("obj vram: without a CUDA driver a VRAM registration is refused clearly",
          "[obj][s3][vram]") {
  refused_without_driver<nixl::obj::backend>(s3_params());
}

TEST_CASE("azure vram: without a CUDA driver a VRAM registration is refused clearly",
          "[obj][azure][vram]") {
  refused_without_driver<nixl::azure_blob::backend>(az_params());
}

TEST_CASE("obj vram: vram_staging_bytes is parsed, defaults to 64 MiB and is bounded",
          "[obj][s3][vram]") {
  auto p = s3_params();
  CHECK(nixl::obj::config::from_params(p).http.vram_staging_bytes == (64u << 20));
  CHECK(nixl::obj::backend::default_params().at("vram_staging_bytes") == std::to_string(64u << 20));
  p["vram_staging_bytes"] = std::to_string(32u << 20);
  CHECK(nixl::obj::config::from_params(p).http.vram_staging_bytes == (32u << 20));
  p["vram_staging_bytes"] = "0";
  CHECK_THROWS_AS(nixl::obj::config::from_params(p), nixl::error);
  p["vram_staging_bytes"] = "lots";
  CHECK_THROWS_AS(nixl::obj::config::from_params(p), nixl::error);
  auto a = az_params();
  a["vram_staging_bytes"] = std::to_string(16u << 20);
  CHECK(nixl::azure_blob::config::from_params(a).http.vram_staging_bytes == (16u << 20));
}
