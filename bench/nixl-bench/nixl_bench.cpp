// One file above 600 lines for now: it will be split by concern (options, segments, target,
// initiator, report) once the concurrent work on nixl-bench has landed.
// nixl-bench: nixlbench's sweep over the agent's public API.
//
// For each (block size, batch size) point a request of `batch` descriptors of `block` bytes is
// made, posted `warmup_iter` times, then `num_iter` times while timing each prep, post and
// transfer; the table gives bandwidth, nixlbench's average latency and the averages and 99th
// percentiles of those times, next to a baseline measured in the same run (single-thread
// memcpy for DRAM, fio for files, cudaMemcpyAsync for VRAM) and their ratio.
//
//   nixl-bench --backend UCX                          # two processes over loopback (default)
//   nixl-bench --backend UCX --processes 1            # two agents in one process
//   nixl-bench --backend POSIX --target_seg_type FILE # DRAM -> file, one agent (loopback)
//   nixl-bench --role target --port 5555 &            # two separate commands
//   nixl-bench --role initiator --peer_ip 127.0.0.1 --port 5555
//   nixl-bench --role target --listen_address 10.0.0.2 --port 5555       # across hosts
//   nixl-bench --role initiator --peer_ip 10.0.0.2 --port 5555
//   nixl-bench --role target --etcd_endpoints http://10.0.0.1:2379        # meet through etcd
//   nixl-bench --role initiator --etcd_endpoints http://10.0.0.1:2379
//
// Two processes exchange metadata through the target's metadata listener (the initiator sends
// its own and fetches the target's), then talk with notifications: the target says where its
// buffer is, the initiator asks it to fill or verify data and to stop.

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <nixl/nixl.hpp>  // UCX and the metadata exchange always; POSIX and CUDA when built
#if defined(NIXL_BENCH_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "bench_common.hpp"
#include "compare_nixl.hpp"
#include "report.hpp"

namespace nb = nixl_bench;
using namespace std::chrono_literals;

/// Every backend this build links (UCX always; POSIX and CUDA when built).
using bench_agent = nixl::agent_over<nixl::enabled_backends>;

namespace {

constexpr const char* target_name = "nixl-bench-target";
constexpr const char* initiator_name = "nixl-bench-initiator";

struct options {
  std::string backend = "UCX";
  std::string initiator_seg_type = "DRAM";
  std::string target_seg_type = "DRAM";
  std::string op_type = "WRITE";
  std::size_t start_block_size = 4096;
  std::size_t max_block_size = 64ull << 20;
  std::size_t start_batch_size = 1;
  std::size_t max_batch_size = 1;
  int num_iter = 1000;
  int warmup_iter = 100;
  int large_blk_iter_ftr = 16;
  int num_threads = 1;
  std::size_t total_buffer_size = 0;  // 0: what the largest point needs
  bool check_consistency = false;
  std::string xfer_mode = "repost";
  bool recreate_xfer = false;
  bool prepared_xfer = false;
  bool scatter = false;
  bool skip_merge = false;
  bool enable_pt = true;
  bool yield = false;
  bool ucx_alloc = false;
  int pipeline_depth = 1;       // requests in flight per thread (repost mode)
  bool reregister_mem = false;  // register + deregister the local blocks every iteration
  std::string compare_nixl;     // folder of NIXL's packed nixlbench (run_pair.sh)
  std::string compare_nixl_err_mode = "none";
  int compare_nixl_runs = 2;
  std::vector<std::string> compare_nixl_args;
  int processes = 0;  // 0: 2 for backends that reach other agents, 1 otherwise
  std::string role;   // "", "target", "initiator"
  std::string peer_ip = "127.0.0.1";
  std::uint16_t port = 0;
  std::string listen_address;  // target's listener; empty: NIXL_LISTEN_ADDRESS, else loopback
  std::string etcd_endpoints;  // --role: meet through etcd instead of the listener
  std::string filepath = "/tmp";
  std::string posix_api_type = "URING";
  std::vector<std::string> backend_params;
  int initiator_gpu = 0;
  int target_gpu = 0;
  std::string baseline = "auto";
  int fio_runtime = 1;
  std::string output_format = "table";
  std::string csv, json, plot;
  bool progress = false;
  std::string command;

  nixl::mem_kind kind_of(const std::string& s) const {
    if (s == "DRAM") return nixl::mem_kind::dram;
    if (s == "VRAM") return nixl::mem_kind::vram;
    if (s == "FILE") return nixl::mem_kind::file;
    throw std::invalid_argument("segment type '" + s + "': use DRAM, VRAM or FILE");
  }
  nixl::mem_kind initiator_kind() const { return kind_of(initiator_seg_type); }
  nixl::mem_kind target_kind() const { return kind_of(target_seg_type); }
  nixl::xfer_op op() const {
    return op_type == "READ" ? nixl::xfer_op::read : nixl::xfer_op::write;
  }
  std::size_t stride_factor() const { return scatter ? 2 : 1; }
  /// Bytes per thread on each side.
  std::size_t per_thread() const {
    if (total_buffer_size != 0) return total_buffer_size / static_cast<std::size_t>(num_threads);
    return max_block_size * max_batch_size * stride_factor() *
           static_cast<std::size_t>(pipeline_depth);
  }
  std::size_t buffer_size() const { return per_thread() * static_cast<std::size_t>(num_threads); }
  bool local_only() const { return backend == "POSIX"; }
};

[[noreturn]] void fail(const std::string& msg) {
  throw std::runtime_error(msg);
}

nixl::params backend_params(const options& o) {
  nixl::params p;
  // UCX: a worker per posting thread, each request on the worker of the thread that makes it
  if (o.backend == "UCX" && o.num_threads > 1) p["num_threads"] = std::to_string(o.num_threads);
  if (o.backend == "POSIX") {
    if (o.posix_api_type == "URING")
      p["use_uring"] = "true";
    else if (o.posix_api_type == "AIO")
      p["use_aio"] = "true";
    else if (o.posix_api_type == "POSIX")
      p["use_posix"] = "true";
    else
      fail("--posix_api_type must be URING, AIO or POSIX");
  }
  for (const auto& kv : o.backend_params) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) fail("--backend_params entry '" + kv + "' is not KEY=VALUE");
    p[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return p;
}

// Segments: what one side transfers from or into

/// A DRAM buffer, a VRAM buffer or a file, all addressed by offsets from 0.
class segment {
 public:
  /// With `ucx`, DRAM comes from the UCX backend's allocator instead of mmap.
  segment(nixl::mem_kind kind, std::size_t size, const options& o, int gpu, const char* who,
          nixl::ucx::backend* ucx = nullptr)
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
  segment(const segment&) = delete;
  ~segment() {
    if (cleanup_) cleanup_();
#if defined(NIXL_BENCH_CUDA)
    if (vram_ != nullptr) cudaFree(vram_);
#endif
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(path_.c_str());
    }
  }

