#pragma once
// A page-aligned, zeroed host buffer with a reproducible byte pattern, and its descriptors: the
// one buffer type of the backend tests.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include <nixl/memory.hpp>

namespace nixl::test {

class buffer {
 public:
  explicit buffer(std::size_t n, std::size_t align = 4096) : n_(n) {
    void* p = nullptr;
    if (::posix_memalign(&p, align, n == 0 ? 1 : n) != 0) throw std::bad_alloc();
    std::memset(p, 0, n == 0 ? 1 : n);
    p_.reset(static_cast<std::byte*>(p));
  }
  std::byte* data() const noexcept { return p_.get(); }
  std::uintptr_t addr(std::size_t off = 0) const noexcept {
    return reinterpret_cast<std::uintptr_t>(p_.get()) + off;
  }
  std::size_t size() const noexcept { return n_; }

  /// Byte i of pattern `seed`.
  static std::byte pattern(std::size_t i, unsigned seed) noexcept {
    return static_cast<std::byte>((i * 131u + seed * 7u + (i >> 12)) & 0xff);
  }
  /// Writes pattern `seed` into [off, off+len) (indexed from `off`).
  void fill(unsigned seed, std::size_t off = 0, std::size_t len = SIZE_MAX) noexcept {
    len = std::min(len, n_ - off);
    for (std::size_t i = 0; i < len; ++i) p_.get()[off + i] = pattern(off + i, seed);
  }
  /// True when [off, off+len) holds pattern `seed` indexed from `pat_off`.
  bool holds(unsigned seed, std::size_t off, std::size_t len, std::size_t pat_off) const noexcept {
    for (std::size_t i = 0; i < len; ++i)
      if (p_.get()[off + i] != pattern(pat_off + i, seed)) return false;
    return true;
  }
  /// True when the whole buffer holds pattern `seed`.
  bool holds(unsigned seed) const noexcept { return holds(seed, 0, n_, 0); }
  void set(std::byte v) noexcept { std::memset(p_.get(), static_cast<int>(v), n_); }

  /// The whole buffer as one registration entry / transfer descriptor of kind `K`.
  template <class K = nixl::dram_t>
  nixl::reg_list<K> reg(std::uint64_t dev = 0, std::string meta = {}) const {
    return {{{addr(), n_, dev}, std::move(meta)}};
  }
  template <class K = nixl::dram_t>
  nixl::xfer_list<K> whole(std::uint64_t dev = 0) const {
    return {{addr(), n_, dev}};
  }
  /// `n` blocks of `block` bytes from offset `first`, `stride` apart (default: contiguous).
  template <class K = nixl::dram_t>
  nixl::xfer_list<K> blocks(std::size_t n, std::size_t block, std::size_t stride = 0,
                            std::size_t first = 0, std::uint64_t dev = 0) const {
    if (stride == 0) stride = block;
    nixl::xfer_list<K> l;
    for (std::size_t i = 0; i < n; ++i) l.push_back({addr(first + i * stride), block, dev});
    return l;
  }

 private:
  struct freer {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, freer> p_;
  std::size_t n_;
};

}  // namespace nixl::test
