#pragma once
/// Members of `nixl::agent` (<nixl/agent.hpp>) about metadata and peers: encoding the local
/// metadata, loading a peer's (checked before anything changes, undone on failure),
/// invalidation, generations, and peers a backend reported dead.

#ifndef NIXL_AGENT_HPP
#error "<nixl/agent/peers.hpp> is a part of <nixl/agent.hpp>: include that instead"
#endif

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/detail/resolve.hpp>

namespace nixl {

template <class... Backends>
std::string agent<Backends...>::local_metadata() const {
  auto g = lock_.exclusive();
  agent_metadata md;
  md.agent = name_;
  bool any = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (remote_backend<B>) {
      auto& s = slot<B>();
      if (!s.engine) return;
      any = true;
      md.connections.push_back({std::string(B::name), s.conn_info});
      for (const auto& idx : s.regions) {
        if (idx.empty()) continue;
        section sec{std::string(B::name), idx.kind(), {}};
        for (const auto& e : idx) sec.regions.push_back({e.range, e.pub});
        md.sections.push_back(std::move(sec));
      }
    }
  });
  if (!any)
    raise(status::invalid_param,
          "local_metadata: agent '{}' has no remote-capable backend; create one (e.g. UCX)", name_);
  return encode(md);
}

template <class... Backends>
std::string agent<Backends...>::load_remote_metadata(std::span<const std::byte> bytes) {
  agent_metadata md = decode_metadata(bytes);
  auto g = lock_.exclusive();
  return load_locked(md);
}

template <class... Backends>
std::string agent<Backends...>::local_partial_metadata(const reg_dlist& list,
                                                       bool include_conn_info,
                                                       const backend_options& opt) const {
  auto g = lock_.exclusive();
  agent_metadata md;
  md.agent = name_;
  md.partial = true;
  bool any = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (remote_backend<B>) {
      auto& s = slot<B>();
      if (!s.engine || !detail::selected<B>(opt.backends)) return;
      if (!list.empty() && !contains(typename B::memory_kinds{}, list.kind())) return;
      any = true;
      if (list.empty() || include_conn_info)
        md.connections.push_back({std::string(B::name), s.conn_info});
      if (list.empty()) return;
      const auto& idx = s.regions[static_cast<std::size_t>(list.kind())];
      section sec{std::string(B::name), list.kind(), {}};
      for (std::size_t i = 0; i < list.size(); ++i) {
        const auto* e = idx.find_exact(list[i]);
        if (e == nullptr)
          raise(status::not_found,
                "local_partial_metadata: entry {} is not registered with {}; register it first", i,
                B::name);
        sec.regions.push_back({e->range, e->pub});
      }
      md.sections.push_back(std::move(sec));
    }
  });
  if (!any)
    raise(status::invalid_param,
          "local_partial_metadata: no remote-capable backend of agent '{}' matches", name_);
  return encode(md);
}

template <class... Backends>
void agent<Backends...>::invalidate_remote_metadata(std::string_view remote) {
  auto g = lock_.exclusive();
  if (remote == name_)
    raise(status::invalid_param, "invalidate_remote_metadata: '{}' is this agent itself", remote);
  prune();
  auto it = peers_.find(remote);
  if (it == peers_.end()) {
    if (auto d = dropped_.find(remote); d != dropped_.end()) {
      dropped_.erase(d);
      return;
    }
    raise(status::not_found, "invalidate_remote_metadata: no metadata loaded for '{}'", remote);
  }
  it->second->token.valid.store(false, std::memory_order_release);
  peers_.erase(it);
  waker_.notify();  // waits on its requests end now (not_found)
}

template <class... Backends>
bool agent<Backends...>::check_remote_metadata(std::string_view remote, const xfer_dlist& descs) {
  auto g = lock_.exclusive();
  prune();
  auto it = peers_.find(remote);
  if (it == peers_.end()) return false;
  if (descs.empty()) return it->second->token.self || has_any_peer(*it->second);
  bool ok = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (ok) return;
    auto& ps = std::get<peer_slot<B>>(it->second->slots);
    if (!ps.peer) return;
    ok = detail::first_uncovered(ps.regions[static_cast<std::size_t>(descs.kind())], descs) ==
         descs.size();
  });
  return ok;
}

