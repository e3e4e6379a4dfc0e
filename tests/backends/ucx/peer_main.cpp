// Target process of the two-process UCX tests. Usage:
//   nixl_ucx_peer <name> <buffer bytes> [--no-thread] [--mode=auto|peer|none] [--alloc]
// Writes its metadata to stdout ("MD <len>\n" + bytes), then answers line commands on stdin:
//   LOAD <len>\n<bytes>        load the initiator's metadata          -> "OK <name>"
//   FILL <off> <len> <seed>    fill the buffer with a test pattern    -> "OK"
//   SUM <off> <len>            FNV-1a of a buffer range               -> "SUM <hex>"
//   NOTIFS <count> <ms>        wait for <count> notifications          -> "N <sender> <hex>"...,
//   "END" NOTIFY <agent> <hex>       standalone notification                -> "OK" QUIT
// Without a progress thread it calls agent.progress() while waiting for commands.

#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ucx_support.hpp"

namespace {

using ucx_agent = nixl::agent<nixl::ucx::backend>;

std::string hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string o;
  for (unsigned char c : s) {
    o += d[c >> 4];
    o += d[c & 15];
  }
  return o.empty() ? "-" : o;
}
std::string unhex(std::string_view s) {
  if (s == "-") return {};
  std::string o;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    o += static_cast<char>(std::stoi(std::string(s.substr(i, 2)), nullptr, 16));
  return o;
}

// Reads one line from stdin; progresses the agent while waiting when asked to.
bool read_line(std::string& line, ucx_agent& a, bool pump) {
  line.clear();
  for (;;) {
    pollfd p{0, POLLIN, 0};
    const int n = ::poll(&p, 1, pump ? 0 : -1);
    if (n == 0) {
      a.progress();
      continue;
    }
    char c;
    const auto r = ::read(0, &c, 1);
    if (r <= 0) return false;
    if (c == '\n') return true;
    line += c;
  }
}

bool read_exact(void* dst, std::size_t n) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const auto r = ::read(0, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

void reply(const std::string& s) {
  std::string l = s + "\n";
  std::fwrite(l.data(), 1, l.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <name> <bytes> [--no-thread] [--mode=M]\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  const std::size_t size = std::strtoull(argv[2], nullptr, 10);
  bool thread = true;
  bool alloc = false;
  std::string mode = "auto";
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-thread") thread = false;
    if (a == "--alloc") alloc = true;
    if (a.rfind("--mode=", 0) == 0) mode = a.substr(7);
  }
  nixl::agent_config cfg;
  cfg.enable_prog_thread = thread;
  ucx_agent agent(name, cfg);
  agent.create_backend<nixl::ucx::backend>({{"ucx_error_handling_mode", mode}});
  // the buffer: ordinary memory, or memory UCX allocates (shared memory on one host)
  ucx_test::buffer plain(alloc ? 1 : size);
  nixl::ucx::memory ucx_mem;
  if (alloc) ucx_mem = agent.get_backend<nixl::ucx::backend>().allocate(size);
  std::byte* const base = alloc ? ucx_mem.data() : plain.data();
  const auto addr = reinterpret_cast<std::uintptr_t>(base);
  agent.register_memory(nixl::reg_list<nixl::dram_t>{{{addr, size, 0}, ""}});
  const std::string md = agent.local_metadata();
  std::printf("MD %zu %llu\n", md.size(), static_cast<unsigned long long>(addr));
  std::fwrite(md.data(), 1, md.size(), stdout);
  std::fflush(stdout);

  std::string line;
  nixl::notif_map got;
  std::size_t total = 0;
  while (read_line(line, agent, !thread)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "QUIT") break;
      if (cmd == "LOAD") {
        std::size_t n = 0;
        in >> n;
        std::string blob(n, '\0');
        if (!read_exact(blob.data(), n)) return 3;
        reply("OK " + agent.load_remote_metadata(blob));
      } else if (cmd == "FILL") {
        std::size_t off = 0, len = 0;
        unsigned seed = 0;
        in >> off >> len >> seed;
        for (std::size_t i = 0; i < len && off + i < size; ++i)
          base[off + i] = ucx_test::buffer::pattern(off + i, seed);
        reply("OK");
      } else if (cmd == "SUM") {
        std::size_t off = 0, len = 0;
        in >> off >> len;
        reply(fmt::format("SUM {:x}",
                          ucx_test::fnv(base + off, std::min(len, size - std::min(off, size)))));
      } else if (cmd == "NOTIFS") {
        std::size_t count = 0;
        long ms = 0;
        in >> count >> ms;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        for (;;) {
          nixl::notif_map m = agent.notifications();
          for (auto& [from, msgs] : m) {
            total += msgs.size();
            for (auto& x : msgs) got[from].push_back(std::move(x));
          }
          if (total >= count || std::chrono::steady_clock::now() > deadline) break;
          if (thread) ::usleep(100);
        }
        for (auto& [from, msgs] : got)
          for (auto& x : msgs) reply("N " + from + " " + hex(x));
        got.clear();
        total = 0;
        reply("END");
      } else if (cmd == "NOTIFY") {
        std::string to, h;
        in >> to >> h;
        agent.notify(to, unhex(h));
        reply("OK");
      } else {
        reply("ERR unknown command " + cmd);
      }
    } catch (const std::exception& e) {
      reply(std::string("ERR ") + e.what());
    }
  }
  agent.deregister_memory(nixl::reg_list<nixl::dram_t>{{{addr, size, 0}, ""}});
  return 0;
}
