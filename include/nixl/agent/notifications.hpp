#pragma once
/// Members of `nixl::agent` (<nixl/agent.hpp>) about notifications: collecting those that
/// arrived and the abort notices, waiting for them, sending a standalone one.

#ifndef NIXL_AGENT_HPP
#error "<nixl/agent/notifications.hpp> is a part of <nixl/agent.hpp>: include that instead"
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/detail/resolve.hpp>

namespace nixl {

template <class... Backends>
void agent<Backends...>::notifications(notif_map& out, const backend_options& opt) {
  auto g = lock_.exclusive();
  bool any = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (notifying_backend<B>) {
      if (auto& s = slot<B>(); s.engine && detail::selected<B>(opt.backends)) {
        any = true;
        s.engine->take_notifications(out);
      }
    }
  });
  if (!any)
    raise(status::backend, "notifications: no created backend{} of agent '{}' delivers them",
          opt.backends.empty() ? "" : " among those named", name_);
}

template <class... Backends>
void agent<Backends...>::aborted_notifications(notif_map& out, const backend_options& opt) {
  auto g = lock_.exclusive();
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (aborting_backend<B>) {
      if (auto& s = slot<B>(); s.engine && detail::selected<B>(opt.backends))
        s.engine->take_aborts(out);
    }
  });
}

template <class... Backends>
std::vector<std::string> agent<Backends...>::gone_agents(const backend_options& opt) {
  auto g = lock_.exclusive();
  std::vector<std::string> out;
  for_each_watching(opt, [&](auto& engine) { engine.gone_agents(out); });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

template <class... Backends>
template <class F>
void agent<Backends...>::for_each_watching(const backend_options& opt, F&& f) {
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (watching_backend<B>) {
      if (auto& s = slot<B>(); s.engine && detail::selected<B>(opt.backends)) f(*s.engine);
    }
  });
}

template <class... Backends>
bool agent<Backends...>::wait_notifications(notif_map& out, std::chrono::nanoseconds timeout,
                                            const backend_options& opt) {
  return wait_for_notifications(out, nullptr, timeout, opt);
}

template <class... Backends>
bool agent<Backends...>::wait_notifications(notif_map& out, notif_map& aborts,
                                            std::chrono::nanoseconds timeout,
                                            const backend_options& opt) {
  return wait_for_notifications(out, &aborts, timeout, opt);
}

template <class... Backends>
bool agent<Backends...>::wait_for_notifications(notif_map& out, notif_map* aborts,
                                                std::chrono::nanoseconds timeout,
                                                const backend_options& opt) {
  const auto deadline = detail::waker::deadline_after(timeout);
  const auto count = [&] {
    std::uint64_t n = 0;
    for (const auto& [from, msgs] : out) n += msgs.size();
    if (aborts != nullptr) {
      for (const auto& [from, msgs] : *aborts) n += msgs.size();
      // an agent found gone ends the wait too
      for_each_watching(opt, [&](const auto& engine) { n += engine.gone_events(); });
    }
    return n;
  };
  const auto collect = [&] {
    notifications(out, opt);  // throws when no backend delivers them
    if (aborts != nullptr) aborted_notifications(*aborts, opt);
  };
  const std::uint64_t before = count();
  collect();
  if (count() != before) return true;
  bool polled = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (notifying_backend<B>) {
      if (auto& s = slot<B>(); s.engine && detail::selected<B>(opt.backends)) {
        if constexpr (waking_backend<B>)
          polled |= !s.engine->wakes_waiters();
        else
          polled = true;
      }
    }
  });
  waker_.wait_until(
      [&] {
        try {
          if (polled) progress();
          collect();
        } catch (...) {
          return true;  // out of memory: give up waiting, keep what arrived
        }
        return count() != before;
      },
      deadline, polled);
  return count() != before;
}

template <class... Backends>
void agent<Backends...>::notify(std::string_view remote, std::string_view msg,
                                const backend_options& opt) {
  auto g = lock_.shared();
  auto st = find_peer(remote, "notify");
  bool sent = false;
  detail::for_each_type<Backends...>([&]<class B>() {
    if constexpr (notifying_backend<B>) {
      if (sent || !detail::selected<B>(opt.backends)) return;
      auto& ps = std::get<peer_slot<B>>(st->slots);
      if (!ps.peer || !slot<B>().engine) return;
      slot<B>().engine->notify(*ps.peer, msg);
      sent = true;
    }
  });
  if (!sent)
    raise(status::not_found, "notify: no notifying backend of agent '{}' reaches '{}'", name_,
          remote);
}

}  // namespace nixl
