// Copy requests: a peer on this host whose VRAM meets this backend's host memory cannot have
// CUDA map that memory in its process, so it asks this backend to run the copy (its VRAM opened
// here from its CUDA IPC handle) and waits for the answer; its notification follows as usual.
// The answer goes as soon as the copies are issued, with the interprocess events recorded after
// them: the peer waits on those (as on its own driver copies), and no thread here waits for the
// GPU. A peer that did not ask for events (or a driver that cannot export them) gets its answer
// once the copies ended.

#include <chrono>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::ucx::detail {

bool engine::runs_host_copies() const noexcept {
  return NIXL_UCX_WITH_CUDA != 0 && cfg_.cuda_host_vram;
}

void engine::add_host_region(std::uintptr_t addr, std::size_t len) {
  std::lock_guard lk(copy_mu_);
  host_regions_.emplace(addr, len);
}

void engine::remove_host_region(std::uintptr_t addr, std::size_t len) noexcept {
  std::lock_guard lk(copy_mu_);
  auto [b, e] = host_regions_.equal_range(addr);
  for (auto it = b; it != e; ++it)
    if (it->second == len) {
      host_regions_.erase(it);
      return;
    }
}

namespace {

// The copy request's send failed: its answer will not come.
void on_copy_sent(void* request, ucs_status_t st, void* user) noexcept {
  ucp_request_free(request);
  if (st == UCS_OK) return;  // the slot may be done and posted again by now: not touched
  auto* s = static_cast<op_slot*>(user);
  log::error("UCX: copy request: ucp_am_send_nbx: {}", ucs_status_string(st));
  s->owner->fail_copy(s->copy_token, to_status(st));
}

}  // namespace

status engine::run_copy(std::string_view data, std::uint64_t& token, ipc_events& events) noexcept {
  events.n = 0;
  reap_served(false);
  try {
    const wire::copy_request req = wire::parse_copy_request(data);
    token = req.token;
    if (!runs_host_copies()) return status::not_supported;
    std::vector<gpu_item> items;
    items.reserve(req.entries.size());
    std::vector<std::shared_ptr<ipc_mapping>> keep;
    for (const wire::copy_entry& e : req.entries) {
      std::shared_ptr<ipc_mapping> m;
      std::pair<std::uintptr_t, std::size_t> region{};
      {
        std::lock_guard lk(copy_mu_);
        // only host memory this backend registered, whole ranges inside one region
        auto it = host_regions_.upper_bound(e.host_addr);
        bool inside = false;
        while (it != host_regions_.begin() && !inside) {
          --it;
          inside = e.host_addr - it->first <= it->second &&
                   e.len <= it->second - (e.host_addr - it->first);
          if (inside) region = {it->first, it->second};
        }
        if (!inside) {
          log::warn("UCX: refused a copy request for [{:#x}, +{}): not registered here",
                    e.host_addr, e.len);
          return status::invalid_param;
        }
      }
      ipc_export x;
      x.handle = e.handle;
      x.uuid = e.uuid;
      x.offset = e.vram_offset;
      x.alloc_len = e.alloc_len;
      // kept open while idle for the next request, until this engine goes (or more than the
      // table's bound are idle; reopened on use)
      m = gpu::open_ipc(x, this);
      if (!m) return status::not_supported;
      const gpu::mapped w = gpu::where(*m);
      if (w.size == 0 || e.vram_offset > w.size || e.len > w.size - e.vram_offset) {
        log::warn("UCX: refused a copy request: {} bytes at offset {} of a peer allocation of {}",
                  e.len, e.vram_offset, w.size);
        return status::invalid_param;
      }
      gpu::pin(region.first, region.second, 0);  // the whole region, once
      char* vram = w.base + e.vram_offset;
      auto* host = reinterpret_cast<char*>(e.host_addr);
      items.push_back(req.to_host ? gpu_item{host, vram, e.len, w.loc.ctx, w.loc.stream}
                                  : gpu_item{vram, host, e.len, w.loc.ctx, w.loc.stream});
      keep.push_back(std::move(m));
    }
    if (!req.events || !gpu_ipc_events()) return gpu_copy(items);
    auto job = std::make_unique<served_copy>();
    const status st = gpu_issue(items, job->g, true, &events);
    if (st != status::success || job->g.recorded == 0) {
      events.n = 0;
      return st;  // ended here (or failed, after waiting for what was issued)
    }
    job->keep = std::move(keep);
    for (const gpu_item& it : items) job->bytes += it.len;
    add_served(std::move(job));
    return status::success;
  } catch (const std::exception& ex) {
    log::warn("UCX: dropped a malformed copy request of {} bytes: {}", data.size(), ex.what());
    return status::invalid_param;
  } catch (...) {
    return status::backend;
  }
}

