#pragma once
/// Members of `nixl::agent` (<nixl/agent.hpp>) about transfers: preparing lists, making requests
/// from lists or from prepared lists with indices, choosing the backend, cost estimates.

#ifndef NIXL_AGENT_HPP
#error "<nixl/agent/transfers.hpp> is a part of <nixl/agent.hpp>: include that instead"
#endif

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <nixl/detail/region_index.hpp>
#include <nixl/detail/resolve.hpp>
#include <nixl/detail/type_list.hpp>

namespace nixl {

template <class... Backends>
auto agent<Backends...>::prepare_list(std::string_view remote, const xfer_dlist& list,
                                      const backend_options& opt) -> prepared {
  auto g = lock_.shared();
  prepared p;
  p.agent_ = std::string(remote);
  p.local_ = remote.empty();
  p.kind_ = list.kind();
  p.count_ = list.size();
  std::size_t worst = list.size();
  bool any = false;
  detail::scratch_pins pins;
  if (p.local_) {
    detail::for_each_type<Backends...>([&]<class B>() {
      auto& s = slot<B>();
      if (!s.engine || !detail::selected<B>(opt.backends)) return;
      auto v =
          detail::bind_all(s.regions[static_cast<std::size_t>(list.kind())], list, worst, pins);
      if (v) {
        std::get<typename prepared::template local_vec<B>>(p.local_descs_) = std::move(v);
        any = true;
      }
    });
  } else {
    p.peer_ = find_peer(remote, "prepare_list");
    detail::for_each_type<Backends...>([&]<class B>() {
      auto& ps = std::get<peer_slot<B>>(p.peer_->slots);
      if (!ps.peer || !detail::selected<B>(opt.backends)) return;
      auto v =
          detail::bind_all(ps.regions[static_cast<std::size_t>(list.kind())], list, worst, pins);
      if (v) {
        std::get<typename prepared::template remote_vec<B>>(p.remote_descs_) = std::move(v);
        any = true;
      }
    });
  }
  if (!any) uncovered_error("prepare_list", list, worst, remote);
  p.pins_ = detail::pinned(pins);
  return p;
}

template <class... Backends>
auto agent<Backends...>::prepare_list(std::string_view remote, const strided_dlist& list,
                                      const backend_options& opt) -> prepared {
  if (list.empty()) raise(status::not_found, "prepare_list: the strided list is empty");
  // Each row resolves as its span; the stored descriptor is then the run's first block.
  xfer_dlist spans(list.kind());
  spans.reserve(list.row_count());
  std::vector<detail::run> runs;
  runs.reserve(list.row_count());
  std::size_t start = 0;
  for (std::size_t i = 0; i < list.row_count(); ++i) {
    const stride_desc& r = list[i];
    if (!r.valid())
      raise(status::not_found,
            "prepare_list: strided row {} (addr {:#x}, len {}, dev {}, stride {}, count {}) is "
            "invalid; give count > 0, len > 0 and stride >= len",
            i, r.addr, r.len, r.dev, r.stride, r.count);
    spans.push_back(r.span());
    runs.push_back({start, r.stride});
    start += r.count;
  }
  prepared p = prepare_list(remote, spans, opt);
  auto first_blocks = [&](auto& v) {
    if (!v) return;
    for (std::size_t i = 0; i < v->size(); ++i) (*v)[i].len = list[i].len;
  };
  std::apply([&](auto&... v) { (first_blocks(v), ...); }, p.local_descs_);
  std::apply([&](auto&... v) { (first_blocks(v), ...); }, p.remote_descs_);
  p.count_ = start;
  p.runs_ = std::move(runs);
  return p;
}

template <class... Backends>
auto agent<Backends...>::make_request(xfer_op op, const prepared& local,
                                      std::span<const int> local_idx, const prepared& remote,
                                      std::span<const int> remote_idx, const xfer_options& opt)
    -> xfer_request {
  check_indices(local, local_idx, remote, remote_idx);
  auto g = lock_.shared();
  xfer_request out;  // built in place: a request is large and moves are not free
  for_candidates(local.kind(), remote.kind(), *remote.peer_, opt.backends, [&]<class B>() {
    if (!local.template has<B>() || !remote.template has<B>()) return false;
    build<B>(out.template emplace<B>(), op, local, local_idx, remote, remote_idx, opt);
    return true;
  });
  if (!out.valid())
    raise(status::not_found,
          "make_request: no backend resolved both lists ({} -> {} with '{}'); prepare them with a "
          "backend that moves both kinds",
          local.kind(), remote.kind(), remote.agent_name());
  return out;
}

template <class... Backends>
template <kind_tag L, kind_tag R>
auto agent<Backends...>::make_request(xfer_op op, const typed_prepared<L>& local,
                                      std::span<const int> local_idx,
                                      const typed_prepared<R>& remote,
                                      std::span<const int> remote_idx, const xfer_options& opt)
    -> request<detail::select_backend_t<L, R, Backends...>> {
  using B = detail::select_backend_t<L, R, Backends...>;
  check_indices(local, local_idx, remote, remote_idx);
  auto g = lock_.shared();
  require_usable<B>(*remote.peer_);
  if (!local.template has<B>() || !remote.template has<B>())
    raise(status::not_found, "make_request: the lists were not resolved by backend {}", B::name);
  request<B> req;
  build<B>(req, op, local, local_idx, remote, remote_idx, opt);
  return req;
}

template <class... Backends>
auto agent<Backends...>::create_request(xfer_op op, const xfer_dlist& local,
                                        const xfer_dlist& remote, std::string_view remote_agent,
                                        const xfer_options& opt) -> xfer_request {
  detail::check_pairs(local, remote);
  auto g = lock_.shared();
  const auto& st = find_peer(remote_agent, "create_request");
  xfer_request out;  // built in place
  std::size_t worst_l = local.size(), worst_r = remote.size();
  for_candidates(local.kind(), remote.kind(), *st, opt.backends, [&]<class B>() {
    detail::scratch_pins pins;
    detail::scratch_descs<typename B::region> l;
    if (!detail::bind_into(slot<B>().regions[static_cast<std::size_t>(local.kind())], local,
                           worst_l, pins, l))
      return false;
    auto& ps = std::get<peer_slot<B>>(st->slots);
    detail::scratch_descs<typename B::remote_region> r;
    if (!detail::bind_into(ps.regions[static_cast<std::size_t>(remote.kind())], remote, worst_r,
                           pins, r))
      return false;
    auto& req = out.template emplace<B>();
    finish<B>(req, op, l.span(), r.span(), st, opt, detail::request_pins(pins));
    req.telem_.desc_count = local.size();  // NIXL reports the caller's count for one-shot requests
    return true;
  });
  if (!out.valid()) {
    if (worst_l < local.size()) uncovered_error("create_request", local, worst_l, {});
    if (worst_r < remote.size()) uncovered_error("create_request", remote, worst_r, remote_agent);
    raise(status::not_found,
          "create_request: no created backend moves {} -> {} to '{}'; create one that does",
          local.kind(), remote.kind(), remote_agent);
  }
  return out;
}

template <class... Backends>
template <kind_tag L, kind_tag R>
auto agent<Backends...>::create_request(xfer_op op, const xfer_list<L>& local,
                                        const xfer_list<R>& remote, std::string_view remote_agent,
                                        const xfer_options& opt)
    -> request<detail::select_backend_t<L, R, Backends...>> {
  using B = detail::select_backend_t<L, R, Backends...>;
  detail::check_pairs(local, remote);
  auto g = lock_.shared();
  const auto& st = find_peer(remote_agent, "create_request");
  require_usable<B>(*st);
  std::size_t worst = local.size();
  detail::scratch_pins pins;
  detail::scratch_descs<typename B::region> l;
  if (!detail::bind_into(slot<B>().regions[static_cast<std::size_t>(L::value)], local, worst, pins,
                         l))
    uncovered_error("create_request", local, worst, {});
  worst = remote.size();
  auto& ps = std::get<peer_slot<B>>(st->slots);
  detail::scratch_descs<typename B::remote_region> r;
  if (!detail::bind_into(ps.regions[static_cast<std::size_t>(R::value)], remote, worst, pins, r))
    uncovered_error("create_request", remote, worst, remote_agent);
  request<B> req;
  finish<B>(req, op, l.span(), r.span(), st, opt, detail::request_pins(pins));
  req.telem_.desc_count = local.size();  // NIXL reports the caller's count for one-shot requests
  return req;
}

template <class... Backends>
template <class B>
std::optional<std::chrono::microseconds> agent<Backends...>::estimate_cost(
    const request<B>& r) const {
  if constexpr (estimating_backend<B>) {
    if (!r.valid()) return std::nullopt;
    return r.engine().estimate(r.backend_state());
  } else {
    return std::nullopt;
  }
}

template <class... Backends>
std::optional<std::chrono::microseconds> agent<Backends...>::estimate_cost(
    const xfer_request& r) const {
  std::optional<std::chrono::microseconds> out;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (auto* t = r.template get_if<B>()) out = estimate_cost(*t);
  });
  return out;
}

