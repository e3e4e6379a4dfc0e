#pragma once
/// Members of `nixl::agent` (<nixl/agent.hpp>) about memory registration: register, deregister (a
/// region a prepared list or a request still points into stays registered with its backend
/// until they are gone, and they fail their next use), query, and the loopback view of each
/// local region.

#ifndef NIXL_AGENT_HPP
#error "<nixl/agent/registration.hpp> is a part of <nixl/agent.hpp>: include that instead"
#endif

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include <nixl/detail/region_index.hpp>
#include <nixl/detail/resolve.hpp>

namespace nixl {

namespace detail {
inline std::uint64_t total_length(const reg_dlist& list) noexcept {
  std::uint64_t n = 0;
  for (const auto& d : list) n += d.len;
  return n;
}
}  // namespace detail

template <class... Backends>
void agent<Backends...>::register_memory(const reg_dlist& list, const backend_options& opt) {
  auto g = lock_.exclusive();
  detail::for_each_type<Backends...>([&]<class B>() {
    if (slot<B>().engine) sweep_retired<B>(false);
  });
  const mem_kind k = list.kind();
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].len == 0 && !unbounded_allowed(k))
      raise(status::invalid_param,
            "register_memory: entry {} has length 0; only file, block and object entries may be "
            "unbounded",
            i);
  std::optional<error> last;
  bool any = false, candidate = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    auto& s = slot<B>();
    if (!s.engine || !contains(typename B::memory_kinds{}, k) || !detail::selected<B>(opt.backends))
      return;
    candidate = true;
    try {
      register_with<B>(list);
      any = true;
    } catch (const error& e) {
      log::warn("agent '{}': {} could not register: {}", name_, B::name, e.what());
      last = e;
    }
  });
  if (!candidate)
    raise(status::not_found, "register_memory: no created backend of agent '{}' takes {} memory{}",
          name_, k, opt.backends.empty() ? "" : " among the backends named");
  if (!any) throw *last;
  if (tsink_) tsink_->event(telemetry_event::memory_registered, detail::total_length(list));
}

template <class... Backends>
void agent<Backends...>::deregister_memory(const reg_dlist& list, const backend_options& opt) {
  auto g = lock_.exclusive();
  const mem_kind k = list.kind();
  bool any = false;
  std::optional<std::size_t> missing;
  detail::for_each_type<Backends...>([&]<class B>() {
    auto& s = slot<B>();
    if (!s.engine || !detail::selected<B>(opt.backends)) return;
    auto& idx = s.regions[static_cast<std::size_t>(k)];
    if (idx.empty()) return;
    for (std::size_t i = 0; i < list.size(); ++i)
      if (idx.find_exact(list[i]) == nullptr) {
        missing = i;
        return;
      }
    for (const auto& d : list) retire_region<B>(k, d);
    any = true;
  });
  detail::for_each_type<Backends...>([&]<class B>() {
    if (slot<B>().engine) sweep_retired<B>(false);
  });
  if (missing || !any)
    raise(status::not_found,
          "deregister_memory: entry {} of the {} list is not a registered range of agent '{}'; "
          "pass the same (addr, len, dev) that was registered",
          missing.value_or(0), k, name_);
  if (tsink_) tsink_->event(telemetry_event::memory_deregistered, detail::total_length(list));
}

template <class... Backends>
std::vector<std::optional<params>> agent<Backends...>::query_memory(const reg_dlist& list,
                                                                    const backend_options& opt) {
  auto g = lock_.exclusive();
  if (opt.backends.size() != 1)
    raise(status::invalid_param, "query_memory: name exactly one backend (got {})",
          opt.backends.size());
  std::optional<std::vector<std::optional<params>>> r;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (B::name != opt.backends[0]) return;
    if (!slot<B>().engine)
      raise(status::not_found, "query_memory: backend {} was not created", B::name);
    if constexpr (querying_backend<B>)
      r.emplace(slot<B>().engine->query_memory(list.span()));
    else
      raise(status::not_supported, "query_memory: backend {} cannot query memory", B::name);
  });
  if (!r) raise(status::not_found, "query_memory: unknown backend '{}'", opt.backends[0]);
  return std::move(*r);
}

