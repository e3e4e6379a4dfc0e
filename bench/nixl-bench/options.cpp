// Options: the command line, the parameters given to the backend, and their checks.

#include "options.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>

namespace nixl_bench {

nixl::params backend_params(const options& o) {
  nixl::params p;
  // UCX: a worker per posting thread, each request on the worker of the thread that makes it
  if (o.backend == "UCX" && o.host_threads() > 1)
    p["num_threads"] = std::to_string(o.host_threads());
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
  if (o.backend == "GDS" && o.gds_batch_pool_size > 0)
    p["batch_pool_size"] = std::to_string(o.gds_batch_pool_size);
  if (o.backend == "GDS" && o.gds_batch_limit > 0)
    p["batch_limit"] = std::to_string(o.gds_batch_limit);
  if (o.backend == "GDS_MT" && o.gds_mt_num_threads > 0)
    p["thread_count"] = std::to_string(o.gds_mt_num_threads);
  for (const auto& kv : o.backend_params) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) fail("--backend_params entry '" + kv + "' is not KEY=VALUE");
    p[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return p;
}

void add_options(CLI::App& app, options& o) {
  // A later option wins, so that wrappers (scripts/quickstart.sh) can be overridden.
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);
  auto size_opt = [&](const char* name, std::size_t& v, const char* help) {
    app.add_option(name, v, help)->transform(CLI::AsSizeValue(false));
  };
  app.add_option("--backend", o.backend,
                 "UCX, POSIX, CUDA, GDS, GDS_MT, LIBFABRIC, OBJ or AZURE_BLOB")
      ->check(CLI::IsMember(
          {"UCX", "POSIX", "CUDA", "GDS", "GDS_MT", "LIBFABRIC", "OBJ", "AZURE_BLOB"}));
  app.add_option("--initiator_seg_type", o.initiator_seg_type, "DRAM or VRAM")
      ->check(CLI::IsMember({"DRAM", "VRAM"}));
  app.add_option("--target_seg_type", o.target_seg_type, "DRAM, VRAM, FILE or OBJ")
      ->check(CLI::IsMember({"DRAM", "VRAM", "FILE", "OBJ"}));
  app.add_option("--op_type", o.op_type, "READ or WRITE")->check(CLI::IsMember({"READ", "WRITE"}));
  size_opt("--start_block_size", o.start_block_size, "first block size (4K, 1M, ...)");
  size_opt("--max_block_size", o.max_block_size, "last block size");
  size_opt("--start_batch_size", o.start_batch_size, "first batch size (descriptors per request)");
  size_opt("--max_batch_size", o.max_batch_size, "last batch size");
  app.add_option("--num_iter", o.num_iter, "measured iterations per point")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup_iter", o.warmup_iter, "untimed iterations per point")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup_ms", o.warmup_ms,
                 "before the first point, post its request untimed for this many milliseconds "
                 "(a process's first tens of ms of requests can be slower: clocks, caches, page "
                 "tables)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--large_blk_iter_ftr", o.large_blk_iter_ftr,
                 "divide iterations by this above 1 MiB blocks")
      ->check(CLI::PositiveNumber);
  app.add_option("--num_threads", o.num_threads,
                 "initiator threads, each with its own requests (1-64); with --use_device_api the "
                 "CUDA block size (1-1024): up to 32 each thread puts alone, above that a multiple "
                 "of 32 and each warp puts together")
      ->check(CLI::Range(1, 1024));
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
  app.add_flag("--use_device_api", o.use_device_api,
               "GPU-initiated WRITE, VRAM -> VRAM (UCX or CUDA): a kernel puts each point's "
               "blocks through memory views (nixl/device.cuh), one block per thread or warp of "
               "--num_threads-thread CUDA blocks; baseline: a plain copy kernel of the same shape");
  app.add_flag("--yield", o.yield, "yield the CPU between polls instead of spinning");
  app.add_flag("--wait", o.wait,
               "wait for each request with request::wait (its spin, then the agent's event fd) "
               "instead of polling; with --pipeline_depth, sleep on the event fd whenever none "
               "of the requests in flight has ended");
  app.add_option("--wait_spin_us", o.wait_spin_us,
                 "the initiator's agent_config::wait_spin (with --wait; default: the agent's)");
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
  app.add_option("--gds_batch_pool_size", o.gds_batch_pool_size, "GDS: batch handles (16)");
  app.add_option("--gds_batch_limit", o.gds_batch_limit, "GDS: entries per batch handle (128)");
  app.add_option("--gds_mt_num_threads", o.gds_mt_num_threads,
                 "GDS_MT: threads (hardware threads / 2)");
  app.add_option("--backend_params", o.backend_params, "more backend parameters, KEY=VALUE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--initiator_gpu", o.initiator_gpu, "GPU of initiator VRAM");
  app.add_option("--target_gpu", o.target_gpu, "GPU of target VRAM");
  app.add_option("--baseline", o.baseline,
                 "auto (memcpy for DRAM, fio for FILE, cufile for GDS and GDS_MT, cuda for VRAM, "
                 "curl for OBJ, kernel for --use_device_api), memcpy, fio, cufile, cuda, curl, "
                 "kernel, none")
      ->check(CLI::IsMember({"auto", "memcpy", "fio", "cufile", "cuda", "curl", "kernel", "none"}));
  app.add_option("--fio_runtime", o.fio_runtime, "seconds of each fio baseline run")
      ->check(CLI::PositiveNumber);
  app.add_option("--output_format", o.output_format, "table, csv or json on stdout")
      ->check(CLI::IsMember({"table", "csv", "json"}));
  app.add_option("--csv", o.csv, "also write CSV here");
  app.add_option("--json", o.json, "also write JSON here");
  app.add_option("--plot", o.plot, "also plot bandwidth and latency here (PNG, gnuplot)");
  app.add_flag("--progress", o.progress,
               "show a progress line (default: when stderr is a terminal)");
}

