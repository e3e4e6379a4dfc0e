#pragma once
// Helpers of the UCX backend tests.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <nixl/backends/ucx.hpp>
#include <nixl/status.hpp>

namespace ucx_test {

/// Page-aligned zeroed buffer.
class buffer {
 public:
  explicit buffer(std::size_t n) : n_(n) {
    void* p = nullptr;
    if (::posix_memalign(&p, 4096, n == 0 ? 1 : n) != 0) throw std::bad_alloc();
    std::memset(p, 0, n);
    p_.reset(static_cast<std::byte*>(p));
  }
  std::byte* data() const noexcept { return p_.get(); }
  std::uintptr_t addr() const noexcept { return reinterpret_cast<std::uintptr_t>(p_.get()); }
  std::size_t size() const noexcept { return n_; }
  /// Byte i of pattern `seed`.
  static std::byte pattern(std::size_t i, unsigned seed) noexcept {
    return static_cast<std::byte>((i * 131u + seed * 7u + (i >> 12)) & 0xff);
  }
  void fill(unsigned seed, std::size_t off = 0, std::size_t len = SIZE_MAX) noexcept {
    len = std::min(len, n_ - off);
    for (std::size_t i = 0; i < len; ++i) p_.get()[off + i] = pattern(off + i, seed);
  }
  /// True when [off, off+len) holds pattern `seed` (indexed from `pat_off`).
  bool holds(unsigned seed, std::size_t off, std::size_t len, std::size_t pat_off) const noexcept {
    for (std::size_t i = 0; i < len; ++i)
      if (p_.get()[off + i] != pattern(pat_off + i, seed)) return false;
    return true;
  }

 private:
  struct freer {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, freer> p_;
  std::size_t n_;
};

/// The status of `f()` (success unless it throws nixl::error).
template <class F>
nixl::status code_of(F&& f) {
  try {
    f();
  } catch (const nixl::error& e) {
    return e.status_code();
  }
  return nixl::status::success;
}

/// Calls `poll()` until it returns something other than in_progress, or the time is up.
template <class Poll>
nixl::status wait_done(Poll&& poll, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  nixl::status s = poll();
  while (s == nixl::status::in_progress && std::chrono::steady_clock::now() < deadline) s = poll();
  return s;
}

inline std::span<const std::byte> bytes_of(const std::string& s) noexcept {
  return std::as_bytes(std::span(s.data(), s.size()));
}

}  // namespace ucx_test
