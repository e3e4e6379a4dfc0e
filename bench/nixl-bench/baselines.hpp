#pragma once
// Baselines measured in the same run as the transfers: single-thread memcpy for DRAM, fio for
// files, the CUDA runtime's own copies for VRAM.

#include <cstddef>
#include <cstdint>
#include <string>

#include "bench_common.hpp"
#include "options.hpp"

namespace nixl_bench {

struct baseline_result {
  double gbps = 0, us = 0;
};

/// Copies the blocks the transfers moved, in the same order: with `slots`, iteration k copies
/// blocks (k * batch + j) % slots as the prepared mode does, else the same `batch` blocks.
baseline_result memcpy_baseline(std::uint8_t* src, std::uint8_t* dst, const nb::layout& lay,
                                std::size_t batch, const nb::point& p, bool read,
                                std::size_t slots = 0);

/// One fio job over the same file and range (fio must be installed; else no baseline).
baseline_result fio_baseline(const std::string& path, const nb::point& p, bool read, int seconds);

#if defined(NIXL_BENCH_CUDA)
/// What the CUDA runtime itself does for the same blocks between the same two GPUs (or GPU and
/// host).
baseline_result cuda_baseline(nixl::mem_kind lk, nixl::mem_kind tk, const nb::layout& lay,
                              const nb::point& p, bool read, int lgpu, int tgpu);
#endif

#if defined(NIXL_BENCH_GDS)
/// Direct cuFileRead/cuFileWrite of the same blocks between `base` (DRAM or VRAM of GPU `gpu`)
/// and the file at `path`, one call per block on one thread, with the point's iteration counts
/// (cufile_baseline.cpp; no baseline, with a message, when cuFile is missing or refuses).
baseline_result cufile_baseline(const std::string& path, std::uintptr_t base, nixl::mem_kind kind,
                                int gpu, const nb::layout& lay, const nb::point& p, bool read);
#endif

}  // namespace nixl_bench