namespace {

/// --use_device_api's combinations: WRITE, VRAM -> VRAM, UCX or CUDA, a CUDA block size that
/// gives a level, and the request modes a kernel has (one launch per iteration).
void validate_device(options& o) {
  const std::string f = "--use_device_api: ";
  if (o.backend != "UCX" && o.backend != "CUDA")
    fail(f + "--backend " + o.backend + " makes no memory views; use --backend UCX or CUDA");
  if (o.op_type != "WRITE")
    fail(f + "--op_type " + o.op_type + ": kernels put into the target; use --op_type WRITE");
  if (o.initiator_seg_type != "VRAM" || o.target_seg_type != "VRAM")
    fail(f + "views are of GPU memory; use --initiator_seg_type VRAM --target_seg_type VRAM");
  if (o.num_threads > 32 && o.num_threads % 32 != 0)
    fail(f + "--num_threads " + std::to_string(o.num_threads) +
         " is the CUDA block size: up to 32 (THREAD level) or a multiple of 32 up to 1024 (WARP "
         "level)");
  if (o.recreate_xfer || o.prepared_xfer || o.xfer_mode != "repost" || o.reregister_mem)
    fail(f +
         "views are prepared once per point and every iteration is one kernel; drop "
         "--xfer_mode, --recreate_xfer, --prepared_xfer and --reregister_mem");
  if (o.pipeline_depth != 1)
    fail(f + "--pipeline_depth: one kernel at a time (each iteration waits for its kernel)");
  if (!o.compare_nixl.empty()) fail(f + "--compare_nixl compares host-posted UCX runs only");
  if (o.baseline == "auto") o.baseline = "kernel";
  if (o.baseline != "kernel" && o.baseline != "cuda" && o.baseline != "none")
    fail(f + "--baseline " + o.baseline + ": use kernel (a plain copy kernel), cuda or none");
  if (!device_api_built)
    fail(f +
         "this nixl-bench was built without it (it needs the CUDA compiler and the CUDA "
         "backend: configure with NIXL_WITH_CUDA=ON where nvcc is found)");
}

}  // namespace

