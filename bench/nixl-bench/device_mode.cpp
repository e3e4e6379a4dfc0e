// --use_device_api (device_mode.hpp): the views of a point, the put kernel's timed launches, the
// data check and the copy kernel's baseline.

#include "device_mode.hpp"

#include <string>
#include <vector>

#include "baselines.hpp"

namespace nixl_bench {
namespace {

/// The two views of a point, released when it ends (also on an error).
class views {
 public:
  views(bench_agent& a, const nixl::xfer_dlist& local,
        const std::vector<nixl::remote_entry>& remote, const options& o)
      : a_(a) {
    nixl::view_options vo;
    vo.backends = {o.backend};
    local_ = a.prepare_view(local, vo);
    vo.device = o.initiator_gpu;  // the view's header where the kernel runs
    try {
      remote_ = a.prepare_view(nixl::mem_kind::vram, remote, vo);
    } catch (...) {
      a.release_view(local_);
      throw;
    }
  }
  ~views() {
    a_.release_view(remote_);
    a_.release_view(local_);
  }
  views(const views&) = delete;
  views& operator=(const views&) = delete;
  const void* local() const noexcept { return local_; }
  const void* remote() const noexcept { return remote_; }

 private:
  bench_agent& a_;
  void* local_ = nullptr;
  void* remote_ = nullptr;
};

}  // namespace

void require_gpu(int gpu) {
  if (const std::string why = device::no_gpu(gpu); !why.empty())
    fail(why + " (--use_device_api runs kernels on --initiator_gpu and needs --target_gpu's VRAM)");
}

nb::row run_device_point(bench_agent& a, const options& o, segment& local, target_side& tgt,
                         device::runner& gpu, const nb::point& p, std::size_t idx,
                         std::size_t npoints, progress_line& prog) {
  const nb::layout lay{p.block, p.block * o.stride_factor(), o.per_thread()};
  const auto seed = static_cast<std::uint32_t>(idx + 1);
  if (o.check_consistency) local.fill(seed);

  nixl::xfer_dlist l(nixl::mem_kind::vram);
  std::vector<nixl::remote_entry> r;
  l.reserve(p.batch);
  r.reserve(p.batch);
  for (std::size_t i = 0; i < p.batch; ++i) {
    l.push_back(local.at(lay.offset(0, i), p.block));
    r.push_back({tgt.agent(), tgt.at(lay.offset(0, i), p.block)});
  }

  std::vector<double> prep, post, tx;
  post.reserve(static_cast<std::size_t>(p.iters));
  tx.reserve(static_cast<std::size_t>(p.iters));
  nb::clock::time_point start{}, end{};
  {
    const auto t0 = nb::clock::now();
    views v(a, l, r, o);
    prep.push_back(nb::us_since(t0, nb::clock::now()));
    gpu.begin();
    for (int k = 0; k < p.warmup + p.iters; ++k) {
      if (k == p.warmup) start = nb::clock::now();
      const auto t1 = nb::clock::now();
      gpu.launch_puts(v.local(), v.remote(), p.batch, p.block, o.num_threads);
      const auto t2 = nb::clock::now();
      gpu.wait("put kernel");
      if (k < p.warmup) continue;
      post.push_back(nb::us_since(t1, t2));
      tx.push_back(nb::us_since(t1, nb::clock::now()));
      prog.update(idx, npoints, p, k - p.warmup + 1);
    }
    end = nb::clock::now();
    gpu.check_puts();
  }
  prog.clear();

  nb::row row;
  row.block = p.block;
  row.batch = p.batch;
  row.iters = p.iters;
  const double wall = nb::us_since(start, end);
  const double bytes = static_cast<double>(p.block * p.batch) * p.iters;
  row.gbps = bytes / wall / 1e3;
  row.avg_lat = wall / (static_cast<double>(p.iters) * static_cast<double>(p.batch));
  row.prep = nb::summarize(prep);
  row.post = nb::summarize(post);
  row.tx = nb::summarize(tx);
  row.descs = p.batch;  // puts per kernel

  if (o.check_consistency) {
    if (auto bad = tgt.verify(lay, p.batch, 1, seed))
      fail(
          fmt::format("data check failed at block {} batch {}: byte at offset {} of the target "
                      "side is wrong",
                      p.block, p.batch, *bad));
    row.checked = true;
  }

  if (o.baseline == "kernel") {
    // The same blocks by the same launch shape without views, into VRAM of the target's GPU
    // in this process (a target process's memory is reached through views only).
    const std::size_t span = lay.offset(0, p.batch - 1) + p.block;
    gpu.prepare_copy(span, o.target_gpu);
    const auto* src = reinterpret_cast<const void*>(local.base());
    nb::clock::time_point b0{};
    for (int k = 0; k < p.warmup + p.iters; ++k) {
      if (k == p.warmup) b0 = nb::clock::now();
      gpu.launch_copy(src, p.batch, p.block, lay.stride, o.num_threads);
      gpu.wait("copy kernel");
    }
    const double us = nb::us_since(b0, nb::clock::now());
    row.base_gbps = bytes / us / 1e3;
    row.base_us = us / p.iters;
  }
#if defined(NIXL_BENCH_CUDA)
  else if (o.baseline == "cuda") {
    const auto b =
        cuda_baseline(local.kind(), tgt.kind(), lay, p, false, o.initiator_gpu, o.target_gpu);
    row.base_gbps = b.gbps;
    row.base_us = b.us;
  }
#endif
  return row;
}

}  // namespace nixl_bench
