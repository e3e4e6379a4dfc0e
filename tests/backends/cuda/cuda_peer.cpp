// Target process of the two-process CUDA test. Usage: nixl_cuda_peer <gpu> <bytes>.
// Registers a sub-range of a larger allocation on <gpu> (pattern 11) and some DRAM, prints
// "READY <metadata hex> <vram addr> <len> <offset in allocation> <dram addr> <dram len>
// <allocation start>" (the allocation's first 4 KiB are a second region),
// waits for the notification "written" from "initiator", checks that the region now holds
// pattern 22 and prints "RESULT ok" (or "RESULT bad <index>"), then exits on "EXIT".

#include <cstdio>
#include <iostream>

#include "cuda_support.hpp"

using namespace cuda_test;

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const int dev = std::atoi(argv[1]);
  const std::size_t len = std::strtoull(argv[2], nullptr, 10);
  const std::size_t base = (1u << 20) + 512;
  try {
    gpu_buffer big(len + (2u << 20), dev);
    big.fill_pattern(11);
    std::vector<char> dram(1 << 16);
    agent t("peer");
    t.create_backend("CUDA");
    t.register_memory(reg(nixl::mem_kind::vram, big.addr(base), len, dev));
    // a second region of the same allocation (same IPC handle on the other side)
    t.register_memory(reg(nixl::mem_kind::vram, big.addr(0), 4096, dev));
    t.register_memory(
        reg(nixl::mem_kind::dram, reinterpret_cast<std::uintptr_t>(dram.data()), dram.size(), 0));
    std::cout << "READY " << to_hex(t.local_metadata()) << ' ' << big.addr(base) << ' ' << len
              << ' ' << base << ' ' << reinterpret_cast<std::uintptr_t>(dram.data()) << ' '
              << dram.size() << ' ' << big.addr(0) << std::endl;
    if (!wait_notif(t, "initiator", "written", std::chrono::seconds(120))) {
      std::cout << "RESULT timeout" << std::endl;
      return 1;
    }
    auto got = big.download(base, len);
    for (std::size_t i = 0; i < len; ++i)
      if (got[i] != pattern(22, i)) {
        std::cout << "RESULT bad " << i << std::endl;
        return 1;
      }
    std::cout << "RESULT ok" << std::endl;
    std::string line;
    std::getline(std::cin, line);
    return line == "EXIT" ? 0 : 3;
  } catch (const std::exception& e) {
    std::cerr << "nixl_cuda_peer: " << e.what() << std::endl;
    std::cout << "RESULT error" << std::endl;
    return 1;
  }
}