template <class... Backends>
std::uint64_t agent<Backends...>::remote_generation(std::string_view remote) {
  auto g = lock_.exclusive();
  prune();
  auto it = peers_.find(remote);
  return it == peers_.end() ? 0 : it->second->token.generation;
}

template <class... Backends>
std::vector<std::string> agent<Backends...>::remote_agents() {
  auto g = lock_.exclusive();
  prune();
  std::vector<std::string> out;
  for (const auto& [n, s] : peers_)
    if (!s->token.self) out.push_back(n);
  return out;
}

template <class... Backends>
void agent<Backends...>::make_connection(std::string_view remote, const backend_options& opt) {
  auto g = lock_.exclusive();
  auto st = find_peer(remote, "make_connection");
  bool any = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    auto& ps = std::get<peer_slot<B>>(st->slots);
    if (!ps.peer || !detail::selected<B>(opt.backends)) return;
    any = true;
    if constexpr (connecting_backend<B>) slot<B>().engine->connect(*ps.peer);
  });
  if (!any)
    raise(status::backend,
          "make_connection: no backend{} of agent '{}' has connection info for '{}'",
          opt.backends.empty() ? "" : " among those named", name_, remote);
}

template <class... Backends>
std::string agent<Backends...>::load_locked(const agent_metadata& md) {
  if (md.agent == name_)
    raise(status::invalid_param,
          "load_remote_metadata: the metadata is this agent's own ('{}'); load a peer's", name_);
  prune();
  auto it = peers_.find(md.agent);
  const bool fresh = it == peers_.end();
  std::shared_ptr<peer_state> st;
  if (fresh) {
    st = std::make_shared<peer_state>();
    st->token.name = md.agent;
    st->token.generation = ++generation_;
    track(st);
  } else {
    st = it->second;
  }
  // Check everything before changing anything.
  bool matched = false;
  bool restarted = false;
  for (const auto& c : md.connections) {
    detail::for_each_type<Backends...>([&]<class B>() {
      if constexpr (remote_backend<B>) {
        if (B::name != c.backend || !slot<B>().engine) return;
        matched = true;
        auto& ps = std::get<peer_slot<B>>(st->slots);
        if (!ps.peer || ps.conn_info == c.info) return;
        if constexpr (incarnation_backend<B>) {
          const auto was = B::incarnation(std::as_bytes(std::span(ps.conn_info)));
          const auto now = B::incarnation(std::as_bytes(std::span(c.info)));
          if (was != 0 && now != 0 && was != now) {
            restarted = true;  // another process under the same name: a restart
            return;
          }
        }
        raise(status::not_allowed,
              "load_remote_metadata: agent '{}' sent new {} connection info while loaded; "
              "invalidate it first",
              md.agent, B::name);
      }
    });
  }
  if (restarted) {
    // The old incarnation is gone: its requests end with remote_disconnect, and the metadata
    // loads as a new peer (a new generation).
    log::info(
        "agent '{}': '{}' restarted (new connection info of another process); requests "
        "to its previous generation end with NIXL_ERR_REMOTE_DISCONNECT",
        name_, md.agent);
    st->token.restarted.store(true, std::memory_order_release);
    st->token.valid.store(false, std::memory_order_release);
    peers_.erase(it);
    waker_.notify();  // waits on its requests end now
    return load_locked(md);
  }
  for (const auto& sec : md.sections) {
    detail::for_each_type<Backends...>([&]<class B>() {
      if constexpr (remote_backend<B>) {
        if (B::name != sec.backend || !slot<B>().engine) return;
        matched = true;
        if (!contains(typename B::memory_kinds{}, sec.kind))
          raise(status::mismatch, "load_remote_metadata: {} does not move {} memory", B::name,
                sec.kind);
        auto& ps = std::get<peer_slot<B>>(st->slots);
        bool has_conn = ps.peer.has_value();
        for (const auto& c : md.connections) has_conn = has_conn || c.backend == B::name;
        if (!has_conn)
          raise(status::not_found,
                "load_remote_metadata: regions of '{}' for {} arrived before its connection info; "
                "send metadata with connection info first",
                md.agent, B::name);
        const auto& idx = ps.regions[static_cast<std::size_t>(sec.kind)];
        for (const auto& r : sec.regions)
          if (const auto* e = idx.find_exact(r.range); e != nullptr && e->pub != r.data)
            raise(status::not_allowed,
                  "load_remote_metadata: agent '{}' changed the public data of a loaded region "
                  "(addr {:#x}); invalidate it first",
                  md.agent, r.range.addr);
      }
    });
  }
  if (!matched && fresh)
    raise(status::backend, "load_remote_metadata: agent '{}' shares no backend with agent '{}'",
          md.agent, name_);
  // Apply, undoing this call's additions on failure.
  std::vector<std::function<void()>> undo;
  try {
    for (const auto& c : md.connections) {
      detail::for_each_type<Backends...>([&]<class B>() {
        if constexpr (remote_backend<B>) {
          if (B::name != c.backend || !slot<B>().engine) return;
          auto& ps = std::get<peer_slot<B>>(st->slots);
          if (ps.peer) return;
          auto bytes = std::as_bytes(std::span(c.info.data(), c.info.size()));
          ps.peer.emplace(slot<B>().engine->load_peer(md.agent, bytes));
          ps.engine = slot<B>().engine.get();
          ps.conn_info = c.info;
          undo.push_back([&ps] { peer_state::unload(ps); });
        }
      });
    }
    for (const auto& sec : md.sections) {
      detail::for_each_type<Backends...>([&]<class B>() {
        if constexpr (remote_backend<B>) {
          if (B::name != sec.backend || !slot<B>().engine) return;
          auto& ps = std::get<peer_slot<B>>(st->slots);
          auto& idx = ps.regions[static_cast<std::size_t>(sec.kind)];
          for (const auto& r : sec.regions) {
            if (idx.find_exact(r.range) != nullptr) continue;
            auto bytes = std::as_bytes(std::span(r.data.data(), r.data.size()));
            auto rr = slot<B>().engine->unpack(*ps.peer, sec.kind, r.range, bytes);
            idx.insert(r.range, {}, r.data, std::move(rr));
            undo.push_back([&idx, &ps, range = r.range] {
              if (auto x = idx.erase(range)) ps.engine->unload_region(*x);
            });
          }
        }
      });
    }
  } catch (...) {
    for (auto u = undo.rbegin(); u != undo.rend(); ++u) (*u)();
    throw;
  }
  if (fresh) {
    if (auto d = dropped_.find(md.agent); d != dropped_.end()) dropped_.erase(d);
    peers_.emplace(md.agent, std::move(st));
  }
  log::info("agent '{}': loaded metadata of '{}'", name_, md.agent);
  return md.agent;
}

