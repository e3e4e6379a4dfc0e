#pragma once
// What the GDS tests share: a scratch folder, buffers, the fake cuFile's knobs and counters,
// and the backend contract driven without an agent, for GDS and GDS_MT alike.

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds_mt.hpp>

#include "nixl_test/catch.hpp"

namespace gds_test {

namespace fs = std::filesystem;

/// A scratch folder (under `base`, default the temporary folder) removed at the end.
struct scratch {
  fs::path dir;
  explicit scratch(const fs::path& base = fs::temp_directory_path()) {
    std::string tmpl = (base / "nixl-gds-XXXXXX").string();
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

/// Page-aligned host memory.
struct buffer {
  std::byte* p = nullptr;
  std::size_t n = 0;
  explicit buffer(std::size_t size) : n(size) {
    p = static_cast<std::byte*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096));
    REQUIRE(p != nullptr);
    std::memset(p, 0, n);
  }
  ~buffer() { std::free(p); }
  buffer(const buffer&) = delete;
  std::uintptr_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(p + off);
  }
  void fill(std::uint32_t seed) {
    std::mt19937 g(seed);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(g());
  }
};

/// One backend's settings for a test: GDS or GDS_MT, over the library at `lib`; cuFile's
/// compatibility mode off unless `extra` says otherwise, whatever the machine has.
template <class B>
nixl::params params_for(const std::string& lib, nixl::params extra = {}) {
  extra["cufile_path"] = lib;
  extra.try_emplace("compat_mode", "false");
  return extra;
}

template <class B>
B make(const nixl::params& p) {
  return B(B::config::from_params(p), nixl::backend_context{"gds-test"});
}

/// Drives a request of the bare backend to its end (bounded: 60 s).
template <class B>
nixl::status wait(B& b, typename B::request& r, nixl::status s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (s == nixl::status::in_progress && std::chrono::steady_clock::now() < end) {
    s = b.check(r);
    if (s == nixl::status::in_progress) std::this_thread::yield();
  }
  return s;
}

/// The contract without an agent: one memory region, one file region, pairs of (memory
/// offset, file offset, length).
template <class B>
struct rig {
  B& b;
  typename B::region mem;
  typename B::region file;
  typename B::remote_region rfile;
  typename B::peer self;
  std::uintptr_t base;

  rig(B& be, nixl::mem_kind kind, std::uintptr_t addr, std::size_t len, std::uint64_t dev, int fd,
      const std::string& meta = "")
      : b(be), base(addr) {
    mem = b.register_region(kind, {{addr, len, dev}, ""});
    file = b.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd)}, meta});
    rfile = b.load_local(file);
    self = b.self_peer();
  }
  ~rig() {
    b.unload_region(rfile);
    b.deregister_region(file);
    b.deregister_region(mem);
  }
  rig(const rig&) = delete;

  struct piece {
    std::size_t mem_off, file_off, len;
  };
  void prepare(typename B::request& r, nixl::xfer_op op, const std::vector<piece>& pieces) {
    std::vector<nixl::bound_desc<typename B::region>> l;
    std::vector<nixl::bound_desc<typename B::remote_region>> rm;
    for (const auto& pc : pieces) {
      nixl::bound_desc<typename B::region> a;
      a.addr = base + pc.mem_off;
      a.len = pc.len;
      a.region = &mem;
      nixl::bound_desc<typename B::remote_region> f;
      f.addr = pc.file_off;
      f.len = pc.len;
      f.dev = static_cast<std::uint64_t>(file.fd);
      f.region = &rfile;
      l.push_back(a);
      rm.push_back(f);
    }
    b.prepare(r, op, l, rm, self);
  }
  nixl::status run(nixl::xfer_op op, const std::vector<piece>& pieces) {
    typename B::request r;
    prepare(r, op, pieces);
    auto s = wait(b, r, b.post(r, std::nullopt));
    CHECK(b.release(r) == nixl::status::success);
    return s;
  }
};

/// `count` pieces of `len` bytes; the file side shuffled with gaps, so that no two neighbours
/// are contiguous in both memory and file.
inline std::vector<rig<nixl::gds::backend>::piece> scattered(std::size_t count, std::size_t len) {
  std::vector<std::size_t> slot(count);
  for (std::size_t i = 0; i < count; ++i) slot[i] = i;
  std::shuffle(slot.begin(), slot.end(), std::mt19937(7));
  std::vector<rig<nixl::gds::backend>::piece> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back({i * len, slot[i] * (len + 4096), len});
  return out;
}

template <class B>
std::vector<typename rig<B>::piece> pieces_of(
    const std::vector<rig<nixl::gds::backend>::piece>& v) {
  std::vector<typename rig<B>::piece> out;
  for (const auto& p : v) out.push_back({p.mem_off, p.file_off, p.len});
  return out;
}

}  // namespace gds_test
