// Loading cuFile at run time: one table of entry points per library path, the driver's
// process-wide reference count, and the text of cuFile's error codes.

#include <nixl/backends/gds/check.hpp>
#include <nixl/backends/gds/cufile.hpp>
#include <nixl/detail/call_site.hpp>

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>
#include <nixl/log.hpp>

namespace nixl::gds::cufile {
namespace {

std::mutex& load_mutex() {
  static std::mutex m;
  return m;
}

template <class F>
void bind(void* h, F& slot, const char* sym, const std::string& path, std::string_view who) {
  void* p = ::dlsym(h, sym);
  if (p == nullptr)
    raise(status::backend,
          "{}: libcufile at '{}' has no symbol {}; it is not a cuFile library this backend "
          "knows (it needs cuFile 1.6 or later)",
          who, path, sym);
  slot = reinterpret_cast<F>(p);
}

const char* error_name(int e) noexcept {
  switch (e) {
    case 0:
      return "CU_FILE_SUCCESS";
    case 5001:
      return "CU_FILE_DRIVER_NOT_INITIALIZED";
    case 5002:
      return "CU_FILE_DRIVER_INVALID_PROPS";
    case 5003:
      return "CU_FILE_DRIVER_UNSUPPORTED_LIMIT";
    case 5004:
      return "CU_FILE_DRIVER_VERSION_MISMATCH";
    case 5005:
      return "CU_FILE_DRIVER_VERSION_READ_ERROR";
    case 5006:
      return "CU_FILE_DRIVER_CLOSING";
    case 5007:
      return "CU_FILE_PLATFORM_NOT_SUPPORTED";
    case 5008:
      return "CU_FILE_IO_NOT_SUPPORTED";
    case 5009:
      return "CU_FILE_DEVICE_NOT_SUPPORTED";
    case 5010:
      return "CU_FILE_NVFS_DRIVER_ERROR";
    case 5011:
      return "CU_FILE_CUDA_DRIVER_ERROR";
    case 5012:
      return "CU_FILE_CUDA_POINTER_INVALID";
    case 5013:
      return "CU_FILE_CUDA_MEMORY_TYPE_INVALID";
    case 5014:
      return "CU_FILE_CUDA_POINTER_RANGE_ERROR";
    case 5015:
      return "CU_FILE_CUDA_CONTEXT_MISMATCH";
    case 5016:
      return "CU_FILE_INVALID_MAPPING_SIZE";
    case 5017:
      return "CU_FILE_INVALID_MAPPING_RANGE";
    case 5018:
      return "CU_FILE_INVALID_FILE_TYPE";
    case 5019:
      return "CU_FILE_INVALID_FILE_OPEN_FLAG";
    case 5020:
      return "CU_FILE_DIO_NOT_SET";
    case 5022:
      return "CU_FILE_INVALID_VALUE";
    case 5023:
      return "CU_FILE_MEMORY_ALREADY_REGISTERED";
    case 5024:
      return "CU_FILE_MEMORY_NOT_REGISTERED";
    case 5025:
      return "CU_FILE_PERMISSION_DENIED";
    case 5026:
      return "CU_FILE_DRIVER_ALREADY_OPEN";
    case 5027:
      return "CU_FILE_HANDLE_NOT_REGISTERED";
    case 5028:
      return "CU_FILE_HANDLE_ALREADY_REGISTERED";
    case 5029:
      return "CU_FILE_DEVICE_NOT_FOUND";
    case 5030:
      return "CU_FILE_INTERNAL_ERROR";
    case 5031:
      return "CU_FILE_GETNEWFD_FAILED";
    case 5033:
      return "CU_FILE_NVFS_SETUP_ERROR";
    case 5034:
      return "CU_FILE_IO_DISABLED";
    case 5035:
      return "CU_FILE_BATCH_SUBMIT_FAILED";
    case 5036:
      return "CU_FILE_GPU_MEMORY_PINNING_FAILED";
    case 5037:
      return "CU_FILE_BATCH_FULL";
    case 5038:
      return "CU_FILE_ASYNC_NOT_SUPPORTED";
    default:
      return "CU_FILE_ERROR";
  }
}

}  // namespace

std::string library_path(std::string_view param) {
  if (!param.empty()) return std::string(param);
  if (const char* e = std::getenv("NIXL_CUFILE_PATH"); e != nullptr && *e != '\0') return e;
  return "libcufile.so.0";
}

const library& library::load(std::string_view path_in, std::string_view who) {
  std::lock_guard g(load_mutex());
  // Tables live for the process: entry points stay valid while any backend holds one.
  static std::map<std::string, library, std::less<>> loaded;
  if (auto it = loaded.find(path_in); it != loaded.end()) return it->second;
  std::string path(path_in);
  ::dlerror();
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = ::dlerror();
    raise(status::backend,
          "{}: libcufile not found ({}: {}); install cuFile (libcufile of the CUDA toolkit), "
          "add its folder to LD_LIBRARY_PATH, or name the library with the backend parameter "
          "cufile_path or NIXL_CUFILE_PATH",
          who, path, why != nullptr ? why : "dlopen failed");
  }
  library lib{};
  lib.path = path;
  // The table's entry points and their symbols, in the same order.
  constexpr const char* symbols[] = {"cuFileDriverOpen",
                                     "cuFileDriverClose_v2",
                                     "cuFileHandleRegister",
                                     "cuFileHandleDeregister",
                                     "cuFileBufRegister",
                                     "cuFileBufDeregister",
                                     "cuFileRead",
                                     "cuFileWrite",
                                     "cuFileBatchIOSetUp",
                                     "cuFileBatchIOSubmit",
                                     "cuFileBatchIOGetStatus",
                                     "cuFileBatchIOCancel",
                                     "cuFileBatchIODestroy"};
  auto slots =
      std::tie(lib.cuFileDriverOpen, lib.cuFileDriverClose, lib.cuFileHandleRegister,
               lib.cuFileHandleDeregister, lib.cuFileBufRegister, lib.cuFileBufDeregister,
               lib.cuFileRead, lib.cuFileWrite, lib.cuFileBatchIOSetUp, lib.cuFileBatchIOSubmit,
               lib.cuFileBatchIOGetStatus, lib.cuFileBatchIOCancel, lib.cuFileBatchIODestroy);
  static_assert(std::tuple_size_v<decltype(slots)> == std::size(symbols));
  std::apply(
      [&](auto&... slot) {
        std::size_t i = 0;
        (bind(h, slot, symbols[i++], path, who), ...);
      },
      slots);
  // The handle is never closed: a table handed out stays valid for the process.
  return loaded.emplace(path, std::move(lib)).first->second;
}

