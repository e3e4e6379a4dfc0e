// C++ side of the Python overhead benchmark: the same request cycle as bench/python/overhead.py
// (create a request, post it, poll it to completion, release it), through the agent's run-time
// path over UCX, on a loopback DRAM transfer small enough that the data movement is negligible.
//
//   nixl_py_overhead_cpp [iterations] [bytes]
// Prints one line per case: "<case> <ns per iteration>".

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

namespace {

using agent_t = nixl::agent<nixl::ucx::backend>;
using clock_type = std::chrono::steady_clock;

void wait_done(agent_t::xfer_request& r, nixl::status s) {
  while (s == nixl::status::in_progress) s = r.status();
  if (s != nixl::status::success) {
    std::fprintf(stderr, "transfer failed: %s\n", std::string(nixl::to_string(s)).c_str());
    std::exit(1);
  }
}

template <class F>
void run(const char* name, int iters, F&& f) {
  for (int i = 0; i < iters / 10 + 1; ++i) f();  // warm-up
  const auto t0 = clock_type::now();
  for (int i = 0; i < iters; ++i) f();
  const auto ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
  std::printf("%s %.0f\n", name, ns / iters);
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20000;
  const std::size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 64;
  std::vector<char> src(bytes, 1), dst(bytes, 0);

  nixl::agent_config cfg;  // progress thread on, as the Python default
  agent_t a("bench-cpp", cfg);
  a.create_backend("UCX");
  const auto s = reinterpret_cast<std::uintptr_t>(src.data());
  const auto d = reinterpret_cast<std::uintptr_t>(dst.data());
  a.register_memory(
      nixl::reg_dlist(nixl::mem_kind::dram, {{{s, bytes, 0}, {}}, {{d, bytes, 0}, {}}}));
  const nixl::xfer_dlist local(nixl::mem_kind::dram, {{s, bytes, 0}});
  const nixl::xfer_dlist remote(nixl::mem_kind::dram, {{d, bytes, 0}});

  run("initialize_transfer_check_release", iters, [&] {
    auto r = a.create_request(nixl::xfer_op::write, local, remote, a.name());
    wait_done(r, r.post());
    (void)r.release();
  });

  auto lp = a.prepare_list("", local);
  auto rp = a.prepare_list(a.name(), remote);
  const int idx[] = {0};
  run("make_prepped_transfer_check_release", iters, [&] {
    auto r = a.make_request(nixl::xfer_op::write, lp, idx, rp, idx);
    wait_done(r, r.post());
    (void)r.release();
  });

  auto r = a.create_request(nixl::xfer_op::write, local, remote, a.name());
  run("transfer_check_repost", iters, [&] { wait_done(r, r.post()); });
  return 0;
}