template <class... Backends>
void agent<Backends...>::uncovered_error(std::string_view call, const xfer_dlist& list,
                                         std::size_t i, std::string_view remote) const {
  if (list.empty()) raise(status::invalid_param, "{}: the descriptor list is empty", call);
  const desc& d = list[std::min(i, list.size() - 1)];
  raise(status::not_found,
        "{}: {} descriptor {} (addr {:#x}, len {}, dev {}) lies outside every region registered "
        "{}; register the memory first{}",
        call, list.kind(), i, d.addr, d.len, d.dev,
        remote.empty() ? fmt::format("by agent '{}'", name_) : fmt::format("by agent '{}'", remote),
        remote.empty() || remote == name_ ? "" : " and reload its metadata");
}

template <class... Backends>
void agent<Backends...>::check_indices(const prepared& l, std::span<const int> li,
                                       const prepared& r, std::span<const int> ri) {
  if (!l.is_local())
    raise(status::invalid_param,
          "make_request: the first list was prepared for agent '{}'; prepare it with an empty "
          "agent name (local side)",
          l.agent_name());
  if (r.is_local())
    raise(status::invalid_param,
          "make_request: the second list was prepared for the local side; prepare it for the "
          "remote agent (or this agent's own name for loopback)");
  if (li.empty() || li.size() != ri.size())
    raise(status::invalid_param,
          "make_request: {} local and {} remote indices; give equal, non-zero counts", li.size(),
          ri.size());
  for (std::size_t i = 0; i < li.size(); ++i) {
    if (li[i] < 0 || static_cast<std::size_t>(li[i]) >= l.size())
      raise(status::invalid_param,
            "make_request: local index {} (position {}) is out of range 0..{}", li[i], i, l.size());
    if (ri[i] < 0 || static_cast<std::size_t>(ri[i]) >= r.size())
      raise(status::invalid_param,
            "make_request: remote index {} (position {}) is out of range 0..{}", ri[i], i,
            r.size());
  }
  for (const auto* p : {&l, &r})
    if (p->pins_ && p->pins_->stale())
      raise(status::not_found,
            "make_request: the {} list points into memory deregistered after it was prepared; "
            "prepare it again",
            p == &l ? "local" : "remote");
  if (!r.peer_->token.valid.load(std::memory_order_acquire))
    raise(status::not_found,
          "make_request: agent '{}' was invalidated after the list was prepared; prepare it again",
          r.agent_name());
}

