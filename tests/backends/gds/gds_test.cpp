// GDS and GDS_MT against the project's fake libcufile (pread/pwrite, DRAM only): parameters,
// the library lookup, chunking, the batch pool, a full pool, error paths, cancellation, file
// handles, path mode and query_memory, and the agent's loopback path.

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds_mt.hpp>

#include "gds_support.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/small_fs.hpp"

using namespace gds_test;
using gds_b = nixl::gds::backend;
using mt_b = nixl::gds_mt::backend;

namespace {

const std::string lib = NIXL_FAKE_CUFILE;

/// The fake's knobs and counters; knobs go back to 0 at scope exit.
struct fake {
  void* h = nullptr;
  long (*get_)(const char*) = nullptr;
  void (*set_)(const char*, long) = nullptr;
  fake() {
    h = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(h != nullptr);
    get_ = reinterpret_cast<long (*)(const char*)>(::dlsym(h, "nixl_fake_cufile_get"));
    set_ = reinterpret_cast<void (*)(const char*, long)>(::dlsym(h, "nixl_fake_cufile_set"));
    REQUIRE(get_ != nullptr);
    REQUIRE(set_ != nullptr);
    reset();
  }
  ~fake() {
    reset();
    ::dlclose(h);
  }
  void reset() {
    for (const char* k : {"delay_us", "hang", "hang_sync", "hang_submit", "ignore_cancel",
                          "refuse_buf", "fail_open", "fail_io"})
      set_(k, 0);
  }
  long get(const char* k) const { return get_(k); }
  void set(const char* k, long v) const { set_(k, v); }
};

/// The fake, a scratch folder and the file `data` in it, open read-write: most tests start here.
struct data_file {
  fake f;
  scratch tmp;
  fd_guard fd{::open((tmp / "data").c_str(), O_RDWR | O_CREAT, 0600)};
};

// GDS: DRAM through the batch API, so that the fake's batch path is what these tests drive
// (the default, synchronous DRAM, has its own test).
template <class B>
nixl::params p(nixl::params extra = {}) {
  if constexpr (std::is_same_v<B, gds_b>) extra.try_emplace("dram_batch", "true");
  return params_for<B>(lib, std::move(extra));
}

/// Posts `pieces` as one WRITE whose synchronous calls take `delay` each and releases it `after`
/// that, while threads run its chunks (GDS_MT, or GDS's DRAM threads): the release returns
/// within a second, at most `max_calls` chunks ran, and none runs afterwards.
template <class B>
void release_in_flight(const fake& f, B& b, rig<B>& r, const std::vector<piece>& pieces,
                       std::chrono::microseconds delay, std::chrono::milliseconds after,
                       long max_calls) {
  typename B::request q;
  r.prepare(q, nixl::xfer_op::write, pieces);
  f.set("delay_us", delay.count());
  const long calls0 = f.get("sync_calls");
  CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
  std::this_thread::sleep_for(after);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(b.release(q) == nixl::status::success);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  const long calls = f.get("sync_calls") - calls0;
  CHECK(calls >= 1);
  CHECK(calls <= max_calls);
  std::this_thread::sleep_for(2 * delay + std::chrono::milliseconds(20));
  CHECK(f.get("sync_calls") - calls0 == calls);  // nothing ran after the release
  CHECK(f.get("sync_running") == 0);
}

/// The same for 64 chunks of 4 KiB, 50 ms each, on two threads: at most 4 ran (one more each
/// while releasing).
template <class B>
void release_drops_waiting_chunks(const fake& f, int fd, buffer& src, nixl::params extra) {
  auto b = make<B>(params_for<B>(lib, std::move(extra)));
  rig<B> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd);
  release_in_flight(f, b, r, scattered(64, 4096), std::chrono::milliseconds(50),
                    std::chrono::milliseconds(20), 4);
}

/// A release of a chunk that runs past `cancel_timeout_ms` (one thread): `repost_active`; the
/// chunk finishes on its own and the request then reports that it was canceled.
template <class B>
void release_past_cancel_timeout(const fake& f, int fd, buffer& src, nixl::params extra) {
  extra.emplace("cancel_timeout_ms", "50");
  auto b = make<B>(params_for<B>(lib, std::move(extra)));
  rig<B> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd);
  typename B::request q;
  r.prepare(q, nixl::xfer_op::write, {{0, 0, 4096}});
  f.set("delay_us", 400'000);
  CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(b.release(q) == nixl::status::repost_active);
  f.set("delay_us", 0);
  CHECK(wait(b, q, nixl::status::in_progress) == nixl::status::canceled);
  CHECK(b.release(q) == nixl::status::success);
  // The request goes again.
  r.prepare(q, nixl::xfer_op::write, {{0, 0, 4096}});
  CHECK(wait(b, q, b.post(q, std::nullopt)) == nixl::status::success);
}

/// Sets the fake's hang knob `knob` to 1 for its lifetime, and a watchdog unsets it after 10 s:
/// a call that waits for the hang returns only then, and `fired()` tells the test, which fails
/// instead of hanging.
class hang_guard {
 public:
  hang_guard(const fake& f, const char* knob) : f_(f), knob_(knob) {
    f_.set(knob_, 1);
    t_ = std::thread([this] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!done_.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!done_.load()) {
        fired_ = true;
        f_.set(knob_, 0);
      }
    });
  }
  ~hang_guard() { stop(); }
  hang_guard(const hang_guard&) = delete;
  hang_guard& operator=(const hang_guard&) = delete;
  /// Unsets the knob (the hang ends).
  void release() const { f_.set(knob_, 0); }
  /// Ends the watchdog; true when it had to unset the knob.
  bool stop() {
    done_ = true;
    if (t_.joinable()) t_.join();
    f_.set(knob_, 0);
    return fired_.load();
  }
  bool fired() const { return fired_.load(); }

 private:
  const fake& f_;
  const char* knob_;
  std::atomic<bool> done_{false}, fired_{false};
  std::thread t_;
};

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const nixl::error& e) {
    return e.what();
  }
  return "no throw";
}

}  // namespace

TEST_CASE("gds: parameters with NIXL's names and defaults", "[gds]") {
  auto c = nixl::gds::config::from_params({});
  CHECK(c.batch_pool_size == 16);
  CHECK(c.batch_limit == 128);
  CHECK(c.max_request_size == (16u << 20));
  auto d = nixl::gds::config::from_params(
      {{"batch_pool_size", "4"}, {"batch_limit", "8"}, {"max_request_size", "65536"}});
  CHECK(d.batch_pool_size == 4);
  CHECK(d.batch_limit == 8);
  CHECK(d.max_request_size == 65536);
  CHECK_FALSE(c.dram_batch);
  CHECK(c.io_threads == 2);
  CHECK(nixl::gds::config::from_params({{"io_threads", "5"}}).io_threads == 5);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"io_threads", "0"}}), nixl::error);
  CHECK(nixl::gds::config::from_params({{"dram_batch", "true"}}).dram_batch);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"dram_batch", "maybe"}}), nixl::error);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"batch_pool_size", "0"}}), nixl::error);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"batch_limit", "x"}}), nixl::error);
  auto m = nixl::gds_mt::config::from_params({{"thread_count", "8"}});
  CHECK(m.thread_count == 8);
  CHECK(nixl::gds_mt::config::from_params({}).thread_count ==
        std::max(1u, std::thread::hardware_concurrency() / 2));
  CHECK_THROWS_AS(nixl::gds_mt::config::from_params({{"thread_count", "0"}}), nixl::error);
  CHECK(gds_b::default_params().at("batch_pool_size") == "16");
  CHECK(mt_b::default_params().count("thread_count") == 1);
  // How long an idle thread looks for the next chunk before it sleeps: both backends.
  CHECK(c.thread_spin == std::chrono::microseconds(50));
  CHECK(nixl::gds_mt::config::from_params({}).thread_spin == std::chrono::microseconds(50));
  CHECK(nixl::gds::config::from_params({{"thread_spin_us", "0"}}).thread_spin.count() == 0);
  CHECK(nixl::gds_mt::config::from_params({{"thread_spin_us", "200"}}).thread_spin.count() == 200);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"thread_spin_us", "100001"}}), nixl::error);
  CHECK(gds_b::default_params().at("thread_spin_us") == "50");
  CHECK(mt_b::default_params().at("thread_spin_us") == "50");
  // GDS in compatibility mode: small requests on its threads.
  CHECK(c.compat_thread_size == (1u << 20));
  CHECK(gds_b::default_params().at("compat_thread_size") == "1048576");
  CHECK(nixl::gds::config::from_params({{"compat_thread_size", "0"}}).compat_thread_size == 0);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"compat_thread_size", "-1"}}), nixl::error);
}

