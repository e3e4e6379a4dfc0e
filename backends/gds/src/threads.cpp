// The GDS_MT backend: a pool of threads making synchronous cuFileRead/cuFileWrite calls.

#include <nixl/backends/gds_mt.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

#include <nixl/log.hpp>

namespace nixl::gds::detail {

thread_pool::thread_pool(const cufile::library& lib, unsigned threads, std::string_view who,
                         std::chrono::microseconds spin)
    : lib_(&lib), who_(who), spin_(spin) {
  workers_.reserve(threads);
  idle_.reserve(threads);
  try {
    for (unsigned i = 0; i < threads; ++i) {
      workers_.push_back(std::make_unique<worker>());
      worker* w = workers_.back().get();
      w->t = std::thread([this, w, i] { run(*w, i); });
      std::lock_guard g(mu_);
      idle_.push_back(i);
    }
  } catch (...) {
    // No work was handed out: every started thread waits on its semaphore.
    for (auto& w : workers_) {
      if (!w->t.joinable()) continue;
      w->j = nullptr;
      w->wake.release();
      w->t.join();
    }
    throw;
  }
}

thread_pool::~thread_pool() {
  {
    std::lock_guard g(mu_);
    stop_ = true;
    // Jobs still queued are dropped: their chunks count as finished.
    for (job* j = head_; j != nullptr;) {
      job* n = j->next_queued;
      j->finished.fetch_add(j->units() - j->claimed, std::memory_order_acq_rel);
      j->claimed = j->units();
      j->next_queued = nullptr;
      j->keep.reset();
      j = n;
    }
    head_ = tail_ = nullptr;
    // Idle threads are woken with nothing to do; busy ones see stop_ after their chunk.
    for (unsigned k : idle_) {
      workers_[k]->j = nullptr;
      workers_[k]->wake.release();
    }
    idle_.clear();
  }
  for (auto& w : workers_) w->t.join();
}

void thread_pool::claim(job*& j, std::size_t& i, std::shared_ptr<job>& hold) noexcept {
  j = head_;
  i = j->claimed++;
  if (j->claimed == j->units()) {  // its last chunk: off the queue
    head_ = j->next_queued;
    if (head_ == nullptr) tail_ = nullptr;
    j->next_queued = nullptr;
    hold = std::move(j->keep);
  } else {
    hold = j->keep;  // a copy: the job outlives this chunk
  }
}

void thread_pool::enqueue(const std::shared_ptr<job>& self) noexcept {
  worker* first = nullptr;
  {
    std::lock_guard g(mu_);
    self->keep = self;  // a copy: no allocation
    self->next_queued = nullptr;
    if (tail_ != nullptr)
      tail_->next_queued = self.get();
    else
      head_ = self.get();
    tail_ = self.get();
    if (stop_) return;
    // The threads that went idle last get the chunks: the top of the stack first. Each chunk
    // is in its thread's slot, so it runs without the lock. The k-th thread handed one is woken
    // by the ((k - 1) / 2)-th (a tree: set up before any of them is woken), the first by this.
    const std::size_t top = idle_.size();
    const auto handed = [&](std::size_t k) -> worker& { return *workers_[idle_[top - 1 - k]]; };
    std::size_t k = 0;
    for (; k < top && head_ != nullptr; ++k) {
      worker& w = handed(k);
      claim(w.j, w.i, w.hold);
      w.kids[0] = w.kids[1] = nullptr;
      if (k > 0) handed((k - 1) / 2).kids[(k - 1) % 2] = &w;
    }
    if (k > 0) first = &handed(0);
    idle_.resize(top - k);
  }
  if (first != nullptr) first->wake.release();
}

void thread_pool::withdraw(job& j) noexcept {
  std::shared_ptr<job> keep;  // dropped after the lock
  std::lock_guard g(mu_);
  job* prev = nullptr;
  for (job* q = head_; q != nullptr; prev = q, q = q->next_queued) {
    if (q != &j) continue;
    if (prev != nullptr)
      prev->next_queued = q->next_queued;
    else
      head_ = q->next_queued;
    if (tail_ == q) tail_ = prev;
    q->next_queued = nullptr;
    q->finished.fetch_add(q->units() - q->claimed, std::memory_order_acq_rel);
    q->claimed = q->units();
    keep = std::move(q->keep);
    break;
  }
}

bool thread_pool::cancel(job& j, std::chrono::milliseconds timeout) noexcept {
  if (!j.busy()) return true;
  j.canceled.store(true, std::memory_order_release);
  withdraw(j);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (j.busy()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      try {
        log::error(
            "{}: {} chunk(s) of a released request still run after cancel_timeout_ms={}; "
            "release answers repost_active and the chunks finish on their own",
            who_, j.units() - j.finished.load(), timeout.count());
      } catch (...) {
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

unsigned thread_pool::idle() const noexcept {
  std::lock_guard g(mu_);
  return static_cast<unsigned>(idle_.size());
}

void thread_pool::await_work(worker& w) const noexcept {
  if (spin_.count() > 0) {
    // A stream of small requests hands the next chunk over within microseconds: looking for it
    // a while spares the poster the wake-up (a futex call, and the scheduler's latency).
    const auto until = std::chrono::steady_clock::now() + spin_;
    do {
      if (w.wake.try_acquire()) return;
    } while (std::chrono::steady_clock::now() < until);
  }
  w.wake.acquire();
}

void thread_pool::run(worker& w, unsigned self) noexcept {
  for (;;) {
    await_work(w);
    for (worker*& k : w.kids) {
      if (k != nullptr) std::exchange(k, nullptr)->wake.release();
    }
    job* j = w.j;
    std::size_t i = w.i;
    std::shared_ptr<job> hold = std::move(w.hold);
    if (j == nullptr) return;  // stop
    for (;;) {
      execute(*j, i);
      job* next = nullptr;
      std::size_t ni = 0;
      std::shared_ptr<job> next_hold;
      bool quit = false;
      {
        std::lock_guard g(mu_);
        if (stop_)
          quit = true;
        else if (head_ != nullptr)
          claim(next, ni, next_hold);  // keep going while chunks are queued
        else
          idle_.push_back(self);  // before the chunk counts: the next post finds this thread
      }
      j->finished.fetch_add(1, std::memory_order_acq_rel);
      hold.reset();
      if (quit) return;
      if (next == nullptr) break;
      j = next;
      i = ni;
      hold = std::move(next_hold);
    }
  }
}

void thread_pool::execute(job& j, std::size_t i) noexcept {
  if (j.task != nullptr) {
    if (!j.canceled.load(std::memory_order_acquire) && !j.task(j))
      j.failed.store(true, std::memory_order_release);
    return;
  }
  const chunk& c = j.work.chunks[i];
  if (!j.failed.load(std::memory_order_acquire) && !j.canceled.load(std::memory_order_acquire)) {
    if (c.device >= 0) use_device(c.device);
    errno = 0;
    const ssize_t r = j.work.write
                          ? lib_->cuFileWrite(c.fh, c.buf, c.size, c.file_offset, c.buf_offset)
                          : lib_->cuFileRead(c.fh, c.buf, c.size, c.file_offset, c.buf_offset);
    if (r < 0 || static_cast<std::size_t>(r) != c.size) {
      if (!j.bad_taken.exchange(true, std::memory_order_acq_rel)) {
        j.bad_chunk = i;
        j.bad_ret = r;
        report_chunk(who_, j.work.write, c, r);
      }
      j.failed.store(true, std::memory_order_release);
    }
  }
}

}  // namespace nixl::gds::detail

namespace nixl::gds_mt {

backend::backend(const config& cfg, const nixl::backend_context& ctx)
    : file_backend("GDS_MT", gds::resolve_compat(cfg.compat_mode), ctx.agent_name, cfg.cufile_path),
      cfg_(cfg),
      pool_(std::make_unique<gds::detail::thread_pool>(state_->lib(), cfg.thread_count, "GDS_MT",
                                                       cfg.thread_spin)) {
  if (compat_)
    log::info(
        "GDS_MT backend ({}): {} threads, cuFile compatibility mode: chunks of {} bytes (up to "
        "{} for large requests), cuFile {}",
        ctx.agent_name, cfg.thread_count, std::min(cfg.compat_chunk_size, cfg.max_request_size),
        cfg.max_request_size, state_->lib().path);
  else
    log::info("GDS_MT backend ({}): {} threads, chunks of {} bytes, cuFile {}", ctx.agent_name,
              cfg.thread_count, cfg.max_request_size, state_->lib().path);
}

std::size_t backend::chunk_size_for(std::size_t total) const noexcept {
  return gds::chunk_size(compat_, cfg_.max_request_size, cfg_.compat_chunk_size,
                         gds::max_compat_chunks, total);
}

backend::~backend() = default;
backend::backend(backend&&) noexcept = default;
backend& backend::operator=(backend&&) noexcept = default;

void backend::prepare(request& req, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer&) {
  if (req.job && req.job->busy())
    raise(status::repost_active,
          "GDS_MT prepare: the request is still in flight; release it first");
  auto j = std::make_shared<gds::detail::job>();
  std::size_t total = 0;
  for (const auto& d : local) total += d.len;
  j->work = gds::detail::make_plan("GDS_MT", op, local, remote, chunk_size_for(total));
  req.job = std::move(j);
}

nixl::status backend::post(request& req, nixl::notif_arg notif) noexcept {
  if (notif.has_value()) return nixl::status::not_supported;
  if (!req.job) return nixl::status::invalid_param;
  auto& j = *req.job;
  if (j.busy()) return nixl::status::repost_active;
  j.start();
  if (j.work.chunks.empty()) return nixl::status::success;
  pool_->enqueue(req.job);
  return nixl::status::in_progress;
}

nixl::status backend::check(request& req) noexcept {
  if (!req.job || !req.job->posted.load(std::memory_order_acquire)) return nixl::status::not_posted;
  auto& j = *req.job;
  if (j.finished.load(std::memory_order_acquire) < j.units()) return nixl::status::in_progress;
  if (j.failed.load(std::memory_order_acquire)) return nixl::status::backend;
  if (j.canceled.load(std::memory_order_acquire)) return nixl::status::canceled;
  return nixl::status::success;
}

nixl::status backend::release(request& req) noexcept {
  if (!req.job) return nixl::status::success;
  if (!pool_->cancel(*req.job, cfg_.cancel_timeout)) return nixl::status::repost_active;
  req.job.reset();
  return nixl::status::success;
}

unsigned backend::thread_count() const noexcept {
  return pool_->threads();
}

unsigned backend::idle_threads() const noexcept {
  return pool_->idle();
}

}  // namespace nixl::gds_mt