template <class... Backends>
template <class F>
void agent<Backends...>::for_candidates(mem_kind lk, mem_kind rk, const peer_state& st,
                                        const std::vector<std::string>& names, F&& f) {
  std::optional<error> refused;
  auto try_one = [&]<class B>() {
    if (!slot<B>().engine || !moves<B>(lk, rk)) return false;
    if (!std::get<peer_slot<B>>(st.slots).peer) return false;
    try {
      return static_cast<bool>(f.template operator()<B>());
    } catch (const error& e) {
      if (e.status_code() != status::not_supported) throw;
      refused = e;
      return false;
    }
  };
  bool done = false;
  if (names.empty()) {
    for (const bool preferred : {true, false})
      detail::for_each_type<Backends...>([&]<class B>() {
        if (!done && prefers<B>(lk, rk) == preferred) done = try_one.template operator()<B>();
      });
  } else {
    for (const auto& n : names) {
      detail::for_each_type<Backends...>([&]<class B>() {
        if (!done && B::name == n) done = try_one.template operator()<B>();
      });
      if (done) break;
    }
  }
  if (!done && refused) throw *refused;
}

template <class... Backends>
template <class B>
void agent<Backends...>::require_usable(const peer_state& st) const {
  if (!slot<B>().engine)
    raise(status::not_found, "backend {} was not created in agent '{}'; call create_backend",
          B::name, name_);
  if (!std::get<peer_slot<B>>(st.slots).peer)
    raise(status::not_found, "backend {} has no connection to agent '{}'", B::name, st.token.name);
}