TEMPLATE_TEST_CASE("gds: without libcufile the backend does not start", "[gds]", gds_b, mt_b) {
  const auto msg = message([] {
    (void)make<TestType>({{"cufile_path", "/nonexistent/libcufile.so.0"}});
  });
  CHECK(msg.find("libcufile not found") != std::string::npos);
  CHECK(msg.find("/nonexistent/libcufile.so.0") != std::string::npos);
  fake f;
  f.set("fail_open", 1);
  const auto open_msg = message([] { (void)make<TestType>(p<TestType>()); });
  CHECK(open_msg.find("cuFileDriverOpen") != std::string::npos);
  CHECK(open_msg.find("5001") != std::string::npos);
}

TEMPLATE_TEST_CASE("gds: DRAM <-> file, chunked at max_request_size", "[gds]", gds_b, mt_b) {
  fake f;
  scratch tmp;
  fd_guard fd(::open((tmp / "data").c_str(), O_RDWR | O_CREAT, 0600));
  const std::size_t count = GENERATE(1, 1000);
  const std::size_t len = GENERATE(4096, 3 * 65536 + 100);
  nixl::params extra{{"max_request_size", "65536"}};
  if constexpr (std::is_same_v<TestType, gds_b>) extra["batch_limit"] = "16";
  if constexpr (std::is_same_v<TestType, mt_b>) extra["thread_count"] = "4";
  auto b = make<TestType>(p<TestType>(extra));
  buffer src(count * len), dst(count * len);
  src.fill(static_cast<std::uint32_t>(count + len));
  const auto pieces = scattered(count, len);
  const std::size_t chunks_each = (len + 65535) / 65536;
  const long entries0 = f.get("entries"), sync0 = f.get("sync_calls");
  f.set("max_entry", 0);
  f.set("max_sync", 0);
  {
    rig<TestType> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::write, pieces) == nixl::status::success);
  }
  {
    rig<TestType> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::read, pieces) == nixl::status::success);
  }
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  const long moved =
      std::is_same_v<TestType, gds_b> ? f.get("entries") - entries0 : f.get("sync_calls") - sync0;
  CHECK(moved == static_cast<long>(2 * count * chunks_each));
  const long biggest = std::is_same_v<TestType, gds_b> ? f.get("max_entry") : f.get("max_sync");
  CHECK(biggest == static_cast<long>(std::min<std::size_t>(len, 65536)));
  CHECK(f.get("in_flight") == 0);
}

TEST_CASE_METHOD(data_file, "gds: a small pool carries many batches, reusing its handles",
                 "[gds]") {
  auto b = make<gds_b>(p<gds_b>({{"batch_pool_size", "2"}, {"batch_limit", "4"}}));
  CHECK(b.pool_size() == 2);
  buffer src(1000 * 4096), dst(1000 * 4096);
  src.fill(3);
  const long submits0 = f.get("submits");
  {
    rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::write, scattered(1000, 4096)) == nixl::status::success);
  }
  CHECK(f.get("submits") - submits0 == 250);  // 1000 entries, 4 per batch
  {
    rig<gds_b> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::read, scattered(1000, 4096)) == nixl::status::success);
  }
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  CHECK(b.free_batches() == 2);
}

TEST_CASE_METHOD(data_file, "gds: a full batch pool gives a clear status at once, never a hang",
                 "[gds]") {
  auto b = make<gds_b>(p<gds_b>({{"batch_pool_size", "1"}, {"batch_limit", "4"}}));
  buffer src(8 * 4096);
  src.fill(5);
  rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  gds_b::request a, c;
  r.prepare(a, nixl::xfer_op::write, {{0, 0, 4096}, {4096, 4096, 4096}});
  r.prepare(c, nixl::xfer_op::write, {{8192, 8192, 4096}});
  f.set("hang", 1);
  CHECK(b.post(a, std::nullopt) == nixl::status::in_progress);
  CHECK(b.free_batches() == 0);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(b.post(c, std::nullopt) == nixl::status::backend);  // no handle free
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  CHECK(b.check(c) == nixl::status::not_posted);
  CHECK(b.post(a, std::nullopt) == nixl::status::repost_active);
  CHECK(b.check(a) == nixl::status::in_progress);
  f.set("hang", 0);
  CHECK(wait(b, a, nixl::status::in_progress) == nixl::status::success);
  CHECK(wait(b, c, b.post(c, std::nullopt)) == nixl::status::success);  // free again
  CHECK(b.release(a) == nixl::status::success);
  CHECK(b.release(c) == nixl::status::success);
}

TEST_CASE_METHOD(data_file, "gds: release of a request in flight cancels it", "[gds]") {
  buffer src(64 * 4096);
  src.fill(6);
  SECTION("GDS: the batches are canceled and their handles return to the pool") {
    auto b = make<gds_b>(p<gds_b>({{"batch_pool_size", "2"}, {"batch_limit", "8"}}));
    rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    gds_b::request q;
    r.prepare(q, nixl::xfer_op::write, scattered(64, 4096));
    const long cancels0 = f.get("cancels"), submits0 = f.get("submits");
    f.set("hang", 1);
    CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
    CHECK(b.free_batches() == 0);
    // A thread submits the two batches (16 entries); then they are cuFile's to cancel.
    CHECK(wait_until([&] { return f.get("submits") - submits0 == 2; }));
    CHECK(b.release(q) == nixl::status::success);
    f.set("hang", 0);
    CHECK(f.get("cancels") - cancels0 == 2);
    CHECK(b.free_batches() == 2);
    CHECK(f.get("in_flight") == 0);
    struct stat st {};
    REQUIRE(::fstat(fd.fd, &st) == 0);
    CHECK(st.st_size == 0);  // nothing was written
    // The request can be prepared and posted again.
    r.prepare(q, nixl::xfer_op::write, {{0, 0, 4096}});
    CHECK(wait(b, q, b.post(q, std::nullopt)) == nixl::status::success);
  }
  SECTION("GDS: a cancel that cuFile refuses is waited for, bounded by cancel_timeout_ms") {
    auto b = make<gds_b>(p<gds_b>({{"batch_pool_size", "1"}, {"cancel_timeout_ms", "200"}}));
    rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    gds_b::request q;
    r.prepare(q, nixl::xfer_op::write, {{0, 0, 4096}});
    f.set("hang", 1);
    f.set("ignore_cancel", 1);
    CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(b.release(q) == nixl::status::repost_active);
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(took >= std::chrono::milliseconds(150));
    CHECK(took < std::chrono::seconds(3));
    f.set("hang", 0);  // cuFile finishes on its own
    CHECK(b.release(q) == nixl::status::success);
    f.set("ignore_cancel", 0);
    CHECK(b.free_batches() == 1);
  }
  SECTION("GDS_MT: chunks not started are dropped, running ones are waited for") {
    release_drops_waiting_chunks<mt_b>(f, fd.fd, src, {{"thread_count", "2"}});
  }
  SECTION("GDS, DRAM chunks on its threads: the same") {
    release_drops_waiting_chunks<gds_b>(f, fd.fd, src, {{"io_threads", "2"}});
  }
  SECTION("GDS_MT: running chunks past cancel_timeout_ms give repost_active") {
    release_past_cancel_timeout<mt_b>(f, fd.fd, src, {{"thread_count", "1"}});
  }
  SECTION("GDS, DRAM chunks on its threads: the same") {
    release_past_cancel_timeout<gds_b>(f, fd.fd, src, {{"io_threads", "1"}});
  }
}

