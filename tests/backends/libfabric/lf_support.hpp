#pragma once
// Helpers of the LIBFABRIC backend tests: buffers, bounded waits, the providers to run over.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include <nixl/backends/libfabric.hpp>
#include <nixl/status.hpp>

#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"

namespace lf_test {

/// Page-aligned zeroed buffer with a checkable pattern.
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
  static std::byte pattern(std::size_t i, unsigned seed) noexcept {
    return static_cast<std::byte>((i * 131u + seed * 7u + (i >> 12)) & 0xff);
  }
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

 private:
  struct freer {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, freer> p_;
  std::size_t n_;
};

using nixl::test::code_of;

/// Calls `poll()` until it returns something other than in_progress, or the time is up.
template <class Poll>
nixl::status wait_done(Poll&& poll, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  nixl::status s = poll();
  while (s == nixl::status::in_progress && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    s = poll();
  }
  return s;
}

inline std::span<const std::byte> bytes_of(const std::string& s) noexcept {
  return std::as_bytes(std::span(s.data(), s.size()));
}

/// Parameters of a provider the tests run over: tcp;ofi_rxm pinned to loopback, or shm.
inline nixl::params tcp_params(std::string interfaces = "lo") {
  return {{"provider", "tcp;ofi_rxm"}, {"interfaces", std::move(interfaces)}};
}
inline nixl::params shm_params() {
  return {{"provider", "shm"}};
}

/// Why a provider cannot be opened here, or empty when it can.
inline std::string unavailable(const nixl::params& p) {
  try {
    nixl::libfabric::backend b(nixl::libfabric::config::from_params(p),
                               nixl::backend_context{"probe", nixl::thread_sync::none, false, {}});
    return {};
  } catch (const nixl::error& e) {
    return e.what();
  }
}

}  // namespace lf_test
