#pragma once
// nixl-bench's options (its command line, nixlbench's flag names) and what is derived from them.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nixl/nixl.hpp>  // UCX and the metadata exchange always; POSIX and CUDA when built

namespace CLI {
class App;
}

namespace nixl_bench {}
namespace nb = nixl_bench;

namespace nixl_bench {

/// Whether this build has --use_device_api (the CUDA compiler and backend were found).
#if defined(NIXL_BENCH_DEVICE)
constexpr bool device_api_built = true;
#else
constexpr bool device_api_built = false;
#endif

/// Every backend this build links (UCX always; POSIX and CUDA when built).
using bench_agent = nixl::agent_over<nixl::enabled_backends>;

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
  int warmup_ms = 0;  // the sweep's first point also runs untimed for this long first
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
  bool wait = false;       ///< request::wait instead of polling
  long wait_spin_us = -1;  ///< agent_config::wait_spin of the initiator; < 0: the default
  bool ucx_alloc = false;
  int pipeline_depth = 1;       // requests in flight per thread (repost mode)
  bool reregister_mem = false;  // register + deregister the local blocks every iteration
  bool use_device_api = false;  // kernels put through memory views; num_threads: CUDA block size
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
  unsigned gds_batch_pool_size = 0;  // 0: the backend's default
  unsigned gds_batch_limit = 0;
  unsigned gds_mt_num_threads = 0;
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
    if (s == "OBJ") return nixl::mem_kind::object;
    throw std::invalid_argument("segment type '" + s + "': use DRAM, VRAM or FILE");
  }
  nixl::mem_kind initiator_kind() const { return kind_of(initiator_seg_type); }
  nixl::mem_kind target_kind() const { return kind_of(target_seg_type); }
  nixl::xfer_op op() const {
    return op_type == "READ" ? nixl::xfer_op::read : nixl::xfer_op::write;
  }
  std::size_t stride_factor() const { return scatter ? 2 : 1; }
  /// Threads of the initiator process that post requests (with --use_device_api one: the
  /// kernel's threads are --num_threads).
  int host_threads() const { return use_device_api ? 1 : num_threads; }
  /// --use_device_api: each thread puts a block alone (THREAD) up to 32 threads a CUDA block,
  /// else each warp puts one together (WARP).
  bool device_warp_level() const { return num_threads > 32; }
  /// Bytes per thread on each side.
  std::size_t per_thread() const {
    if (total_buffer_size != 0) return total_buffer_size / static_cast<std::size_t>(host_threads());
    return max_block_size * max_batch_size * stride_factor() *
           static_cast<std::size_t>(pipeline_depth);
  }
  std::size_t buffer_size() const {
    return per_thread() * static_cast<std::size_t>(host_threads());
  }
  /// OBJ or AZURE_BLOB: a run of obj_mode.cpp.
  bool object_store() const { return backend == "OBJ" || backend == "AZURE_BLOB"; }
  bool local_only() const {
    return backend == "POSIX" || backend == "GDS" || backend == "GDS_MT" || object_store();
  }
};

[[noreturn]] inline void fail(const std::string& msg) {
  throw std::runtime_error(msg);
}

/// The backend's parameters for this run (--num_threads, --posix_api_type, --backend_params).
nixl::params backend_params(const options& o);

/// Adds every option to `app`, bound to the fields of `o`.
void add_options(CLI::App& app, options& o);

/// Checks the combination of options and settles the derived ones (modes, processes,
/// baseline); throws with the flag to change.
void validate(options& o);

}  // namespace nixl_bench