TEMPLATE_TEST_CASE("gds: error paths give an error status and a message", "[gds]", gds_b, mt_b) {
  fake f;
  scratch tmp;
  auto b = make<TestType>(p<TestType>());
  buffer buf(16384);
  SECTION("closed descriptor at registration") {
    int fd = ::open((tmp / "x").c_str(), O_RDWR | O_CREAT, 0600);
    ::close(fd);
    const auto msg = message([&] {
      (void)b.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd)}, ""});
    });
    CHECK(msg.find("not an open file descriptor") != std::string::npos);
  }
  SECTION("a READ past the end of the file") {
    fd_guard fd(::open((tmp / "short").c_str(), O_RDWR | O_CREAT, 0600));
    REQUIRE(::pwrite(fd.fd, buf.data(), 4096, 0) == 4096);
    rig<TestType> r(b, nixl::mem_kind::dram, buf.addr(), buf.size(), 0, fd.fd);
    CHECK(r.run(nixl::xfer_op::read, {{0, 0, 8192}}) == nixl::status::backend);
    CHECK(r.run(nixl::xfer_op::read, {{0, 8192, 4096}}) == nixl::status::backend);
    CHECK(r.run(nixl::xfer_op::read, {{0, 0, 4096}}) == nixl::status::success);
  }
  SECTION("an I/O error") {
    fd_guard fd(::open((tmp / "io").c_str(), O_RDWR | O_CREAT, 0600));
    rig<TestType> r(b, nixl::mem_kind::dram, buf.addr(), buf.size(), 0, fd.fd);
    f.set("fail_io", 1);
    CHECK(r.run(nixl::xfer_op::write, {{0, 0, 4096}}) == nixl::status::backend);
    CHECK(r.run(nixl::xfer_op::write, {{0, 0, 4096}}) == nixl::status::success);
  }
  SECTION("a file on tmpfs") {
    struct statfs fs {};
    if (::statfs("/dev/shm", &fs) != 0 || static_cast<unsigned long>(fs.f_type) != TMPFS_MAGIC)
      NIXL_SKIP("no tmpfs at /dev/shm");
    scratch shm("/dev/shm");
    fd_guard fd(::open((shm / "t").c_str(), O_RDWR | O_CREAT, 0600));
    const auto msg = message([&] {
      (void)b.register_region(nixl::mem_kind::file,
                              {{0, 0, static_cast<std::uint64_t>(fd.fd)}, ""});
    });
    CHECK(msg.find("is on tmpfs, which cuFile cannot use") != std::string::npos);
    CHECK(msg.find("ext4 or xfs") != std::string::npos);
  }
  SECTION("pairs that are not memory <-> file") {
    fd_guard fd(::open((tmp / "p").c_str(), O_RDWR | O_CREAT, 0600));
    rig<TestType> r(b, nixl::mem_kind::dram, buf.addr(), buf.size(), 0, fd.fd);
    nixl::bound_desc<typename TestType::region> l;
    l.addr = buf.addr();
    l.len = 4096;
    l.region = &r.mem;
    auto rmem = b.load_local(r.mem);
    nixl::bound_desc<typename TestType::remote_region> m;
    m.addr = buf.addr(4096);
    m.len = 4096;
    m.region = &rmem;
    typename TestType::request q;
    CHECK_THROWS_AS(b.prepare(q, nixl::xfer_op::write, std::span(&l, 1), std::span(&m, 1), r.self),
                    nixl::error);
  }
  SECTION("notifications are not supported") {
    fd_guard fd(::open((tmp / "n").c_str(), O_RDWR | O_CREAT, 0600));
    rig<TestType> r(b, nixl::mem_kind::dram, buf.addr(), buf.size(), 0, fd.fd);
    typename TestType::request q;
    r.prepare(q, nixl::xfer_op::write, {{0, 0, 4096}});
    CHECK(b.post(q, std::string_view("hi")) == nixl::status::not_supported);
  }
}

TEMPLATE_TEST_CASE("gds: files get one cuFile handle per descriptor; buffers are registered",
                   "[gds]", gds_b, mt_b) {
  fake f;
  scratch tmp;
  fd_guard fd(::open((tmp / "h").c_str(), O_RDWR | O_CREAT, 0600));
  const long handles0 = f.get("handles"), bufs0 = f.get("buffers");
  {
    auto b = make<TestType>(p<TestType>());
    auto r1 =
        b.register_region(nixl::mem_kind::file, {{0, 0, static_cast<std::uint64_t>(fd.fd)}, ""});
    auto r2 =
        b.register_region(nixl::mem_kind::file, {{4096, 0, static_cast<std::uint64_t>(fd.fd)}, ""});
    CHECK(f.get("handles") - handles0 == 1);
    CHECK(r1.fh == r2.fh);
    b.deregister_region(r1);
    CHECK(f.get("handles") - handles0 == 1);
    b.deregister_region(r2);
    CHECK(f.get("handles") - handles0 == 0);
    buffer buf(8192);
    auto m = b.register_region(nixl::mem_kind::dram, {{buf.addr(), buf.size(), 0}, ""});
    CHECK(f.get("buffers") - bufs0 == 1);
    b.deregister_region(m);
    CHECK(f.get("buffers") - bufs0 == 0);
    // A refused DRAM registration only costs speed.
    f.set("refuse_buf", 1);
    buffer src(8192);
    src.fill(4);
    rig<TestType> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    CHECK(r.mem.buf == nullptr);
    CHECK(r.run(nixl::xfer_op::write, {{0, 0, 8192}}) == nixl::status::success);
    std::vector<std::byte> back(8192);
    REQUIRE(::pread(fd.fd, back.data(), back.size(), 0) == 8192);
    CHECK(std::memcmp(back.data(), src.data(), 8192) == 0);
  }
  CHECK(f.get("handles") - handles0 == 0);
}

TEMPLATE_TEST_CASE("gds: path mode and query_memory", "[gds]", gds_b, mt_b) {
  fake f;
  scratch tmp;
  auto b = make<TestType>(p<TestType>());
  const auto path = (tmp / "pm").string();
  buffer buf(8192);
  buf.fill(8);
  {
    rig<TestType> r(b, nixl::mem_kind::dram, buf.addr(), buf.size(), 0, 7, "rw,create:" + path);
    CHECK(r.file.owns_fd);
    CHECK(r.file.fd >= 0);
    CHECK(r.run(nixl::xfer_op::write, {{0, 4096, 8192}}) == nixl::status::success);
  }
  CHECK(fs::exists(path));
  nixl::test::check_file_queries(b, tmp.dir, path, 4096 + 8192);
  const auto msg = message([&] {
    (void)b.register_region(nixl::mem_kind::file, {{0, 0, 1}, "ro:" + (tmp / "nope").string()});
  });
  CHECK(msg.find("cannot open") != std::string::npos);
  CHECK(msg.find("No such file") != std::string::npos);
  // O_DIRECT through path mode, with aligned buffers and offsets.
  {
    buffer back(8192);
    rig<TestType> r(b, nixl::mem_kind::dram, back.addr(), back.size(), 0, 8, "ro,direct:" + path);
    const int fl = ::fcntl(r.file.fd, F_GETFL);
    if (fl < 0 || (fl & O_DIRECT) == 0) NIXL_SKIP("O_DIRECT not kept on this file system");
    CHECK(r.run(nixl::xfer_op::read, {{0, 4096, 8192}}) == nixl::status::success);
    CHECK(std::memcmp(back.data(), buf.data(), 8192) == 0);
  }
}