  nixl::mem_kind kind() const noexcept {
    return kind_;
  }
  std::size_t size() const noexcept {
    return size_;
  }
  const std::string& path() const noexcept {
    return path_;
  }
  std::uintptr_t base() const noexcept {
    if (kind_ == nixl::mem_kind::dram) return reinterpret_cast<std::uintptr_t>(host());
    if (kind_ == nixl::mem_kind::vram) return reinterpret_cast<std::uintptr_t>(vram_);
    return 0;
  }
  std::uint64_t dev() const noexcept {
    if (kind_ == nixl::mem_kind::vram) return static_cast<std::uint64_t>(gpu_);
    if (kind_ == nixl::mem_kind::file) return static_cast<std::uint64_t>(fd_);
    return 0;
  }
  /// Registers the segment with `a` (restricted to `opt`'s backends) until destruction.
  void register_with(bench_agent& a, const nixl::backend_options& opt = {}) {
    a.register_memory(registration(), opt);
    cleanup_ = [this, &a, opt] {
      try {
        a.deregister_memory(registration(), opt);
      } catch (...) {
      }
    };
  }
  std::uint8_t* host() const noexcept {
    if (ucx_mem_.size() != 0) return reinterpret_cast<std::uint8_t*>(ucx_mem_.data());
    return host_.data();
  }
  nixl::reg_dlist registration() const {
    nixl::reg_dlist l(kind_);
    if (kind_ == nixl::mem_kind::file)
      l.push_back({{0, 0, dev()}, path_});
    else
      l.push_back({{base(), size_, dev()}, ""});
    return l;
  }
  nixl::desc at(std::size_t off, std::size_t len) const noexcept {
    return {base() + off, len, dev()};
  }

