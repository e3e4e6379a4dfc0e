// The target process (--role target, or forked by the initiator): registers its segment,
// exchanges metadata through its listener or etcd, then serves the initiator's requests.

#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "roles.hpp"
#include "target.hpp"
#if defined(NIXL_BENCH_DEVICE)
#include "device_mode.hpp"
#endif

namespace nixl_bench {

int run_target(const options& o, int port_fd) {
#if defined(NIXL_BENCH_DEVICE)
  if (o.use_device_api) require_gpu(o.target_gpu);  // the initiator's kernels put into its VRAM
#endif
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

}  // namespace nixl_bench
