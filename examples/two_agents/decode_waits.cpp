// A decode instance waits for a prefill's KV blocks without polling, and learns at once when the
// prefill is gone instead of at its deadline.
//
// "prefill" loads the metadata of "decode" and WRITEs one step of KV blocks into decode's cache
// with a notification per step; decode never loads the prefill's metadata. Decode sleeps in
// wait_notifications (with the abort notices), which also ends when an agent is found gone
// (gone_agents). After the first step the prefill agent is destroyed, as when its process ends:
// decode's wait for the second step ends within milliseconds, not at its 30 s deadline. The same
// holds across processes and hosts (docs/error-model.md, "Agents found gone").
//
//   ./nixl_decode_waits
#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

using agent = nixl::agent<nixl::ucx::backend>;
using clk = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t size = 1 << 20;

std::uintptr_t addr(std::vector<unsigned char>& v) {
  return reinterpret_cast<std::uintptr_t>(v.data());
}

/// How decode's wait for step `tag` of the prefill ended: "done" (its notification), "aborted"
/// (the prefill's transfer ended without success), "gone" (the prefill is) or "deadline".
std::string wait_step(agent& decode, const std::string& tag, clk::duration limit) {
  const auto end = clk::now() + limit;
  nixl::notif_map notifs, aborts;
  const auto has = [&](nixl::notif_map& m) {
    const auto& got = m["prefill"];
    return std::find(got.begin(), got.end(), tag) != got.end();
  };
  for (;;) {
    if (has(notifs)) return "done";
    if (has(aborts)) return "aborted";
    const auto gone = decode.gone_agents();
    if (std::find(gone.begin(), gone.end(), "prefill") != gone.end()) return "gone";
    const auto now = clk::now();
    if (now >= end) return "deadline";
    decode.wait_notifications(notifs, aborts, end - now);  // sleeps: no CPU while waiting
  }
}

}  // namespace

int main() try {
  std::vector<unsigned char> cache(size, 0), kv(size);
  for (std::size_t i = 0; i < size; ++i) kv[i] = static_cast<unsigned char>(i * 13 + 5);

  agent decode("decode");
  decode.create_backend<nixl::ucx::backend>();
  decode.register_memory(nixl::reg_list<nixl::dram_t>{{{addr(cache), size, 0}, ""}});

  auto prefill = std::make_unique<agent>("prefill");
  prefill->create_backend<nixl::ucx::backend>();
  prefill->register_memory(nixl::reg_list<nixl::dram_t>{{{addr(kv), size, 0}, ""}});
  prefill->load_remote_metadata(decode.local_metadata());

  // Step 0: the prefill writes, decode's wait ends with the notification.
  nixl::status s;
  {
    auto w = prefill->create_request(
        nixl::xfer_op::write, nixl::xfer_list<nixl::dram_t>{{addr(kv), size, 0}},
        nixl::xfer_list<nixl::dram_t>{{addr(cache), size, 0}}, "decode", {.notif = "kv-0"});
    s = w.post();
    if (s == nixl::status::in_progress) s = w.wait(10s);
  }
  std::printf("prefill WRITE %zu KiB -> decode: %s\n", size / 1024,
              std::string(nixl::to_string(s)).c_str());
  const std::string first = wait_step(decode, "kv-0", 30s);
  std::printf("decode's wait for kv-0: %s, %s bytes\n", first.c_str(),
              cache == kv ? "the same" : "DIFFERENT");
  if (s != nixl::status::success || first != "done" || cache != kv) return 1;

  // Step 1 never comes: the prefill is destroyed while decode waits for it.
  prefill.reset();
  const auto t0 = clk::now();
  const std::string second = wait_step(decode, "kv-1", 30s);
  const auto ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  std::printf("decode's wait for kv-1: %s after %.1f ms (deadline 30 s)\n", second.c_str(), ms);
  return second == "gone" ? 0 : 1;
} catch (const nixl::error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