TEMPLATE_TEST_CASE("gds: VRAM without a GPU is refused at registration", "[gds]", gds_b, mt_b) {
  fake f;
  // The backend's own check: a CUDA build that can make GPU 0 current has a GPU.
  if (nixl::gds::detail::vram_built() && nixl::gds::detail::use_device(0))
    NIXL_SKIP("a CUDA device is present: VRAM registration succeeds here");
  auto b = make<TestType>(p<TestType>());
  CHECK_THROWS_AS(b.register_region(nixl::mem_kind::vram, {{4096, 4096, 0}, ""}), nixl::error);
}

TEST_CASE_METHOD(data_file,
                 "gds: DRAM moves with synchronous calls on the backend's threads by default, not "
                 "the batch API",
                 "[gds]") {
  auto b = make<gds_b>(params_for<gds_b>(lib, {{"batch_limit", "4"}}));
  const std::size_t count = 10, len = 8192;
  buffer src(count * len), dst(count * len);
  src.fill(3);
  std::vector<rig<gds_b>::piece> pieces;
  for (std::size_t i = 0; i < count; ++i) pieces.push_back({i * len, (count - 1 - i) * len, len});
  const long submits = f.get("submits"), calls = f.get("sync_calls");
  {
    rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    CHECK(r.run(nixl::xfer_op::write, pieces) == nixl::status::success);
  }
  {
    rig<gds_b> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    CHECK(r.run(nixl::xfer_op::read, pieces) == nixl::status::success);
  }
  CHECK(std::memcmp(dst.data(), src.data(), src.size()) == 0);
  CHECK(f.get("submits") == submits);
  CHECK(f.get("sync_calls") - calls == static_cast<long>(2 * count));
  CHECK(b.free_batches() == b.pool_size());
  // A failing chunk fails the request, and the next one works.
  rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  f.set("fail_io", 1);
  CHECK(r.run(nixl::xfer_op::write, {{0, 0, 4096}}) == nixl::status::backend);
  CHECK(r.run(nixl::xfer_op::write, {{0, 0, 4096}}) == nixl::status::success);
}

