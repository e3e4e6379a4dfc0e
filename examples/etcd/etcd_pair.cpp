// Two processes that find each other through etcd and move data over UCX.
//
//   NIXL_ETCD_ENDPOINTS=http://127.0.0.1:2379 ./nixl_etcd_pair target &
//   NIXL_ETCD_ENDPOINTS=http://127.0.0.1:2379 ./nixl_etcd_pair initiator
//
// Each publishes its metadata under <NIXL_ETCD_NAMESPACE>/<name>/metadata and fetches the
// other's (waiting for it if the other has not started yet). The target tells the initiator
// where to write with a notification holding its descriptor list; the initiator writes and
// notifies back; the target checks the bytes and withdraws its metadata, which the initiator
// sees through its etcd watch.
#include <nixl/agent.hpp>
#include <nixl/backends/ucx.hpp>
#include <nixl/metadata/exchange.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using agent = nixl::agent<nixl::ucx::backend>;

namespace {

constexpr std::size_t size = 1 << 20;

template <class Pred>
bool wait_for(Pred pred, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

nixl::reg_list<nixl::dram_t> registration(std::vector<unsigned char>& b) {
  return {{{reinterpret_cast<std::uintptr_t>(b.data()), b.size(), 0}, ""}};
}

int run_target() {
  agent a("target");
  nixl::metadata::exchange x{a};  // etcd from NIXL_ETCD_ENDPOINTS
  a.create_backend<nixl::ucx::backend>();
  std::vector<unsigned char> buf(size, 0);
  a.register_memory(registration(buf));
  x.send_local_metadata().get();
  std::printf("target: published its metadata; waiting for the initiator's\n");
  x.fetch_remote_metadata("initiator").get();
  std::printf("target: loaded the initiator's metadata\n");
  nixl::xfer_dlist where(nixl::mem_kind::dram,
                         {{reinterpret_cast<std::uintptr_t>(buf.data()), size, 0}});
  a.notify("initiator", nixl::encode(where));
  // The initiator writes, then notifies.
  std::vector<std::string> got;
  if (!wait_for(
          [&] {
            auto n = a.notifications();
            for (auto& m : n["initiator"]) got.push_back(m);
            return !got.empty();
          },
          30s)) {
    std::fprintf(stderr, "target: no notification from the initiator\n");
    return 1;
  }
  for (std::size_t i = 0; i < size; ++i) {
    if (buf[i] != static_cast<unsigned char>(i * 7)) {
      std::fprintf(stderr, "target: byte %zu is %u, expected %u\n", i, buf[i],
                   static_cast<unsigned char>(i * 7));
      return 1;
    }
  }
  std::printf("target: notification '%s', %zu bytes verified\n", got.front().c_str(), size);
  x.invalidate_local_metadata().get();
  std::printf("target: metadata withdrawn\n");
  return 0;
}

int run_initiator() {
  agent a("initiator");
  nixl::metadata::exchange x{a};
  a.create_backend<nixl::ucx::backend>();
  std::vector<unsigned char> buf(size);
  for (std::size_t i = 0; i < size; ++i) buf[i] = static_cast<unsigned char>(i * 7);
  a.register_memory(registration(buf));
  x.send_local_metadata().get();
  x.fetch_remote_metadata("target").get();  // waits (bounded) for the target to publish
  std::printf("initiator: loaded the target's metadata\n");
  // The target sends where to write as a serialised descriptor list.
  std::string msg;
  if (!wait_for(
          [&] {
            auto n = a.notifications();
            if (!n["target"].empty()) msg = n["target"].front();
            return !msg.empty();
          },
          30s)) {
    std::fprintf(stderr, "initiator: the target did not say where to write\n");
    return 1;
  }
  nixl::xfer_dlist where = nixl::decode_xfer_list(msg);
  if (where.size() != 1 || where[0].len != size) {
    std::fprintf(stderr, "initiator: unexpected descriptor list from the target\n");
    return 1;
  }
  nixl::xfer_list<nixl::dram_t> local{{reinterpret_cast<std::uintptr_t>(buf.data()), size, 0}};
  nixl::xfer_list<nixl::dram_t> remote{{where[0].addr, size, 0}};
  auto req = a.create_request(nixl::xfer_op::write, local, remote, "target", {.notif = "written"});
  auto s = req.post();
  auto end = std::chrono::steady_clock::now() + 30s;
  while (s == nixl::status::in_progress && std::chrono::steady_clock::now() < end) s = req.status();
  if (s != nixl::status::success) {
    std::fprintf(stderr, "initiator: transfer ended with %s\n",
                 std::string(nixl::to_string(s)).c_str());
    return 1;
  }
  std::printf("initiator: wrote %zu bytes and notified the target\n", size);
  if (!wait_for([&] { return !a.check_remote_metadata("target"); }, 30s)) {
    std::fprintf(stderr, "initiator: the target's withdrawal was not seen\n");
    return 1;
  }
  std::printf("initiator: the target withdrew; dropped it\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 ||
      (std::strcmp(argv[1], "target") != 0 && std::strcmp(argv[1], "initiator") != 0)) {
    std::fprintf(stderr, "usage: %s target|initiator  (with NIXL_ETCD_ENDPOINTS set)\n", argv[0]);
    return 2;
  }
  try {
    return std::strcmp(argv[1], "target") == 0 ? run_target() : run_initiator();
  } catch (const nixl::error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
    return 1;
  }
}
