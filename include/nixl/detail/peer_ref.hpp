#pragma once
/// The peer handle of a backend whose engine owns its peers' state: a pointer to that state,
/// moved (never copied) by the agent, null once unloaded. A backend names it as its `peer`.

#include <atomic>
#include <utility>

namespace nixl::detail {

/// A backend's handle of one loaded peer; `State` is the engine's record of it.
template <class State>
struct peer_ref {
  State* state = nullptr;
  peer_ref() = default;
  explicit peer_ref(State* s) noexcept : state(s) {}
  peer_ref(peer_ref&& o) noexcept : state(std::exchange(o.state, nullptr)) {}
  peer_ref& operator=(peer_ref&& o) noexcept {
    state = std::exchange(o.state, nullptr);
    return *this;
  }
  /// True once the peer is known to be gone (`State::failed`, an atomic flag).
  bool failed() const noexcept {
    return state != nullptr && state->failed.load(std::memory_order_acquire);
  }
};

}  // namespace nixl::detail
