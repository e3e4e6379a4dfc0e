// Connection info and region public data (wire.hpp), on the core's codec.

#include <cstring>

#include <fmt/format.h>

#include <nixl/status.hpp>

#include "wire.hpp"

namespace nixl::cuda::detail {

namespace {
constexpr std::size_t conn_header = 8 + identity::wire_size;

std::string_view chars(std::span<const std::byte> b) noexcept {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
}  // namespace

std::string encode_connection_info(const identity& me, std::string_view socket) {
  const std::string_view host = std::string_view(me.hostname).substr(0, max_host_name);
  nixl::detail::writer w;
  w.reserve(conn_header + host.size() + socket.size());
  w.u32(conn_magic);
  w.u8(wire_version);
  w.u8(static_cast<std::uint8_t>(host.size()));
  w.u8(static_cast<std::uint8_t>(socket.size()));
  w.u8(0);
  me.encode(w);
  w.raw(host);
  w.raw(socket);
  return w.take();
}

conn_record decode_connection_info(std::string_view agent, std::span<const std::byte> info) {
  auto malformed = [&](std::string_view why) {
    raise(status::invalid_param,
          "CUDA backend: connection info of agent '{}' is malformed ({} bytes: {}); it must come "
          "from a CUDA backend of this library",
          agent, info.size(), why);
  };
  if (info.size() < conn_header) malformed(fmt::format("fewer than {}", conn_header));
  nixl::detail::reader r(chars(info), "CUDA connection info");
  if (r.u32("magic") != conn_magic) malformed("not NXCC");
  const std::uint8_t version = r.u8("version");
  const std::size_t host_len = r.u8("host name length");
  const std::size_t sock_len = r.u8("socket name length");
  (void)r.u8("reserved");
  if (version != wire_version)
    raise(status::mismatch,
          "CUDA backend: agent '{}' speaks CUDA wire version {}, this build {}; use the same "
          "library version on both sides",
          agent, version, wire_version);
  if (sock_len == 0 || sock_len > max_socket_name)
    malformed(fmt::format("socket name of {} bytes, expected 1 to {}", sock_len, max_socket_name));
  if (r.remaining() != identity::wire_size + host_len + sock_len)
    malformed(fmt::format("{} bytes after the header, expected {}", r.remaining(),
                          identity::wire_size + host_len + sock_len));
  conn_record c;
  c.owner = identity::decode(r);
  c.owner.hostname = std::string(r.raw("host name", host_len));
  c.socket = std::string(r.raw("socket name", sock_len));
  r.finish();
  return c;
}

std::string encode_region(const region_record& x) {
  nixl::detail::writer w;
  w.reserve(region_blob_size);
  w.u32(region_magic);
  w.u8(wire_version);
  w.u8(static_cast<std::uint8_t>(x.kind));
  w.u8(x.flags);
  w.u8(0);
  x.owner.encode(w);
  w.raw({reinterpret_cast<const char*>(x.gpu.data()), x.gpu.size()});
  w.u64(x.addr);
  w.u64(x.len);
  w.u64(x.offset);
  w.u64(x.alloc_size);
  w.raw({x.ipc_handle.data(), x.ipc_handle.size()});
  return w.take();
}

region_record decode_region(std::string_view agent, mem_kind kind, const nixl::desc& d,
                            std::span<const std::byte> data) {
  auto malformed = [&](std::string_view why) {
    raise(status::invalid_param,
          "CUDA backend: public data of a region of agent '{}' is malformed ({} bytes: {})", agent,
          data.size(), why);
  };
  if (data.size() != region_blob_size) malformed(fmt::format("expected {}", region_blob_size));
  nixl::detail::reader r(chars(data), "CUDA region data");
  if (r.u32("magic") != region_magic) malformed("not NXCR");
  if (const auto v = r.u8("version"); v != wire_version)
    malformed(fmt::format("version {}, this build speaks {}", v, wire_version));
  region_record x;
  const std::uint8_t k = r.u8("kind");
  x.flags = r.u8("flags");
  (void)r.u8("reserved");
  x.owner = identity::decode(r);
  const std::string_view gpu = r.raw("GPU UUID", x.gpu.size());
  std::memcpy(x.gpu.data(), gpu.data(), gpu.size());
  x.addr = r.u64("address");
  x.len = r.u64("length");
  x.offset = r.u64("offset");
  x.alloc_size = r.u64("allocation size");
  const std::string_view h = r.raw("IPC handle", x.ipc_handle.size());
  std::memcpy(x.ipc_handle.data(), h.data(), h.size());
  r.finish();
  if (k != static_cast<std::uint8_t>(kind) || x.addr != d.addr || x.len != d.len ||
      x.offset > x.alloc_size || x.len > x.alloc_size - x.offset)
    raise(status::mismatch,
          "CUDA backend: public data of agent '{}' does not describe {} {:#x} + {} (it says kind "
          "{}, {:#x} + {}, offset {} in an allocation of {})",
          agent, kind, d.addr, d.len, k, x.addr, x.len, x.offset, x.alloc_size);
  x.kind = kind;
  return x;
}

}  // namespace nixl::cuda::detail
