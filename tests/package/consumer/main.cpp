// A program outside the tree, built against an installed, added or fetched nixl: it includes
// only <nixl/nixl.hpp> and runs the README's C++ example when the UCX backend is linked.
#include <nixl/nixl.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

bool codec_round_trip() {
  nixl::xfer_dlist l(nixl::mem_kind::dram, {{1, 2, 3}});
  return nixl::decode_xfer_list(nixl::encode(l)) == l;
}

#if defined(NIXL_HAS_UCX)
// README, "C++ in ten lines".
bool readme_example() {
  constexpr std::size_t len = 1 << 16;
  std::vector<unsigned char> src(len), dst(len, 0);
  for (std::size_t i = 0; i < len; ++i) src[i] = static_cast<unsigned char>(i * 13 + 1);
  const auto src_addr = reinterpret_cast<std::uintptr_t>(src.data());
  const auto dst_addr = reinterpret_cast<std::uintptr_t>(dst.data());

  nixl::agent<nixl::ucx::backend> a{"prefill-0"}, b{"decode-0"};
  a.create_backend<nixl::ucx::backend>();
  b.create_backend<nixl::ucx::backend>();
  a.register_memory(nixl::reg_list<nixl::dram_t>{{{src_addr, len, 0}, ""}});
  b.register_memory(nixl::reg_list<nixl::dram_t>{{{dst_addr, len, 0}, ""}});
  a.load_remote_metadata(b.local_metadata());
  auto req = a.create_request(
      nixl::xfer_op::write, nixl::xfer_list<nixl::dram_t>{{src_addr, len, 0}},
      nixl::xfer_list<nixl::dram_t>{{dst_addr, len, 0}}, "decode-0", {.notif = "kv-17"});
  auto s = req.post();
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s == nixl::status::in_progress && std::chrono::steady_clock::now() < end) s = req.status();
  if (s != nixl::status::success) {
    std::printf("consumer: transfer ended with %s\n", std::string(nixl::to_string(s)).c_str());
    return false;
  }
  std::vector<std::string> got;
  while (got.empty() && std::chrono::steady_clock::now() < end)
    got = b.notifications()["prefill-0"];
  if (got != std::vector<std::string>{"kv-17"} || dst != src) {
    std::printf("consumer: notification or data missing after the transfer\n");
    return false;
  }
  return true;
}
#endif

}  // namespace

int main() {
  bool ok = codec_round_trip();
  std::printf("consumer: codec round trip %s\n", ok ? "ok" : "FAILED");
  for (auto n : nixl::agent_over<nixl::enabled_backends>::available_backends())
    std::printf("consumer: backend %.*s linked\n", static_cast<int>(n.size()), n.data());
#if defined(NIXL_HAS_UCX)
  const bool readme = readme_example();
  std::printf("consumer: README example %s\n", readme ? "ok" : "FAILED");
  ok = ok && readme;
#endif
  return ok ? 0 : 1;
}
