#pragma once
/// `nixl::xfer_request<Backends...>`: a transfer request whose backend is chosen at run time,
/// a `std::variant` over `request<B>`; `post()` is a `std::visit`, not a virtual call. An agent
/// calls it `agent<Backends...>::xfer_request`.

#include <chrono>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include <nixl/request.hpp>
#include <nixl/status.hpp>
#include <nixl/telemetry.hpp>

namespace nixl {

template <class... Backends>
class agent;

/// A transfer request whose backend is chosen at run time: a variant over `request<B>`.
template <class... Backends>
class xfer_request {
 public:
  xfer_request() = default;
  template <class B>
  xfer_request(request<B>&& r) noexcept : v_(std::in_place_type<request<B>>, std::move(r)) {}

  nixl::status post() noexcept {
    return apply(nixl::status::invalid_param, [](auto& r) { return r.post(); });
  }
  nixl::status post(notif_arg n) noexcept {
    return apply(nixl::status::invalid_param, [&](auto& r) { return r.post(n); });
  }
  nixl::status status() noexcept {
    return apply(nixl::status::invalid_param, [](auto& r) { return r.status(); });
  }
  /// request<B>::peek: where it stands without making progress (after an event-fd wake-up).
  nixl::status peek() noexcept {
    return apply(nixl::status::invalid_param, [](auto& r) { return r.peek(); });
  }
  /// request<B>::wait: the status once ended, `in_progress` at the deadline.
  nixl::status wait(std::chrono::nanoseconds timeout) noexcept {
    return apply(nixl::status::invalid_param, [&](auto& r) { return r.wait(timeout); });
  }
  nixl::status release() noexcept {
    return apply(nixl::status::invalid_param, [](auto& r) { return r.release(); });
  }
  nixl::status telemetry(xfer_telemetry& t) const noexcept {
    return apply(nixl::status::invalid_param, [&](const auto& r) { return r.telemetry(t); });
  }
  /// Name of the backend that moves this request ("" when empty).
  std::string_view backend_name() const noexcept {
    return apply(std::string_view{}, [](const auto& r) { return r.backend_name(); });
  }
  std::string_view remote_agent() const noexcept {
    return apply(std::string_view{}, [](const auto& r) { return r.remote_agent(); });
  }
  std::size_t descriptor_count() const noexcept {
    return apply(std::size_t{0}, [](const auto& r) { return r.descriptor_count(); });
  }
  bool valid() const noexcept {
    return apply(false, [](const auto& r) { return r.valid(); });
  }
  /// The typed request when `B` moves it, else null.
  template <class B>
  request<B>* get_if() noexcept {
    return std::get_if<request<B>>(&v_);
  }
  template <class B>
  const request<B>* get_if() const noexcept {
    return std::get_if<request<B>>(&v_);
  }

 private:
  template <class... Bs>
  friend class agent;
  /// Replaces what is held with a fresh `request<B>` for the agent to fill in place.
  template <class B>
  request<B>& emplace() {
    return v_.template emplace<request<B>>();
  }

  /// `f(request)` for the request held, `fallback` when empty.
  template <class R, class Self, class F>
  static R apply_to(Self& self, R fallback, F&& f) noexcept {
    return std::visit(
        [&](auto& r) -> R {
          if constexpr (std::is_same_v<std::decay_t<decltype(r)>, std::monostate>)
            return fallback;
          else
            return f(r);
        },
        self.v_);
  }
  template <class R, class F>
  R apply(R fallback, F&& f) noexcept {
    return apply_to(*this, fallback, std::forward<F>(f));
  }
  template <class R, class F>
  R apply(R fallback, F&& f) const noexcept {
    return apply_to(*this, fallback, std::forward<F>(f));
  }
  std::variant<std::monostate, request<Backends>...> v_;
};

}  // namespace nixl