TEMPLATE_TEST_CASE("gds: through the agent, loopback to itself", "[gds]", gds_b, mt_b) {
  fake f;
  scratch tmp;
  fd_guard fd(::open((tmp / "agent").c_str(), O_RDWR | O_CREAT, 0600));
  nixl::agent<gds_b, mt_b> a{"gds-agent"};  // both types in one agent; one is created
  nixl::params bp = p<TestType>();
  if constexpr (std::is_same_v<TestType, mt_b>) bp["thread_count"] = "8";
  a.create_backend(std::string(TestType::name), bp);
  if constexpr (std::is_same_v<TestType, mt_b>)
    CHECK(a.template get_backend<mt_b>().thread_count() == 8);
  const std::size_t count = 100, len = 8192;
  buffer src(count * len), dst(count * len);
  src.fill(10);
  nixl::reg_dlist mem(nixl::mem_kind::dram);
  mem.push_back({{src.addr(), src.size(), 0}, ""});
  mem.push_back({{dst.addr(), dst.size(), 0}, ""});
  nixl::reg_dlist file(nixl::mem_kind::file);
  file.push_back({{0, count * len, static_cast<std::uint64_t>(fd.fd)}, ""});
  a.register_memory(mem);
  a.register_memory(file);
  auto run = [&](nixl::xfer_op op, const buffer& b) {
    nixl::xfer_dlist l(nixl::mem_kind::dram), r(nixl::mem_kind::file);
    for (std::size_t i = 0; i < count; ++i) {
      l.push_back({b.addr(i * len), len, 0});
      r.push_back({(count - 1 - i) * len, len, static_cast<std::uint64_t>(fd.fd)});
    }
    auto req = a.create_request(op, l, r, "gds-agent");
    const auto s = req.post();
    return s == nixl::status::in_progress ? nixl::test::wait(req) : s;
  };
  CHECK(run(nixl::xfer_op::write, src) == nixl::status::success);
  CHECK(run(nixl::xfer_op::read, dst) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  auto q = a.query_memory(file, {{std::string(TestType::name)}});
  REQUIRE(q.size() == 1);
  REQUIRE(q[0].has_value());
  CHECK(q[0]->at("size") == std::to_string(count * len));
  a.deregister_memory(file);
  a.deregister_memory(mem);
}

TEST_CASE("gds: GDS and GDS_MT in one agent: the second is refused, as NIXL does", "[gds]") {
  fake f;
  auto refused = [](auto& a, const std::string& name) {
    try {
      a.create_backend(name, name == "GDS" ? p<gds_b>() : p<mt_b>());
    } catch (const nixl::error& e) {
      CHECK(std::string(e.what()).find("only one of GDS and GDS_MT") != std::string::npos);
      return e.status_code();
    }
    return nixl::status::success;
  };
  {
    nixl::agent<gds_b, mt_b> a{"gds-both"};
    a.create_backend("GDS", p<gds_b>());
    CHECK(refused(a, "GDS_MT") == nixl::status::not_allowed);
    nixl::agent<gds_b, mt_b> other{"gds-other"};  // another agent may have the other one
    other.create_backend("GDS_MT", p<mt_b>());
    CHECK(refused(other, "GDS") == nixl::status::not_allowed);
  }
  // The agent gone, its name is free again: in the other order now.
  nixl::agent<gds_b, mt_b> a{"gds-both"};
  a.create_backend("GDS_MT", p<mt_b>());
  CHECK(refused(a, "GDS") == nixl::status::not_allowed);
  CHECK(a.template get_backend<mt_b>().thread_count() > 0);  // the first one still works
}

TEMPLATE_TEST_CASE("gds: requests of several threads at once on one backend", "[gds]", gds_b,
                   mt_b) {
  fake f;
  scratch tmp;
  fd_guard fd(::open((tmp / "threads").c_str(), O_RDWR | O_CREAT, 0600));
  nixl::params extra{{"max_request_size", "16384"}};
  if constexpr (std::is_same_v<TestType, gds_b>)
    extra["batch_pool_size"] = "8";  // room for every thread's request
  auto b = make<TestType>(p<TestType>(extra));
  constexpr int threads = 4;
  constexpr std::size_t count = 64, len = 8192, span = count * len;
  buffer src(threads * span), dst(threads * span);
  src.fill(21);
  rig<TestType> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  rig<TestType> back(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
  std::vector<int> ok(threads, 0);
  auto work = [&](int t) {
    std::vector<typename rig<TestType>::piece> pieces;
    for (std::size_t i = 0; i < count; ++i)
      pieces.push_back({t * span + i * len, t * span + (count - 1 - i) * len, len});
    int good = 0;
    for (int round = 0; round < 5; ++round) {
      typename TestType::request w, rd;
      r.prepare(w, nixl::xfer_op::write, pieces);
      back.prepare(rd, nixl::xfer_op::read, pieces);
      // A full pool answers at once; post again until a handle is free (each wait bounded).
      auto run = [&](typename TestType::request& q) {
        nixl::status s = nixl::status::backend;
        for (int k = 0; k < 1000 && s == nixl::status::backend; ++k)
          s = wait(b, q, b.post(q, std::nullopt));
        return s;
      };
      const bool wrote = run(w) == nixl::status::success;
      const bool read = wrote && run(rd) == nixl::status::success;
      good += read ? 1 : 0;
      b.release(w);
      b.release(rd);
    }
    ok[t] = good;
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) ts.emplace_back(work, t);
  for (auto& t : ts) t.join();
  for (int t = 0; t < threads; ++t) CHECK(ok[t] == 5);
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
}

namespace {

/// Sets an environment variable for a scope, and puts the old value back.
struct env_guard {
  std::string key;
  std::optional<std::string> old;
  env_guard(const char* k, const char* v) : key(k) {
    if (const char* o = std::getenv(k)) old = o;
    if (v != nullptr)
      ::setenv(k, v, 1);
    else
      ::unsetenv(k);
  }
  ~env_guard() {
    if (old)
      ::setenv(key.c_str(), old->c_str(), 1);
    else
      ::unsetenv(key.c_str());
  }
  env_guard(const env_guard&) = delete;
};

constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;

}  // namespace

TEST_CASE("gds: compatibility mode: its detection and parameters", "[gds]") {
  using nixl::gds::compat_setting;
  using nixl::gds::resolve_compat;
  scratch tmp;
  const std::string present = tmp.dir.string();  // stands for /sys/module/nvidia_fs
  const std::string absent = (tmp / "nvidia_fs").string();
  {
    env_guard e("NIXL_GDS_COMPAT_MODE", nullptr);
    CHECK(resolve_compat(compat_setting::on, present));
    CHECK_FALSE(resolve_compat(compat_setting::off, absent));
    CHECK_FALSE(resolve_compat(compat_setting::automatic, present));  // nvidia-fs loaded
    CHECK(resolve_compat(compat_setting::automatic, absent));         // no nvidia-fs
  }
  {
    env_guard e("NIXL_GDS_COMPAT_MODE", "0");
    CHECK_FALSE(resolve_compat(compat_setting::automatic, absent));
    CHECK(resolve_compat(compat_setting::on, absent));  // the parameter wins
  }
  {
    env_guard e("NIXL_GDS_COMPAT_MODE", "true");
    CHECK(resolve_compat(compat_setting::automatic, present));
  }
  {
    env_guard e("NIXL_GDS_COMPAT_MODE", "auto");
    CHECK_FALSE(resolve_compat(compat_setting::automatic, present));
  }
  {
    env_guard e("NIXL_GDS_COMPAT_MODE", "maybe");
    CHECK_THROWS_AS(resolve_compat(compat_setting::automatic, present), nixl::error);
  }
  // Parameters.
  auto c = nixl::gds::config::from_params({});
  CHECK(c.compat_mode == compat_setting::automatic);
  CHECK(c.compat_chunk_size == 256 * KiB);
  CHECK(c.max_inflight == 0);
  CHECK(nixl::gds::config::from_params({{"compat_mode", "true"}}).compat_mode ==
        compat_setting::on);
  CHECK(nixl::gds::config::from_params({{"compat_mode", "off"}}).compat_mode ==
        compat_setting::off);
  CHECK(nixl::gds::config::from_params({{"compat_mode", "AUTO"}}).compat_mode ==
        compat_setting::automatic);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"compat_mode", "perhaps"}}), nixl::error);
  CHECK_THROWS_AS(nixl::gds::config::from_params({{"compat_chunk_size", "100"}}), nixl::error);
  CHECK(message([] {
          (void)nixl::gds::config::from_params({{"compat_chunk_size", "5000"}});
        }).find("multiple of 4096") != std::string::npos);
  CHECK(nixl::gds::config::from_params({{"compat_chunk_size", "1048576"}}).compat_chunk_size ==
        1 * MiB);
  CHECK(nixl::gds::config::from_params({{"max_inflight", "32"}}).max_inflight == 32);
  CHECK(nixl::gds_mt::config::from_params({{"compat_chunk_size", "65536"}}).compat_chunk_size ==
        65536);
  CHECK(gds_b::default_params().at("compat_mode") == "auto");
  CHECK(gds_b::default_params().at("max_inflight") == "0");
  CHECK(mt_b::default_params().at("compat_chunk_size") == std::to_string(1 * MiB));
  // The backends resolve it at creation; the environment reaches them.
  fake f;
  {
    env_guard e("NIXL_GDS_COMPAT_MODE", "1");
    auto g = make<gds_b>(params_for<gds_b>(lib, {{"compat_mode", "auto"}}));
    CHECK(g.compat_mode());
    CHECK(g.inflight_cap() == 128);  // batch_limit
    auto m = make<mt_b>(params_for<mt_b>(lib, {{"compat_mode", "auto"}}));
    CHECK(m.compat_mode());
  }
  {
    env_guard e("NIXL_GDS_COMPAT_MODE", "0");
    auto g = make<gds_b>(params_for<gds_b>(lib, {{"compat_mode", "auto"}}));
    CHECK_FALSE(g.compat_mode());
    CHECK(g.inflight_cap() == 0);
    CHECK(g.chunk_size_for(256 * MiB) == 16 * MiB);
  }
  auto g = make<gds_b>(params_for<gds_b>(lib, {{"compat_mode", "true"}, {"max_inflight", "32"}}));
  CHECK(g.inflight_cap() == 32);
  CHECK(g.chunk_size_for(16 * MiB) == 1 * MiB);  // 16 chunks at most (batch_compat_chunks)
  CHECK(g.chunk_size_for(4 * MiB) == 256 * KiB);
  auto g8 = make<gds_b>(params_for<gds_b>(lib, {{"compat_mode", "true"}, {"max_inflight", "8"}}));
  CHECK(g8.chunk_size_for(16 * MiB) == 2 * MiB);  // the lower of the two aims
}

TEST_CASE("gds: the chunk size: compatibility mode, max_request_size, big requests", "[gds]") {
  using nixl::gds::chunk_size;
  // With nvidia-fs: max_request_size, whatever the request.
  CHECK(chunk_size(false, 16 * MiB, 256 * KiB, 128, 1 * MiB) == 16 * MiB);
  CHECK(chunk_size(false, 1 * MiB, 256 * KiB, 128, 1024 * MiB) == 1 * MiB);
  // Compatibility mode: 256 KiB up to 128 chunks (32 MiB), then bigger chunks.
  for (std::size_t total : {4 * KiB, 1 * MiB, 2 * MiB, 16 * MiB, 32 * MiB})
    CHECK(chunk_size(true, 16 * MiB, 256 * KiB, 128, total) == 256 * KiB);
  CHECK(chunk_size(true, 16 * MiB, 256 * KiB, 128, 64 * MiB) == 512 * KiB);
  CHECK(chunk_size(true, 16 * MiB, 256 * KiB, 128, 256 * MiB) == 2 * MiB);
  CHECK(chunk_size(true, 16 * MiB, 256 * KiB, 128, 1024 * MiB) == 8 * MiB);
  CHECK(chunk_size(true, 16 * MiB, 256 * KiB, 128, 4096 * MiB) == 16 * MiB);  // the most
  // Grown chunks are whole pages, and the count stays within the aim.
  const std::size_t odd = 100 * MiB + 1;
  const std::size_t c = chunk_size(true, 16 * MiB, 256 * KiB, 128, odd);
  CHECK(c % 4096 == 0);
  CHECK((odd + c - 1) / c <= 128);
  CHECK(chunk_size(true, 16 * MiB, 256 * KiB, 128, 32 * MiB + 1) > 256 * KiB);
  // An explicit max_request_size stays the most, below the compatibility size and when grown.
  CHECK(chunk_size(true, 64 * KiB, 256 * KiB, 128, 1 * MiB) == 64 * KiB);
  CHECK(chunk_size(true, 1 * MiB, 256 * KiB, 128, 256 * MiB) == 1 * MiB);
  CHECK(chunk_size(true, 1 * MiB, 256 * KiB, 128, 16 * MiB) == 256 * KiB);
  // No aim: never grows.
  CHECK(chunk_size(true, 16 * MiB, 256 * KiB, 0, 1024 * MiB) == 256 * KiB);
}