  /// Pattern `seed` over the whole segment.
  void fill(std::uint32_t seed) {
    if (kind_ == nixl::mem_kind::dram) return nb::fill_pattern(host(), 0, size_, seed);
    std::vector<std::uint8_t> tmp(std::min<std::size_t>(size_, 16u << 20));
    for (std::size_t off = 0; off < size_; off += tmp.size()) {
      const std::size_t n = std::min(tmp.size(), size_ - off);
      nb::fill_pattern(tmp.data(), off, n, seed);
      put(off, tmp.data(), n);
    }
  }
  /// Offset of the first byte of the written blocks that does not hold pattern `seed`.
  std::optional<std::size_t> verify(const nb::layout& lay, std::size_t count, int threads,
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

 private:
  void put(std::size_t off, const void* src, std::size_t n) {
    if (kind_ == nixl::mem_kind::file) {
      if (::pwrite(fd_, src, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
        fail(fmt::format("pwrite {}: {}", path_, std::strerror(errno)));
    } else {
#if defined(NIXL_BENCH_CUDA)
      cuda("cudaMemcpy",
           cudaMemcpy(static_cast<char*>(vram_) + off, src, n, cudaMemcpyHostToDevice));
#endif
    }
  }
  void get(std::size_t off, void* dst, std::size_t n) {
    if (kind_ == nixl::mem_kind::file) {
      if (::pread(fd_, dst, n, static_cast<off_t>(off)) != static_cast<ssize_t>(n))
        fail(fmt::format("pread {}: {}", path_, std::strerror(errno)));
    } else {
#if defined(NIXL_BENCH_CUDA)
      cuda("cudaMemcpy",
           cudaMemcpy(dst, static_cast<char*>(vram_) + off, n, cudaMemcpyDeviceToHost));
#endif
    }
  }
#if defined(NIXL_BENCH_CUDA)
  static void cuda(const char* what, cudaError_t e) {
    if (e != cudaSuccess) fail(fmt::format("{}: {}", what, cudaGetErrorString(e)));
  }
#endif

  nixl::mem_kind kind_;
  std::size_t size_;
  nb::host_buffer host_;
  nixl::ucx::memory ucx_mem_;
  std::function<void()> cleanup_;
  void* vram_ = nullptr;
  int gpu_ = 0;
  int fd_ = -1;
  std::string path_;
};

/// The UCX allocator of `a` when DRAM should come from UCX (--ucx_alloc), else null.
nixl::ucx::backend* ucx_allocator(bench_agent& a, const options& o) {
  if (!o.ucx_alloc || o.backend != "UCX") return nullptr;
  return &a.get_backend<nixl::ucx::backend>();
}

// Notifications as a small request/reply channel

class mailbox {
 public:
  mailbox(bench_agent& a, std::string peer) : a_(a), peer_(std::move(peer)) {}
  /// Next message from the peer, or nothing after `limit`. `idle` runs between polls, which
  /// sleep unless `spin` (a target that progresses its backend itself must not sleep).
  template <class Idle>
  std::optional<std::string> next(std::chrono::milliseconds limit, Idle&& idle, bool spin = false) {
    const auto end = nb::clock::now() + limit;
    for (;;) {
      if (!q_.empty()) {
        auto m = std::move(q_.front());
        q_.pop_front();
        return m;
      }
      auto n = a_.notifications();
      if (auto it = n.find(peer_); it != n.end())
        for (auto& m : it->second) q_.push_back(std::move(m));
      if (!q_.empty()) continue;
      if (nb::clock::now() > end) return std::nullopt;
      idle();
      if (!spin) std::this_thread::sleep_for(100us);
    }
  }
  std::optional<std::string> next(std::chrono::milliseconds limit) {
    return next(limit, [] {});
  }
  void send(std::string_view msg) { a_.notify(peer_, msg); }

 private:
  bench_agent& a_;
  std::string peer_;
  std::deque<std::string> q_;
};

std::string verify_msg(std::uint32_t seed, const nb::layout& lay, std::size_t count, int threads) {
  return fmt::format("verify {} {} {} {} {} {}", seed, lay.block, lay.stride, lay.per_thread, count,
                     threads);
}

// The target side, as the initiator sees it

class target_side {
 public:
  virtual ~target_side() = default;
  /// Agent to name in requests (this agent itself for loopback).
  virtual const std::string& agent() const = 0;
  virtual nixl::desc at(std::size_t off, std::size_t len) const = 0;
  virtual nixl::mem_kind kind() const = 0;
  virtual void fill(std::uint32_t seed) = 0;
  virtual std::optional<std::size_t> verify(const nb::layout&, std::size_t count, int threads,
                                            std::uint32_t seed) = 0;
  /// Called while polling: progresses a target of this process that has no progress thread.
  virtual void idle() {}
  virtual void finish() {}
};

/// A segment of this process: registered with a second agent, or with the initiator itself.
class local_target final : public target_side {
 public:
  local_target(bench_agent& initiator, const options& o, std::size_t size) : initiator_(initiator) {
    if (o.local_only()) {
      name_ = initiator.name();
      seg_.emplace(o.target_kind(), size, o, o.target_gpu, "target");
      seg_->register_with(initiator, {{o.backend}});
      return;
    }
    nixl::agent_config cfg;
    cfg.enable_prog_thread = o.enable_pt;
    agent_ = std::make_unique<bench_agent>(target_name, cfg);
    agent_->create_backend(o.backend, backend_params(o));
    seg_.emplace(o.target_kind(), size, o, o.target_gpu, "target", ucx_allocator(*agent_, o));
    seg_->register_with(*agent_);
    initiator.load_remote_metadata(agent_->local_metadata());
    name_ = target_name;
    progress_ = !o.enable_pt;
  }
  ~local_target() override { finish(); }
  const std::string& agent() const override { return name_; }
  nixl::desc at(std::size_t off, std::size_t len) const override { return seg_->at(off, len); }
  nixl::mem_kind kind() const override { return seg_->kind(); }
  void fill(std::uint32_t seed) override { seg_->fill(seed); }
  std::optional<std::size_t> verify(const nb::layout& l, std::size_t c, int t,
                                    std::uint32_t s) override {
    return seg_->verify(l, c, t, s);
  }
  void idle() override {
    // Initiator threads poll at once; one of them progressing the target is enough.
    if (progress_ && progress_mutex_.try_lock()) {
      agent_->progress();
      progress_mutex_.unlock();
    }
  }
  void finish() override {
    if (agent_) {
      try {
        initiator_.invalidate_remote_metadata(target_name);
      } catch (...) {
      }
    }
    seg_.reset();  // deregisters, before its agent goes
    agent_.reset();
  }
  segment& seg() { return *seg_; }

 private:
  bench_agent& initiator_;
  std::unique_ptr<bench_agent> agent_;
  std::optional<segment> seg_;
  std::string name_;
  bool progress_ = false;
  std::mutex progress_mutex_;
};

/// The target process, reached through notifications.
class remote_target final : public target_side {
 public:
  remote_target(bench_agent& a, nixl::xfer_dlist where, pid_t child)
      : initiator_(a), box_(a, target_name), where_(std::move(where)), child_(child) {}
  ~remote_target() override { finish(); }
  const std::string& agent() const override { return name_; }
  nixl::desc at(std::size_t off, std::size_t len) const override {
    return {where_[0].addr + off, len, where_[0].dev};
  }
  nixl::mem_kind kind() const override { return where_.kind(); }
  void fill(std::uint32_t seed) override {
    box_.send(fmt::format("fill {}", seed));
    expect_ok("fill");
  }
  std::optional<std::size_t> verify(const nb::layout& lay, std::size_t count, int threads,
                                    std::uint32_t seed) override {
    box_.send(verify_msg(seed, lay, count, threads));
    auto r = reply("verify");
    if (r == "ok") return std::nullopt;
    if (r.rfind("bad ", 0) == 0) return std::stoull(r.substr(4));
    fail("target: " + r);
  }
  void finish() override {
    if (done_) return;
    done_ = true;
    try {
      box_.send("done");
      if (box_.next(5s) == std::optional<std::string>("bye"))
        initiator_.invalidate_remote_metadata(target_name);
    } catch (...) {
    }
    if (child_ > 0) {
      int st = 0;
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(child_, &st, WNOHANG) == child_) return;
        std::this_thread::sleep_for(50ms);
      }
      ::kill(child_, SIGTERM);
      ::waitpid(child_, &st, 0);
    }
  }

 private:
  std::string reply(const char* what) {
    auto m = box_.next(120s);
    if (!m) fail(fmt::format("the target did not answer '{}' within 120 s", what));
    return *m;
  }
  void expect_ok(const char* what) {
    auto r = reply(what);
    if (r != "ok") fail(fmt::format("target: {}: {}", what, r));
  }
  bench_agent& initiator_;
  mailbox box_;
  nixl::xfer_dlist where_;
  pid_t child_;
  std::string name_ = target_name;
  bool done_ = false;
};

// Target process

int run_target(const options& o, int port_fd) {
  nixl::agent_config cfg;
  cfg.enable_prog_thread = o.enable_pt;
  bench_agent a(target_name, cfg);
  const bool etcd = !o.etcd_endpoints.empty();
  nixl::metadata::config mc;
  mc.listen = !etcd;
  mc.listen_port = o.port;
  mc.listen_address = o.listen_address;  // empty: NIXL_LISTEN_ADDRESS, else loopback
  mc.etcd_endpoints = o.etcd_endpoints;
  mc.etcd_watch_timeout = std::chrono::hours(1);  // the wait for the initiator's key
  a.create_backend(o.backend, backend_params(o));
  segment seg(o.target_kind(), o.buffer_size(), o, o.target_gpu, "target",
              o.target_kind() == nixl::mem_kind::dram ? ucx_allocator(a, o) : nullptr);
  seg.register_with(a);
  // Listening starts only now, so that an initiator which connects at once never fetches
  // metadata without the segment. Declared after `seg`: destroyed first.
  nixl::metadata::exchange x{a, mc};
  const auto port = x.port();
  if (port_fd >= 0) {
    auto s = fmt::format("{}\n", port);
    if (::write(port_fd, s.data(), s.size()) != static_cast<ssize_t>(s.size())) return 1;
    ::close(port_fd);
  } else if (etcd) {
    x.send_local_metadata().get();  // published under our name; the initiator fetches it
    fmt::print("nixl-bench target: {} bytes of {} published at {}; waiting for the initiator\n",
               seg.size(), o.target_seg_type, o.etcd_endpoints);
    std::fflush(stdout);
  } else {
    fmt::print("nixl-bench target: {} bytes of {} at port {}; waiting for the initiator\n",
               seg.size(), o.target_seg_type, port);
    std::fflush(stdout);
  }
  auto idle = [&] {
    if (!o.enable_pt) a.progress();
  };
  // The initiator sends its metadata to the listener; then we can notify it.
  const auto end = nb::clock::now() + (port_fd >= 0 ? 60s : 3600s);
  while (!a.check_remote_metadata(initiator_name)) {
    if (etcd) x.fetch_remote_metadata(initiator_name).get();  // waits for its key
    if (nb::clock::now() > end) {
      fmt::print(stderr, "nixl-bench target: no initiator connected\n");
      return 1;
    }
    idle();
    std::this_thread::sleep_for(1ms);
  }
  mailbox box(a, initiator_name);
  nixl::xfer_dlist where(seg.kind(), {seg.at(0, seg.size())});
  box.send("where:" + nixl::encode(where));
  for (;;) {
    auto m = box.next(1000ms, idle, !o.enable_pt);
    if (!m) {
      if (!a.check_remote_metadata(initiator_name)) {
        fmt::print(stderr, "nixl-bench target: the initiator went away\n");
        return 1;
      }
      continue;
    }
    std::istringstream in(*m);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "done") {
        // The initiator drops this agent when it reads "bye", so that our exit is not
        // reported as a failed peer; give it a moment to do so.
        box.send("bye");
        std::this_thread::sleep_for(200ms);
        return 0;
      }
      if (cmd == "fill") {
        std::uint32_t seed = 0;
        in >> seed;
        seg.fill(seed);
        box.send("ok");
      } else if (cmd == "verify") {
        std::uint32_t seed = 0;
        nb::layout lay;
        std::size_t count = 0;
        int threads = 0;
        in >> seed >> lay.block >> lay.stride >> lay.per_thread >> count >> threads;
        if (!in || threads < 1 ||
            lay.offset(threads - 1, count ? count - 1 : 0) + lay.block > seg.size())
          box.send("error: bad verify request");
        else if (auto bad = seg.verify(lay, count, threads, seed))
          box.send(fmt::format("bad {}", *bad));
        else
          box.send("ok");
      } else {
        box.send("error: unknown command '" + cmd + "'");
      }
    } catch (const std::exception& e) {
      box.send(std::string("error: ") + e.what());
    }
  }
}

// Baselines

struct baseline_result {
  double gbps = 0, us = 0;
};

/// Copies the blocks the transfers moved, in the same order: with `slots`, iteration k copies
/// blocks (k * batch + j) % slots as the prepared mode does, else the same `batch` blocks.
baseline_result memcpy_baseline(std::uint8_t* src, std::uint8_t* dst, const nb::layout& lay,
                                std::size_t batch, const nb::point& p, bool read,
                                std::size_t slots = 0) {
  if (read) std::swap(src, dst);
  auto once = [&](int k) {
    for (std::size_t j = 0; j < batch; ++j) {
      const std::size_t i = slots ? (static_cast<std::size_t>(k) * batch + j) % slots : j;
      const std::size_t off = lay.offset(0, i);
      std::memcpy(dst + off, src + off, lay.block);
    }
  };
  for (int k = 0; k < p.warmup; ++k) once(k);
  const auto a = nb::clock::now();
  for (int k = p.warmup; k < p.warmup + p.iters; ++k) once(k);
  const double us = nb::us_since(a, nb::clock::now());
  const double bytes = static_cast<double>(lay.block * batch) * p.iters;
  return {bytes / us / 1e3, us / p.iters};
}

