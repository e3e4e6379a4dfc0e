// Two agents in one process move data over UCX and say what they did.
//
// "alice" owns a source buffer, "bob" a destination buffer. Alice loads Bob's metadata (in
// one process a string is enough; across processes it goes through the metadata listener or
// etcd), WRITEs 4 blocks into Bob's buffer with a notification, then READs them back into a
// second buffer. Bob checks the bytes when the notification arrives.
//
//   ./nixl_two_agents
#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using agent = nixl::agent<nixl::ucx::backend>;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t block = 64 * 1024, blocks = 4, size = block * blocks;

std::uintptr_t addr(std::vector<unsigned char>& v) {
  return reinterpret_cast<std::uintptr_t>(v.data());
}

/// Posts and polls a request to its end.
template <class Request>
nixl::status run(Request& r) {
  auto s = r.post();
  while (s == nixl::status::in_progress) s = r.status();
  return s;
}

}  // namespace

int main() try {
  agent alice("alice"), bob("bob");
  alice.create_backend<nixl::ucx::backend>();
  bob.create_backend<nixl::ucx::backend>();

  std::vector<unsigned char> src(size), back(size), dst(size, 0);
  for (std::size_t i = 0; i < size; ++i) src[i] = static_cast<unsigned char>(i * 31 + 7);
  alice.register_memory(
      nixl::reg_list<nixl::dram_t>{{{addr(src), size, 0}, ""}, {{addr(back), size, 0}, ""}});
  bob.register_memory(nixl::reg_list<nixl::dram_t>{{{addr(dst), size, 0}, ""}});
  std::printf("alice and bob registered %zu KiB each with UCX\n", size / 1024);

  // Bob's connection info and region keys, as Alice would fetch them from Bob's listener.
  const std::string md = bob.local_metadata();
  std::printf("alice loads bob's metadata (%zu bytes) -> '%s'\n", md.size(),
              alice.load_remote_metadata(md).c_str());

  // Four blocks in reverse order, so that the agent cannot merge them into one.
  nixl::xfer_list<nixl::dram_t> local, remote;
  for (std::size_t i = 0; i < blocks; ++i) {
    local.push_back({addr(src) + i * block, block, 0});
    remote.push_back({addr(dst) + (blocks - 1 - i) * block, block, 0});
  }
  auto w = alice.create_request(nixl::xfer_op::write, local, remote, "bob", {.notif = "wrote 4"});
  const auto t0 = std::chrono::steady_clock::now();
  auto s = run(w);
  const auto us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::printf("alice WRITE %zu x %zu KiB -> bob over %s: %s in %.1f us\n", blocks, block / 1024,
              std::string(w.backend_name()).c_str(), std::string(nixl::to_string(s)).c_str(), us);
  if (s != nixl::status::success) return 1;

  // The notification is delivered after the data is visible at Bob.
  std::vector<std::string> got;
  for (int i = 0; i < 2000 && got.empty(); ++i) {
    got = bob.notifications()["alice"];
    if (got.empty()) std::this_thread::sleep_for(1ms);
  }
  if (got.empty()) {
    std::fprintf(stderr, "bob: no notification from alice\n");
    return 1;
  }
  for (std::size_t i = 0; i < blocks; ++i)
    for (std::size_t j = 0; j < block; ++j)
      if (dst[(blocks - 1 - i) * block + j] != src[i * block + j]) {
        std::fprintf(stderr, "bob: block %zu byte %zu differs\n", i, j);
        return 1;
      }
  std::printf("bob got notification '%s' from alice; %zu bytes checked\n", got.front().c_str(),
              size);

  // READ the same blocks back into a second buffer of Alice's.
  nixl::xfer_list<nixl::dram_t> into;
  for (std::size_t i = 0; i < blocks; ++i) into.push_back({addr(back) + i * block, block, 0});
  auto r = alice.create_request(nixl::xfer_op::read, into, remote, "bob");
  s = run(r);
  std::printf("alice READ %zu x %zu KiB <- bob: %s, %s\n", blocks, block / 1024,
              std::string(nixl::to_string(s)).c_str(), back == src ? "same bytes" : "DIFFERENT");
  return s == nixl::status::success && back == src ? 0 : 1;
} catch (const nixl::error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
