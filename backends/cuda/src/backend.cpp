// nixl::cuda::backend: creation and destruction, the GPUs it sees, and the owners of CUDA
// events and device memory that requests hold. The rest, by concern: config.cpp, wire.cpp,
// registration.cpp, peers.cpp, ipc.cpp, transfer.cpp, notify.cpp. No progress loop: check()
// (inline in cuda.hpp) polls CUDA events.

#include <cuda_runtime_api.h>

#include <nixl/backends/cuda.hpp>
#include <nixl/backends/cuda/check.hpp>
#include <nixl/backends/cuda/detail/runtime.hpp>
#include <nixl/log.hpp>

namespace nixl::cuda {

namespace detail {

void event_handle::reset() noexcept {
  if (e_ == nullptr) return;
  // A recorded event may still be pending: the work behind it reads memory this request owns.
  (void)NIXL_CUDA_WARN(cudaEventSynchronize(e_));
  (void)NIXL_CUDA_WARN(cudaEventDestroy(e_));
  e_ = nullptr;
}

void device_buffer::reset() noexcept {
  if (p_ == nullptr) return;
  device_guard g(dev_);
  (void)NIXL_CUDA_WARN(cudaFree(p_));
  p_ = nullptr;
}

backend_state::~backend_state() {
  for (auto& d : devs) {
    if (!d) continue;
    device_guard g(d->ordinal);
    for (auto s : d->streams) (void)NIXL_CUDA_WARN(cudaStreamDestroy(s));
  }
}

}  // namespace detail

backend::backend(const config& cfg, const nixl::backend_context& ctx)
    : st_(std::make_unique<detail::backend_state>()) {
  st_->cfg = cfg;
  st_->agent = ctx.agent_name;
  const auto& devs = detail::devices();
  st_->devs.resize(devs.size());
  for (const auto& d : devs) {
    auto s = std::make_unique<detail::device_state>();
    s->ordinal = d.ordinal;
    s->sm_count = d.sm_count;
    s->peer.assign(devs.size(), 0);
    st_->devs[static_cast<std::size_t>(d.ordinal)] = std::move(s);
  }
  if (devs.empty())
    nixl::log::info("CUDA backend of '{}': no GPU ({}); registration will be refused",
                    ctx.agent_name, detail::no_device_reason());
}

backend::~backend() = default;

backend::backend(backend&&) noexcept = default;
backend& backend::operator=(backend&&) noexcept = default;

int backend::device_count() noexcept {
  return static_cast<int>(detail::devices().size());
}

std::string_view backend::no_device_reason() noexcept {
  return detail::no_device_reason();
}

}  // namespace nixl::cuda
