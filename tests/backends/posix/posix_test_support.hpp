#pragma once
// What the POSIX backend's tests share: a scratch folder, owned descriptors and aligned
// buffers, the parameters of each engine, and the backend contract driven without an agent.

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nixl/backends/posix.hpp>

#include "nixl_test/catch.hpp"

namespace posix_test {

namespace fs = std::filesystem;
using nixl::posix::backend;

/// A scratch folder removed at the end of the test.
struct scratch {
  fs::path dir;
  scratch() {
    std::string tmpl = (fs::temp_directory_path() / "nixl-posix-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path operator/(const std::string& n) const { return dir / n; }
};

/// An open file descriptor closed at scope exit.
struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f) : fd(f) { REQUIRE(fd >= 0); }
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  fd_guard(const fd_guard&) = delete;
};

/// Page-aligned memory (O_DIRECT needs it).
struct buffer {
  std::byte* p = nullptr;
  std::size_t n = 0;
  explicit buffer(std::size_t size) : n(size) {
    p = static_cast<std::byte*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096));
    REQUIRE(p != nullptr);
  }
  ~buffer() { std::free(p); }
  buffer(const buffer&) = delete;
  std::uintptr_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(p + off);
  }
  void fill(std::uint32_t seed) {
    std::mt19937 g(seed);
    auto* w = reinterpret_cast<std::uint32_t*>(p);
    for (std::size_t i = 0; i < n / 4; ++i) w[i] = static_cast<std::uint32_t>(g());
  }
  void zero() { std::memset(p, 0, n); }
};

inline nixl::params engine_params(const std::string& e) {
  if (e == "URING") return {{"use_uring", "true"}};
  if (e == "AIO") return {{"use_aio", "true"}};
  if (e == "POSIX") return {{"use_posix", "true"}};
  if (e == "POSIX-inline") return {{"use_posix", "true"}, {"num_threads", "0"}};
  return {};
}

/// Drives a request of the bare backend to its end.
inline nixl::status wait(backend& b, backend::request& r, nixl::status s) {
  while (s == nixl::status::in_progress) {
    s = b.check(r);
    if (s == nixl::status::in_progress) std::this_thread::yield();
  }
  return s;
}

/// The backend contract without an agent: one dram region, one file region, pairs of
/// (memory offset, file offset, length).
struct direct_rig {
  backend b;
  backend::region mem;
  backend::region file;
  backend::remote_region rfile;
  backend::peer self;

  direct_rig(const nixl::params& p, const buffer& buf, int fd)
      : b(backend::config::from_params(p), nixl::backend_context{"test"}) {
    mem = b.register_region(nixl::mem_kind::dram, {{buf.addr(), buf.n, 0}, ""});
    file = b.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd)}, ""});
    rfile = b.load_local(file);
    self = b.self_peer();
  }
  ~direct_rig() {
    b.unload_region(rfile);
    b.deregister_region(file);
    b.deregister_region(mem);
  }

  struct piece {
    std::size_t mem_off, file_off, len;
  };
  void prepare(backend::request& r, nixl::xfer_op op, const buffer& buf,
               const std::vector<piece>& pieces) {
    std::vector<nixl::bound_desc<backend::region>> l;
    std::vector<nixl::bound_desc<backend::remote_region>> rm;
    for (const auto& pc : pieces) {
      nixl::bound_desc<backend::region> a;
      a.addr = buf.addr(pc.mem_off);
      a.len = pc.len;
      a.region = &mem;
      nixl::bound_desc<backend::remote_region> f;
      f.addr = pc.file_off;
      f.len = pc.len;
      f.dev = static_cast<std::uint64_t>(file.fd);
      f.region = &rfile;
      l.push_back(a);
      rm.push_back(f);
    }
    b.prepare(r, op, l, rm, self);
  }
  nixl::status run(nixl::xfer_op op, const buffer& buf, const std::vector<piece>& pieces) {
    backend::request r;
    prepare(r, op, buf, pieces);
    auto s = wait(b, r, b.post(r, std::nullopt));
    b.release(r);
    return s;
  }
};

/// `count` pieces of `len` bytes; the file side in a shuffled order with gaps, so that no two
/// neighbours are contiguous in both memory and file.
inline std::vector<direct_rig::piece> scattered(std::size_t count, std::size_t len) {
  std::vector<std::size_t> slot(count);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), std::mt19937(7));
  std::vector<direct_rig::piece> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back({i * len, slot[i] * (len + 4096), len});
  return out;
}

}  // namespace posix_test