template <class... Backends>
template <class B>
void agent<Backends...>::register_with(const reg_dlist& list) {
  auto& s = slot<B>();
  const mem_kind k = list.kind();
  auto& idx = s.regions[static_cast<std::size_t>(k)];
  std::size_t done = 0;
  try {
    for (; done < list.size(); ++done) {
      const reg_desc& d = list[done];
      if (idx.find_exact(d) != nullptr)
        raise(status::invalid_param,
              "register_memory: entry {} (addr {:#x}, len {}, dev {}) is registered already with "
              "{}",
              done, d.addr, d.len, d.dev, B::name);
      auto r = s.engine->register_region(k, d);
      std::string pub;
      if constexpr (remote_backend<B>) {
        try {
          pub = std::string(s.engine->public_data(r));
        } catch (...) {
          s.engine->deregister_region(r);
          throw;
        }
      }
      auto& stored = idx.insert(d, d.meta, std::move(pub), std::move(r));
      if constexpr (loopback_backend<B>) {
        auto& ps = std::get<peer_slot<B>>(self_state().slots);
        try {
          auto rr = s.engine->load_local(stored);
          ps.regions[static_cast<std::size_t>(k)].insert(d, {}, {}, std::move(rr));
        } catch (...) {
          auto owned = idx.erase(d);
          s.engine->deregister_region(*owned);
          throw;
        }
      }
    }
  } catch (...) {
    for (std::size_t i = 0; i < done; ++i) remove_region<B>(k, list[i]);
    throw;
  }
}

template <class... Backends>
template <class B>
void agent<Backends...>::retire_region(mem_kind k, const desc& d) noexcept {
  auto& s = slot<B>();
  const auto ki = static_cast<std::size_t>(k);
  detail::region_pin pin, view_pin;
  std::unique_ptr<typename B::remote_region> view;
  if constexpr (loopback_backend<B>) {
    if (auto it = peers_.find(name_); it != peers_.end())
      view = std::get<peer_slot<B>>(it->second->slots).regions[ki].erase(d, view_pin);
  }
  auto r = s.regions[ki].erase(d, pin);
  const bool held = pin.use_count() > 1 || view_pin.use_count() > 1;
  if (held) {
    try {
      s.retired.push_back({pin, view_pin, std::move(r), std::move(view)});
      if (pin) pin->retired.store(true, std::memory_order_release);
      if (view_pin) view_pin->retired.store(true, std::memory_order_release);
      detail::retire_epoch().fetch_add(1, std::memory_order_acq_rel);
      return;
    } catch (...) {
      // No room to keep it: the holders' next post fails, the registration goes now.
      if (pin) pin->retired.store(true, std::memory_order_release);
      if (view_pin) view_pin->retired.store(true, std::memory_order_release);
      detail::retire_epoch().fetch_add(1, std::memory_order_acq_rel);
    }
  }
  if (view) s.engine->unload_region(*view);
  if (r) s.engine->deregister_region(*r);
}

template <class... Backends>
template <class B>
void agent<Backends...>::sweep_retired(bool all) noexcept {
  auto& s = slot<B>();
  std::erase_if(s.retired, [&](detail::retired_region<B>& x) {
    if (!all && (!x.pin.expired() || !x.view_pin.expired())) return false;
    if (x.view) s.engine->unload_region(*x.view);
    if (x.region) s.engine->deregister_region(*x.region);
    return true;
  });
}

template <class... Backends>
template <class B>
void agent<Backends...>::remove_region(mem_kind k, const desc& d) noexcept {
  auto& s = slot<B>();
  if constexpr (loopback_backend<B>) {
    auto it = peers_.find(name_);
    if (it != peers_.end()) {
      auto& ps = std::get<peer_slot<B>>(it->second->slots);
      if (auto rr = ps.regions[static_cast<std::size_t>(k)].erase(d)) s.engine->unload_region(*rr);
    }
  }
  if (auto r = s.regions[static_cast<std::size_t>(k)].erase(d)) s.engine->deregister_region(*r);
}

}  // namespace nixl
