// Connection info and region public data (wire.hpp), on the core's codec.

#include <cstring>

#include <fmt/format.h>

#include <nixl/status.hpp>

#include "wire.hpp"

namespace nixl::cuda::detail {

namespace {

std::string_view chars(std::span<const std::byte> b) noexcept {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// The reader's message, without the status name that std::system_error appends.
std::string_view reason(const nixl::error& e) noexcept {
  std::string_view w = e.what();
  const auto colon = w.rfind(": ");
  if (colon != std::string_view::npos && w.substr(colon + 2) == to_string(e.status_code()))
    w = w.substr(0, colon);
  return w;
}

}  // namespace

std::string encode_connection_info(const nixl::detail::host_identity& me, std::string_view socket) {
  nixl::detail::writer w;
  w.u32(conn_magic);
  w.u8(wire_version);
  me.encode(w);
  w.bytes(socket);
  return w.take();
}

conn_record decode_connection_info(std::string_view agent, std::span<const std::byte> info) {
  auto malformed = [&](std::string_view why) {
    raise(status::invalid_param,
          "CUDA backend: connection info of agent '{}' is malformed ({} bytes: {}); it must come "
          "from a CUDA backend of this library",
          agent, info.size(), why);
  };
  if (info.size() < 5) malformed("fewer than 5");
  nixl::detail::reader r(chars(info), "CUDA connection info");
  if (r.u32("magic") != conn_magic) malformed("not NXCC");
  if (const auto v = r.u8("version"); v != wire_version)
    raise(status::mismatch,
          "CUDA backend: agent '{}' speaks CUDA wire version {}, this build {}; use the same "
          "library version on both sides",
          agent, v, wire_version);
  conn_record c;
  try {
    c.owner = nixl::detail::host_identity::decode(r);
    c.socket = std::string(r.bytes("socket name", max_socket_name));
    r.finish();
  } catch (const nixl::error& e) {
    malformed(reason(e));
  }
  if (c.socket.empty()) malformed("empty socket name");
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
