#pragma once
// The members of engine_of<K>, forwarded to its state. Each src/engine_<k>.cpp specializes
// engine_of<K>::state, includes this and instantiates engine_of<K>.

#include <memory>

#include <nixl/backends/posix/detail/engine.hpp>

namespace nixl::posix::detail {

template <engine_kind K>
engine_of<K>::engine_of(const engine_options& o) : s_(std::make_unique<state>(o)) {}
template <engine_kind K>
engine_of<K>::engine_of(engine_of&&) noexcept = default;
template <engine_kind K>
engine_of<K>& engine_of<K>::operator=(engine_of&&) noexcept = default;
template <engine_kind K>
engine_of<K>::~engine_of() = default;
template <engine_kind K>
nixl::status engine_of<K>::submit(io_batch& b) noexcept {
  return s_->submit(b);
}
template <engine_kind K>
nixl::status engine_of<K>::poll(io_batch& b) noexcept {
  return s_->poll(b);
}
template <engine_kind K>
void engine_of<K>::cancel(io_batch& b) noexcept {
  s_->cancel(b);
}
template <engine_kind K>
unsigned engine_of<K>::depth() const noexcept {
  return s_->depth();
}

// Instantiated in src/engine_<k>.cpp (or engine_posix.cpp for an engine not in this build).
extern template class engine_of<engine_kind::uring>;
extern template class engine_of<engine_kind::aio>;
extern template class engine_of<engine_kind::posix>;

}  // namespace nixl::posix::detail