baseline_result fio_baseline(const std::string& path, const nb::point& p, bool read, int seconds) {
  // One fio job over the same file and range: `batch` blocks, io_uring, queue depth = batch,
  // looping over the range for a fixed time (fio reports times in whole milliseconds, so a
  // short job would say nothing).
  const std::size_t size = p.block * p.batch;
  const std::string cmd = fmt::format(
      "fio --name=nixl-bench --filename='{}' --rw={} --bs={} --size={} --time_based "
      "--runtime={} --ioengine=io_uring --iodepth={} --invalidate=0 --output-format=json "
      "2>/dev/null",
      path, read ? "read" : "write", p.block, size, seconds, std::min<std::size_t>(p.batch, 256));
  std::FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return {};
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  if (::pclose(f) != 0) {
    fmt::print(stderr, "nixl-bench: fio failed; no file baseline (is fio installed?)\n");
    return {};
  }
  try {
    auto j = nlohmann::json::parse(out.substr(out.find('{')));
    const auto& job = j.at("jobs").at(0).at(read ? "read" : "write");
    const double bw = job.at("bw_bytes").get<double>();
    if (bw <= 0) return {};
    return {bw / 1e9, static_cast<double>(size) / bw * 1e6};
  } catch (const std::exception& e) {
    fmt::print(stderr, "nixl-bench: cannot read fio's output: {}\n", e.what());
    return {};
  }
}

#if defined(NIXL_BENCH_CUDA)
/// Memory of one side of the cuda baseline, in the initiator process: cudaMalloc'ed on `gpu`
/// for VRAM, pinned host memory for DRAM.
class cuda_scratch {
 public:
  cuda_scratch(nixl::mem_kind kind, std::size_t n, int gpu) : vram_(kind == nixl::mem_kind::vram) {
    if (vram_) {
      ok_ = cudaSetDevice(gpu) == cudaSuccess && cudaMalloc(&p_, n) == cudaSuccess &&
            cudaMemset(p_, 1, n) == cudaSuccess;
    } else {
      ok_ = cudaMallocHost(&p_, n) == cudaSuccess;
      if (ok_) std::memset(p_, 1, n);
    }
  }
  ~cuda_scratch() {
    if (p_ != nullptr) (void)(vram_ ? cudaFree(p_) : cudaFreeHost(p_));
  }
  cuda_scratch(const cuda_scratch&) = delete;
  cuda_scratch& operator=(const cuda_scratch&) = delete;
  bool ok() const { return ok_ && p_ != nullptr; }
  char* get() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
  bool vram_;
  bool ok_ = false;
};

