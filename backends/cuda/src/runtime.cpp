// Checked-call helpers, the device table, host and process identity, and allocation ranges.

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

#include <cudaTypedefs.h>
#include <fmt/format.h>

#include <nixl/backends/cuda/check.hpp>
#include <nixl/backends/cuda/runtime.hpp>
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

namespace {
const char* base_name(const char* file) noexcept {
  const char* slash = std::strrchr(file, '/');
  return slash != nullptr ? slash + 1 : file;
}
}  // namespace

void throw_cuda(cudaError_t e, const char* call, const char* file, int line,
                std::string_view hint) {
  (void)cudaGetLastError();  // clears the slot for errors that are not sticky
  std::string msg = fmt::format("{}: {} [{}:{}]", call, describe(e), base_name(file), line);
  if (!hint.empty()) fmt::format_to(std::back_inserter(msg), "; {}", hint);
  throw nixl::error(status::backend, msg);
}

void report_cuda(cudaError_t e, const char* call, const char* file, int line) noexcept {
  (void)cudaGetLastError();
  try {
    nixl::log::error("CUDA: {}: {} [{}:{}]", call, describe(e), base_name(file), line);
  } catch (...) {
  }
}

namespace {

struct device_table {
  std::vector<device_info> list;
  std::string reason;
};

const device_table& table() noexcept {
  static const device_table t = [] {
    device_table out;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      try {
        out.reason = fmt::format("cudaGetDeviceCount: {}", describe(e));
      } catch (...) {
      }
      return out;
    }
    if (n == 0) {
      out.reason = "cudaGetDeviceCount: no CUDA device is visible to this process";
      return out;
    }
    for (int i = 0; i < n; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      device_info d;
      d.ordinal = i;
      std::memcpy(d.id.data(), p.uuid.bytes, 16);
      d.sm_count = p.multiProcessorCount;
      d.name = p.name;
      d.pci = fmt::format("{:04x}:{:02x}:{:02x}.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
      out.list.push_back(std::move(d));
    }
    if (out.list.empty()) out.reason = "cudaGetDeviceProperties failed for every device";
    return out;
  }();
  return t;
}

}  // namespace

const std::vector<device_info>& devices() noexcept {
  return table().list;
}
std::string_view no_device_reason() noexcept {
  return table().reason;
}

int ordinal_of(const uuid& id) noexcept {
  for (const auto& d : devices())
    if (d.id == id) return d.ordinal;
  return -1;
}

std::string to_string(const uuid& u) {
  return fmt::format(
      "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}"
      "{:02x}{:02x}",
      u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
      u[15]);
}

namespace {

// /proc/sys/kernel/random/boot_id holds "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": it differs
// between hosts and between boots of one host.
uuid read_boot_id() noexcept {
  uuid out{};
  char buf[64] = {};
  const int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    std::size_t k = 0;
    for (ssize_t i = 0; i + 1 < n && k < 16; ++i) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex(buf[i]);
      if (hi < 0) continue;
      const int lo = hex(buf[i + 1]);
      if (lo < 0) continue;
      out[k++] = static_cast<std::uint8_t>(hi * 16 + lo);
      ++i;
    }
    if (k == 16) return out;
  }
  // No boot id (not Linux, or /proc hidden): fall back to the host name alone, hashed.
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = host; *c != 0; ++c)
    h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}

}  // namespace

const host_identity& self() noexcept {
  static const host_identity id = [] {
    host_identity me;
    me.boot_id = read_boot_id();
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) me.hostname = host;
    std::random_device rd;
    me.process_token =
        (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(::getpid());
    if (me.process_token == 0) me.process_token = 1;
    return me;
  }();
  return id;
}

void allocation_range(const void* p, std::uintptr_t& base, std::size_t& size) {
  static PFN_cuMemGetAddressRange_v3020 fn = nullptr;
  static std::once_flag once;
  static cudaError_t lookup_error = cudaSuccess;
  static cudaDriverEntryPointQueryResult lookup_result = cudaDriverEntryPointSuccess;
  std::call_once(once, [] {
    void* f = nullptr;
    lookup_error = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000,
                                                    cudaEnableDefault, &lookup_result);
    if (lookup_error == cudaSuccess && lookup_result == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(f);
    else
      (void)cudaGetLastError();
  });
  if (fn == nullptr)
    nixl::raise(status::backend,
                "cudaGetDriverEntryPointByVersion(\"cuMemGetAddressRange\"): not available ({}, "
                "query result {}); the installed driver is older than the CUDA runtime, update it",
                cudaGetErrorName(lookup_error), static_cast<int>(lookup_result));
  CUdeviceptr b = 0;
  std::size_t s = 0;
  const CUresult r = fn(&b, &s, reinterpret_cast<CUdeviceptr>(p));
  if (r != CUDA_SUCCESS)
    nixl::raise(status::invalid_param,
                "cuMemGetAddressRange({}): driver error {}; the address is not inside memory "
                "allocated by CUDA on a GPU (cudaMalloc, a caching allocator, ...)",
                p, static_cast<int>(r));
  base = static_cast<std::uintptr_t>(b);
  size = s;
}

}  // namespace nixl::cuda::detail
