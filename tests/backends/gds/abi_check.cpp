// Compiled only where NVIDIA's cufile.h is installed: the backends' own declarations of the
// cuFile API (nixl/backends/gds/cufile.hpp) against the header, size by size and offset by
// offset. A mismatch stops the build here; the program prints what it compared.

#include <cufile.h>

#include <cstddef>
#include <cstdio>

#include <nixl/backends/gds/cufile.hpp>

namespace ours = nixl::gds::cufile;

#define NIXL_SAME_SIZE(a, b) static_assert(sizeof(a) == sizeof(b), #a " and " #b " differ in size")
#define NIXL_SAME_OFFSET(a, b, fa, fb) \
  static_assert(offsetof(a, fa) == offsetof(b, fb), #a "::" #fa " is not where " #b " has it")

NIXL_SAME_SIZE(ours::CUfileError_t, CUfileError_t);
NIXL_SAME_OFFSET(ours::CUfileError_t, CUfileError_t, err, err);
NIXL_SAME_OFFSET(ours::CUfileError_t, CUfileError_t, cu_err, cu_err);
NIXL_SAME_SIZE(ours::CUfileDescr_t, CUfileDescr_t);
NIXL_SAME_OFFSET(ours::CUfileDescr_t, CUfileDescr_t, type, type);
NIXL_SAME_OFFSET(ours::CUfileDescr_t, CUfileDescr_t, handle, handle);
NIXL_SAME_OFFSET(ours::CUfileDescr_t, CUfileDescr_t, fs_ops, fs_ops);
NIXL_SAME_SIZE(ours::CUfileIOParams_t, CUfileIOParams_t);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, mode, mode);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, u.batch.devPtr_base,
                 u.batch.devPtr_base);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, u.batch.file_offset,
                 u.batch.file_offset);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, u.batch.devPtr_offset,
                 u.batch.devPtr_offset);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, u.batch.size, u.batch.size);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, fh, fh);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, opcode, opcode);
NIXL_SAME_OFFSET(ours::CUfileIOParams_t, CUfileIOParams_t, cookie, cookie);
NIXL_SAME_SIZE(ours::CUfileIOEvents_t, CUfileIOEvents_t);
NIXL_SAME_OFFSET(ours::CUfileIOEvents_t, CUfileIOEvents_t, cookie, cookie);
NIXL_SAME_OFFSET(ours::CUfileIOEvents_t, CUfileIOEvents_t, status, status);
NIXL_SAME_OFFSET(ours::CUfileIOEvents_t, CUfileIOEvents_t, ret, ret);
NIXL_SAME_SIZE(int, CUfileOpError);
NIXL_SAME_SIZE(int, CUfileStatus_t);
NIXL_SAME_SIZE(int, CUfileOpcode_t);
NIXL_SAME_SIZE(ours::CUfileHandle_t, CUfileHandle_t);
NIXL_SAME_SIZE(ours::CUfileBatchHandle_t, CUfileBatchHandle_t);

static_assert(ours::CU_FILE_DRIVER_NOT_INITIALIZED == CU_FILE_DRIVER_NOT_INITIALIZED);
static_assert(ours::CU_FILE_HANDLE_NOT_REGISTERED == CU_FILE_HANDLE_NOT_REGISTERED);
static_assert(ours::CU_FILE_INTERNAL_ERROR == CU_FILE_INTERNAL_ERROR);
static_assert(ours::CU_FILE_HANDLE_TYPE_OPAQUE_FD == CU_FILE_HANDLE_TYPE_OPAQUE_FD);
static_assert(ours::CUFILE_READ == CUFILE_READ && ours::CUFILE_WRITE == CUFILE_WRITE);
static_assert(ours::CUFILE_BATCH == CUFILE_BATCH);
static_assert(ours::CUFILE_WAITING == CUFILE_WAITING && ours::CUFILE_PENDING == CUFILE_PENDING &&
              ours::CUFILE_INVALID == CUFILE_INVALID && ours::CUFILE_CANCELED == CUFILE_CANCELED &&
              ours::CUFILE_COMPLETE == CUFILE_COMPLETE && ours::CUFILE_TIMEOUT == CUFILE_TIMEOUT &&
              ours::CUFILE_FAILED == CUFILE_FAILED);

// The entry points: the types of our table's pointers are those of the header's functions.
static_assert(sizeof(decltype(ours::library::cuFileRead)) == sizeof(&cuFileRead));

int main() {
  std::printf(
      "cuFile ABI: the backends' declarations match cufile.h (CUfileError_t %zu, CUfileDescr_t "
      "%zu, CUfileIOParams_t %zu, CUfileIOEvents_t %zu bytes)\n",
      sizeof(CUfileError_t), sizeof(CUfileDescr_t), sizeof(CUfileIOParams_t),
      sizeof(CUfileIOEvents_t));
  return 0;
}
