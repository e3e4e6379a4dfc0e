// Copy requests: a peer on this host whose VRAM meets this backend's host memory cannot have
// CUDA map that memory in its process, so it asks this backend to run the copy (its VRAM opened
// here from its CUDA IPC handle) and waits for the answer; its notification follows as usual.

#include <array>
#include <chrono>
#include <exception>

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
  std::lock_guard sl(serving_->mu);
  {
    std::lock_guard lk(copy_mu_);
    auto [b, e] = host_regions_.equal_range(addr);
    for (auto it = b; it != e; ++it)
      if (it->second == len) {
        host_regions_.erase(it);
        break;
      }
  }
  // copies served for peers that still touch the range end before it is let go
  for (const auto& c : serving_->running)
    for (auto [a, n] : c->host)
      if (a < addr + len && addr < a + n) {
        gpu_wait(c->g);
        break;
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

namespace {

void on_reply_closed(void* request, ucs_status_t, void*) noexcept {
  ucp_request_free(request);
}

}  // namespace

engine::serving::reply_peer* engine::serving::reply_to(ucp_worker_h worker, std::uint32_t w,
                                                       std::string_view address) {
  auto& m = replies[w];
  if (auto it = m.find(address); it != m.end()) {
    it->second.used = ++uses;
    return &it->second;
  }
  if (m.size() >= max_replies) {
    auto idle = m.end();
    for (auto it = m.begin(); it != m.end(); ++it)
      if (it->second.in_flight == 0 && (idle == m.end() || it->second.used < idle->second.used))
        idle = it;
    if (idle != m.end()) {
      ucp_request_param_t cp{};
      cp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
      cp.cb.send = &on_reply_closed;
      (void)ucp_ep_close_nbx(idle->second.ep, &cp);  // a request frees itself at its end
      m.erase(idle);
    }
  }
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;  // as the data endpoints of a peer on this host
  ucp_ep_h h = nullptr;
  if (const ucs_status_t st = ucp_ep_create(worker, &ep, &h); st != UCS_OK) {
    log::warn(
        "UCX: copy request: no endpoint to the requester for the answer ({}); the copy "
        "runs before the request's callback returns",
        ucs_status_string(st));
    return nullptr;
  }
  auto& r = m[std::string(address)];
  r.ep = h;
  r.used = ++uses;
  return &r;
}

void engine::serving::close_replies(std::span<worker_handle> workers,
                                    std::int64_t deadline_ns) noexcept {
  std::vector<std::pair<ucp_worker_h, ucs_status_ptr_t>> closing;
  for (std::size_t w = 0; w < replies.size() && w < workers.size(); ++w) {
    for (auto& [address, r] : replies[w]) {
      ucp_request_param_t cp{};  // mode none: a flush close (UCX refuses a forced one)
      ucs_status_ptr_t req = ucp_ep_close_nbx(r.ep, &cp);
      if (!UCS_PTR_IS_PTR(req)) continue;
      try {
        closing.emplace_back(workers[w].get(), req);
      } catch (...) {
        ucp_request_free(req);
      }
    }
    replies[w].clear();
  }
  // answers still queued go out with the close; a requester that is gone is not waited for
  // beyond the deadline (the worker's destruction purges what is left)
  for (auto [worker, req] : closing) {
    while (ucp_request_check_status(req) == UCS_INPROGRESS && now_ns() < deadline_ns)
      ucp_worker_progress(worker);
    ucp_request_free(req);
  }
}

status engine::serve_copy(std::string_view data, std::uint32_t w, std::uint64_t& token) noexcept {
  try {
    const wire::copy_request req = wire::parse_copy_request(data);
    token = req.token;
    if (!runs_host_copies()) return status::not_supported;
    auto c = std::make_unique<serving::served>();
    c->token = req.token;
    c->worker = w;
    std::vector<gpu_item> items;
    items.reserve(req.entries.size());
    c->keep.reserve(req.entries.size());
    c->host.reserve(req.entries.size());
    // held until the copies are listed: a deregistration of the host memory waits for them
    std::lock_guard sl(serving_->mu);
    for (const wire::copy_entry& e : req.entries) {
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
      std::shared_ptr<ipc_mapping> m = gpu::open_ipc(x, this);
      if (!m) return status::not_supported;
      const gpu::mapped mw = gpu::where(*m);
      if (mw.size == 0 || e.vram_offset > mw.size || e.len > mw.size - e.vram_offset) {
        log::warn("UCX: refused a copy request: {} bytes at offset {} of a peer allocation of {}",
                  e.len, e.vram_offset, mw.size);
        return status::invalid_param;
      }
      gpu::pin(region.first, region.second, 0);  // the whole region, once
      char* vram = mw.base + e.vram_offset;
      auto* host = reinterpret_cast<char*>(e.host_addr);
      items.push_back(req.to_host ? gpu_item{host, vram, e.len, mw.loc.ctx, mw.loc.stream}
                                  : gpu_item{vram, host, e.len, mw.loc.ctx, mw.loc.stream});
      c->keep.push_back(std::move(m));
      c->host.emplace_back(e.host_addr, e.len);
    }
    // A version 1 request, or no endpoint for the answer: the copies end before this returns.
    serving::reply_peer* to = req.reply_address.empty()
                                  ? nullptr
                                  : serving_->reply_to(workers_[w].get(), w, req.reply_address);
    serving_->running.reserve(serving_->running.size() + 1);  // no throw once copies run
    const status st = gpu_issue(items, c->g, to != nullptr);
    if (st != status::success || c->g.recorded == 0) return st;  // ended (gpu_issue waited)
    c->to = to;
    ++to->in_flight;
    serving_->running.push_back(std::move(c));
    gpu_pending_.fetch_add(1, std::memory_order_release);
    if (has_progress_thread()) wake();  // it watches the events while they are pending
    return status::in_progress;
  } catch (const nixl::error& ex) {
    log::warn("UCX: dropped a malformed copy request of {} bytes: {}", data.size(), ex.what());
    return status::invalid_param;
  } catch (const std::exception& ex) {
    log::error("UCX: serving a copy request: {}", ex.what());
    return status::backend;
  } catch (...) {
    return status::backend;
  }
}

namespace {

void answer_copy(ucp_ep_h ep, std::uint64_t token, status st, bool& pending) noexcept {
  try {
    auto buf = std::make_unique<std::string>(wire::encode_copy_ack(token, st));
    ucs_status_t sent = UCS_OK;
    pending = send_owned(ep, engine::ack_am_id, buf, sent);
    warn_ucs(sent, "ucp_am_send_nbx (copy answer)", __FILE__, __LINE__);
  } catch (...) {
    log::error("UCX: out of memory answering a copy request");
  }
}

}  // namespace

void engine::reap_served(bool all) noexcept {
  std::array<std::pair<std::unique_ptr<serving::served>, status>, 32> done{};
  std::size_t n = 0;
  {
    std::unique_lock lk(serving_->mu, std::defer_lock);
    if (all)
      lk.lock();
    else if (!lk.try_lock())
      return;  // another thread reaps, or a request is being served
    auto& run = serving_->running;
    for (std::size_t i = 0; i < run.size() && n < done.size();) {
      if (all) gpu_wait(run[i]->g);
      const status st = gpu_query(run[i]->g);
      if (st == status::in_progress) {
        ++i;
        continue;
      }
      done[n++] = {std::move(run[i]), st};
      run[i] = std::move(run.back());
      run.pop_back();
    }
  }
  if (n == 0) return;
  // answered outside the lock: sending takes the worker's lock, which a thread serving a new
  // request holds while it waits for serving_->mu
  for (std::size_t i = 0; i < n; ++i) {
    auto& [c, st] = done[i];
    gpu_pending_.fetch_sub(1, std::memory_order_acq_rel);
    if (st != status::success)
      log::error("UCX: a copy run for a peer ended with {}", to_string(st));
    bool pending = false;
    answer_copy(c->to->ep, c->token, st, pending);
    if (pending) kick(c->worker);
  }
  std::lock_guard lk(serving_->mu);
  for (std::size_t i = 0; i < n; ++i) --done[i].first->to->in_flight;
}

ucs_status_t engine::on_copy(void* arg, const void*, std::size_t, void* data, std::size_t len,
                             const ucp_am_recv_param_t* param) noexcept {
  const auto* wa = static_cast<const worker_arg*>(arg);
  engine* self = wa->e;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    log::warn("UCX: dropped a copy request sent by rendezvous (not from a NIXL UCX agent)");
    return UCS_OK;
  }
  std::uint64_t token = 0;
  const status st =
      self->serve_copy(std::string_view(static_cast<const char*>(data), len), wa->w, token);
  if (st == status::in_progress) return UCS_OK;  // reap_served answers
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0 || param->reply_ep == nullptr)
    return UCS_OK;
  bool pending = false;
  answer_copy(param->reply_ep, token, st, pending);
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
  if (op_slot* s = self->take_copy_waiter(ack->first)) {
    if (ack->second != status::success)
      log::error("UCX: copy request to '{}' ended with {}",
                 s->peer.load(std::memory_order_relaxed)->name, to_string(ack->second));
    copy_done(s, ack->second);
  }
  return UCS_OK;
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

void engine::delegate_copy(op_slot* s, peer_state* p, std::uint32_t w, std::string& msg) noexcept {
  const std::uint64_t token = copy_token_.fetch_add(1, std::memory_order_relaxed);
  wire::set_copy_token(msg, token);
  s->copy_token = token;
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
