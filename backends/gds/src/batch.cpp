// The GDS backend: its pool of cuFile batch handles, and requests submitted on them.

#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds/check.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <nixl/log.hpp>

namespace nixl::gds {
namespace detail {

batch_pool::batch_pool(const cufile::library& lib, unsigned size, unsigned limit)
    : lib_(&lib), size_(size), limit_(limit) {
  std::vector<batch_slot*> made;
  made.reserve(size);
  std::size_t ready = 0;  // handles set up
  try {
    for (unsigned i = 0; i < size; ++i) {
      batch_slot* s = slots_.acquire([limit] {
        auto s = std::make_unique<batch_slot>();
        s->params.resize(limit);
        s->events.resize(limit);
        s->seen.resize(limit);
        return s;
      });
      made.push_back(s);
      NIXL_CUFILE_CHECK_HINT(
          lib.cuFileBatchIOSetUp(&s->handle, limit),
          fmt::format("GDS: setting up batch handle {} of batch_pool_size {} with batch_limit "
                      "{}; lower batch_pool_size or batch_limit (cufile.json limits them with "
                      "io_batchsize)",
                      i, size, limit));
      ++ready;
    }
  } catch (...) {
    for (std::size_t i = 0; i < ready; ++i) lib.cuFileBatchIODestroy(made[i]->handle);
    throw;
  }
  for (batch_slot* s : made) slots_.release(s);
}

batch_pool::~batch_pool() {
  slots_.for_each([this](const batch_slot& s) {
    if (s.handle != nullptr) lib_->cuFileBatchIODestroy(s.handle);
  });
}

void batch_pool::take(std::size_t n, std::vector<batch_slot*>& out) noexcept {
  while (n-- > 0 && out.size() < out.capacity()) {
    batch_slot* s = slots_.try_acquire();
    if (s == nullptr) break;
    out.push_back(s);
  }
}

void batch_pool::give(batch_slot* s) noexcept {
  s->submitted = s->finished = 0;
  slots_.release(s);  // the pool's free list has room for every record: never allocates
}

void batch_pool::renew(batch_slot* s) noexcept {
  lib_->cuFileBatchIODestroy(s->handle);
  s->handle = nullptr;
  if (!NIXL_CUFILE_WARN(lib_->cuFileBatchIOSetUp(&s->handle, limit_))) {
    s->handle = nullptr;
    lose(s);
    return;
  }
  give(s);
}

void batch_pool::lose(batch_slot*) noexcept {
  try {
    log::error("GDS: a cuFile batch handle leaves the pool for good ({} of {} left)", free_count(),
               size_);
  } catch (...) {
  }
}

bool launch(const cufile::library& lib, std::span<batch_slot* const> slots) noexcept {
  for (std::size_t k = 0; k < slots.size(); ++k) {
    batch_slot& s = *slots[k];
    if (s.submitted == 0) continue;
    if (s.device >= 0) use_device(s.device);
    if (!NIXL_CUFILE_WARN(lib.cuFileBatchIOSubmit(s.handle, s.submitted, s.params.data(), 0))) {
      for (; k < slots.size(); ++k) slots[k]->submitted = 0;  // none of these runs
      return false;
    }
  }
  return true;
}

namespace {
bool launch_task(job& j) noexcept {
  auto& l = static_cast<launch_job&>(j);
  l.ran = true;
  return launch(*l.lib, l.slots);
}
}  // namespace

}  // namespace detail

backend::backend(const config& cfg, const nixl::backend_context& ctx)
    : file_backend("GDS", resolve_compat(cfg.compat_mode), ctx.agent_name, cfg.cufile_path),
      cfg_(cfg),
      inflight_cap_(cfg.max_inflight != 0 ? cfg.max_inflight : (compat_ ? cfg.batch_limit : 0)),
      pool_(std::make_unique<detail::batch_pool>(state_->lib(), cfg.batch_pool_size,
                                                 cfg.batch_limit)),
      threads_(std::make_unique<detail::thread_pool>(state_->lib(), cfg.io_threads, "GDS",
                                                     cfg.thread_spin)) {
  if (compat_)
    log::info(
        "GDS backend ({}): {} batch handles of {} entries, cuFile compatibility mode: chunks of "
        "{} bytes (up to {} for large requests), at most {} entries in flight per request, "
        "requests of up to {} bytes on its {} threads, cuFile {}",
        ctx.agent_name, cfg.batch_pool_size, cfg.batch_limit,
        std::min(cfg.compat_chunk_size, cfg.max_request_size), cfg.max_request_size,
        inflight_cap_ != 0 ? std::to_string(inflight_cap_) : std::string("all"),
        cfg.compat_thread_size, cfg.io_threads, state_->lib().path);
  else
    log::info("GDS backend ({}): {} batch handles of {} entries, chunks of {} bytes, cuFile {}",
              ctx.agent_name, cfg.batch_pool_size, cfg.batch_limit, cfg.max_request_size,
              state_->lib().path);
}

std::size_t backend::chunk_size_for(std::size_t total) const noexcept {
  return chunk_size(compat_, cfg_.max_request_size, cfg_.compat_chunk_size,
                    std::min<std::size_t>(inflight_cap_ != 0 ? inflight_cap_ : max_compat_chunks,
                                          batch_compat_chunks),
                    total);
}

std::size_t backend::slots_wanted(std::size_t chunks) const noexcept {
  const std::size_t limit = pool_->limit();
  if (inflight_cap_ == 0 || chunks <= inflight_cap_) return (chunks + limit - 1) / limit;
  // More chunks than may be in flight: enough handles for the cap, and at least two, so that
  // one is submitted again while the other still runs.
  return std::max<std::size_t>(2, (inflight_cap_ + limit - 1) / limit);
}

backend::~backend() = default;
backend::backend(backend&&) noexcept = default;
backend& backend::operator=(backend&&) noexcept = default;

namespace {
/// `j` itself when nothing else holds it, else a new one: a job a release gave up on may still
/// be held by a thread, and is dropped rather than reused.
template <class Job>
Job& own(std::shared_ptr<Job>& j) {
  if (!j || j.use_count() > 1) j = std::make_shared<Job>();
  return *j;
}
}  // namespace

bool backend::in_flight(const request& req) noexcept {
  return req.state.busy() || !req.slots.empty() || (req.sync && req.sync->busy()) ||
         (req.launch && req.launch->busy());
}

void backend::start_sync(request& req) noexcept {
  req.sync->start();
  threads_->enqueue(req.sync);
}

void backend::prepare(request& req, xfer_op op, std::span<const bound_desc<region>> local,
                      std::span<const bound_desc<remote_region>> remote, peer&) {
  if (in_flight(req))
    raise(status::repost_active, "GDS prepare: the request is still in flight; release it first");
  std::size_t total = 0;
  for (const auto& d : local) total += d.len;
  // Host-memory chunks go to the threads, which move them with synchronous calls: all of them
  // unless dram_batch, and in compatibility mode always (libcufile 1.15 mishandles host memory in
  // batch entries there, docs/gds.md). Those keep max_request_size: smaller ones would only add
  // calls (compatibility mode's bounce buffers cut each call anyway). In compatibility mode a
  // small request goes to the threads whole, VRAM too (compat_thread_size).
  const bool all_threads = compat_ && total <= cfg_.compat_thread_size;
  const bool host_batch =
      !all_threads && cfg_.dram_batch && (!compat_ || cfg_.host_batch_in_compat);
  req.plan = detail::make_plan("GDS", op, local, remote,
                               all_threads ? cfg_.max_request_size : chunk_size_for(total),
                               host_batch ? 0 : cfg_.max_request_size);
  auto& ch = req.plan.chunks;
  const auto sync_end =
      all_threads  ? ch.begin()
      : host_batch ? ch.end()
                   : std::stable_partition(ch.begin(), ch.end(),
                                           [](const detail::chunk& c) { return c.device >= 0; });
  if (sync_end != ch.end()) {
    detail::job& j = own(req.sync);
    j.work.write = req.plan.write;
    j.work.chunks.assign(sync_end, ch.end());
    j.posted.store(false, std::memory_order_relaxed);
    ch.erase(sync_end, ch.end());
  } else {
    req.sync.reset();
  }
  const std::size_t batches = slots_wanted(req.plan.chunks.size());
  req.slots.clear();
  req.slots.reserve(std::max<std::size_t>(1, std::min<std::size_t>(batches, pool_->size())));
  if (!req.plan.chunks.empty()) {
    detail::launch_job& l = own(req.launch);
    l.task = &detail::launch_task;
    l.lib = &state_->lib();
    l.slots.clear();
    l.slots.reserve(req.slots.capacity());
    l.posted.store(false, std::memory_order_relaxed);
  }
  req.next = req.done = 0;
  req.failing = false;
  req.state.reset();
}

void backend::fill(request& req, detail::batch_slot& s) noexcept {
  const auto& chunks = req.plan.chunks;
  std::size_t room = std::min<std::size_t>(pool_->limit(), chunks.size() - req.next);
  if (inflight_cap_ != 0) {
    // The cap, shared between the request's handles; what the others hold now counts too.
    std::size_t in_flight = 0;
    for (const detail::batch_slot* o : req.slots)
      if (o != &s) in_flight += o->submitted - o->finished;
    const std::size_t share = (inflight_cap_ + req.slots.size() - 1) / req.slots.size();
    const std::size_t left = in_flight < inflight_cap_ ? inflight_cap_ - in_flight : 0;
    room = std::min({room, share, left});
  }
  s.first = req.next;
  s.finished = 0;
  if (room == 0) {  // nothing may go now: the handle waits for the next poll
    s.submitted = 0;
    return;
  }
  const auto n = static_cast<unsigned>(room);
  for (unsigned j = 0; j < n; ++j) {
    const detail::chunk& c = chunks[req.next + j];
    auto& p = s.params[j];
    p = {};
    p.mode = cufile::CUFILE_BATCH;
    // Host memory is named by its own address: cuFile's batch path (libcufile 1.15, compatibility
    // mode) ignores devPtr_offset for it, so every entry would move the base's bytes
    // (bench/cuda/cufile_batch_probe, docs/gds.md).
    const bool host = c.device < 0;
    p.u.batch.devPtr_base = host ? static_cast<char*>(c.buf) + c.buf_offset : c.buf;
    p.u.batch.file_offset = c.file_offset;
    p.u.batch.devPtr_offset = host ? 0 : c.buf_offset;
    p.u.batch.size = c.size;
    p.fh = c.fh;
    p.opcode = req.plan.write ? cufile::CUFILE_WRITE : cufile::CUFILE_READ;
    p.cookie = reinterpret_cast<void*>(static_cast<std::uintptr_t>(j));
    s.seen[j] = 0;
  }
  s.device = chunks[req.next].device;
  s.submitted = n;
  req.next += n;
}

bool backend::submit(request& req, detail::batch_slot& s) noexcept {
  fill(req, s);
  detail::batch_slot* const one = &s;
  return detail::launch(state_->lib(), std::span(&one, 1));
}

void backend::settle_launch(request& req) noexcept {
  auto& l = *req.launch;
  l.posted.store(false, std::memory_order_relaxed);
  if (!l.ran)  // canceled before a thread got to it: nothing reached cuFile
    for (detail::batch_slot* s : l.slots) s->submitted = 0;
}

nixl::status backend::post(request& req, nixl::notif_arg notif) noexcept {
  if (notif.has_value()) return nixl::status::not_supported;
  if (in_flight(req)) return nixl::status::repost_active;
  req.next = req.done = 0;
  req.failing = false;
  if (req.plan.chunks.empty()) {
    if (!req.sync) return req.state.end(nixl::status::success);
    req.state.start();
    start_sync(req);
    return nixl::status::in_progress;
  }
  pool_->take(slots_wanted(req.plan.chunks.size()), req.slots);
  if (req.slots.empty()) {
    req.state.reset();
    try {
      log::error(
          "GDS: batch pool exhausted: all {} batch handles are held by requests in flight; "
          "post again once one completes, or raise batch_pool_size",
          pool_->size());
    } catch (...) {
    }
    return nixl::status::backend;
  }
  req.state.start();
  unsigned entries = 0;
  for (auto* s : req.slots) {
    if (req.next >= req.plan.chunks.size()) break;
    fill(req, *s);
    entries += s->submitted;
  }
  const bool handed_over = entries > inline_entries;
  if (handed_over) {  // a thread submits them, ahead of the DRAM chunks
    auto& l = *req.launch;
    l.slots.assign(req.slots.begin(), req.slots.end());  // within the capacity of prepare
    l.ran = false;
    l.start();
    threads_->enqueue(req.launch);
  }
  if (req.sync) start_sync(req);
  if (handed_over) return nixl::status::in_progress;
  if (!detail::launch(state_->lib(), req.slots)) return fail(req);
  return poll(req);
}

nixl::status backend::check(request& req) noexcept {
  return req.state.busy() ? poll(req) : req.state.result();
}

nixl::status backend::poll(request& req) noexcept {
  if (req.failing) return settle(req);
  if (req.launch && req.launch->posted.load(std::memory_order_acquire)) {
    // The batches a thread submits: nothing of them is polled before it did.
    if (req.launch->busy()) return nixl::status::in_progress;
    settle_launch(req);
    if (req.launch->failed.load(std::memory_order_acquire)) return fail(req);
  }
  if (req.sync && req.sync->failed.load(std::memory_order_acquire)) return fail(req);
  const auto& lib = state_->lib();
  bool bad = false;
  for (std::size_t k = 0; k < req.slots.size();) {
    detail::batch_slot& s = *req.slots[k];
    if (s.finished < s.submitted) {
      unsigned nr = s.submitted;
      struct timespec zero {};  // never waits: check() only polls
      if (!NIXL_CUFILE_WARN(lib.cuFileBatchIOGetStatus(s.handle, 0, &nr, s.events.data(), &zero)))
        return fail(req);
      nr = std::min(nr, s.submitted);
      for (unsigned i = 0; i < nr; ++i) {
        const auto& ev = s.events[i];
        const auto j = reinterpret_cast<std::uintptr_t>(ev.cookie);
        if (j >= s.submitted || s.seen[j] != 0) continue;
        const detail::chunk& c = req.plan.chunks[s.first + j];
        if ((ev.status & cufile::CUFILE_COMPLETE) != 0) {
          if (ev.ret != c.size) {
            detail::report_chunk("GDS", req.plan.write, c, static_cast<long long>(ev.ret));
            bad = true;
          }
        } else if ((ev.status & (cufile::CUFILE_FAILED | cufile::CUFILE_INVALID |
                                 cufile::CUFILE_CANCELED | cufile::CUFILE_TIMEOUT)) != 0) {
          detail::report_chunk("GDS", req.plan.write, c, static_cast<long long>(ev.ret));
          bad = true;
        } else {
          continue;  // waiting or pending
        }
        s.seen[j] = 1;
        ++s.finished;
      }
      if (bad) return fail(req);
    }
    if (s.finished < s.submitted) {
      ++k;
      continue;
    }
    req.done += s.submitted;
    s.submitted = 0;
    if (req.next < req.plan.chunks.size()) {
      if (!submit(req, s)) return fail(req);
      ++k;
      continue;
    }
    pool_->give(&s);
    req.slots[k] = req.slots.back();
    req.slots.pop_back();
  }
  if (!req.slots.empty() || req.done < req.plan.chunks.size()) return nixl::status::in_progress;
  if (req.sync) {
    if (req.sync->busy()) return nixl::status::in_progress;
    if (req.sync->failed.load(std::memory_order_acquire)) return fail(req);
    // A release that gave up waiting for running chunks: they stopped now.
    if (req.sync->canceled.load(std::memory_order_acquire))
      return req.state.end(nixl::status::canceled);
  }
  return req.state.end(nixl::status::success);
}

bool backend::drain(request& req) noexcept {
  const auto& lib = state_->lib();
  // Handles with nothing in flight go back as they are; the others are canceled.
  for (std::size_t k = 0; k < req.slots.size();) {
    detail::batch_slot* s = req.slots[k];
    if (s->finished >= s->submitted) {
      pool_->give(s);
    } else if (NIXL_CUFILE_WARN(lib.cuFileBatchIOCancel(s->handle))) {
      pool_->renew(s);  // canceled: cuFile has given the entries back
    } else {
      ++k;
      continue;
    }
    req.slots[k] = req.slots.back();
    req.slots.pop_back();
  }
  // A cancel that failed: wait, bounded, until cuFile reports every entry finished.
  const auto deadline = std::chrono::steady_clock::now() + cfg_.cancel_timeout;
  while (!req.slots.empty()) {
    for (std::size_t k = 0; k < req.slots.size();) {
      detail::batch_slot& s = *req.slots[k];
      unsigned nr = s.submitted;
      struct timespec zero {};
      if (NIXL_CUFILE_WARN(lib.cuFileBatchIOGetStatus(s.handle, 0, &nr, s.events.data(), &zero))) {
        nr = std::min(nr, s.submitted);
        for (unsigned i = 0; i < nr; ++i) {
          const auto j = reinterpret_cast<std::uintptr_t>(s.events[i].cookie);
          if (j >= s.submitted || s.seen[j] != 0) continue;
          if ((s.events[i].status & (cufile::CUFILE_WAITING | cufile::CUFILE_PENDING)) != 0)
            continue;
          s.seen[j] = 1;
          ++s.finished;
        }
      }
      if (s.finished >= s.submitted) {
        pool_->renew(&s);
        req.slots[k] = req.slots.back();
        req.slots.pop_back();
      } else {
        ++k;
      }
    }
    if (req.slots.empty()) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      try {
        log::error(
            "GDS: cuFile did not give back {} batch handle(s) within cancel_timeout_ms={}; the "
            "request keeps them (release answers repost_active) and its buffers may still be "
            "in use",
            req.slots.size(), cfg_.cancel_timeout.count());
      } catch (...) {
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

nixl::status backend::fail(request& req) noexcept {
  drain(req);
  if (req.sync && req.sync->busy()) {
    // The DRAM chunks not started never run; the request ends once the running ones stop.
    req.sync->canceled.store(true, std::memory_order_release);
    threads_->withdraw(*req.sync);
  }
  req.failing = true;
  return settle(req);
}

nixl::status backend::settle(request& req) noexcept {
  if (req.sync && req.sync->busy()) return nixl::status::in_progress;
  req.failing = false;
  return req.state.end(nixl::status::backend);
}

nixl::status backend::release(request& req) noexcept {
  if (req.launch && req.launch->posted.load(std::memory_order_acquire)) {
    if (!threads_->cancel(*req.launch, cfg_.cancel_timeout)) return nixl::status::repost_active;
    settle_launch(req);
  }
  if (!req.slots.empty() && !drain(req)) return nixl::status::repost_active;
  if (req.sync && !threads_->cancel(*req.sync, cfg_.cancel_timeout))
    return nixl::status::repost_active;
  req.failing = false;
  req.state.reset();
  return nixl::status::success;
}

unsigned backend::pool_size() const noexcept {
  return pool_->size();
}

std::size_t backend::free_batches() const noexcept {
  return pool_->free_count();
}

unsigned backend::io_threads() const noexcept {
  return threads_->threads();
}

unsigned backend::idle_io_threads() const noexcept {
  return threads_->idle();
}

}  // namespace nixl::gds
