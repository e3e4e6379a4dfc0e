#pragma once
// The GPU side of nixl_device_bench (kernels.cu): buffers, the kernels and their timing, so that
// device_bench.cpp (the agents, C++20) needs no CUDA header.

#include <cstddef>
#include <string>

namespace device_bench {

/// Why no GPU can be used (empty when GPU 0 can).
std::string no_gpu();
/// GPU 0's name and multiprocessor count.
std::string gpu_name();
int sm_count();

/// cudaMalloc'ed memory of GPU 0 (exits with the CUDA error on failure).
void* vram(std::size_t n);
void vram_free(void* p);
/// Fills `p` with bytes i % 253 + `seed`; zeroes `q`.
void fill(void* p, void* q, std::size_t n, unsigned seed);
/// Whether the first `n` bytes of `a` and `b` are equal.
bool equal(const void* a, const void* b, std::size_t n);

/// Each measurement repeats until at least this much GPU (or host) time has passed.
void set_min_ms(double ms);
double min_ms();

/// One launch of `blocks` blocks of 512 threads, block b moving its slice of [0, n) (n a
/// multiple of 16): through views (nixl::device::put<level::block>, local entry 0 -> remote
/// entry 0) or by a plain 16-byte copy loop. Microseconds per launch (cudaEvents around
/// back-to-back launches). The put exits on the first put that is not ok.
double put_us(void* local_view, void* remote_view, std::size_t n, int blocks);
double copy_us(const void* src, void* dst, std::size_t n, int blocks);
/// cudaMemcpyAsync device-to-device of n bytes, microseconds per copy.
double memcpy_us(const void* src, void* dst, std::size_t n);
/// One put through the views (as put_us) to check the data once; exits if it is not ok.
void put_once(void* local_view, void* remote_view, std::size_t n, int blocks);

/// `count` puts of `len` bytes in one kernel, one warp per put (nixl::device::put<level::warp>,
/// put i at offset i x len on both sides): microseconds per launch, by cudaEvents around
/// back-to-back launches, and by the host clock around launch + synchronize.
double small_puts_us(void* local_view, void* remote_view, int count, std::size_t len);
double small_puts_host_us(void* local_view, void* remote_view, int count, std::size_t len);

}  // namespace device_bench
