// The shared completion record and slot pool: phases, results, orphans, stable addresses.

#include "nixl_test/catch.hpp"

#include <thread>
#include <vector>

#include <nixl/detail/completion.hpp>

using nixl::status;
using nixl::detail::completion;
using nixl::detail::phase;
using nixl::detail::slot_pool;

TEST_CASE("completion: idle, busy, done and reset", "[completion]") {
  completion c;
  CHECK(c.state() == phase::idle);
  CHECK(c.result() == status::not_posted);
  c.start();
  CHECK(c.busy());
  CHECK(c.result() == status::in_progress);
  CHECK(c.finish(status::remote_disconnect));
  CHECK(c.ended());
  CHECK(c.result() == status::remote_disconnect);
  CHECK_FALSE(c.detach());  // an ended request cannot be orphaned
  c.start();                // a repost starts from a clean result
  CHECK(c.finish(status::success));
  CHECK(c.result() == status::success);
  c.reset();
  CHECK(c.result() == status::not_posted);
}

TEST_CASE("completion: a detached request is handed back by its finisher", "[completion]") {
  completion c;
  CHECK_FALSE(c.detach());  // not busy
  c.start();
  CHECK(c.detach());
  CHECK(c.state() == phase::orphan);
  CHECK(c.result() == status::not_posted);
  CHECK_FALSE(c.finish(status::success));  // the caller reclaims the record
}

TEST_CASE("completion: exactly one of finish and detach wins a race", "[completion]") {
  for (int round = 0; round < 200; ++round) {
    completion c;
    c.start();
    bool detached = false, finished = false;
    std::thread a([&] { detached = c.detach(); });
    std::thread b([&] { finished = c.finish(status::success); });
    a.join();
    b.join();
    // Either the finish came first (done; detach refused) or the detach did (finish says
    // reclaim). Never both, never neither.
    CHECK(detached != finished);
    CHECK(c.state() == (detached ? phase::orphan : phase::done));
  }
}

TEST_CASE("slot_pool: records are reused and keep their addresses", "[completion]") {
  struct slot {
    completion c;
    int made_by = 0;
  };
  slot_pool<slot> pool;
  int made = 0;
  auto make = [&] {
    auto s = std::make_unique<slot>();
    s->made_by = ++made;
    return s;
  };
  slot* a = pool.acquire(make);
  slot* b = pool.acquire(make);
  CHECK(a != b);
  CHECK(pool.size() == 2);
  CHECK(pool.free_count() == 0);
  pool.release(a);
  CHECK(pool.free_count() == 1);
  CHECK(pool.acquire(make) == a);  // reused, not made again
  CHECK(made == 2);
  std::vector<slot*> many;
  for (int i = 0; i < 100; ++i) many.push_back(pool.acquire());
  CHECK(pool.size() == 102);
  CHECK(a->made_by == 1);  // earlier records did not move while the pool grew
  int seen = 0;
  pool.for_each([&](const slot&) { ++seen; });
  CHECK(seen == 102);
}

TEST_CASE("completion: end from any phase, and copies", "[completion]") {
  completion c;
  CHECK(c.end(status::backend) == status::backend);  // idle -> done, no start needed
  CHECK(c.ended());
  CHECK(c.result() == status::backend);
  c.start();
  CHECK(c.end(status::success) == status::success);
  CHECK(c.result() == status::success);
  completion copy(c);
  CHECK(copy.result() == status::success);
  c.reset();
  copy = c;
  CHECK(copy.state() == phase::idle);
}

TEST_CASE("slot_pool: try_acquire never makes a record", "[completion]") {
  slot_pool<completion> pool;
  CHECK(pool.try_acquire() == nullptr);
  completion* a = pool.acquire();
  CHECK(pool.try_acquire() == nullptr);
  pool.release(a);
  CHECK(pool.try_acquire() == a);
  CHECK(pool.size() == 1);
}
