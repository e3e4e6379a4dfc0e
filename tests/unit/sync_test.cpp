// The agent's lock in thread_sync::rw (detail::sharded_rw_mutex): readers together, a writer
// alone; and what the lock keeps safe while threads post on one agent (deregistration refused
// while requests live, a peer removed under posting threads).
#include <nixl/agent.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/fixtures.hpp"

using namespace nixl::test;
using nixl::status;
using nixl::xfer_op;
using nixl::detail::sharded_rw_mutex;
using namespace std::chrono_literals;

TEST_CASE("sharded_rw_mutex: a writer excludes every reader, readers see its whole update") {
  sharded_rw_mutex m;
  // Plain integers: a reader that ran alongside the writer would see them differ (and TSan
  // would report the race).
  long a = 0, b = 0;
  std::atomic<bool> stop{false};
  std::atomic<long> torn{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&] {
      const auto s = sharded_rw_mutex::this_thread_slot();
      while (!stop.load(std::memory_order_relaxed)) {
        m.lock_shared(s);
        if (a != b) ++torn;
        m.unlock_shared(s);
        ++reads;
      }
    });
  for (int i = 0; i < 2000; ++i) {
    m.lock();
    ++a;
    std::this_thread::yield();
    ++b;
    m.unlock();
  }
  while (reads.load() < 1000) std::this_thread::yield();
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(torn == 0);
  CHECK(a == 2000);
  CHECK(b == 2000);
}

TEST_CASE("sharded_rw_mutex: readers hold it together, also in one slot") {
  sharded_rw_mutex m;
  m.lock_shared(0);
  std::atomic<bool> entered{false};
  std::thread other([&] {
    m.lock_shared(0);  // the same slot as the first reader
    entered = true;
    m.unlock_shared(0);
  });
  other.join();  // would hang if readers excluded each other
  CHECK(entered);
  m.unlock_shared(0);
}

TEST_CASE("sharded_rw_mutex: a writer waits for the readers inside, readers wait for it") {
  sharded_rw_mutex m;
  const auto s = sharded_rw_mutex::this_thread_slot();
  m.lock_shared(s);
  std::atomic<bool> writing{false}, wrote{false};
  std::thread writer([&] {
    m.lock();
    writing = true;
    std::this_thread::sleep_for(20ms);
    wrote = true;
    m.unlock();
  });
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(writing);  // the reader is still inside
  m.unlock_shared(s);
  while (!writing) std::this_thread::yield();
  m.lock_shared(s);  // blocks until the writer is done
  CHECK(wrote);
  m.unlock_shared(s);
  writer.join();
}

TEST_CASE("rw agent: control calls run while threads post, with the safety of the lock") {
  test_agent a("a", {.sync = nixl::thread_sync::rw}), b("b", {.sync = nixl::thread_sync::rw});
  a.create_backend<memcpy_backend>();
  b.create_backend<memcpy_backend>();
  constexpr int threads = 3;
  constexpr std::size_t block = 256;
  buffer src(threads * block), dst(threads * block), spare(4096);
  src.iota();
  connect_pair(a, b, src, dst);
  std::atomic<int> ready{0};
  std::atomic<bool> stop{false};
  std::atomic<long> posted{0}, bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      nixl::xfer_list<nixl::dram_t> l{{src.addr(t * block), block, 0}};
      nixl::xfer_list<nixl::dram_t> r{{dst.addr(t * block), block, 0}};
      auto q = a.create_request(xfer_op::write, l, r, "b");
      ++ready;
      while (!stop.load()) {
        auto st = q.post();
        if (st == status::not_found) break;  // the peer was removed
        if (st != status::success) ++bad;
        ++posted;
      }
      if (q.release() != status::success) ++bad;
    });
  while (ready.load() < threads) std::this_thread::yield();
  // Exclusive calls interleave with the posting threads.
  for (int i = 0; i < 20; ++i) {
    a.register_memory(spare.reg());
    a.deregister_memory(spare.reg());
  }
  while (posted.load() < 100) std::this_thread::yield();
  // Removing the peer under the posting threads: their next post says not_found.
  a.invalidate_remote_metadata("b");
  stop = true;
  for (auto& t : ts) t.join();
  CHECK(bad == 0);
  CHECK(src.bytes == dst.bytes);
  CHECK(code_of([&] { a.deregister_memory(src.reg()); }) == status::success);
}

TEST_CASE("thread_index: threads alive at once hold different indices, exited ones are reused") {
  using nixl::detail::thread_index;
  const std::uint32_t main_index = thread_index();
  CHECK(thread_index() == main_index);  // stable within a thread

  // Four threads alive at once: four different indices, none the main thread's.
  auto live_set = [&] {
    std::vector<std::uint32_t> got(4);
    std::atomic<int> arrived{0};
    std::vector<std::thread> ts;
    for (std::size_t t = 0; t < got.size(); ++t)
      ts.emplace_back([&, t] {
        got[t] = thread_index();
        arrived.fetch_add(1);
        while (arrived.load() < static_cast<int>(got.size())) std::this_thread::yield();
      });
    for (auto& t : ts) t.join();
    std::sort(got.begin(), got.end());
    return got;
  };
  const auto first = live_set();
  CHECK(std::adjacent_find(first.begin(), first.end()) == first.end());
  CHECK(std::find(first.begin(), first.end(), main_index) == first.end());

  // Once they have exited, a new set of four reuses the same indices: a program that starts new
  // threads for each phase keeps them on distinct workers (index % workers), phase after phase.
  for (int round = 0; round < 3; ++round) CHECK(live_set() == first);

  // One thread after another: each gets the lowest free index, the same every time.
  std::uint32_t a = 0, b = 0;
  std::thread([&] { a = thread_index(); }).join();
  std::thread([&] { b = thread_index(); }).join();
  CHECK(a == b);
  CHECK(a != main_index);
}