TEMPLATE_TEST_CASE("gds: compatibility mode cuts descriptors at compat_chunk_size", "[gds]", gds_b,
                   mt_b) {
  fake f;
  scratch tmp;
  fd_guard fd(::open((tmp / "compat").c_str(), O_RDWR | O_CREAT, 0600));
  struct point {
    std::size_t max_request, compat_chunk, len, chunk, batch_chunk;
  };
  // 256 KiB at 16 KiB: 16 chunks; at most max_request_size; 4 MiB at 4 KiB would be 1024
  // chunks: grown to 32 KiB, 128 chunks (GDS_MT), or to 256 KiB, 16 chunks (GDS).
  const auto pt0 = GENERATE(point{16 * MiB, 16 * KiB, 256 * KiB, 16 * KiB, 16 * KiB},
                            point{8 * KiB, 16 * KiB, 256 * KiB, 8 * KiB, 8 * KiB},
                            point{16 * MiB, 4 * KiB, 4 * MiB, 32 * KiB, 256 * KiB});
  auto pt = pt0;
  if constexpr (std::is_same_v<TestType, gds_b>) pt.chunk = pt.batch_chunk;
  nixl::params extra{{"compat_mode", "true"},
                     {"max_request_size", std::to_string(pt.max_request)},
                     {"compat_chunk_size", std::to_string(pt.compat_chunk)}};
  if constexpr (std::is_same_v<TestType, mt_b>) extra["thread_count"] = "4";
  // GDS: the batches at every size (by default a request of up to 1 MiB goes to the threads).
  if constexpr (std::is_same_v<TestType, gds_b>) extra["compat_thread_size"] = "0";
  auto b = make<TestType>(p<TestType>(extra));
  CHECK(b.compat_mode());
  CHECK(b.chunk_size_for(pt.len) == pt.chunk);
  buffer src(pt.len), dst(pt.len);
  src.fill(static_cast<std::uint32_t>(pt.len + pt.chunk));
  const long entries0 = f.get("entries"), sync0 = f.get("sync_calls");
  f.set("max_entry", 0);
  f.set("max_sync", 0);
  {
    rig<TestType> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::write, {{0, 0, pt.len}}) == nixl::status::success);
  }
  {
    rig<TestType> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::read, {{0, 0, pt.len}}) == nixl::status::success);
  }
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  const bool batch = std::is_same_v<TestType, gds_b>;
  const long moved = batch ? f.get("entries") - entries0 : f.get("sync_calls") - sync0;
  CHECK(moved == static_cast<long>(2 * (pt.len / pt.chunk)));
  CHECK((batch ? f.get("max_entry") : f.get("max_sync")) == static_cast<long>(pt.chunk));
}

TEST_CASE_METHOD(
    data_file, "gds: in compatibility mode a request up to compat_thread_size goes to the threads",
    "[gds]") {
  // Host memory through the batches (dram_batch and the test field), so that where a request
  // goes shows for DRAM as it would for VRAM: up to the threshold, whole to the threads in chunks
  // of max_request_size; past it, to the batches.
  const std::string limit = GENERATE(std::string(), std::string("0"), std::string("2097152"));
  nixl::params extra{{"compat_mode", "true"}, {"max_request_size", std::to_string(512 * KiB)}};
  if (!limit.empty()) extra["compat_thread_size"] = limit;
  auto b = make<gds_b>(p<gds_b>(extra));
  const std::size_t threshold = limit.empty() ? MiB : std::stoul(limit);
  CHECK(b.settings().compat_thread_size == threshold);
  buffer src(4 * MiB), dst(4 * MiB);
  src.fill(static_cast<std::uint32_t>(threshold + 3));
  for (const std::size_t len : {64 * KiB, MiB, 2 * MiB, 4 * MiB}) {
    const long submits0 = f.get("submits"), sync0 = f.get("sync_calls");
    {
      rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::write, {{0, 0, len}}) == nixl::status::success);
    }
    {
      rig<gds_b> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::read, {{0, 0, len}}) == nixl::status::success);
    }
    CHECK(std::memcmp(src.data(), dst.data(), len) == 0);
    const long calls = f.get("sync_calls") - sync0, submits = f.get("submits") - submits0;
    INFO("threshold " << threshold << ", " << len << " bytes");
    if (len <= threshold) {
      CHECK(submits == 0);
      CHECK(calls == static_cast<long>(2 * ((len + 512 * KiB - 1) / (512 * KiB))));
    } else {
      CHECK(submits >= 2);
      CHECK(calls == 0);
    }
  }
}

TEST_CASE_METHOD(data_file, "gds: a request keeps at most max_inflight batch entries in flight",
                 "[gds]") {
  constexpr std::size_t count = 1000, len = 4096;
  buffer src(count * len), dst(count * len);
  src.fill(44);
  const auto pieces = scattered(count, len);
  auto run_both = [&](gds_b& b) {
    {
      rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::write, pieces) == nixl::status::success);
    }
    std::memset(dst.data(), 0, dst.size());
    {
      rig<gds_b> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::read, pieces) == nixl::status::success);
    }
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
    CHECK(b.free_batches() == b.pool_size());
    CHECK(f.get("in_flight") == 0);
  };
  // max_request_size keeps the 1000 descriptors at one chunk each: 1000 entries.
  nixl::params base{{"compat_mode", "true"}, {"max_request_size", "4096"}};
  f.set("delay_us", 20);
  SECTION("compatibility mode: batch_limit (128) entries at most") {
    auto b = make<gds_b>(p<gds_b>(base));
    REQUIRE(b.inflight_cap() == 128);
    f.set("max_in_flight", 0);
    const long entries0 = f.get("entries");
    run_both(b);
    CHECK(f.get("entries") - entries0 == static_cast<long>(2 * count));
    CHECK(f.get("max_in_flight") <= 128);
    CHECK(f.get("max_in_flight") >= 1);
  }
  SECTION("an explicit max_inflight") {
    base["max_inflight"] = "10";
    auto b = make<gds_b>(p<gds_b>(base));
    f.set("max_in_flight", 0);
    run_both(b);
    CHECK(f.get("max_in_flight") <= 10);
  }
  SECTION("with nvidia-fs: no cap, every free handle is used") {
    base["compat_mode"] = "false";
    auto b = make<gds_b>(p<gds_b>(base));
    REQUIRE(b.inflight_cap() == 0);
    f.set("max_in_flight", 0);
    run_both(b);
    CHECK(f.get("max_in_flight") > 128);
  }
  SECTION("release while capped: the batches are canceled, the handles return") {
    auto b = make<gds_b>(p<gds_b>(base));
    rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    gds_b::request q;
    r.prepare(q, nixl::xfer_op::write, pieces);
    f.set("hang", 1);
    f.set("max_in_flight", 0);
    CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
    CHECK(b.check(q) == nixl::status::in_progress);
    CHECK(f.get("max_in_flight") <= 128);
    CHECK(b.release(q) == nixl::status::success);
    f.set("hang", 0);
    CHECK(f.get("in_flight") == 0);
    CHECK(b.free_batches() == b.pool_size());
    CHECK(wait(b, q, b.post(q, std::nullopt)) == nixl::status::success);  // posted again
    CHECK(b.release(q) == nixl::status::success);
  }
}

