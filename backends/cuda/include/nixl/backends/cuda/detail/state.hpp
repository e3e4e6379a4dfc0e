#pragma once
/// Engine state of the CUDA backend: per GPU its streams and peer access, the notification
/// socket. `check` (inline) sends notifications through it. Internal.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <nixl/backends/cuda/detail/config.hpp>
#include <nixl/backends/cuda/detail/notify.hpp>

namespace nixl::cuda::detail {

/// One GPU as the backend uses it.
struct device_state {
  int ordinal = 0;
  int sm_count = 1;
  std::vector<cudaStream_t> streams;  // created by the first request on this GPU
  std::atomic<unsigned> next{0};      // the stream the next request takes
  std::vector<std::int8_t> peer;      // per GPU: 0 unknown, 1 peer access enabled, -1 impossible
};

struct backend_state {
  backend_state() = default;
  ~backend_state();  // destroys the streams
  backend_state(const backend_state&) = delete;
  backend_state& operator=(const backend_state&) = delete;

  config cfg;
  std::string agent;
  notif_socket socket;
  nixl::detail::notif_inbox inbox;  // what the socket received, by kind
  std::mutex mu;                    // setup path: streams, peer access, extra IPC mappings
  std::vector<std::unique_ptr<device_state>> devs;
};

}  // namespace nixl::cuda::detail
