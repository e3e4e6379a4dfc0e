// The device table and allocation ranges.

#include <cstring>
#include <mutex>

#include <cudaTypedefs.h>
#include <fmt/format.h>

#include <nixl/backends/cuda/check.hpp>
#include <nixl/backends/cuda/detail/runtime.hpp>
#include <nixl/log.hpp>

namespace nixl::cuda::detail {

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
