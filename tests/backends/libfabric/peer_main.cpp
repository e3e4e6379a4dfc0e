// Target process of the two-process LIBFABRIC tests. Usage:
//   nixl_libfabric_peer <name> <buffer bytes> <provider> [<interfaces>]
// Fills its buffer with pattern 7, writes its metadata to stdout ("MD <len>\n" + bytes), then
// answers line commands on stdin until EOF:
//   SUM <off> <len>     FNV-1a of a buffer range                      -> "SUM <hex>"
//   NOTIFS <count>      waits (30 s at most) for notifications           -> "N <count>"

#include <nixl/agent.hpp>
#include <nixl/backends/libfabric.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "nixl_test/peer_process.hpp"

using nixl::test::fnv;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <name> <bytes> <provider> [<interfaces>]\n", argv[0]);
    return 2;
  }
  try {
    const std::size_t n = std::strtoull(argv[2], nullptr, 10);
    void* mem = nullptr;
    if (n == 0 || ::posix_memalign(&mem, 4096, n) != 0) return 2;
    auto* buf = static_cast<std::byte*>(mem);
    for (std::size_t i = 0; i < n; ++i)
      buf[i] = static_cast<std::byte>((i * 131u + 7u * 7u + (i >> 12)) & 0xff);
    nixl::agent<nixl::libfabric::backend> a{argv[1]};
    nixl::params p{{"provider", argv[3]}};
    if (argc > 4) p["interfaces"] = argv[4];
    a.create_backend<nixl::libfabric::backend>(p);
    a.register_memory(
        nixl::reg_list<nixl::dram_t>{{{reinterpret_cast<std::uintptr_t>(buf), n, 0}, ""}});
    const std::string md = a.local_metadata();
    std::cout << "MD " << md.size() << "\n";
    std::cout.write(md.data(), static_cast<std::streamsize>(md.size()));
    std::cout.flush();
    for (std::string line; std::getline(std::cin, line);) {
      std::istringstream in(line);
      std::string cmd;
      in >> cmd;
      if (cmd == "SUM") {
        std::size_t off = 0, len = 0;
        in >> off >> len;
        if (off > n || len > n - off) len = off = 0;
        std::cout << "SUM " << std::hex << fnv(buf + off, len) << std::dec << std::endl;
      } else if (cmd == "NOTIFS") {
        std::size_t want = 0;
        in >> want;
        std::size_t got = 0;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        nixl::notif_map m;
        while (got < want && std::chrono::steady_clock::now() < until) {
          a.notifications(m);
          got = 0;
          for (auto& [k, v] : m) got += v.size();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::cout << "N " << got << std::endl;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nixl_libfabric_peer: %s\n", e.what());
    return 1;
  }
}
