#pragma once
/// The part of NVIDIA's cuFile API (libcufile.so.0) that the GDS backends use, declared here in
/// the library's own names inside `nixl::gds::cufile`, and the table of entry points loaded at
/// run time. The library is never linked: `library::load` dlopens it, so the backends build
/// without cuFile's header or library, and a fake of the same soname stands in for it in tests.
///
/// Layouts follow the C ABI of x86-64 and aarch64 Linux; tests/backends/gds/abi_check.cpp
/// compares every size and offset with NVIDIA's header where that header is installed.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

namespace nixl::gds::cufile {

/// `CUfileOpError`: 0, or 5000 + n.
using CUfileOpError = int;
inline constexpr CUfileOpError CU_FILE_SUCCESS = 0;
inline constexpr CUfileOpError CU_FILE_DRIVER_NOT_INITIALIZED = 5001;
inline constexpr CUfileOpError CU_FILE_HANDLE_NOT_REGISTERED = 5027;
inline constexpr CUfileOpError CU_FILE_INTERNAL_ERROR = 5030;

/// `CUfileError_t`: returned by value (8 bytes, in a register).
struct CUfileError_t {
  CUfileOpError err;  // cuFile's error
  int cu_err;         // CUresult of the CUDA driver
};

/// `CUfileFileHandleType`.
inline constexpr int CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1;

/// `CUfileDescr_t`.
struct CUfileDescr_t {
  int type;
  union {
    int fd;
    void* handle;
  } handle;
  const void* fs_ops;
};

using CUfileHandle_t = void*;

/// `CUfileOpcode_t`.
inline constexpr int CUFILE_READ = 0;
inline constexpr int CUFILE_WRITE = 1;

/// `CUfileStatus_t` bits.
inline constexpr int CUFILE_WAITING = 0x01;
inline constexpr int CUFILE_PENDING = 0x02;
inline constexpr int CUFILE_INVALID = 0x04;
inline constexpr int CUFILE_CANCELED = 0x08;
inline constexpr int CUFILE_COMPLETE = 0x10;
inline constexpr int CUFILE_TIMEOUT = 0x20;
inline constexpr int CUFILE_FAILED = 0x40;

/// `CUfileBatchMode_t`.
inline constexpr int CUFILE_BATCH = 1;

/// `CUfileIOParams_t`: one entry of a batch.
struct CUfileIOParams_t {
  int mode;  // CUFILE_BATCH
  union {
    struct {
      void* devPtr_base;
      off_t file_offset;
      off_t devPtr_offset;
      std::size_t size;
    } batch;
  } u;
  CUfileHandle_t fh;
  int opcode;  // CUFILE_READ or CUFILE_WRITE
  void* cookie;
};

/// `CUfileIOEvents_t`: the state of one finished (or failed) entry.
struct CUfileIOEvents_t {
  void* cookie;
  int status;       // CUFILE_* status bits
  std::size_t ret;  // bytes moved, or a negative error
};

using CUfileBatchHandle_t = void*;

static_assert(sizeof(CUfileError_t) == 8);
static_assert(sizeof(CUfileDescr_t) == 24 && offsetof(CUfileDescr_t, fs_ops) == 16);
static_assert(sizeof(CUfileIOParams_t) == 64 && offsetof(CUfileIOParams_t, fh) == 40 &&
              offsetof(CUfileIOParams_t, cookie) == 56);
static_assert(sizeof(CUfileIOEvents_t) == 24 && offsetof(CUfileIOEvents_t, ret) == 16);

/// The entry points, one pointer each, loaded once per library path.
struct library {
  CUfileError_t (*cuFileDriverOpen)();
  CUfileError_t (*cuFileDriverClose)();  // the symbol cuFileDriverClose_v2
  CUfileError_t (*cuFileHandleRegister)(CUfileHandle_t*, CUfileDescr_t*);
  void (*cuFileHandleDeregister)(CUfileHandle_t);
  CUfileError_t (*cuFileBufRegister)(const void*, std::size_t, int);
  CUfileError_t (*cuFileBufDeregister)(const void*);
  ssize_t (*cuFileRead)(CUfileHandle_t, void*, std::size_t, off_t, off_t);
  ssize_t (*cuFileWrite)(CUfileHandle_t, const void*, std::size_t, off_t, off_t);
  CUfileError_t (*cuFileBatchIOSetUp)(CUfileBatchHandle_t*, unsigned);
  CUfileError_t (*cuFileBatchIOSubmit)(CUfileBatchHandle_t, unsigned, CUfileIOParams_t*, unsigned);
  CUfileError_t (*cuFileBatchIOGetStatus)(CUfileBatchHandle_t, unsigned, unsigned*,
                                          CUfileIOEvents_t*, struct timespec*);
  CUfileError_t (*cuFileBatchIOCancel)(CUfileBatchHandle_t);
  void (*cuFileBatchIODestroy)(CUfileBatchHandle_t);

  std::string path;  // what was opened

  /// The library at `path` (a soname or a file), opened once per process and never closed.
  /// Throws `nixl::error(backend)` "<who>: libcufile not found (...)" when it cannot be opened,
  /// or naming the first missing symbol.
  static const library& load(std::string_view path, std::string_view who = "GDS");
};

/// The library path to use: `param` when given, else `$NIXL_CUFILE_PATH`, else
/// "libcufile.so.0".
std::string library_path(std::string_view param);

/// "CU_FILE_HANDLE_NOT_REGISTERED (5027)"-style text of a cuFile error, with the CUDA driver
/// result when it is set.
std::string describe(CUfileError_t e);

/// A process-wide reference to the open cuFile driver: the first one opens it, the last one
/// closes it. Throws `nixl::error(backend)` when the driver does not open.
class driver {
 public:
  explicit driver(const library& lib);
  ~driver();
  driver(const driver&) = delete;
  driver& operator=(const driver&) = delete;

 private:
  const library* lib_;
};

}  // namespace nixl::gds::cufile
