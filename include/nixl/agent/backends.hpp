#pragma once
/// Members of `nixl::agent` (<nixl/agent.hpp>) about its backends: construction and teardown,
/// creating backends by type or name, their parameters, explicit progress.

#ifndef NIXL_AGENT_HPP
#error "<nixl/agent/backends.hpp> is a part of <nixl/agent.hpp>: include that instead"
#endif

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include <nixl/detail/resolve.hpp>

namespace nixl {

template <class... Backends>
agent<Backends...>::agent(std::string name, agent_config cfg)
    : name_(std::move(name)), cfg_(std::move(cfg)), lock_(cfg_.sync) {
  if (name_.empty())
    raise(status::invalid_param, "agent: the name is empty; give every agent a unique name");
  telemetry_ = detail::telemetry_enabled(cfg_.capture_telemetry);
  if (telemetry_) tsink_ = detail::make_telemetry_sink(name_);
}

template <class... Backends>
agent<Backends...>::~agent() {
  // Requests still held let go of their backends now (each then answers as released).
  requests_.detach_all();
  views_.clear();  // before the peers and regions they point into
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (closing_aware_backend<B>) {
      if (auto& s = slot<B>(); s.engine) s.engine->agent_closing();
    }
  });
  peers_.clear();
  // peer states that prepared lists still hold: unloaded while the backends exist
  for (const auto& w : states_)
    if (const auto st = w.lock()) st->unload_all();
  detail::for_each_type<Backends...>([&]<class B>() {
    auto& s = slot<B>();
    if (!s.engine) return;
    sweep_retired<B>(true);
    for (auto& idx : s.regions)
      for (auto& e : idx.take_all()) s.engine->deregister_region(*e.region);
  });
}

template <class... Backends>
template <class B>
B& agent<Backends...>::create_backend(const params& p) {
  static_assert(detail::index_of<B, Backends...> < sizeof...(Backends),
                "create_backend<B>: B is not one of this agent's backend types");
  auto g = lock_.exclusive();
  auto& s = slot<B>();
  if (s.engine)
    raise(status::invalid_param, "create_backend: backend {} already exists in agent '{}'", B::name,
          name_);
  backend_context ctx{name_, lock_.mode(), cfg_.enable_prog_thread, cfg_.progress_delay, &waker_};
  auto engine = std::make_unique<B>(B::config::from_params(p), ctx);
  std::string conn;
  if constexpr (remote_backend<B>) conn = std::string(engine->connection_info());
  if constexpr (loopback_backend<B>) {
    auto& self = self_state();
    auto& ps = std::get<peer_slot<B>>(self.slots);
    ps.peer.emplace(engine->self_peer());
    ps.engine = engine.get();
  }
  s.engine = std::move(engine);
  s.user_params = p;
  s.conn_info = std::move(conn);
  log::info("agent '{}': created backend {}", name_, B::name);
  return *s.engine;
}

template <class... Backends>
void agent<Backends...>::create_backend(std::string_view backend_name, const params& p) {
  bool found = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (!found && B::name == backend_name) {
      found = true;
      create_backend<B>(p);
    }
  });
  if (!found)
    raise(status::not_found, "create_backend: unknown backend '{}'; this agent has {}",
          backend_name, fmt::join(available_backends(), ", "));
}

template <class... Backends>
bool agent<Backends...>::has_backend(std::string_view backend_name) const noexcept {
  bool r = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (B::name == backend_name && slot<B>().engine) r = true;
  });
  return r;
}

template <class... Backends>
std::vector<std::string> agent<Backends...>::created_backends() const {
  std::vector<std::string> out;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (slot<B>().engine) out.emplace_back(B::name);
  });
  return out;
}

template <class... Backends>
template <class B>
B& agent<Backends...>::get_backend() const {
  auto& s = slot<B>();
  if (!s.engine)
    raise(status::not_found, "backend {} was not created in agent '{}'; call create_backend",
          B::name, name_);
  return *s.engine;
}

template <class... Backends>
std::pair<params, std::vector<mem_kind>> agent<Backends...>::plugin_params(
    std::string_view backend_name) {
  std::optional<std::pair<params, std::vector<mem_kind>>> r;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (B::name == backend_name) r.emplace(params(B::default_params()), detail::kinds_of<B>());
  });
  if (!r) raise(status::not_found, "plugin_params: unknown backend '{}'", backend_name);
  return *r;
}

template <class... Backends>
std::pair<params, std::vector<mem_kind>> agent<Backends...>::backend_params(
    std::string_view backend_name) const {
  std::optional<std::pair<params, std::vector<mem_kind>>> r;
  detail::for_each_type<Backends...>([&]<class B>() {
    if (B::name == backend_name && slot<B>().engine) {
      params p = B::default_params();
      for (const auto& [k, v] : slot<B>().user_params) p[k] = v;
      r.emplace(std::move(p), detail::kinds_of<B>());
    }
  });
  if (!r) raise(status::not_found, "backend_params: backend '{}' was not created", backend_name);
  return *r;
}

template <class... Backends>
void agent<Backends...>::progress() {
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (progressing_backend<B>) {
      if (auto& s = slot<B>(); s.engine) s.engine->progress();
    }
  });
}

}  // namespace nixl
