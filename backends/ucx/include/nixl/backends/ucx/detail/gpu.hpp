#pragma once
/// DRAM <-> VRAM of one host copied by the CUDA driver for the UCX backend (`host_vram_copy`,
/// docs/ucx.md "GPU memory"): UCX 1.22 has no transport that moves host memory into another
/// UCX context's GPU memory, so it stages such transfers through host fragments. The driver
/// (loaded at run time; absent: the path is off) copies instead, from pinned host memory.

#include <cstddef>
#include <span>

#include <nixl/status.hpp>

namespace nixl::ucx::detail {

/// One descriptor the driver copies: both addresses are valid in this process (VRAM of
/// another process mapped through CUDA IPC). `stream` and `ctx` belong to the device of the
/// VRAM side.
struct gpu_item {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t len = 0;
  void* ctx = nullptr;
  void* stream = nullptr;
};

/// Copies every item and waits for them (the data is in place on `success`).
status gpu_copy(std::span<const gpu_item> items) noexcept;

}  // namespace nixl::ucx::detail
