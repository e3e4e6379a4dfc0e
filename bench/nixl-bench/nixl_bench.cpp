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
//   nixl-bench --backend OBJ                          # DRAM -> S3 objects, curl as baseline
//   nixl-bench --backend AZURE_BLOB                   # DRAM -> Azure blobs (azurite)
//   nixl-bench --use_device_api --initiator_seg_type VRAM --target_seg_type VRAM --num_threads 256
//                                                     # a kernel puts through memory views
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
//
// Files: options.cpp (command line, checks), segment.cpp (memory per segment type), mailbox.hpp
// and target.hpp (the target as the initiator sees it), target_process.cpp (the target
// process), initiator.cpp (the run and --compare_nixl), sweep.cpp (one point: threads, modes,
// data check), baselines.cpp, report.hpp (tables, CSV, JSON, plot), compare_nixl.hpp,
// device_mode.cpp and device_kernels.cu (--use_device_api: kernels putting through memory views).

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "obj_mode.hpp"
#include "options.hpp"
#include "roles.hpp"

int main(int argc, char** argv) {
  using namespace nixl_bench;
  options o;
  CLI::App app{"nixl-bench: transfer bandwidth and latency sweeps through nixl::agent"};
  add_options(app, o);
  CLI11_PARSE(app, argc, argv);
  if (!o.progress) o.progress = ::isatty(2) != 0;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);

  try {
    validate(o);
    if (o.object_store()) return run_obj(o);
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