TEST_CASE_METHOD(data_file, "gds: GDS_MT hands each chunk to the thread that went idle last",
                 "[gds]") {
  auto b = make<mt_b>(p<mt_b>({{"thread_count", "8"}, {"max_request_size", "4096"}}));
  buffer src(64 * 1024);
  src.fill(8);
  rig<mt_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  CHECK(b.idle_threads() == 8);
  SECTION("one chunk per request: always the same thread") {
    f.set("sync_threads", 0);
    for (int i = 0; i < 100; ++i)
      REQUIRE(r.run(i % 2 == 0 ? nixl::xfer_op::write : nixl::xfer_op::read, {{0, 0, 4096}}) ==
              nixl::status::success);
    CHECK(f.get("sync_threads") == 1);
  }
  // k chunks per request, each taking 2 ms: the same k threads every time, side by side
  const auto side_by_side = [&](long k) {
    f.set("sync_threads", 0);
    f.set("max_sync_running", 0);
    f.set("delay_us", 2000);
    for (int i = 0; i < 20; ++i)
      REQUIRE(r.run(nixl::xfer_op::write, {{0, 0, static_cast<std::size_t>(k) * 4096}}) ==
              nixl::status::success);
    CHECK(f.get("sync_threads") == k);
    CHECK(f.get("max_sync_running") >= 2);
    CHECK(f.get("max_sync_running") <= k);
  };
  SECTION("four chunks per request") {
    side_by_side(4);
  }
  SECTION("eight chunks per request: the post wakes one thread, and the woken wake the rest") {
    // each thread's chunk runs only once the thread that wakes it ran: a chunk whose thread
    // is never woken would leave its request unfinished
    side_by_side(8);
  }
  CHECK(b.idle_threads() == 8);  // a finished request leaves every thread idle
}

TEST_CASE_METHOD(data_file, "gds: GDS_MT with many requests: queued, canceled, released in flight",
                 "[gds]") {
  constexpr std::size_t count = 1000, len = 4096;
  buffer src(count * len), dst(count * len);
  src.fill(77);
  auto b = make<mt_b>(p<mt_b>({{"thread_count", "2"}, {"max_request_size", "4096"}}));
  rig<mt_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  const auto many = scattered(count, len);
  SECTION("a request released while queued never runs; those ahead of it finish") {
    mt_b::request a, c, q;
    r.prepare(a, nixl::xfer_op::write, {{0, 0, 4 * len}});              // 4 chunks
    r.prepare(c, nixl::xfer_op::write, {{4 * len, 4 * len, 4 * len}});  // 4 chunks
    r.prepare(q, nixl::xfer_op::write, many);                           // 1000 chunks
    f.set("delay_us", 20'000);
    const long calls0 = f.get("sync_calls");
    CHECK(b.post(a, std::nullopt) == nixl::status::in_progress);
    CHECK(b.post(c, std::nullopt) == nixl::status::in_progress);
    CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(b.release(q) == nixl::status::success);  // still queued behind a and c
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500));
    CHECK(b.check(q) == nixl::status::not_posted);
    CHECK(wait(b, a, nixl::status::in_progress) == nixl::status::success);
    CHECK(wait(b, c, nixl::status::in_progress) == nixl::status::success);
    CHECK(f.get("sync_calls") - calls0 == 8);  // none of the 1000
    CHECK(b.release(a) == nixl::status::success);
    CHECK(b.release(c) == nixl::status::success);
  }
  SECTION("a request of 1000 descriptors released in flight stops, bounded") {
    release_in_flight(f, b, r, many, std::chrono::milliseconds(1), std::chrono::milliseconds(10),
                      static_cast<long>(count) - 1);
    CHECK(b.idle_threads() == 2);
  }
  SECTION("1000 descriptors, then many small requests at once, all finish") {
    REQUIRE(r.run(nixl::xfer_op::write, many) == nixl::status::success);
    rig<mt_b> back(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    std::vector<mt_b::request> qs(50);
    for (std::size_t i = 0; i < qs.size(); ++i)
      back.prepare(qs[i], nixl::xfer_op::read, {{many[i].mem_off, many[i].file_off, len}});
    for (auto& q : qs) CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
    for (auto& q : qs) CHECK(wait(b, q, nixl::status::in_progress) == nixl::status::success);
    for (auto& q : qs) CHECK(b.release(q) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), qs.size() * len) == 0);
    REQUIRE(back.run(nixl::xfer_op::read, many) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  }
}

TEST_CASE_METHOD(data_file,
                 "gds: DRAM moved synchronously keeps max_request_size in compatibility mode",
                 "[gds]") {
  // dram_batch false (the default): the backend's threads move DRAM chunks with synchronous
  // calls.
  auto b = make<gds_b>(params_for<gds_b>(
      lib,
      {{"compat_mode", "true"}, {"compat_chunk_size", "16384"}, {"max_request_size", "131072"}}));
  buffer src(256 * KiB), dst(256 * KiB);
  src.fill(12);
  const long calls0 = f.get("sync_calls"), submits0 = f.get("submits");
  f.set("max_sync", 0);
  {
    rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::write, {{0, 0, 256 * KiB}}) == nixl::status::success);
  }
  {
    rig<gds_b> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::read, {{0, 0, 256 * KiB}}) == nixl::status::success);
  }
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  CHECK(f.get("sync_calls") - calls0 == 4);  // 2 chunks of 128 KiB each way, not 16 of 16 KiB
  CHECK(f.get("max_sync") == static_cast<long>(128 * KiB));
  CHECK(f.get("submits") == submits0);
}

TEST_CASE(
    "gds: dram_batch acts with nvidia-fs only: in compatibility mode host memory goes to "
    "the threads",
    "[gds]") {
  // libcufile 1.15 in compatibility mode mishandles host memory in batch entries (docs/gds.md).
  fake f;
  scratch tmp;
  fd_guard fd{::open((tmp / "data").c_str(), O_RDWR | O_CREAT, 0600)};
  buffer src(256 * KiB), dst(256 * KiB);
  src.fill(21);
  const bool compat = GENERATE(true, false);
  DYNAMIC_SECTION((compat ? "compatibility mode" : "nvidia-fs")) {
    // Built from the parameters alone (make() lets the batch path act in compat mode).
    gds_b b(gds_b::config::from_params(
                params_for<gds_b>(lib, {{"compat_mode", compat ? "true" : "false"},
                                        {"dram_batch", "true"},
                                        {"compat_chunk_size", "65536"},
                                        {"max_request_size", "65536"}})),
            nixl::backend_context{"gds-test-GDS"});
    const long calls0 = f.get("sync_calls"), submits0 = f.get("submits");
    {
      rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
      REQUIRE(r.run(nixl::xfer_op::write, {{0, 0, 256 * KiB}}) == nixl::status::success);
    }
    rig<gds_b> r(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::read, {{0, 0, 256 * KiB}}) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
    if (compat) {
      CHECK(f.get("sync_calls") - calls0 == 8);  // 4 chunks of 64 KiB each way
      CHECK(f.get("submits") == submits0);
    } else {
      CHECK(f.get("sync_calls") == calls0);
      CHECK(f.get("submits") > submits0);
    }
  }
}

