#pragma once
// A file backend's contract driven without an agent (POSIX, GDS, GDS_MT): one memory region, one
// file region (loopback: the agent's own), requests of (memory offset, file offset, length)
// pieces, each driven to its end within a deadline; and the query_memory answers every file
// backend gives.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nixl/memory.hpp>
#include <nixl/status.hpp>

#include "nixl_test/catch.hpp"
#include "nixl_test/wait.hpp"

namespace nixl::test {

/// One descriptor pair of a rig's request.
struct piece {
  std::size_t mem_off, file_off, len;
};

/// `count` pieces of `len` bytes; the file side shuffled with gaps, so that no two neighbours
/// are contiguous in both memory and file.
inline std::vector<piece> scattered(std::size_t count, std::size_t len) {
  std::vector<std::size_t> slot(count);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), std::mt19937(7));
  std::vector<piece> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back({i * len, slot[i] * (len + 4096), len});
  return out;
}

/// Drives a bare backend's request, posted with answer `s`, until it leaves in_progress or
/// `limit` has passed; returns the last status.
template <class B>
nixl::status wait(B& b, typename B::request& r, nixl::status s,
                  std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  if (s != nixl::status::in_progress) return s;
  return wait_done([&] { return b.check(r); }, limit);
}

template <class B>
struct file_rig {
  using piece = nixl::test::piece;
  B& b;
  typename B::region mem;
  typename B::region file;
  typename B::remote_region rfile;
  typename B::peer self;
  std::uintptr_t base;

  /// Registers [addr, addr+len) of `kind` on device `dev`, and the file `fd` (or the path mode
  /// `meta`).
  file_rig(B& be, nixl::mem_kind kind, std::uintptr_t addr, std::size_t len, std::uint64_t dev,
           int fd, const std::string& meta = "")
      : b(be), base(addr) {
    mem = b.register_region(kind, {{addr, len, dev}, ""});
    file = b.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd)}, meta});
    rfile = b.load_local(file);
    self = b.self_peer();
  }
  ~file_rig() {
    b.unload_region(rfile);
    b.deregister_region(file);
    b.deregister_region(mem);
  }
  file_rig(const file_rig&) = delete;
  file_rig& operator=(const file_rig&) = delete;

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
  /// Prepares, posts and waits for one request; returns its final status.
  nixl::status run(nixl::xfer_op op, const std::vector<piece>& pieces) {
    typename B::request r;
    prepare(r, op, pieces);
    auto s = wait(b, r, b.post(r, std::nullopt));
    CHECK(b.release(r) == nixl::status::success);
    return s;
  }
};

/// What query_memory answers for `path` (a file of `size` bytes, named in path mode and as a
/// plain path) and for a file that does not exist in `tmp` (named both ways); returns the answers.
template <class B>
std::vector<std::optional<nixl::params>> check_file_queries(const B& b,
                                                            const std::filesystem::path& tmp,
                                                            const std::string& path,
                                                            std::size_t size) {
  std::vector<nixl::reg_desc> q = {{{0, 0, 42}, "rw,create:" + path},
                                   {{0, 0, 0}, path},
                                   {{0, 0, 0}, (tmp / "nope").string()},
                                   {{0, 0, 0}, "ro:" + (tmp / "nope").string()}};
  auto res = b.query_memory(q);
  REQUIRE(res.size() == 4);
  REQUIRE(res[0].has_value());
  REQUIRE(res[1].has_value());
  CHECK(res[0]->at("size") == std::to_string(size));
  CHECK(res[1]->at("size") == std::to_string(size));
  CHECK_FALSE(res[2].has_value());
  CHECK_FALSE(res[3].has_value());
  return res;
}

}  // namespace nixl::test
