// What NIXL_CUDA_CHECK and NIXL_CUDA_WARN call: error descriptions, throwing and logging.

#include <fmt/format.h>

#include <nixl/backends/cuda/check.hpp>
#include <nixl/detail/call_site.hpp>
#include <nixl/log.hpp>

namespace nixl::cuda::detail {

bool is_sticky(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

std::string describe(cudaError_t e) {
  std::string s = fmt::format("{} ({}", cudaGetErrorString(e), cudaGetErrorName(e));
  if (is_sticky(e))
    s += "; sticky: the CUDA context of this process is unusable, every later CUDA call fails "
         "the same way; restart the process";
  s += ')';
  return s;
}

void throw_cuda(cudaError_t e, const char* call, const char* file, int line,
                std::string_view hint) {
  (void)cudaGetLastError();  // clears the slot for errors that are not sticky
  throw nixl::error(status::backend,
                    nixl::detail::call_failure(call, describe(e), file, line, hint));
}

void report_cuda(cudaError_t e, const char* call, const char* file, int line) noexcept {
  (void)cudaGetLastError();
  try {
    nixl::log::error("CUDA: {}", nixl::detail::call_failure(call, describe(e), file, line));
  } catch (...) {
  }
}

}  // namespace nixl::cuda::detail