TEMPLATE_TEST_CASE(
    "gds: a file system that fills ends the WRITE with an error; the backend goes on", "[gds]",
    gds_b, mt_b) {
  // GDS: the batch API and (its default for DRAM) synchronous calls; GDS_MT: its threads.
  const bool batch = GENERATE(true, false);
  if (!batch && !std::is_same_v<TestType, gds_b>) return;
  DYNAMIC_SECTION((batch ? "batch API" : "synchronous")) {
    fake f;
    // cuFile refuses tmpfs, so a small ext4 on a loop device.
    small_fs fs(small_fs::type::ext4, 4 << 20);
    NIXL_REQUIRE_MOUNT(fs);
    fd_guard fd(::open((fs / "data").c_str(), O_RDWR | O_CREAT, 0600));
    auto b = make<TestType>(batch ? p<TestType>() : params_for<TestType>(lib));
    const std::size_t part = 256 << 10, big = 8 << 20;
    buffer buf(part + big), back(2 * part);
    buf.fill(6);
    rig<TestType> r(b, nixl::mem_kind::dram, buf.addr(), buf.size(), 0, fd.fd);
    rig<TestType> rd(b, nixl::mem_kind::dram, back.addr(), back.size(), 0, fd.fd);
    REQUIRE(r.run(nixl::xfer_op::write, {{0, 0, part}}) == nixl::status::success);
    // Larger than what is free: an error, not success after a short write, and within the wait.
    CHECK(r.run(nixl::xfer_op::write, {{part, part, big}}) == nixl::status::backend);
    REQUIRE(rd.run(nixl::xfer_op::read, {{0, 0, part}}) == nixl::status::success);
    CHECK(back.holds(6, 0, part, 0));
    // The partial tail dropped, a WRITE that fits succeeds on the same backend and reads back.
    REQUIRE(::ftruncate(fd.fd, static_cast<off_t>(part)) == 0);
    CHECK(r.run(nixl::xfer_op::write, {{part, part, part}}) == nixl::status::success);
    back.set(std::byte{0});
    REQUIRE(rd.run(nixl::xfer_op::read, {{0, 0, 2 * part}}) == nixl::status::success);
    CHECK(back.holds(6, 0, 2 * part, 0));
    CHECK(f.get("in_flight") == 0);
  }
}

TEST_CASE_METHOD(data_file, "gds: post hands DRAM chunks to the threads and waits for no I/O",
                 "[gds]") {
  // Synchronous calls hang until the knob is unset; a watchdog unsets it after 10 s, so a post
  // that waited for them would return only then, and the test would fail, not hang.
  auto b = make<gds_b>(params_for<gds_b>(lib, {{"max_request_size", "65536"}}));
  CHECK(b.io_threads() == 2);
  buffer src(256 * KiB), dst(256 * KiB);
  src.fill(9);
  hang_guard hang(f, "hang_sync");
  rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  gds_b::request q;
  r.prepare(q, nixl::xfer_op::write, {{0, 0, 256 * KiB}});  // 4 chunks of 64 KiB
  CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
  CHECK_FALSE(hang.fired());
  // Both threads take a chunk and wait inside their calls; the request is in progress.
  CHECK(wait_until([&] { return f.get("sync_running") == 2; }));
  CHECK(b.check(q) == nixl::status::in_progress);
  CHECK(b.idle_io_threads() == 0);
  hang.release();
  CHECK(wait(b, q, nixl::status::in_progress) == nixl::status::success);
  CHECK_FALSE(hang.stop());
  CHECK(b.release(q) == nixl::status::success);
  rig<gds_b> rd(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
  REQUIRE(rd.run(nixl::xfer_op::read, {{0, 0, 256 * KiB}}) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  CHECK(wait_until([&] { return b.idle_io_threads() == 2; }));
}

TEST_CASE_METHOD(data_file, "gds: a failing DRAM chunk ends the request once no chunk of it runs",
                 "[gds]") {
  // 16 chunks of 4 KiB on two threads, 20 ms each; the first fails at once. The request reports
  // `backend` only when the other thread's chunk has ended, and the chunks not started never run.
  auto b = make<gds_b>(params_for<gds_b>(lib, {{"max_request_size", "4096"}}));
  buffer src(16 * 4096);
  src.fill(4);
  rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  gds_b::request q;
  r.prepare(q, nixl::xfer_op::write, {{0, 0, 16 * 4096}});
  const long calls0 = f.get("sync_calls");
  f.set("delay_us", 20'000);
  f.set("fail_io", 1);
  const nixl::status st = wait(b, q, b.post(q, std::nullopt));
  CHECK(st == nixl::status::backend);
  CHECK(f.get("sync_running") == 0);  // nothing of it runs once it reported its end
  const long calls = f.get("sync_calls") - calls0;
  CHECK(calls < 16);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(f.get("sync_calls") - calls0 == calls);
  f.set("delay_us", 0);
  // The same request goes again after its release.
  CHECK(b.release(q) == nixl::status::success);
  r.prepare(q, nixl::xfer_op::write, {{0, 0, 16 * 4096}});
  CHECK(wait(b, q, b.post(q, std::nullopt)) == nixl::status::success);
}

TEST_CASE_METHOD(data_file, "gds: a post of many batch entries leaves their submission to a thread",
                 "[gds]") {
  // cuFileBatchIOSubmit hangs until the knob is unset (a watchdog unsets it after 10 s: a post
  // that submitted itself would return only then, and the test would fail, not hang).
  auto b = make<gds_b>(p<gds_b>({{"io_threads", "1"}, {"batch_limit", "16"}}));
  buffer src(16 * 4096), dst(16 * 4096);
  src.fill(21);
  rig<gds_b> r(b, nixl::mem_kind::dram, src.addr(), src.size(), 0, fd.fd);
  SECTION("one entry: the post submits it itself") {
    gds_b::request q;
    r.prepare(q, nixl::xfer_op::write, {{0, 0, 4096}});
    const long submits0 = f.get("submits");
    const auto st = b.post(q, std::nullopt);
    CHECK(f.get("submits") - submits0 == 1);  // before post returned
    CHECK(wait(b, q, st) == nixl::status::success);
    CHECK(b.release(q) == nixl::status::success);
  }
  SECTION("16 entries: a thread submits them; a request queued behind it releases at once") {
    hang_guard hang(f, "hang_submit");
    const long submits0 = f.get("submits");
    gds_b::request q, later;
    r.prepare(q, nixl::xfer_op::write, scattered(16, 4096));
    r.prepare(later, nixl::xfer_op::write, scattered(16, 4096));
    CHECK(b.post(q, std::nullopt) == nixl::status::in_progress);
    CHECK(b.post(later, std::nullopt) == nixl::status::in_progress);  // queued: one thread
    CHECK_FALSE(hang.fired());
    CHECK(b.check(q) == nixl::status::in_progress);
    CHECK(b.free_batches() == b.pool_size() - 2);
    // Released before a thread got to it: nothing of it reached cuFile, its handle is back.
    CHECK(b.release(later) == nixl::status::success);
    CHECK(b.free_batches() == b.pool_size() - 1);
    CHECK(f.get("submits") == submits0);
    hang.release();
    CHECK(wait(b, q, nixl::status::in_progress) == nixl::status::success);
    CHECK_FALSE(hang.stop());
    CHECK(f.get("submits") - submits0 == 1);  // q's one batch of 16 entries
    CHECK(b.release(q) == nixl::status::success);
    CHECK(b.free_batches() == b.pool_size());
    rig<gds_b> rd(b, nixl::mem_kind::dram, dst.addr(), dst.size(), 0, fd.fd);
    REQUIRE(rd.run(nixl::xfer_op::read, scattered(16, 4096)) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  }
}