ucs_status_t engine::on_copy(void* arg, const void*, std::size_t, void* data, std::size_t len,
                             const ucp_am_recv_param_t* param) noexcept {
  auto* self = static_cast<engine*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    log::warn("UCX: dropped a copy request sent by rendezvous (not from a NIXL UCX agent)");
    return UCS_OK;
  }
  std::uint64_t token = 0;
  ipc_events events;
  const status st =
      self->run_copy(std::string_view(static_cast<const char*>(data), len), token, events);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0 || param->reply_ep == nullptr)
    return UCS_OK;
  try {
    auto buf = std::make_unique<std::string>(wire::encode_copy_ack(token, st, &events));
    ucs_status_t sent = UCS_OK;
    send_owned(param->reply_ep, ack_am_id, buf, sent);
    warn_ucs(sent, "ucp_am_send_nbx (copy answer)", __FILE__, __LINE__);
  } catch (...) {
    log::error("UCX: out of memory answering a copy request");
  }
  return UCS_OK;
}

ucs_status_t engine::on_copy_ack(void* arg, const void*, std::size_t, void* data, std::size_t len,
                                 const ucp_am_recv_param_t*) noexcept {
  auto* self = static_cast<engine*>(arg);
  const auto ack = wire::parse_copy_ack(std::string_view(static_cast<const char*>(data), len));
  if (!ack) {
    log::warn("UCX: dropped a malformed copy answer of {} bytes", len);
    return UCS_OK;
  }
  // An answer nobody waits for (given up, or a token never issued) is dropped.
  op_slot* s = self->take_copy_waiter(ack->token);
  if (s == nullptr) return UCS_OK;
  if (ack->st != status::success)
    log::error("UCX: copy request to '{}' ended with {}",
               s->peer.load(std::memory_order_relaxed)->name, to_string(ack->st));
  if (ack->events.n == 0) {
    copy_done(s, ack->st);  // the copies ended (or failed)
    return UCS_OK;
  }
  if (s->copy_ctx == nullptr) {  // the request asked for no events (its VRAM has no context)
    log::error("UCX: copy request to '{}': the peer answered with events it was not asked for",
               s->peer.load(std::memory_order_relaxed)->name);
    copy_done(s, status::backend);
    return UCS_OK;
  }
  // issued: they end when the peer's events say so, seen as this process's own driver copies
  s->copy_deadline_ns.store(0, std::memory_order_relaxed);
  if (gpu_import(ack->events, s->copy_ctx, s->peer_copy) == status::success &&
      self->watch_gpu(s, s->peer_copy)) {
    self->copies_issued_.fetch_add(1, std::memory_order_relaxed);
    return UCS_OK;
  }
  gpu_drop(s->peer_copy);
  log::error("UCX: copy request to '{}': cannot wait for the peer's copies here",
             s->peer.load(std::memory_order_relaxed)->name);
  copy_done(s, status::backend);
  return UCS_OK;
}

// The progress thread polls for the end of the copies run for peers from shortly before they
// are expected to end (a look every 20 us before): a requester that loops sends its next request
// as soon as it sees that end, and a thread that polls then takes it without a wake-up. The
// expected end comes from the rate of the copies before (they queue on the device's stream);
// the margin covers a rate that varies, and an estimate never exceeds the true time by more
// than the 20 us between looks, so it cannot drift.
void engine::add_served(std::unique_ptr<served_copy> job) {
  const std::int64_t now = now_ns();
  job->issued_ns = now;
  std::lock_guard lk(served_mu_);
  const auto took =
      static_cast<std::int64_t>(served_ns_per_byte_ * static_cast<double>(job->bytes));
  served_due_ns_ = std::max(now, served_due_ns_) + took;
  const std::int64_t margin = 30'000 + took / 16;
  const bool known = served_ns_per_byte_ > 0;  // else polled for from now, to learn the rate
  served_watch_from_.store(known ? served_due_ns_ - margin : now, std::memory_order_relaxed);
  served_watch_until_.store(known ? served_due_ns_ + margin + 50'000 : now + 2'000'000,
                            std::memory_order_relaxed);
  served_.push_back(std::move(job));
  served_pending_.store(static_cast<int>(served_.size()), std::memory_order_relaxed);
}

