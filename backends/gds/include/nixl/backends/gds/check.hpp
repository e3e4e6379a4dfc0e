#pragma once
/// Checked calls into cuFile. Every cuFile call whose failure is an error goes through one of
/// these macros, which record the call text, file and line:
///
// clang-format off
///   NIXL_CUFILE_CHECK(lib.cuFileDriverOpen());          // throws nixl::error(backend, "cuFileDriverOpen(): ...")
///   NIXL_CUFILE_CHECK_HINT(lib.cuFileHandleRegister(&fh, &d), "put the file on ext4 or xfs");
///   NIXL_CUFILE_WARN(lib.cuFileBufDeregister(p));       // destructors: logs, never throws
// clang-format on

#include <string_view>

#include <nixl/backends/gds/cufile.hpp>
#include <nixl/status.hpp>

namespace nixl::gds::detail {

/// Throws `nixl::error(s)`: "<call>: <cuFile error> [<file>:<line>]; <hint>".
[[noreturn]] void throw_cufile(cufile::CUfileError_t e, const char* call, const char* file,
                               int line, std::string_view hint = {}, status s = status::backend);

/// Logs a failed call (no-throw form for destructors and the hot path).
[[gnu::cold]] void report_cufile(cufile::CUfileError_t e, const char* call, const char* file,
                                 int line) noexcept;

}  // namespace nixl::gds::detail

/// Evaluates a cuFile call returning `CUfileError_t`; throws with `hint` (evaluated only on
/// failure) when it fails.
#define NIXL_CUFILE_CHECK_HINT(expr, hint)                                                \
  do {                                                                                    \
    const ::nixl::gds::cufile::CUfileError_t nixl_cufile_e_ = (expr);                     \
    if (nixl_cufile_e_.err != ::nixl::gds::cufile::CU_FILE_SUCCESS)                       \
      ::nixl::gds::detail::throw_cufile(nixl_cufile_e_, #expr, __FILE__, __LINE__, hint); \
  } while (0)

/// Evaluates a cuFile call returning `CUfileError_t`; throws when it fails.
#define NIXL_CUFILE_CHECK(expr) NIXL_CUFILE_CHECK_HINT(expr, ::std::string_view{})

/// Evaluates a cuFile call returning `CUfileError_t`; logs a failure and yields false.
#define NIXL_CUFILE_WARN(expr)                                                     \
  ([&]() noexcept {                                                                \
    const ::nixl::gds::cufile::CUfileError_t nixl_cufile_e_ = (expr);              \
    if (nixl_cufile_e_.err == ::nixl::gds::cufile::CU_FILE_SUCCESS) return true;   \
    ::nixl::gds::detail::report_cufile(nixl_cufile_e_, #expr, __FILE__, __LINE__); \
    return false;                                                                  \
  }())
