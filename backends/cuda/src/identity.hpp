#pragma once
// Identity of this host and process as the CUDA backend sends it and compares it: the one
// place that decides whether a peer shares this host (CUDA IPC, the notification socket) or this
// process (pointers used directly). docs/cuda.md, "Public data and identity".

#include <cstdint>
#include <string>

#include <nixl/backends/cuda/detail/runtime.hpp>
#include <nixl/detail/codec.hpp>

namespace nixl::cuda::detail {

struct identity {
  uuid boot_id{};                   // /proc/sys/kernel/random/boot_id: this kernel, this boot
  std::uint64_t process_token = 0;  // random per process
  std::string hostname;             // for messages only: not sent with regions, never compared

  /// Bytes on the wire: 16 of boot id, u64 token (24 bytes).
  static constexpr std::size_t wire_size = 24;
  void encode(nixl::detail::writer& w) const;
  static identity decode(nixl::detail::reader& r);

  /// CUDA IPC handles and the abstract notification socket of `peer` work from here.
  bool same_host_as(const identity& peer) const noexcept { return peer.boot_id == boot_id; }
  /// Pointers of `peer` are valid here.
  bool same_process_as(const identity& peer) const noexcept {
    return same_host_as(peer) && peer.process_token == process_token;
  }
};

/// This host and process, read once.
const identity& self() noexcept;

}  // namespace nixl::cuda::detail
