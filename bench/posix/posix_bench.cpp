// Read and write bandwidth of the POSIX backend through nixl::agent, one request per pass over
// the file, one descriptor per block, and the time to make such a request (`make_us`: the median
// of --makes requests made and released). Prints one JSON object per (operation, block size).
//
//   nixl_posix_bench --file /path/f --size 1G --bs 4K,1M,16M --op read,write \
//                    --engine URING --iodepth 64 [--direct] [--loops 3]

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <nixl/agent.hpp>
#include <nixl/backends/posix.hpp>

#include "bench_common.hpp"

namespace {

bool g_spin = false;

std::size_t parse_size(std::string_view s) {
  if (s.empty()) throw std::invalid_argument("empty size");
  std::size_t mul = 1;
  char last = s.back();
  if (last == 'K' || last == 'k') mul = 1ull << 10;
  if (last == 'M' || last == 'm') mul = 1ull << 20;
  if (last == 'G' || last == 'g') mul = 1ull << 30;
  if (mul != 1) s.remove_suffix(1);
  std::size_t used = 0;
  const std::string digits(s);
  const auto n = std::stoull(digits, &used);
  if (used != digits.size()) throw std::invalid_argument(digits);
  return n * mul;
}

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    auto c = s.find(',');
    out.emplace_back(s.substr(0, c));
    s = c == std::string_view::npos ? std::string_view{} : s.substr(c + 1);
  }
  return out;
}

struct options {
  std::string file;
  std::size_t size = 1ull << 30;
  std::vector<std::size_t> bs = {4096, 1 << 20, 16 << 20};
  std::vector<std::string> ops = {"read", "write"};
  std::string engine = "URING";
  unsigned iodepth = 64;
  bool direct = false;
  unsigned loops = 3;
  unsigned threads = 4;
  unsigned makes = 9;
};