void validate(options& o) {
  if (!o.use_device_api && o.num_threads > 64)
    fail("--num_threads " + std::to_string(o.num_threads) +
         ": up to 64 initiator threads (above that only with --use_device_api, where it is the "
         "CUDA block size)");
  if (!o.use_device_api && o.baseline == "kernel")
    fail("--baseline kernel is the copy kernel of --use_device_api");
  if (o.use_device_api) validate_device(o);
  if (o.recreate_xfer && o.prepared_xfer)
    fail("--recreate_xfer and --prepared_xfer exclude each other");
  if (o.recreate_xfer) o.xfer_mode = "recreate";
  if (o.prepared_xfer) o.xfer_mode = "prepared";
  if (o.start_block_size == 0 || o.start_block_size > o.max_block_size)
    fail("--start_block_size must be between 1 and --max_block_size");
  if (o.start_batch_size == 0 || o.start_batch_size > o.max_batch_size)
    fail("--start_batch_size must be between 1 and --max_batch_size");
  if (o.object_store()) {  // DRAM <-> objects in one process (obj_mode.cpp)
    if (o.initiator_seg_type != "DRAM")
      fail("--backend " + o.backend + " moves DRAM: --initiator_seg_type DRAM");
    o.target_seg_type = "OBJ";
    o.processes = 1;
    const bool s3 = o.backend == "OBJ";
    if (o.baseline == "auto") o.baseline = s3 ? "curl" : "none";
    if (o.baseline != "none" && (!s3 || o.baseline != "curl"))
      fail(s3 ? "--backend OBJ: --baseline curl or none"
              : "--backend AZURE_BLOB: --baseline none (curl cannot sign Shared Key)");
    return;
  }
  (void)o.initiator_kind();
  const auto tk = o.target_kind();
  if (o.initiator_kind() == nixl::mem_kind::file)
    fail("--initiator_seg_type FILE: use DRAM or VRAM");
  const bool file = tk == nixl::mem_kind::file;
  const bool gds = o.backend == "GDS" || o.backend == "GDS_MT";
  if (file && o.backend != "POSIX" && !gds)
    fail("--target_seg_type FILE needs --backend POSIX, GDS or GDS_MT");
  if (o.backend == "POSIX" && !file)
    fail("--backend POSIX moves DRAM to and from files: add --target_seg_type FILE");
  if (gds && !file)
    fail("--backend " + o.backend +
         " moves DRAM or VRAM to and from files: add --target_seg_type FILE");
  if (o.backend == "POSIX" && o.initiator_kind() == nixl::mem_kind::vram)
    fail("--backend POSIX moves DRAM only: use --backend GDS or GDS_MT for VRAM");
  if (o.processes == 0) o.processes = o.local_only() ? 1 : 2;
  if (o.local_only() && o.processes != 1)
    fail("--backend " + o.backend + " works within one process (--processes 1)");
  if (!o.etcd_endpoints.empty() && o.role.empty())
    fail("--etcd_endpoints is for --role target / --role initiator (two commands)");
  if (!o.role.empty()) o.processes = 2;
  if (o.baseline == "auto") {
    if (file && gds)
      o.baseline = "cufile";
    else if (file)
      o.baseline = "fio";
    else if (o.initiator_kind() == nixl::mem_kind::vram || tk == nixl::mem_kind::vram)
      o.baseline = "cuda";
    else
      o.baseline = "memcpy";
  }
#if !defined(NIXL_BENCH_CUDA)
  if (o.baseline == "cuda") o.baseline = "none";
#endif
#if !defined(NIXL_BENCH_GDS)
  if (o.baseline == "cufile") o.baseline = "none";
#endif
  if (o.baseline == "cufile" && !file) o.baseline = "none";
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

}  // namespace nixl_bench