/// What the CUDA runtime itself does for the same blocks between the same two GPUs (or GPU and
/// host): one cudaMemcpyPeerAsync (cudaMemcpyAsync when one side is DRAM) per descriptor on one
/// stream of the executing GPU, then a stream synchronize, with the point's iteration counts.
/// Both buffers live in the initiator process (a peer process's addresses mean nothing here),
/// so the figure is the copy engines' speed between those GPUs, measured in the same run.
baseline_result cuda_baseline(nixl::mem_kind lk, nixl::mem_kind tk, const nb::layout& lay,
                              const nb::point& p, bool read, int lgpu, int tgpu) {
  const std::size_t span = lay.offset(0, p.batch - 1) + lay.block;
  const nixl::mem_kind src_kind = read ? tk : lk, dst_kind = read ? lk : tk;
  const int src_gpu = read ? tgpu : lgpu, dst_gpu = read ? lgpu : tgpu;
  cuda_scratch src(src_kind, span, src_gpu), dst(dst_kind, span, dst_gpu);
  // The stream belongs to the GPU the CUDA backend executes on: the source GPU for VRAM ->
  // VRAM (it pushes), else the GPU side.
  const int exec = src_kind == nixl::mem_kind::vram ? src_gpu : dst_gpu;
  const bool peer = src_kind == nixl::mem_kind::vram && dst_kind == nixl::mem_kind::vram;
  cudaStream_t s{};
  auto bad = [](const char* what, cudaError_t e) {
    fmt::print(stderr, "nixl-bench: cuda baseline: {}: {}; no baseline for this point\n", what,
               cudaGetErrorString(e));
    return baseline_result{};
  };
  if (!src.ok() || !dst.ok()) return bad("allocation", cudaGetLastError());
  if (auto e = cudaSetDevice(exec); e != cudaSuccess) return bad("cudaSetDevice", e);
  if (peer && src_gpu != dst_gpu) {
    int can = 0;
    cudaDeviceCanAccessPeer(&can, exec, exec == src_gpu ? dst_gpu : src_gpu);
    if (can) {
      const auto e = cudaDeviceEnablePeerAccess(exec == src_gpu ? dst_gpu : src_gpu, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        return bad("cudaDeviceEnablePeerAccess", e);
      (void)cudaGetLastError();
    }
  }
  if (auto e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess)
    return bad("cudaStreamCreate", e);
  cudaError_t err = cudaSuccess;
  auto once = [&] {
    for (std::size_t i = 0; i < p.batch && err == cudaSuccess; ++i) {
      const std::size_t off = lay.offset(0, i);
      err =
          peer ? cudaMemcpyPeerAsync(dst.get() + off, dst_gpu, src.get() + off, src_gpu, lay.block,
                                     s)
               : cudaMemcpyAsync(dst.get() + off, src.get() + off, lay.block, cudaMemcpyDefault, s);
    }
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  };
  for (int k = 0; k < p.warmup; ++k) once();
  const auto a = nb::clock::now();
  for (int k = 0; k < p.iters; ++k) once();
  const double us = nb::us_since(a, nb::clock::now());
  cudaStreamDestroy(s);
  if (err != cudaSuccess) return bad(peer ? "cudaMemcpyPeerAsync" : "cudaMemcpyAsync", err);
  return {static_cast<double>(lay.block * p.batch) * p.iters / us / 1e3, us / p.iters};
}
#endif

// Progress line

class progress_line {
 public:
  explicit progress_line(bool on) : on_(on) {}
  void update(std::size_t idx, std::size_t n, const nb::point& p, int done) {
    if (!on_) return;
    const auto now = nb::clock::now();
    if (now - last_ < 200ms) return;
    last_ = now;
    fmt::print(stderr, "\r[{}/{}] block {} batch {}: iteration {}/{}\033[K", idx + 1, n,
               nb::size_str(p.block), p.batch, done, p.iters);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) fmt::print(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool on_;
  bool shown_ = false;
  nb::clock::time_point last_{};
};

// The sweep

struct thread_out {
  std::vector<double> prep, post, tx;
  nb::clock::time_point start, end;
  std::size_t descs = 0;
  std::exception_ptr err;
};

nixl::status wait(bench_agent::xfer_request& r, nixl::status s, target_side& tgt, bool yield) {
  while (s == nixl::status::in_progress) {
    tgt.idle();
    if (yield) std::this_thread::yield();
    s = r.status();
  }
  return s;
}

/// Requests of one thread that are in flight together (--pipeline_depth, repost mode).
std::size_t pipelined_blocks(const options& o) {
  return o.xfer_mode == "repost" ? static_cast<std::size_t>(o.pipeline_depth) : 1;
}

void must(nixl::status s, const char* what) {
  if (s != nixl::status::success)
    fail(fmt::format("{}: transfer ended with {}", what, nixl::to_string(s)));
}

// Modes added to nixlbench's: pipelined reposts, re-registration

/// `--pipeline_depth D` (repost mode): D requests of `batch` blocks each, on consecutive blocks
/// of the thread's range, all in flight; each is reposted as soon as it completes. The warm-up
/// posts drain before the timed ones start. Tx is one request, from its post() until status()
/// reports success; prep (making the D requests, per request) is reported once.
template <class Start, class Record>
void repost_pipelined(bench_agent& a, const options& o, const segment& local, target_side& tgt,
                      const nb::layout& lay, int t, const nb::point& p,
                      const nixl::xfer_options& xo, thread_out& out, Start&& mark_start,
                      Record&& record) {
  const auto depth = static_cast<std::size_t>(o.pipeline_depth);
  std::vector<bench_agent::xfer_request> reqs;
  reqs.reserve(depth);
  const auto t0 = nb::clock::now();
  for (std::size_t d = 0; d < depth; ++d) {
    nixl::xfer_dlist l(local.kind()), r(tgt.kind());
    for (std::size_t i = 0; i < p.batch; ++i) {
      const std::size_t off = lay.offset(t, d * p.batch + i);
      l.push_back(local.at(off, p.block));
      r.push_back(tgt.at(off, p.block));
    }
    reqs.push_back(a.create_request(o.op(), l, r, tgt.agent(), xo));
  }
  const double prep = nb::us_since(t0, nb::clock::now()) / static_cast<double>(depth);
  out.descs = reqs[0].descriptor_count();

  struct flight {
    int iter = 0;
    nb::clock::time_point t1, t2;
    bool busy = false;
  };
  std::vector<flight> fl(depth);
  int next = 0;
  // Posts request d until one stays in flight (true) or `end` iterations were posted (false).
  auto launch = [&](std::size_t d, int end) {
    while (next < end) {
      flight& f = fl[d];
      f.iter = next++;
      f.t1 = nb::clock::now();
      const auto s = reqs[d].post();
      f.t2 = nb::clock::now();
      if (s == nixl::status::in_progress) return f.busy = true;
      must(s, "post");
      record(f.iter, 0.0, nb::us_since(f.t1, f.t2), nb::us_since(f.t1, nb::clock::now()));
    }
    return false;
  };
  auto phase = [&](int end) {
    std::size_t live = 0;
    for (std::size_t d = 0; d < depth; ++d) live += launch(d, end) ? 1 : 0;
    while (live > 0) {
      tgt.idle();
      for (std::size_t d = 0; d < depth; ++d) {
        flight& f = fl[d];
        if (!f.busy) continue;
        const auto s = reqs[d].status();
        if (s == nixl::status::in_progress) continue;
        must(s, "post");
        record(f.iter, 0.0, nb::us_since(f.t1, f.t2), nb::us_since(f.t1, nb::clock::now()));
        f.busy = false;
        if (!launch(d, end)) --live;
      }
      if (o.yield) std::this_thread::yield();
    }
  };
  phase(p.warmup);
  mark_start(p.warmup);
  phase(p.warmup + p.iters);
  out.end = nb::clock::now();
  out.prep.assign(out.prep.empty() ? 0 : 1, prep);
}

/// `--reregister_mem`: the thread's local blocks are registered before each request is made
/// and deregistered after it is released (nixlbench's flag); prep includes the registration.
template <class Timed>
void reregister_each(bench_agent& a, const options& o, const segment& local, target_side& tgt,
                     const nb::layout& lay, int t, const nb::point& p, const nixl::xfer_options& xo,
                     const nixl::xfer_dlist& l, const nixl::xfer_dlist& r, Timed&& timed) {
  nixl::reg_dlist reg(local.kind());
  for (std::size_t i = 0; i < p.batch; ++i)
    reg.push_back({local.at(lay.offset(t, i), p.block), ""});
  const nixl::backend_options bo{{o.backend}};
  for (int k = 0; k < p.warmup + p.iters; ++k) {
    timed(k, [&] {
      a.register_memory(reg, bo);
      return a.create_request(o.op(), l, r, tgt.agent(), xo);
    });
    a.deregister_memory(reg, bo);
  }
}

nb::row run_point(bench_agent& a, const options& o, segment& local, target_side& tgt,
                  const nb::point& p, std::size_t idx, std::size_t npoints, progress_line& prog,
                  nb::host_buffer& scratch) {
  const nb::layout lay{p.block, p.block * o.stride_factor(), o.per_thread()};
  const std::uint32_t seed = static_cast<std::uint32_t>(idx + 1);
  const nixl::xfer_op op = o.op();
  if (o.check_consistency) {
    if (op == nixl::xfer_op::write)
      local.fill(seed);
    else
      tgt.fill(seed);
  }
  nixl::xfer_options xo;
  xo.backends = {o.backend};
  xo.skip_merge = o.skip_merge;
  const int threads = o.num_threads;
  const std::size_t slots = lay.per_thread / lay.stride;  // prepared mode: the whole range

  std::vector<thread_out> outs(static_cast<std::size_t>(threads));
  std::latch ready(threads);

  auto body = [&](int t) {
    auto& out = outs[static_cast<std::size_t>(t)];
    bool arrived = false;
    try {
      nixl::xfer_dlist l(local.kind()), r(tgt.kind());
      const std::size_t n = o.xfer_mode == "prepared" ? slots : p.batch;
      l.reserve(n);
      r.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        l.push_back(local.at(lay.offset(t, i), p.block));
        r.push_back(tgt.at(lay.offset(t, i), p.block));
      }
      out.prep.reserve(static_cast<std::size_t>(p.iters));
      out.post.reserve(static_cast<std::size_t>(p.iters));
      out.tx.reserve(static_cast<std::size_t>(p.iters));
      const int total = p.warmup + p.iters;
      auto record = [&](int k, double prep, double post, double tx) {
        if (k < p.warmup) return;
        out.prep.push_back(prep);
        out.post.push_back(post);
        out.tx.push_back(tx);
        if (t == 0) prog.update(idx, npoints, p, k - p.warmup + 1);
      };
      auto mark_start = [&](int k) {
        if (k == p.warmup) {
          arrived = true;
          ready.arrive_and_wait();
          out.start = nb::clock::now();
        }
      };
      if (o.xfer_mode == "repost" && o.pipeline_depth > 1) {
        repost_pipelined(a, o, local, tgt, lay, t, p, xo, out, mark_start, record);
      } else if (o.xfer_mode == "repost") {
        const auto t0 = nb::clock::now();
        auto req = a.create_request(op, l, r, tgt.agent(), xo);
        const double prep = nb::us_since(t0, nb::clock::now());
        out.descs = req.descriptor_count();
        for (int k = 0; k < total; ++k) {
          mark_start(k);
          const auto t1 = nb::clock::now();
          auto s = req.post();
          const auto t2 = nb::clock::now();
          must(wait(req, s, tgt, o.yield), "post");
          record(k, k == p.warmup ? prep : 0.0, nb::us_since(t1, t2),
                 nb::us_since(t1, nb::clock::now()));
        }
        out.end = nb::clock::now();
        // nixlbench's prep is paid once per point: report it once, not averaged away.
        out.prep.assign(out.prep.empty() ? 0 : 1, prep);
      } else {
        // recreate: a request from the two lists per iteration; prepared: lists resolved once,
        // a request from indices per iteration. Either way the request is timed from making.
        auto timed = [&](int k, auto make) {
          mark_start(k);
          const auto t0 = nb::clock::now();
          auto req = make();
          const auto t1 = nb::clock::now();
          auto s = req.post();
          const auto t2 = nb::clock::now();
          must(wait(req, s, tgt, o.yield), "post");
          const auto t3 = nb::clock::now();
          out.descs = req.descriptor_count();
          req.release();
          record(k, nb::us_since(t0, t1), nb::us_since(t1, t2), nb::us_since(t1, t3));
        };
        if (o.reregister_mem) {
          reregister_each(a, o, local, tgt, lay, t, p, xo, l, r, timed);
        } else if (o.xfer_mode == "recreate") {
          for (int k = 0; k < total; ++k)
            timed(k, [&] { return a.create_request(op, l, r, tgt.agent(), xo); });
        } else {
          auto pl = a.prepare_list(l, {{o.backend}});
          auto pr = a.prepare_list(tgt.agent(), r, {{o.backend}});
          std::vector<int> li(p.batch), ri(p.batch);
          for (int k = 0; k < total; ++k) {
            for (std::size_t j = 0; j < p.batch; ++j)
              li[j] = ri[j] = static_cast<int>((static_cast<std::size_t>(k) * p.batch + j) % slots);
            timed(k, [&] { return a.make_request(op, pl, li, pr, ri, xo); });
          }
        }
        out.end = nb::clock::now();
      }
    } catch (...) {
      out.err = std::current_exception();
      if (!arrived) ready.count_down();  // never leave the others waiting
    }
  };

  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  body(0);
  for (auto& th : pool) th.join();
  prog.clear();
  for (auto& out : outs)
    if (out.err) std::rethrow_exception(out.err);

  nb::row row;
  row.block = p.block;
  row.batch = p.batch;
  row.iters = p.iters;
  std::vector<double> prep, post, tx;
  auto first = outs[0].start, last = outs[0].end;
  for (auto& out : outs) {
    first = std::min(first, out.start);
    last = std::max(last, out.end);
    prep.insert(prep.end(), out.prep.begin(), out.prep.end());
    post.insert(post.end(), out.post.begin(), out.post.end());
    tx.insert(tx.end(), out.tx.begin(), out.tx.end());
  }
  const double wall = nb::us_since(first, last);
  const double bytes = static_cast<double>(p.block * p.batch) * p.iters * threads;
  row.gbps = bytes / wall / 1e3;
  row.avg_lat = wall / (static_cast<double>(p.iters) * static_cast<double>(p.batch));
  row.prep = nb::summarize(prep);
  row.post = nb::summarize(post);
  row.tx = nb::summarize(tx);
  row.descs = outs[0].descs;

  if (o.check_consistency) {
    const std::size_t count =
        o.xfer_mode == "prepared"
            ? std::min(slots, static_cast<std::size_t>(p.warmup + p.iters) * p.batch)
            : p.batch * pipelined_blocks(o);
    auto bad = op == nixl::xfer_op::write ? tgt.verify(lay, count, threads, seed)
                                          : local.verify(lay, count, threads, seed);
    if (bad)
      fail(
          fmt::format("data check failed at block {} batch {}: byte at offset {} of the {} "
                      "side is wrong",
                      p.block, p.batch, *bad, op == nixl::xfer_op::write ? "target" : "initiator"));
    row.checked = true;
  }

  // Baseline, after the run so that both do not compete for the cores.
  nb::point bp = p;
  if (o.baseline == "memcpy" && local.kind() == nixl::mem_kind::dram) {
    auto b =
        memcpy_baseline(local.host(), scratch.data(), lay, p.batch, bp, op == nixl::xfer_op::read,
                        o.xfer_mode == "prepared" ? slots
                        : pipelined_blocks(o) > 1 ? p.batch * pipelined_blocks(o)
                                                  : 0);
    row.base_gbps = b.gbps;
    row.base_us = b.us;
  } else if (o.baseline == "fio") {
    if (auto* lt = dynamic_cast<local_target*>(&tgt);
        lt && lt->seg().kind() == nixl::mem_kind::file) {
      auto b = fio_baseline(lt->seg().path(), bp, op == nixl::xfer_op::read, o.fio_runtime);
      row.base_gbps = b.gbps;
      row.base_us = b.us;
    }
  }
#if defined(NIXL_BENCH_CUDA)
  else if (o.baseline == "cuda") {
    auto b = cuda_baseline(local.kind(), tgt.kind(), lay, bp, op == nixl::xfer_op::read,
                           o.initiator_gpu, o.target_gpu);
    row.base_gbps = b.gbps;
    row.base_us = b.us;
  }
#endif
  return row;
}

// --compare_nixl: NIXL's nixlbench over the same sweep, in the same run

/// nixlbench's arguments for the sweep `o` describes (its flag names are ours).
std::vector<std::string> nixlbench_args(const options& o) {
  std::vector<std::string> v = {
      "--op_type=" + o.op_type,
      "--initiator_seg_type=" + o.initiator_seg_type,
      "--target_seg_type=" + o.target_seg_type,
      fmt::format("--start_block_size={}", o.start_block_size),
      fmt::format("--max_block_size={}", o.max_block_size),
      fmt::format("--start_batch_size={}", o.start_batch_size),
      fmt::format("--max_batch_size={}", o.max_batch_size),
      fmt::format("--num_iter={}", o.num_iter),
      fmt::format("--warmup_iter={}", o.warmup_iter),
      fmt::format("--large_blk_iter_ftr={}", o.large_blk_iter_ftr),
      fmt::format("--num_threads={}", o.num_threads),
      fmt::format("--pipeline_depth={}", o.pipeline_depth),
      fmt::format("--total_buffer_size={}", o.buffer_size()),
      "--enable_pt=false",  // NIXL's fastest setting on one host; override with --compare_nixl_args
  };
  if (o.check_consistency) v.push_back("--check_consistency");
  if (o.xfer_mode == "recreate") v.push_back("--recreate_xfer");
  if (o.xfer_mode == "prepared") v.push_back("--prepared_xfer");
  if (o.reregister_mem) v.push_back("--reregister_mem");
  v.insert(v.end(), o.compare_nixl_args.begin(), o.compare_nixl_args.end());
  return v;
}

/// One nixlbench run (round `round`); its rows, empty when it failed.
std::vector<nb::nixl_row> nixlbench_run(const options& o, int round) {
  const auto out =
      nb::run_nixlbench(o.compare_nixl, nixlbench_args(o), o.compare_nixl_err_mode, round);
  auto rows = nb::parse_nixlbench(out);
  if (rows.empty() && !out.empty())
    fmt::print(stderr, "nixl-bench: no result rows in NIXL's output:\n{}\n", out);
  return rows;
}

int run_initiator(const options& o, std::optional<pid_t> child, int port_fd) {
  nixl::agent_config cfg;
  cfg.enable_prog_thread = o.enable_pt;
  if (o.num_threads > 1) cfg.sync = nixl::thread_sync::rw;
  bench_agent a(initiator_name, cfg);
  a.create_backend(o.backend, backend_params(o));
  segment local(o.initiator_kind(), o.buffer_size(), o, o.initiator_gpu, "initiator",
                o.initiator_kind() == nixl::mem_kind::dram ? ucx_allocator(a, o) : nullptr);
  if (!o.reregister_mem) local.register_with(a, {{o.backend}});

  // With etcd the exchange lives as long as the run: its lease carries our keys, and the target
  // drops us when they go.
  std::optional<nixl::metadata::exchange> central;
  std::unique_ptr<target_side> tgt;
  if (o.processes == 1) {
    tgt = std::make_unique<local_target>(a, o, o.buffer_size());
  } else {
    std::uint16_t port = o.port;
    if (port_fd >= 0) {  // the forked target writes its listener port
      std::string s;
      char c;
      while (::read(port_fd, &c, 1) == 1 && c != '\n') s.push_back(c);
      ::close(port_fd);
      if (s.empty()) fail("the target process did not start (see its messages above)");
      port = static_cast<std::uint16_t>(std::stoul(s));
    }
    if (!o.etcd_endpoints.empty()) {
      nixl::metadata::config mc;
      mc.etcd_endpoints = o.etcd_endpoints;
      mc.etcd_watch_timeout = std::chrono::minutes(1);  // the wait for the target's key
      central.emplace(a, mc);
      central->send_local_metadata().get();
      central->fetch_remote_metadata(target_name).get();
    } else {
      if (port == 0) fail("--role initiator needs the target's --port");
      const auto where_peer = nixl::metadata::target::peer(o.peer_ip, port);
      {
        nixl::metadata::config inline_only;  // no listener, no etcd: runs on this thread
        inline_only.read_env = false;
        if (const char* k = std::getenv("NIXL_METADATA_SECRET")) inline_only.metadata_secret = k;
        nixl::metadata::exchange x{a, inline_only};
        x.send_local_metadata(where_peer).get();
        x.fetch_remote_metadata(target_name, where_peer).get();
      }
    }
    mailbox box(a, target_name);
    auto m = box.next(60s);
    if (!m || m->rfind("where:", 0) != 0) fail("the target did not say where its buffer is");
    auto where = nixl::decode_xfer_list(std::string_view(*m).substr(6));
    if (where.size() != 1 || where[0].len < o.buffer_size())
      fail(
          fmt::format("the target's buffer holds {} bytes, this run needs {}; give both the "
                      "same size options",
                      where.empty() ? 0 : where[0].len, o.buffer_size()));
    if (where.kind() != o.target_kind())
      fail(fmt::format("the target's segment is {}, --target_seg_type says {}", where.kind(),
                       o.target_seg_type));
    tgt = std::make_unique<remote_target>(a, std::move(where), child.value_or(-1));
  }

  // NIXL's runs alternate with ours: one before the sweep, the rest after it.
  std::vector<std::vector<nb::nixl_row>> nixl_runs;
  if (!o.compare_nixl.empty() && o.compare_nixl_runs > 0) nixl_runs.push_back(nixlbench_run(o, 0));

  auto points = nb::sweep_points(o.start_block_size, o.max_block_size, o.start_batch_size,
                                 o.max_batch_size, o.num_iter, o.warmup_iter, o.large_blk_iter_ftr);
  nb::run_info info{o.backend,  o.op_type,   o.initiator_seg_type, o.target_seg_type, o.xfer_mode,
                    o.baseline, o.processes, o.num_threads,        o.scatter,         o.command};
  const bool table = o.output_format == "table";
  if (table) nb::print_header(stdout, info);
  nb::host_buffer scratch(o.baseline == "memcpy" ? o.per_thread() : 0);
  progress_line prog(o.progress);
  std::vector<nb::row> rows;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    if (p.block * p.batch * o.stride_factor() > o.per_thread()) {
      fmt::print(stderr,
                 "nixl-bench: skipping block {} batch {}: needs {} bytes per thread, "
                 "--total_buffer_size gives {}\n",
                 p.block, p.batch, p.block * p.batch * o.stride_factor(), o.per_thread());
      continue;
    }
    rows.push_back(run_point(a, o, local, *tgt, p, i, points.size(), prog, scratch));
    if (table) nb::print_row(stdout, rows.back());
  }
  tgt->finish();
  tgt.reset();
  for (int k = 1; k < o.compare_nixl_runs && !o.compare_nixl.empty(); ++k)
    nixl_runs.push_back(nixlbench_run(o, k));
  if (!nixl_runs.empty())
    nb::print_compare(stdout,
                      fmt::format("{}, UCX error mode {}, best of {} runs", o.compare_nixl,
                                  o.compare_nixl_err_mode, nixl_runs.size()),
                      rows, nb::best_of(nixl_runs));

  if (o.output_format == "csv") {
    nb::write_csv("/dev/stdout", info, rows);
  } else if (o.output_format == "json") {
    fmt::print("{}\n", nb::to_json(info, rows).dump(2));
  }
  if (!o.csv.empty()) nb::write_csv(o.csv, info, rows);
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << nb::to_json(info, rows).dump(2) << "\n";
  }
  if (!o.plot.empty() && nb::write_plot(o.plot, info, rows) && table)
    fmt::print("plot: {}\n", o.plot);
  return 0;
}

