// Two processes: the target is nixl_libfabric_peer. Data both ways, and a SIGKILLed target seen
// within two seconds.

#include <nixl/agent.hpp>
#include <nixl/backends/libfabric.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "lf_support.hpp"

using lf_test::buffer;
using nixl::status;
using nixl::xfer_op;
using lf_agent = nixl::agent<nixl::libfabric::backend>;
using dram_list = nixl::xfer_list<nixl::dram_t>;

namespace {

std::uint64_t fnv(const std::byte* p, std::size_t n) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// The peer helper on pipes; its metadata read at start.
class peer_process {
 public:
  explicit peer_process(std::vector<std::string> args) {
    int in[2], out[2];
    ::signal(SIGPIPE, SIG_IGN);
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[0]);
      ::close(in[1]);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv;
      std::string exe = NIXL_LIBFABRIC_PEER_EXE;
      argv.push_back(exe.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = ::fdopen(in[1], "w");
    from_ = ::fdopen(out[0], "r");
    char hdr[64] = {};
    if (std::fgets(hdr, sizeof hdr, from_) == nullptr) throw std::runtime_error("peer: no MD");
    std::size_t len = 0;
    if (std::sscanf(hdr, "MD %zu", &len) != 1) throw std::runtime_error("peer: bad MD line");
    md_.resize(len);
    if (std::fread(md_.data(), 1, len, from_) != len) throw std::runtime_error("peer: short MD");
  }
  ~peer_process() {
    if (to_) std::fclose(to_);
    if (from_) std::fclose(from_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& metadata() const { return md_; }
  std::string ask(const std::string& line) {
    std::fprintf(to_, "%s\n", line.c_str());
    std::fflush(to_);
    char buf[256] = {};
    if (std::fgets(buf, sizeof buf, from_) == nullptr) return {};
    std::string r(buf);
    if (!r.empty() && r.back() == '\n') r.pop_back();
    return r;
  }
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string md_;
};

template <class R>
status wait(R& r, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  return lf_test::wait_done([&] { return r.status(); }, limit);
}

}  // namespace

TEST_CASE("libfabric processes: WRITE and READ, notification, then SIGKILL seen within 2 s") {
  const auto prov = GENERATE(std::string("tcp;ofi_rxm"), std::string("shm"));
  const nixl::params p = prov == "shm" ? lf_test::shm_params() : lf_test::tcp_params();
  if (auto why = lf_test::unavailable(p); !why.empty()) NIXL_SKIP(prov << ": " << why);
  CAPTURE(prov);
  const std::size_t n = 4 << 20;
  peer_process peer({"target", std::to_string(n), prov, prov == "shm" ? "" : "lo"});
  buffer b(n);
  lf_agent a{"initiator"};
  a.create_backend<nixl::libfabric::backend>(p);
  a.register_memory(nixl::reg_list<nixl::dram_t>{{{b.addr(), n, 0}, ""}});
  REQUIRE(a.load_remote_metadata(peer.metadata()) == "target");
  const std::uintptr_t remote = [&] {
    // the peer's buffer address: the first registered DRAM region of its metadata
    auto md = nixl::decode_metadata(lf_test::bytes_of(peer.metadata()));
    return md.sections.at(0).regions.at(0).range.addr;
  }();
  // READ the peer's pattern
  auto rd = a.create_request(xfer_op::read, dram_list{{b.addr(), n, 0}}, dram_list{{remote, n, 0}},
                             "target");
  REQUIRE(rd.post() != status::backend);
  REQUIRE(wait(rd) == status::success);
  CHECK(b.holds(7, 0, n, 0));
  // WRITE a new one with a notification
  b.fill(3);
  nixl::xfer_options opt;
  opt.notif = "written";
  auto wr = a.create_request(xfer_op::write, dram_list{{b.addr(), n, 0}}, dram_list{{remote, n, 0}},
                             "target", opt);
  REQUIRE(wr.post() != status::backend);
  REQUIRE(wait(wr) == status::success);
  CHECK(peer.ask("NOTIFS 1") == "N 1");
  char want[32];
  std::snprintf(want, sizeof want, "SUM %llx", static_cast<unsigned long long>(fnv(b.data(), n)));
  CHECK(peer.ask(fmt::format("SUM 0 {}", n)) == want);

  // SIGKILL: the next request fails within 2 s (heartbeat timeout or a connection error)
  peer.kill();
  const auto t0 = std::chrono::steady_clock::now();
  status s = status::in_progress;
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    s = wr.post();
    if (s == status::in_progress || s == status::success) s = wait(wr, std::chrono::seconds(5));
    if (s != status::success) break;
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(s == status::remote_disconnect);
  CHECK(took < std::chrono::seconds(2));
  WARN(prov << ": dead peer seen after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
}