template <class... Backends>
template <class B>
void agent<Backends...>::build(request<B>& req, xfer_op op, const prepared& local,
                               std::span<const int> li, const prepared& remote,
                               std::span<const int> ri, const xfer_options& opt) {
  const auto& lv = *std::get<typename prepared::template local_vec<B>>(local.local_descs_);
  const auto& rv = *std::get<typename prepared::template remote_vec<B>>(remote.remote_descs_);
  detail::scratch_descs<typename B::region> l;
  detail::scratch_descs<typename B::remote_region> r;
  l.reserve(li.size());
  r.reserve(ri.size());
  // `at_l(f)` / `at_r(f)`: the descriptor of flat index f on each side.
  auto fill = [&](auto&& at_l, auto&& at_r) {
    for (std::size_t i = 0; i < li.size(); ++i) {
      const auto& a = at_l(static_cast<std::size_t>(li[i]));
      const auto& b = at_r(static_cast<std::size_t>(ri[i]));
      if (a.len != b.len)
        raise(status::invalid_param, "make_request: pair {} has length {} locally and {} remotely",
              i, a.len, b.len);
      l.push_back(a);
      r.push_back(b);
    }
  };
  if (!local.strided() && !remote.strided()) {
    fill(
        [&](std::size_t f) -> const auto& { return lv[f]; },
        [&](std::size_t f) -> const auto& { return rv[f]; });
  } else {
    auto lc = local.cursor();
    auto rc = remote.cursor();
    fill([&](std::size_t f) { return lc.at(lv, f); }, [&](std::size_t f) { return rc.at(rv, f); });
  }
  finish<B>(req, op, l.span(), r.span(), remote.peer_, opt, {local.pins_, remote.pins_});
}

template <class... Backends>
template <class B>
void agent<Backends...>::finish(request<B>& req, xfer_op op,
                                std::span<bound_desc<typename B::region>> l,
                                std::span<bound_desc<typename B::remote_region>> r,
                                const std::shared_ptr<peer_state>& st, const xfer_options& opt,
                                std::pair<detail::region_pin, detail::region_pin> pins) {
  std::size_t total = 0;
  for (const auto& d : l) total += d.len;
  if (!opt.skip_merge) {
    const std::size_t n = detail::merge_contiguous(l, r);
    l = l.first(n);
    r = r.first(n);
  }
  auto& ps = std::get<peer_slot<B>>(st->slots);
  const std::span<const bound_desc<typename B::region>> ls(l);
  const std::span<const bound_desc<typename B::remote_region>> rs(r);
  // A backend that reads NIXL's customParam takes it as a sixth argument.
  if constexpr (requires {
                  slot<B>().engine->prepare(req.state_, op, ls, rs, *ps.peer,
                                            std::string_view(opt.custom));
                })
    slot<B>().engine->prepare(req.state_, op, ls, rs, *ps.peer, std::string_view(opt.custom));
  else
    slot<B>().engine->prepare(req.state_, op, ls, rs, *ps.peer);
  req.engine_ = slot<B>().engine.get();
  req.lock_ = &lock_;
  req.waker_ = &waker_;
  req.peer_ = std::shared_ptr<detail::peer_token>(st, &st->token);
  requests_.add(req.link_);
  req.op_ = op;
  req.telemetry_on_ = telemetry_;
  req.tsink_ = tsink_.get();
  req.telem_.total_bytes = total;
  req.telem_.desc_count = l.size();  // after merging (prepared lists); create_request resets it
  req.backend_descs_ = l.size();
  const auto stall = opt.stall_timeout.count() != 0 ? opt.stall_timeout : cfg_.xfer_stall_timeout;
  req.stall_timeout_ = stall.count() > 0 ? stall : std::chrono::microseconds{0};
  req.wait_spin_ = std::max(cfg_.wait_spin, std::chrono::microseconds{0});
  req.pins_ = std::move(pins.first);
  req.more_pins_ = std::move(pins.second);
  // Storage for a notification: reserved only when asked for, so that a request without one
  // costs no allocation.
  if (opt.notif_capacity > 0) req.notif_.reserve(opt.notif_capacity);
  if (opt.notif) {
    req.has_notif_ = true;
    req.notif_ = *opt.notif;
  }
}

}  // namespace nixl
