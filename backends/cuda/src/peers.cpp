// Peers and their regions: connection info, loading and unloading, the reach of each region
// (same process, same host, other host), and standalone notifications.

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <nixl/backends/cuda.hpp>
#include <nixl/backends/cuda/detail/runtime.hpp>
#include <nixl/detail/host_identity.hpp>
#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::cuda {

namespace detail {

void refuse(const backend::peer& p, const backend::remote_region& rr) {
  switch (rr.reachable) {
    case reach::other_host:
      raise(status::not_supported,
            "CUDA backend: agent '{}' runs on host '{}', not on this one "
            "('{}'); the CUDA backend moves data within one host: reach it through UCX",
            p.agent, p.host, nixl::detail::host_identity::self().hostname);
    case reach::other_process_dram:
      raise(status::not_supported,
            "CUDA backend: DRAM {} belongs to agent '{}' in another "
            "process; CUDA IPC shares GPU memory only. Move it with UCX, or register a VRAM "
            "buffer on that side",
            hex(rr.addr), p.agent);
    case reach::no_ipc:
      raise(status::not_supported,
            "CUDA backend: VRAM {} of agent '{}' cannot be shared across "
            "processes (its owner could not export a CUDA IPC handle: memory from cuMemCreate "
            "or managed memory); allocate it with cudaMalloc",
            hex(rr.addr), p.agent);
    case reach::no_gpu:
    case reach::ok:
      break;
  }
  raise(status::not_supported, "CUDA backend: cannot map VRAM {} of agent '{}': {}", hex(rr.addr),
        p.agent, no_device_reason());
}

}  // namespace detail

std::string backend::connection_info() const {
  return detail::encode_connection_info(nixl::detail::host_identity::self(), st_->socket.name());
}

backend::peer backend::load_peer(std::string_view agent, std::span<const std::byte> info) {
  detail::conn_record c = detail::decode_connection_info(agent, info);
  const auto& me = nixl::detail::host_identity::self();
  peer p;
  p.agent = std::string(agent);
  p.host = std::move(c.owner.hostname);
  // CUDA IPC and the abstract notification socket need one kernel and the same PID, IPC and
  // network namespaces: nixl::detail::same_host (docs/cuda.md, "Public data and identity").
  p.same_host = nixl::detail::same_host(me, c.owner);
  p.same_process = nixl::detail::same_process(me, c.owner);
  p.socket = detail::notif_socket::address_of(c.socket);
  if (!p.same_host)
    nixl::log::info(
        "CUDA backend: agent '{}' is on another host ('{}'); the CUDA backend will "
        "not move data to it",
        agent, p.host);
  return p;
}

void backend::unload_peer(peer& p) noexcept {
  p.same_host = false;
}

backend::peer backend::self_peer() {
  peer p;
  p.agent = st_->agent;
  p.host = nixl::detail::host_identity::self().hostname;
  p.same_host = true;
  p.same_process = true;
  p.socket = detail::notif_socket::address_of(st_->socket.name());
  return p;
}

backend::remote_region backend::load_local(const region& r) {
  remote_region rr;
  rr.kind = r.kind;
  rr.addr = r.addr;
  rr.len = r.len;
  rr.device = r.device;
  rr.owner_gpu = r.kind == mem_kind::vram;
  rr.access = r.access;
  rr.device_access = r.device_access;
  return rr;
}

void backend::unload_region(remote_region& r) noexcept {
  if (r.ipc_base != nullptr) {
    detail::ipc_close(r.ipc_base);
    r.ipc_base = nullptr;
  }
  for (auto& [dev, base] : r.ipc_more) detail::ipc_close(base);
  r.ipc_more.clear();
  r.access = 0;
}

backend::remote_region backend::unpack(peer& p, mem_kind kind, const nixl::desc& d,
                                       std::span<const std::byte> data) {
  const detail::region_record x = detail::decode_region(p.agent, kind, d, data);
  remote_region rr;
  rr.kind = kind;
  rr.addr = x.addr;
  rr.len = x.len;
  if (!p.same_host) {
    rr.reachable = reach::other_host;
    return rr;
  }
  const bool same_process = p.same_process;
  if (kind == mem_kind::dram) {
    if (!same_process) {
      rr.reachable = reach::other_process_dram;
      return rr;
    }
    rr.access = x.addr;
    std::uintptr_t dp = 0;
    if ((x.flags & detail::flag_device_access) &&
        detail::host_device_pointer(reinterpret_cast<void*>(x.addr), dp)) {
      rr.access = dp;
      rr.device_access = true;
    }
    return rr;
  }
  const int ordinal = detail::ordinal_of(x.gpu);
  if (same_process) {
    if (ordinal < 0)
      raise(status::not_found, "CUDA backend: GPU {} of agent '{}' is unknown here",
            detail::to_string(x.gpu), p.agent);
    rr.device = ordinal;
    rr.owner_gpu = true;
    rr.access = x.addr;
    rr.device_access = true;
    return rr;
  }
  if (!(x.flags & detail::flag_ipc)) {
    rr.reachable = reach::no_ipc;
    return rr;
  }
  if (device_count() == 0) {
    rr.reachable = reach::no_gpu;
    return rr;
  }
  // Map on the owning GPU when this process sees it, else on GPU 0 (peer access is enabled
  // lazily by the driver).
  rr.device = ordinal >= 0 ? ordinal : 0;
  rr.owner_gpu = ordinal >= 0;
  rr.ipc_base = detail::ipc_open(x.ipc_handle, rr.device);
  rr.access = reinterpret_cast<std::uintptr_t>(rr.ipc_base) + x.offset;
  rr.ipc_handle = x.ipc_handle;
  rr.ipc_offset = x.offset;
  rr.device_access = true;
  return rr;
}

void backend::notify(peer& p, std::string_view msg) {
  if (!p.same_host)
    raise(status::not_supported,
          "CUDA backend: agent '{}' runs on host '{}'; notifications of "
          "the CUDA backend stay within one host",
          p.agent, p.host);
  if (msg.size() > detail::max_notif_message)
    raise(status::invalid_param, "CUDA backend: notification of {} bytes exceeds the limit of {}",
          msg.size(), detail::max_notif_message);
  std::string head;
  detail::start_datagram(head, st_->agent);
  detail::set_message_length(head, msg.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    const int rc = st_->socket.send(p.socket, head, msg);
    if (rc == 0) return;
    if (rc != EAGAIN)
      raise(rc == ECONNREFUSED || rc == ENOENT ? status::remote_disconnect : status::backend,
            "CUDA backend: notification to '{}': sendmsg: {}", p.agent, std::strerror(rc));
    if (std::chrono::steady_clock::now() > deadline)
      raise(status::backend,
            "CUDA backend: notification to '{}': its queue stayed full for 2 s; "
            "the target must call get notifications",
            p.agent);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void backend::take_notifications(nixl::notif_map& out) {
  st_->socket.drain(st_->inbox);
  st_->inbox.take(nixl::detail::notif_inbox::kind::notification, out);
}

void backend::take_aborts(nixl::notif_map& out) {
  st_->socket.drain(st_->inbox);
  st_->inbox.take(nixl::detail::notif_inbox::kind::abort, out);
}

}  // namespace nixl::cuda