options parse(int argc, char** argv) {
  options o;
  std::string size = "1G", bs = "4K,1M,16M", ops = "read,write";
  CLI::App app{"nixl_posix_bench: read and write bandwidth of the POSIX backend"};
  app.add_option("--file", o.file, "file to read and write (created when missing)")->required();
  app.add_option("--size", size, "bytes moved per pass (K, M, G suffixes)")->capture_default_str();
  app.add_option("--bs", bs, "block sizes, comma separated")->capture_default_str();
  app.add_option("--op", ops, "operations, comma separated: read, write")->capture_default_str();
  app.add_option("--engine", o.engine, "I/O engine")
      ->check(CLI::IsMember({"URING", "AIO", "POSIX"}))
      ->capture_default_str();
  app.add_option("--iodepth", o.iodepth, "operations in flight (kernel_queue_size)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "worker threads of the POSIX engine")
      ->capture_default_str();
  app.add_option("--loops", o.loops, "passes per point")->capture_default_str();
  app.add_option("--makes", o.makes, "requests made and released per point, to time making one")
      ->capture_default_str();
  app.add_flag("--direct", o.direct, "open the file with O_DIRECT");
  app.add_flag("--spin", g_spin, "poll without yielding between status calls");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  try {
    o.size = parse_size(size);
    o.bs.clear();
    for (auto& s : split(bs)) o.bs.push_back(parse_size(s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "--size/--bs: not a size (%s); write e.g. 4K, 1M, 1G\n", e.what());
    std::exit(2);
  }
  o.ops = split(ops);
  return o;
}

/// Posts and polls to the end. Between polls the thread yields (unless --spin), so that on a
/// machine with few cores the kernel's I/O workers get the CPU, as they do while fio sleeps in
/// io_uring_enter.
template <class Req>
nixl::status run(Req& r) {
  auto s = r.post();
  while (s == nixl::status::in_progress) {
    if (!g_spin) std::this_thread::yield();
    s = r.status();
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  using nixl::posix::backend;

  int fd = ::open(o.file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | (o.direct ? O_DIRECT : 0), 0644);
  if (fd < 0) {
    std::perror(("open " + o.file).c_str());
    return 1;
  }
  // Memory: one distinct block per descriptor, touched before timing.
  void* mem = ::mmap(nullptr, o.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  std::memset(mem, 0x5a, o.size);
  const auto base = reinterpret_cast<std::uintptr_t>(mem);

  nixl::agent<backend> ag("posix-bench");
  nixl::params p = {{"kernel_queue_size", std::to_string(o.iodepth)},
                    {"num_threads", std::to_string(o.threads)}};
  if (o.engine == "URING")
    p["use_uring"] = "true";
  else if (o.engine == "AIO")
    p["use_aio"] = "true";
  else
    p["use_posix"] = "true";
  auto& be = ag.create_backend<backend>(p);
  ag.register_memory(nixl::reg_list<nixl::dram_t>{{{base, o.size, 0}, ""}});
  ag.register_memory(
      nixl::reg_list<nixl::file_t>{{{0, 0, static_cast<std::uint64_t>(fd)}, o.file}});

  // Reads need the whole range in the file: lay it out once, untimed.
  if (::lseek(fd, 0, SEEK_END) < static_cast<off_t>(o.size)) {
    nixl::xfer_list<nixl::dram_t> m{{base, o.size, 0}};
    nixl::xfer_list<nixl::file_t> f{{0, o.size, static_cast<std::uint64_t>(fd)}};
    auto r = ag.create_request(nixl::xfer_op::write, m, f, ag.name());
    if (run(r) != nixl::status::success) return 1;
  }

  for (const auto& opname : o.ops) {
    const auto op = opname == "write" ? nixl::xfer_op::write : nixl::xfer_op::read;
    for (std::size_t bs : o.bs) {
      const std::size_t n = o.size / bs;
      nixl::xfer_list<nixl::dram_t> m;
      nixl::xfer_list<nixl::file_t> f;
      m.reserve(n);
      f.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        m.push_back({base + i * bs, bs, 0});
        f.push_back({i * bs, bs, static_cast<std::uint64_t>(fd)});
      }
      nixl::xfer_options xo;
      xo.skip_merge = true;  // one operation per block, as fio issues them
      // Making a request of n descriptors: the median of `makes` (made, then released).
      std::vector<double> made;
      for (unsigned k = 0; k < o.makes; ++k) {
        const auto a = std::chrono::steady_clock::now();
        { auto tmp = ag.create_request(op, m, f, ag.name(), xo); }
        made.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a)
                .count());
      }
      const double make_us = nixl_bench::median(made);
      auto r = ag.create_request(op, m, f, ag.name(), xo);
      if (run(r) != nixl::status::success) {  // warm-up pass
        std::fprintf(stderr, "transfer failed\n");
        return 1;
      }
      auto t0 = std::chrono::steady_clock::now();
      for (unsigned l = 0; l < o.loops; ++l)
        if (run(r) != nixl::status::success) {
          std::fprintf(stderr, "transfer failed\n");
          return 1;
        }
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double bytes = static_cast<double>(n * bs) * o.loops;
      fmt::print(
          "{{\"tool\": \"nixl\", \"engine\": \"{}\", \"op\": \"{}\", \"bs\": {}, \"size\": {}, "
          "\"iodepth\": {}, \"direct\": {}, \"seconds\": {:.4f}, \"gbps\": {:.3f}, "
          "\"descriptors\": {}, \"make_us\": {:.1f}}}\n",
          be.engine_name(), opname, bs, n * bs, o.iodepth, o.direct ? 1 : 0, s, bytes / s / 1e9, n,
          make_us);
      std::fflush(stdout);
    }
  }
  ag.deregister_memory(
      nixl::reg_list<nixl::file_t>{{{0, 0, static_cast<std::uint64_t>(fd)}, o.file}});
  ::munmap(mem, o.size);
  ::close(fd);
  return 0;
}