void validate(options& o) {
  if (o.recreate_xfer && o.prepared_xfer)
    fail("--recreate_xfer and --prepared_xfer exclude each other");
  if (o.recreate_xfer) o.xfer_mode = "recreate";
  if (o.prepared_xfer) o.xfer_mode = "prepared";
  if (o.start_block_size == 0 || o.start_block_size > o.max_block_size)
    fail("--start_block_size must be between 1 and --max_block_size");
  if (o.start_batch_size == 0 || o.start_batch_size > o.max_batch_size)
    fail("--start_batch_size must be between 1 and --max_batch_size");
  (void)o.initiator_kind();
  const auto tk = o.target_kind();
  if (o.initiator_kind() == nixl::mem_kind::file)
    fail("--initiator_seg_type FILE: use DRAM or VRAM");
  const bool file = tk == nixl::mem_kind::file;
  if (file && o.backend != "POSIX") fail("--target_seg_type FILE needs --backend POSIX");
  if (o.backend == "POSIX" && !file)
    fail("--backend POSIX moves DRAM to and from files: add --target_seg_type FILE");
  if (o.processes == 0) o.processes = o.local_only() ? 1 : 2;
  if (o.local_only() && o.processes != 1)
    fail("--backend POSIX works within one process (--processes 1)");
  if (!o.etcd_endpoints.empty() && o.role.empty())
    fail("--etcd_endpoints is for --role target / --role initiator (two commands)");
  if (!o.role.empty()) o.processes = 2;
  if (o.baseline == "auto") {
    if (file)
      o.baseline = "fio";
    else if (o.initiator_kind() == nixl::mem_kind::vram || tk == nixl::mem_kind::vram)
      o.baseline = "cuda";
    else
      o.baseline = "memcpy";
  }
#if !defined(NIXL_BENCH_CUDA)
  if (o.baseline == "cuda") o.baseline = "none";
#endif
  if (o.baseline == "memcpy" && o.initiator_kind() != nixl::mem_kind::dram) o.baseline = "none";
  if (o.pipeline_depth > 1 && o.xfer_mode != "repost")
    fail("--pipeline_depth needs --xfer_mode repost (requests made once, reposted)");
  if (o.reregister_mem && o.xfer_mode == "prepared")
    fail("--reregister_mem and --prepared_xfer exclude each other (as in nixlbench)");
  if (o.reregister_mem) o.xfer_mode = "recreate";
  if (!o.compare_nixl.empty() && ::access((o.compare_nixl + "/run_pair.sh").c_str(), X_OK) != 0)
    fail("--compare_nixl " + o.compare_nixl +
         ": no run_pair.sh there; give the folder of NIXL's packed nixlbench "
         "(e.g. ../shared/peers/nixl-1.4)");
  if (!o.compare_nixl.empty() && (o.backend != "UCX" || o.processes != 2))
    fail("--compare_nixl compares two-process UCX runs (NIXL's run_pair.sh)");
  if (o.per_thread() < o.start_block_size * o.start_batch_size * o.stride_factor())
    fail("--total_buffer_size is too small for the first point");
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"nixl-bench: transfer bandwidth and latency sweeps through nixl::agent"};
  // A later option wins, so that wrappers (scripts/quickstart.sh) can be overridden.
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  auto size_opt = [&](const char* name, std::size_t& v, const char* help) {
    app.add_option(name, v, help)->transform(CLI::AsSizeValue(false));
  };
  app.add_option("--backend", o.backend, "UCX, POSIX or CUDA")
      ->check(CLI::IsMember({"UCX", "POSIX", "CUDA"}));
  app.add_option("--initiator_seg_type", o.initiator_seg_type, "DRAM or VRAM")
      ->check(CLI::IsMember({"DRAM", "VRAM"}));
  app.add_option("--target_seg_type", o.target_seg_type, "DRAM, VRAM or FILE")
      ->check(CLI::IsMember({"DRAM", "VRAM", "FILE"}));
  app.add_option("--op_type", o.op_type, "READ or WRITE")->check(CLI::IsMember({"READ", "WRITE"}));
  size_opt("--start_block_size", o.start_block_size, "first block size (4K, 1M, ...)");
  size_opt("--max_block_size", o.max_block_size, "last block size");
  size_opt("--start_batch_size", o.start_batch_size, "first batch size (descriptors per request)");
  size_opt("--max_batch_size", o.max_batch_size, "last batch size");
  app.add_option("--num_iter", o.num_iter, "measured iterations per point")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup_iter", o.warmup_iter, "untimed iterations per point")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--large_blk_iter_ftr", o.large_blk_iter_ftr,
                 "divide iterations by this above 1 MiB blocks")
      ->check(CLI::PositiveNumber);
  app.add_option("--num_threads", o.num_threads, "initiator threads, each with its own requests")
      ->check(CLI::Range(1, 64));
  size_opt("--total_buffer_size", o.total_buffer_size,
           "bytes per side (0: what the largest point needs); points that do not fit are skipped");
  app.add_flag("--check_consistency", o.check_consistency, "verify the data of every point");
  app.add_option("--xfer_mode", o.xfer_mode,
                 "repost: make once, post every iteration; recreate: make, post, release every "
                 "iteration; prepared: lists prepared once, a request from indices every iteration")
      ->check(CLI::IsMember({"repost", "recreate", "prepared"}));
  app.add_flag("--recreate_xfer", o.recreate_xfer, "same as --xfer_mode recreate");
  app.add_flag("--prepared_xfer", o.prepared_xfer, "same as --xfer_mode prepared");
  app.add_flag("--scatter", o.scatter,
               "leave a block-sized gap between descriptors so that none can be merged");
  app.add_flag("--skip_merge", o.skip_merge, "ask the agent not to merge contiguous descriptors");
  app.add_option("--enable_pt", o.enable_pt, "backend progress threads (true/false)");
  app.add_flag("--ucx_alloc", o.ucx_alloc,
               "UCX: allocate DRAM through the backend (UCP_MEM_MAP_ALLOCATE); peers on one host "
               "then reach it through shared memory without the target's help");
  app.add_option("--pipeline_depth", o.pipeline_depth,
                 "requests in flight per thread (repost mode), each reposted when it completes")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--reregister_mem", o.reregister_mem,
               "register and deregister the local blocks around every request (implies "
               "recreate)");
  app.add_option("--compare_nixl", o.compare_nixl,
                 "folder of NIXL's packed nixlbench (run_pair.sh): run it over the same sweep "
                 "in this run and print both with ratios");
  app.add_option("--compare_nixl_err_mode", o.compare_nixl_err_mode,
                 "NIXL's UCX error mode for --compare_nixl (none: its fastest on one host)")
      ->check(CLI::IsMember({"none", "peer"}));
  app.add_option("--compare_nixl_runs", o.compare_nixl_runs,
                 "NIXL runs: one before the sweep, the others after; the best counts")
      ->check(CLI::Range(1, 10));
  app.add_option("--compare_nixl_args", o.compare_nixl_args, "more nixlbench arguments")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--yield", o.yield, "yield the CPU between polls instead of spinning");
  app.add_option("--processes", o.processes,
                 "1: target in this process; 2: a target process over loopback (0: 2 for UCX)")
      ->check(CLI::Range(0, 2));
  app.add_option("--role", o.role, "run only one side: target or initiator (two commands)")
      ->check(CLI::IsMember({"target", "initiator"}));
  app.add_option("--peer_ip", o.peer_ip, "the target's listener address (--role initiator)");
  app.add_option("--listen_address", o.listen_address,
                 "address the target's listener binds (--role target; default "
                 "NIXL_LISTEN_ADDRESS, else 127.0.0.1)");
  app.add_option("--etcd_endpoints", o.etcd_endpoints,
                 "--role: meet through this etcd (both sides) instead of the listener");
  app.add_option("--port", o.port, "the target's listener port (--role; 0: any, printed)");
  app.add_option("--filepath", o.filepath, "folder of the target file (FILE)");
  app.add_option("--posix_api_type", o.posix_api_type, "URING, AIO or POSIX")
      ->check(CLI::IsMember({"URING", "AIO", "POSIX"}));
  app.add_option("--backend_params", o.backend_params, "more backend parameters, KEY=VALUE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--initiator_gpu", o.initiator_gpu, "GPU of initiator VRAM");
  app.add_option("--target_gpu", o.target_gpu, "GPU of target VRAM");
  app.add_option("--baseline", o.baseline,
                 "auto (memcpy for DRAM, fio for FILE, cuda for VRAM), memcpy, fio, cuda, none")
      ->check(CLI::IsMember({"auto", "memcpy", "fio", "cuda", "none"}));
  app.add_option("--fio_runtime", o.fio_runtime, "seconds of each fio baseline run")
      ->check(CLI::PositiveNumber);
  app.add_option("--output_format", o.output_format, "table, csv or json on stdout")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  app.add_option("--csv", o.csv, "also write CSV here");
  app.add_option("--json", o.json, "also write JSON here");
  app.add_option("--plot", o.plot, "also plot bandwidth and latency here (PNG, gnuplot)");
  app.add_flag("--progress", o.progress,
               "show a progress line (default: when stderr is a terminal)");
  CLI11_PARSE(app, argc, argv);
  if (!o.progress) o.progress = ::isatty(2) != 0;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);

  try {
    validate(o);
    if (o.role == "target") return run_target(o, -1);
    if (o.role == "initiator") return run_initiator(o, std::nullopt, -1);
    if (o.processes == 1) return run_initiator(o, std::nullopt, -1);
    // Two processes: fork the target before any thread exists; it reports its port on a pipe.
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe failed");
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      int rc = 1;
      try {
        rc = run_target(o, fds[1]);
      } catch (const std::exception& e) {
        fmt::print(stderr, "nixl-bench target: {}\n", e.what());
      }
      std::fflush(stdout);
      std::_Exit(rc);
    }
    ::close(fds[1]);
    try {
      return run_initiator(o, pid, fds[0]);
    } catch (...) {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
      throw;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "nixl-bench: {}\n", e.what());
    return 1;
  }
}