std::size_t engine::reap_served(bool all) noexcept {
  std::vector<std::unique_ptr<served_copy>> ended;  // closed outside the lock
  std::size_t n = 0;
  std::lock_guard lk(served_mu_);
  const std::int64_t now = served_.empty() ? 0 : now_ns();  // one look for every copy ended now
  for (std::size_t i = 0; i < served_.size();) {
    served_copy& c = *served_[i];
    if (all) gpu_wait(c.g);
    if (gpu_query(c.g) == status::in_progress) {
      ++i;
      continue;
    }
    // its rate, from when it could start (after the copies before it) to now: only while no
    // copy of it was waited for here, and for copies long enough to time
    const std::int64_t began = std::max(c.issued_ns, served_end_ns_);
    if (!all && c.bytes >= (std::size_t{1} << 20) && now > began) {
      const double r = static_cast<double>(now - began) / static_cast<double>(c.bytes);
      // down at once, up slowly: a late look only ever makes a copy seem slower
      served_ns_per_byte_ = served_ns_per_byte_ == 0 || r < served_ns_per_byte_
                                ? r
                                : served_ns_per_byte_ + (r - served_ns_per_byte_) / 8;
    }
    served_end_ns_ = now;
    try {
      ended.push_back(std::move(served_[i]));
    } catch (...) {  // out of memory: closed under the lock
      served_[i].reset();
    }
    served_[i] = std::move(served_.back());
    served_.pop_back();
    ++n;
  }
  served_pending_.store(static_cast<int>(served_.size()), std::memory_order_relaxed);
  return n;
}

op_slot* engine::take_copy_waiter(std::uint64_t token) noexcept {
  std::lock_guard lk(copy_mu_);
  auto it = copy_waiters_.find(token);
  if (it == copy_waiters_.end()) return nullptr;
  op_slot* s = it->second;
  copy_waiters_.erase(it);
  return s;
}

void engine::copy_done(op_slot* s, status st) noexcept {
  s->copy_deadline_ns.store(0, std::memory_order_relaxed);
  s->fail(st);
  flush_done(s);
}

void engine::fail_copy(std::uint64_t token, status st) noexcept {
  if (op_slot* s = take_copy_waiter(token)) copy_done(s, st);
}

void engine::expire_copy(op_slot* s) noexcept {
  if (take_copy_waiter(s->copy_token) != s) return;  // answered meanwhile
  log::error("UCX: copy request to '{}': no answer within {} s",
             s->peer.load(std::memory_order_relaxed)->name, copy_deadline.count());
  copy_done(s, status::backend);
}

void engine::fail_copies_of(const peer_state* p) noexcept {
  std::vector<op_slot*> gone;
  {
    std::lock_guard lk(copy_mu_);
    for (auto it = copy_waiters_.begin(); it != copy_waiters_.end();) {
      if (it->second->peer.load(std::memory_order_relaxed) == p) {
        gone.push_back(it->second);
        it = copy_waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (op_slot* s : gone) copy_done(s, status::remote_disconnect);
}

void engine::delegate_copy(op_slot* s, peer_state* p, std::uint32_t w, std::string& msg,
                           void* ctx) noexcept {
  const std::uint64_t token = copy_token_.fetch_add(1, std::memory_order_relaxed);
  wire::set_copy_token(msg, token);
  s->copy_token = token;
  s->copy_ctx = ctx;
  try {
    std::lock_guard lk(copy_mu_);
    copy_waiters_.emplace(token, s);
  } catch (...) {
    copy_done(s, status::backend);
    return;
  }
  s->copy_deadline_ns.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          (std::chrono::steady_clock::now() + copy_deadline).time_since_epoch())
          .count(),
      std::memory_order_relaxed);
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
  rp.cb.send = &on_copy_sent;
  rp.user_data = s;
  ucs_status_ptr_t r =
      ucp_am_send_nbx(p->eps[w], copy_am_id, nullptr, 0, msg.data(), msg.size(), &rp);
  if (UCS_PTR_IS_ERR(r)) {
    log::error("UCX: copy request to '{}': ucp_am_send_nbx: {}", p->name,
               ucs_status_string(UCS_PTR_STATUS(r)));
    fail_copy(token, status::remote_disconnect);
    return;
  }
  // the peer may have failed before the waiter was in place: nobody else would end it
  if (p->gone()) fail_copy(token, status::remote_disconnect);
}

}  // namespace nixl::ucx::detail
