#include <nixl/agent.hpp>

#include "nixl_test/memcpy_backend.hpp"

int main() {
  nixl::agent<nixl::test::memcpy_backend, nixl::test::file_backend> a("a");
  nixl::xfer_list<nixl::vram_t> gpu;
  nixl::xfer_list<nixl::file_t> disk;
  (void)a.create_request(nixl::xfer_op::write, gpu, disk, "a");
}