std::string describe(CUfileError_t e) {
  if (e.cu_err != 0)
    return fmt::format("{} ({}, CUDA driver result {})", error_name(e.err), e.err, e.cu_err);
  return fmt::format("{} ({})", error_name(e.err), e.err);
}

namespace {
struct driver_count {
  std::mutex mu;
  std::map<const library*, unsigned> refs;
};
driver_count& counts() {
  static driver_count c;
  return c;
}
}  // namespace

driver::driver(const library& lib) : lib_(&lib) {
  auto& c = counts();
  std::lock_guard g(c.mu);
  auto& n = c.refs[lib_];
  if (n == 0)
    NIXL_CUFILE_CHECK_HINT(
        lib_->cuFileDriverOpen(),
        "cuFile could not start: check /etc/cufile.json (or $CUFILE_ENV_PATH_JSON) and, without "
        "the nvidia-fs module, that allow_compat_mode is true; $CUFILE_LOGFILE_PATH names "
        "cuFile's log");
  ++n;
}

driver::~driver() {
  auto& c = counts();
  std::lock_guard g(c.mu);
  auto& n = c.refs[lib_];
  if (n > 0 && --n == 0) NIXL_CUFILE_WARN(lib_->cuFileDriverClose());
}

}  // namespace nixl::gds::cufile

namespace nixl::gds::detail {

void throw_cufile(cufile::CUfileError_t e, const char* call, const char* file, int line,
                  std::string_view hint, status s) {
  throw nixl::error(s, nixl::detail::call_failure(call, cufile::describe(e), file, line, hint));
}

void report_cufile(cufile::CUfileError_t e, const char* call, const char* file, int line) noexcept {
  try {
    log::error("GDS: {}", nixl::detail::call_failure(call, cufile::describe(e), file, line));
  } catch (...) {
  }
}

}  // namespace nixl::gds::detail
