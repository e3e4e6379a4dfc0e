// Segments: memory set-up per segment type (DRAM from mmap or UCX, VRAM from cudaMalloc, a file
// of --filepath), and the data pattern written and checked through each.

#include "segment.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#if defined(NIXL_BENCH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nixl_bench {
namespace {

#if defined(NIXL_BENCH_CUDA)
void cuda(const char* what, cudaError_t e) {
  if (e != cudaSuccess) fail(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}
#endif

}  // namespace

segment::segment(nixl::mem_kind kind, std::size_t size, const options& o, int gpu, const char* who,
                 nixl::ucx::backend* ucx)
    : kind_(kind), size_(size) {
  switch (kind) {
    case nixl::mem_kind::dram:
      if (ucx != nullptr) {
        ucx_mem_ = ucx->allocate(size);
        std::memset(ucx_mem_.data(), 0, size);
      } else {
        host_ = nb::host_buffer(size);
      }
      break;
    case nixl::mem_kind::vram:
#if defined(NIXL_BENCH_CUDA)
      gpu_ = gpu;
      cuda("cudaSetDevice", cudaSetDevice(gpu));
      cuda("cudaMalloc", cudaMalloc(&vram_, size));
      cuda("cudaMemset", cudaMemset(vram_, 0, size));
      break;
#else
      (void)gpu;
      fail("VRAM needs a build with the CUDA backend and toolkit (NIXL_WITH_CUDA=ON)");
#endif
    case nixl::mem_kind::file: {
      path_ = fmt::format("{}/nixl-bench-{}-{}.dat", o.filepath, who, ::getpid());
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd_ < 0) fail(fmt::format("open {}: {}", path_, std::strerror(errno)));
      if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
        fail(fmt::format("ftruncate {}: {}", path_, std::strerror(errno)));
      break;
    }
    default:
      fail("unsupported segment kind");
  }
}

segment::~segment() {
  if (cleanup_) cleanup_();
#if defined(NIXL_BENCH_CUDA)
  if (vram_ != nullptr) cudaFree(vram_);
#endif
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

void segment::register_with(bench_agent& a, const nixl::backend_options& opt) {
  a.register_memory(registration(), opt);
  cleanup_ = [this, &a, opt] {
    try {
      a.deregister_memory(registration(), opt);
    } catch (...) {
    }
  };
}

nixl::reg_dlist segment::registration() const {
  nixl::reg_dlist l(kind_);
  if (kind_ == nixl::mem_kind::file)
    l.push_back({{0, 0, dev()}, path_});
  else
    l.push_back({{base(), size_, dev()}, ""});
  return l;
}

void segment::fill(std::uint32_t seed) {
  if (kind_ == nixl::mem_kind::dram) return nb::fill_pattern(host(), 0, size_, seed);
  std::vector<std::uint8_t> tmp(std::min<std::size_t>(size_, 16u << 20));
  for (std::size_t off = 0; off < size_; off += tmp.size()) {
    const std::size_t n = std::min(tmp.size(), size_ - off);
    nb::fill_pattern(tmp.data(), off, n, seed);
    put(off, tmp.data(), n);
  }
}

std::optional<std::size_t> segment::verify(const nb::layout& lay, std::size_t count, int threads,
                                           std::uint32_t seed) {
  std::vector<std::uint8_t> tmp;
  for (int t = 0; t < threads; ++t)
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t off = lay.offset(t, i);
      const std::uint8_t* p;
      if (kind_ == nixl::mem_kind::dram) {
        p = host() + off;
      } else {
        tmp.resize(lay.block);
        get(off, tmp.data(), lay.block);
        p = tmp.data();
      }
      if (auto bad = nb::check_pattern(p, off, lay.block, seed)) return off + *bad;
    }
  return std::nullopt;
}

void segment::put(std::size_t off, const void* src, std::size_t n) {
  if (kind_ == nixl::mem_kind::file) {
    if (::pwrite(fd_, src, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
      fail(fmt::format("pwrite {}: {}", path_, std::strerror(errno)));
  } else {
#if defined(NIXL_BENCH_CUDA)
    cuda("cudaMemcpy", cudaMemcpy(static_cast<char*>(vram_) + off, src, n, cudaMemcpyHostToDevice));
#endif
  }
}

void segment::get(std::size_t off, void* dst, std::size_t n) {
  if (kind_ == nixl::mem_kind::file) {
    if (::pread(fd_, dst, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
      fail(fmt::format("pread {}: {}", path_, std::strerror(errno)));
  } else {
#if defined(NIXL_BENCH_CUDA)
    cuda("cudaMemcpy", cudaMemcpy(dst, static_cast<char*>(vram_) + off, n, cudaMemcpyDeviceToHost));
#endif
  }
}

nixl::ucx::backend* ucx_allocator(bench_agent& a, const options& o) {
  if (!o.ucx_alloc || o.backend != "UCX") return nullptr;
  return &a.get_backend<nixl::ucx::backend>();
}

}  // namespace nixl_bench