template <class... Backends>
void agent<Backends...>::track(const std::shared_ptr<peer_state>& st) {
  std::erase_if(states_, [](const std::weak_ptr<peer_state>& w) { return w.expired(); });
  states_.push_back(st);
}

template <class... Backends>
auto agent<Backends...>::self_state() -> peer_state& {
  auto it = peers_.find(name_);
  if (it == peers_.end()) {
    auto st = std::make_shared<peer_state>();
    st->token.name = name_;
    st->token.self = true;
    st->token.generation = ++generation_;
    track(st);
    it = peers_.emplace(name_, std::move(st)).first;
  }
  return *it->second;
}

template <class... Backends>
void agent<Backends...>::prune() {
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (!it->second->token.valid.load(std::memory_order_acquire)) {
      if (it->second->token.disconnected.load(std::memory_order_acquire))
        dropped_.insert(it->first);
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
}

template <class... Backends>
bool agent<Backends...>::has_any_peer(const peer_state& st) {
  bool any = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (std::get<peer_slot<B>>(st.slots).peer) any = true;
  });
  return any;
}

template <class... Backends>
auto agent<Backends...>::find_peer(std::string_view remote, std::string_view call)
    -> const std::shared_ptr<peer_state>& {
  if (remote == name_) return self_shared(call);
  auto it = peers_.find(remote);
  if (it == peers_.end() || !it->second->token.valid.load(std::memory_order_acquire))
    raise(status::not_found,
          "{}: no metadata loaded for agent '{}'; load it with load_remote_metadata or fetch it",
          call, remote);
  return it->second;
}

template <class... Backends>
auto agent<Backends...>::self_shared(std::string_view call) -> const std::shared_ptr<peer_state>& {
  auto it = peers_.find(name_);
  if (it == peers_.end())
    raise(status::not_found, "{}: agent '{}' has no loopback-capable backend", call, name_);
  return it->second;
}

}  // namespace nixl
