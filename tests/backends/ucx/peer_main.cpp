// Target process of the two-process UCX tests. Usage:
//   nixl_ucx_peer <name> <buffer bytes> [--no-thread] [--mode=peer|ucx_peer|none] [--alloc]
//                 [--vram=<gpu>]
// --vram (builds with the CUDA toolkit): the buffer is cudaMalloc'ed on <gpu>, registered as VRAM.
// Writes its metadata to stdout ("MD <len>\n" + bytes), then answers line commands on stdin:
//   LOAD <len>\n<bytes>        load the initiator's metadata          -> "OK <name>"
//   FILL <off> <len> <seed>    fill the buffer with a test pattern    -> "OK"
//   SUM <off> <len>            FNV-1a of a buffer range               -> "SUM <hex>"
//   NOTIFS <count> <ms>        wait for <count> notifications          -> "N <sender> <hex>"...,
//   "END" NOTIFY <agent> <hex>       standalone notification                -> "OK" QUIT
//   ABORTS <count> <ms>        wait (agent.wait_notifications) for <count> abort notices
//                              -> "A <sender> <hex>"..., "N <sender> <hex>"... (notifications
//                              that arrived meanwhile), "END"
//   DUMPABLE <0|1>             prctl(PR_SET_DUMPABLE): at 0 another process needs
//                              CAP_SYS_PTRACE for process_vm_readv/writev into this one -> "OK"
// Without a progress thread it calls agent.progress() while waiting for commands.

#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

#include <poll.h>
#include <sys/prctl.h>
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

#if defined(NIXL_UCX_TEST_CUDA)
#include <cuda_runtime_api.h>
#endif

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

/// The target's buffer: host memory, or GPU memory reached through cudaMemcpy.
struct target_buffer {
  std::byte* base = nullptr;
  std::size_t size = 0;
  int gpu = -1;  // >= 0: VRAM

  void fill(std::size_t off, std::size_t len, unsigned seed) {
    len = std::min(len, size - std::min(off, size));
    std::vector<std::byte> host;
    std::byte* dst = base + off;
    if (gpu >= 0) {
      host.resize(len);
      dst = host.data();
    }
    for (std::size_t i = 0; i < len; ++i) dst[i] = ucx_test::buffer::pattern(off + i, seed);
#if defined(NIXL_UCX_TEST_CUDA)
    if (gpu >= 0) must(cudaMemcpy(base + off, host.data(), len, cudaMemcpyHostToDevice));
#endif
  }
  std::uint64_t sum(std::size_t off, std::size_t len) {
    len = std::min(len, size - std::min(off, size));
#if defined(NIXL_UCX_TEST_CUDA)
    if (gpu >= 0) {
      std::vector<std::byte> host(len);
      must(cudaMemcpy(host.data(), base + off, len, cudaMemcpyDeviceToHost));
      return ucx_test::fnv(host.data(), len);
    }
#endif
    return ucx_test::fnv(base + off, len);
  }
#if defined(NIXL_UCX_TEST_CUDA)
  static void must(cudaError_t e) {
    if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
  }
#endif
};

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
  int gpu = -1;
  std::string mode = "peer";
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-thread") thread = false;
    if (a == "--alloc") alloc = true;
    if (a.rfind("--mode=", 0) == 0) mode = a.substr(7);
    if (a.rfind("--vram=", 0) == 0) gpu = std::atoi(a.c_str() + 7);
  }
  nixl::agent_config cfg;
  cfg.enable_prog_thread = thread;
  ucx_agent agent(name, cfg);
  agent.create_backend<nixl::ucx::backend>({{"ucx_error_handling_mode", mode}});
  // the buffer: ordinary memory, or memory UCX allocates (shared memory on one host)
  ucx_test::buffer plain(alloc || gpu >= 0 ? 1 : size);
  nixl::ucx::memory ucx_mem;
  if (alloc) ucx_mem = agent.get_backend<nixl::ucx::backend>().allocate(size);
  target_buffer buf{alloc ? ucx_mem.data() : plain.data(), size, gpu};
  if (gpu >= 0) {
#if defined(NIXL_UCX_TEST_CUDA)
    void* p = nullptr;
    target_buffer::must(cudaSetDevice(gpu));
    target_buffer::must(cudaMalloc(&p, size));
    target_buffer::must(cudaMemset(p, 0, size));
    buf.base = static_cast<std::byte*>(p);
#else
    std::fprintf(stderr, "--vram needs a build with the CUDA toolkit\n");
    return 2;
#endif
  }
  const auto addr = reinterpret_cast<std::uintptr_t>(buf.base);
  const nixl::reg_dlist reg(gpu >= 0 ? nixl::mem_kind::vram : nixl::mem_kind::dram,
                            {nixl::reg_desc{{addr, size, gpu >= 0 ? std::uint64_t(gpu) : 0}, ""}});
  agent.register_memory(reg);
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
        buf.fill(off, len, seed);
        reply("OK");
      } else if (cmd == "SUM") {
        std::size_t off = 0, len = 0;
        in >> off >> len;
        reply(fmt::format("SUM {:x}", buf.sum(off, len)));
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
      } else if (cmd == "ABORTS") {
        std::size_t count = 0;
        long ms = 0;
        in >> count >> ms;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        nixl::notif_map aborts, notifs;
        std::size_t n = 0;
        while (n < count && std::chrono::steady_clock::now() < deadline) {
          nixl::notif_map a;
          agent.wait_notifications(notifs, a, deadline - std::chrono::steady_clock::now());
          for (auto& [from, msgs] : a)
            for (auto& x : msgs) {
              aborts[from].push_back(std::move(x));
              ++n;
            }
        }
        for (auto& [from, msgs] : aborts)
          for (auto& x : msgs) reply("A " + from + " " + hex(x));
        for (auto& [from, msgs] : notifs)
          for (auto& x : msgs) reply("N " + from + " " + hex(x));
        reply("END");
      } else if (cmd == "DUMPABLE") {
        int on = 1;
        in >> on;
        reply(::prctl(PR_SET_DUMPABLE, on != 0 ? 1 : 0, 0, 0, 0) == 0 ? "OK" : "ERR prctl");
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
  agent.deregister_memory(reg);
#if defined(NIXL_UCX_TEST_CUDA)
  if (gpu >= 0) cudaFree(buf.base);
#endif
  return 0;
}
