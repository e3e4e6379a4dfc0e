#pragma once
// --use_device_api: each point's blocks put by a kernel through memory views (device_mode.cpp,
// device_kernels.cu), next to a plain copy kernel of the same shape.

#include <cstddef>
#include <memory>

#include "device_kernels.hpp"
#include "options.hpp"
#include "report.hpp"
#include "segment.hpp"
#include "sweep.hpp"
#include "target.hpp"

namespace nixl_bench {

/// Throws "no CUDA device ..." when `gpu` cannot run kernels (before any agent is made).
void require_gpu(int gpu);

/// Runs point `p` (number `idx` of `npoints`): prepares a view of the initiator's `batch`
/// blocks and one of the target's, then launches the put kernel on `gpu`'s stream
/// `warmup` + `iters` times, each launch waited for before the next. Prep is the two views'
/// preparation, Post the launch, Tx launch to completion. The copy kernel (--baseline kernel)
/// or the CUDA runtime's copies (--baseline cuda) run after it with the same counts.
nb::row run_device_point(bench_agent& a, const options& o, segment& local, target_side& tgt,
                         device::runner& gpu, const nb::point& p, std::size_t idx,
                         std::size_t npoints, progress_line& prog);

}  // namespace nixl_bench
