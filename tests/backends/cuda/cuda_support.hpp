#pragma once
// Helpers of the CUDA backend tests: GPU buffers, byte patterns, waiting for requests, hex.

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/cuda.hpp>
#include <nixl/detail/hex.hpp>

namespace cuda_test {

using agent = nixl::agent<nixl::cuda::backend>;

/// Byte `i` of pattern `seed`: differs between seeds and between neighbouring bytes.
inline std::uint8_t pattern(std::uint32_t seed, std::uint64_t i) {
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t(seed) * 0xD1B54A32D192ED03ull);
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x ^ (x >> 8) ^ (x >> 17));
}

inline void fill(std::vector<std::uint8_t>& v, std::uint32_t seed, std::uint64_t base = 0) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = pattern(seed, base + i);
}

inline void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// cudaMalloc'ed memory on one GPU.
struct gpu_buffer {
  void* p = nullptr;
  std::size_t n = 0;
  int dev = 0;
  gpu_buffer(std::size_t bytes, int device) : n(bytes), dev(device) {
    must(cudaSetDevice(dev), "cudaSetDevice");
    must(cudaMalloc(&p, n), "cudaMalloc");
  }
  ~gpu_buffer() {
    if (p) {
      cudaSetDevice(dev);
      cudaFree(p);
    }
  }
  gpu_buffer(const gpu_buffer&) = delete;
  std::uintptr_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(p) + off;
  }
  void upload(const std::vector<std::uint8_t>& v, std::size_t off = 0) const {
    must(cudaMemcpy(static_cast<char*>(p) + off, v.data(), v.size(), cudaMemcpyHostToDevice),
         "cudaMemcpy H2D");
    // cudaMemcpy from pageable memory may return before the DMA lands, and the backend's
    // streams do not wait for the legacy default stream.
    must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<std::uint8_t> download(std::size_t off, std::size_t len) const {
    std::vector<std::uint8_t> v(len);
    must(cudaMemcpy(v.data(), static_cast<const char*>(p) + off, len, cudaMemcpyDeviceToHost),
         "cudaMemcpy D2H");
    return v;
  }
  void fill_pattern(std::uint32_t seed) const {
    std::vector<std::uint8_t> v(n);
    fill(v, seed);
    upload(v);
  }
};

/// Polls a request until it leaves in_progress (30 s at most).
template <class R>
nixl::status wait(R& req, std::chrono::seconds limit = std::chrono::seconds(30)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  nixl::status s = req.status();
  while (s == nixl::status::in_progress && std::chrono::steady_clock::now() < end) s = req.status();
  return s;
}

/// Waits until `a` received `msg` from `from`.
inline bool wait_notif(agent& a, const std::string& from, const std::string& msg,
                       std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  nixl::notif_map m;
  while (std::chrono::steady_clock::now() < end) {
    a.notifications(m);
    for (const auto& x : m[from])
      if (x == msg) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return false;
}

using nixl::detail::to_hex;
inline std::string from_hex(std::string_view h) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out(h.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<char>(v(h[2 * i]) * 16 + v(h[2 * i + 1]));
  return out;
}

inline nixl::reg_dlist reg(nixl::mem_kind k, std::uintptr_t a, std::size_t n, std::uint64_t dev) {
  return nixl::reg_dlist(k, {nixl::reg_desc{{a, n, dev}, ""}});
}

}  // namespace cuda_test
