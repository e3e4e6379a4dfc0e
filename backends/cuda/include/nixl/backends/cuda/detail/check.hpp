#pragma once
/// Checked calls into the CUDA runtime. Every runtime call of the backend whose failure is an
/// error goes through one of these macros, which record the call text, file and line:
///
// clang-format off
///   NIXL_CUDA_CHECK(cudaMalloc(&p, n));       // throws nixl::error(backend, "cudaMalloc(&p, n): ...")
///   if (!NIXL_CUDA_WARN(cudaFree(p))) { ... } // destructors, hot path: logs, never throws
// clang-format on
///
/// A failed call also clears the runtime's last-error slot so that the failure does not leak
/// into unrelated checks. Sticky errors (an illegal address in a kernel, for example) cannot be
/// cleared: the message says so, since every later call of the process fails the same way.
///
/// Calls whose failure is an answer rather than an error are made directly and clear the slot
/// with `detail::clear_error`: cudaEventQuery (not ready yet), cudaGetDeviceCount (no GPU),
/// cudaIpcGetMemHandle (memory CUDA IPC cannot export), cudaHostRegister (memory that stays
/// pageable) and cudaPointerGetAttributes used as a probe.

#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include <nixl/status.hpp>

namespace nixl::cuda::detail {

/// True for errors that leave the CUDA context unusable for the rest of the process.
bool is_sticky(cudaError_t e) noexcept;

/// "an illegal memory access was encountered (cudaErrorIllegalAddress; sticky: ...)".
std::string describe(cudaError_t e);

/// Throws `nixl::error(status::backend)` naming `call`, the error and `hint` (the fix).
[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line,
                             std::string_view hint = {});

/// Logs a failed call (no-throw form for destructors and the hot path).
[[gnu::cold]] void report_cuda(cudaError_t e, const char* call, const char* file,
                               int line) noexcept;

/// Clears the runtime's last-error slot after a call whose failure was an answer; returns `e`.
inline cudaError_t clear_error(cudaError_t e) noexcept {
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e;
}

/// `e`, except that `accepted` counts as success (and is cleared from the last-error slot):
/// `NIXL_CUDA_CHECK(allow(cudaDeviceEnablePeerAccess(to, 0), cudaErrorPeerAccessAlreadyEnabled))`.
inline cudaError_t allow(cudaError_t e, cudaError_t accepted) noexcept {
  if (e != accepted) return e;
  (void)cudaGetLastError();
  return cudaSuccess;
}

}  // namespace nixl::cuda::detail

/// Evaluates a runtime call; throws `nixl::error` when it fails.
#define NIXL_CUDA_CHECK(expr)                                                    \
  do {                                                                           \
    const cudaError_t nixl_cuda_e_ = (expr);                                     \
    if (nixl_cuda_e_ != cudaSuccess)                                             \
      ::nixl::cuda::detail::throw_cuda(nixl_cuda_e_, #expr, __FILE__, __LINE__); \
  } while (0)

/// As NIXL_CUDA_CHECK, with a hint that tells the user how to fix the failure.
#define NIXL_CUDA_CHECK_HINT(expr, hint)                                               \
  do {                                                                                 \
    const cudaError_t nixl_cuda_e_ = (expr);                                           \
    if (nixl_cuda_e_ != cudaSuccess)                                                   \
      ::nixl::cuda::detail::throw_cuda(nixl_cuda_e_, #expr, __FILE__, __LINE__, hint); \
  } while (0)

/// Evaluates a runtime call; logs a failure and yields false, never throws.
#define NIXL_CUDA_WARN(expr)                                                    \
  ([&]() noexcept {                                                             \
    const cudaError_t nixl_cuda_e_ = (expr);                                    \
    if (nixl_cuda_e_ == cudaSuccess) return true;                               \
    ::nixl::cuda::detail::report_cuda(nixl_cuda_e_, #expr, __FILE__, __LINE__); \
    return false;                                                               \
  }())
