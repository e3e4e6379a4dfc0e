// The UCX backend's wire formats: connection info, region data, notification header.

#include "wire.hpp"

#include <algorithm>

#include <nixl/detail/codec.hpp>
#include <nixl/detail/fnv1a.hpp>

namespace nixl::ucx::detail::wire {

using nixl::detail::fnv1a;

// Connection info: magic, version, FNV-1a of the body, then the body: the host identity,
// the backend id, the worker addresses (count, then each as length and bytes), and the flags:
// bit 0, it runs copy requests; bit 1, it runs a progress thread.
std::string encode_conn_info(const nixl::detail::host_identity& id, std::uint64_t uid,
                             std::span<const std::string> addresses, bool host_copies,
                             bool progress_thread) {
  nixl::detail::writer body;
  id.encode(body);
  body.u64(uid);
  body.u32(static_cast<std::uint32_t>(addresses.size()));
  for (const std::string& a : addresses) body.bytes(a);
  body.u8(static_cast<std::uint8_t>((host_copies ? 1 : 0) | (progress_thread ? 2 : 0)));
  const std::string b = body.take();
  nixl::detail::writer w;
  w.u32(conn_magic);
  w.u8(conn_version);
  w.u64(fnv1a(b));
  w.raw(b);
  return w.take();
}

conn_record parse_conn_info(std::string_view agent, std::string_view blob) {
  nixl::detail::reader in(blob, "UCX connection info");
  if (in.u32("magic") != conn_magic)
    in.fail("UCX connection info of '{}': bad magic; the blob is not UCX connection info", agent);
  if (const auto v = in.u8("version"); v != conn_version)
    in.fail(
        "UCX connection info of '{}': version {} (this build reads {}); use the same "
        "nixl-cpp release on every host",
        agent, v, conn_version);
  const std::uint64_t sum = in.u64("checksum");
  if (fnv1a(blob.substr(in.position())) != sum)
    in.fail("UCX connection info of '{}': checksum mismatch; the blob is corrupted", agent);
  conn_record r;
  r.id = nixl::detail::host_identity::decode(in);
  r.uid = in.u64("backend id");
  const std::uint32_t n = in.count("worker count", 4, max_remote_workers);
  if (n == 0) in.fail("UCX connection info of '{}': no worker address", agent);
  for (std::uint32_t i = 0; i < n; ++i)
    r.addresses.push_back(in.bytes("worker address", max_address_size));
  const std::uint8_t flags = in.u8("flags");
  if (flags > 3) in.fail("UCX connection info of '{}': flags {} (0 to 3)", agent, flags);
  r.host_copies = (flags & 1) != 0;
  r.progress_thread = (flags & 2) != 0;
  in.finish();
  return r;
}

// Region data: magic, version, memory kind, FNV-1a of the body, then the body: the packed
// rkey (length and bytes) and a flag; when set, the CUDA IPC export of the VRAM: handle (64
// bytes), device UUID (16), the region's offset in the allocation and the allocation's length.
std::string encode_rkey(mem_kind kind, std::string_view packed, const ipc_export* ipc) {
  nixl::detail::writer body;
  body.bytes(packed);
  body.u8(ipc != nullptr ? 1 : 0);
  if (ipc != nullptr) {
    body.raw(std::string_view(ipc->handle.data(), ipc->handle.size()));
    body.raw(std::string_view(ipc->uuid.data(), ipc->uuid.size()));
    body.u64(ipc->offset);
    body.u64(ipc->alloc_len);
  }
  const std::string b = body.take();
  nixl::detail::writer w;
  w.u32(rkey_magic);
  w.u8(rkey_version);
  w.u8(static_cast<std::uint8_t>(kind));
  w.u64(fnv1a(b));
  w.raw(b);
  return w.take();
}

rkey_record parse_rkey(std::span<const std::byte> data) {
  nixl::detail::reader in(data, "UCX region data");
  if (in.u32("magic") != rkey_magic) in.fail("UCX region data: bad magic; not a UCX remote key");
  if (const auto v = in.u8("version"); v != rkey_version)
    in.fail("UCX region data: version {} (this build reads {})", v, rkey_version);
  const std::uint8_t k = in.u8("memory kind");
  if (!valid_kind(k)) in.fail("UCX region data: unknown memory kind {}", k);
  const std::uint64_t sum = in.u64("checksum");
  const auto whole = std::string_view(reinterpret_cast<const char*>(data.data()), data.size());
  if (fnv1a(whole.substr(in.position())) != sum)
    in.fail("UCX region data: checksum mismatch; the blob is corrupted");
  rkey_record r{static_cast<mem_kind>(k), in.bytes("rkey", max_rkey_size), std::nullopt};
  if (r.packed.empty()) in.fail("UCX region data: empty remote key");
  const std::uint8_t has_ipc = in.u8("IPC flag");
  if (has_ipc > 1) in.fail("UCX region data: IPC flag {} (0 or 1)", has_ipc);
  if (has_ipc == 1) {
    if (r.kind != mem_kind::vram)
      in.fail("UCX region data: a CUDA IPC handle for {} memory", to_string(r.kind));
    ipc_export x;
    const std::string_view h = in.raw("IPC handle", x.handle.size());
    const std::string_view u = in.raw("device UUID", x.uuid.size());
    std::copy(h.begin(), h.end(), x.handle.begin());
    std::copy(u.begin(), u.end(), x.uuid.begin());
    x.offset = in.u64("offset in the allocation");
    x.alloc_len = in.u64("allocation length");
    if (x.alloc_len == 0 || x.offset >= x.alloc_len)
      in.fail("UCX region data: offset {} outside an allocation of {} bytes", x.offset,
              x.alloc_len);
    r.ipc = x;
  }
  in.finish();
  return r;
}

// Copy request: version, token, flags (bit 0: to the host; bit 1: answer with the events of the
// copies), count, then per entry the peer's IPC handle (64), its GPU's UUID (16), the offset in
// its allocation, the allocation's length, the host address here and the length. Copy ack:
// version, token, status, and when the request asked for them and the copies run, a count
// (at most gpu_streams::max) and the IPC handles (64 each) of the events recorded after them.
std::string encode_copy_request(bool to_host, std::span<const copy_entry> entries, bool events) {
  nixl::detail::writer w;
  w.u8(copy_version);
  w.u64(0);
  w.u8(static_cast<std::uint8_t>((to_host ? 1 : 0) | (events ? 2 : 0)));
  w.u32(static_cast<std::uint32_t>(entries.size()));
  for (const copy_entry& e : entries) {
    w.raw(std::string_view(e.handle.data(), e.handle.size()));
    w.raw(std::string_view(e.uuid.data(), e.uuid.size()));
    w.u64(e.vram_offset);
    w.u64(e.alloc_len);
    w.u64(e.host_addr);
    w.u64(e.len);
  }
  return w.take();
}

void set_copy_token(std::string& msg, std::uint64_t token) noexcept {
  nixl::detail::writer w;
  w.u64(token);
  const std::string t = w.take();
  if (msg.size() >= 1 + t.size()) msg.replace(1, t.size(), t);
}

copy_request parse_copy_request(std::string_view data) {
  nixl::detail::reader in(data, "UCX copy request");
  if (const auto v = in.u8("version"); v != copy_version)
    in.fail("UCX copy request: version {} (this build reads {})", v, copy_version);
  copy_request r;
  r.token = in.u64("token");
  const std::uint8_t flags = in.u8("flags");
  if (flags > 3) in.fail("UCX copy request: flags {} (0 to 3)", flags);
  r.to_host = (flags & 1) != 0;
  r.events = (flags & 2) != 0;
  constexpr std::size_t entry_size = 64 + 16 + 4 * 8;
  const std::uint32_t n = in.count("entry count", entry_size, max_copy_entries);
  r.entries.resize(n);
  for (copy_entry& e : r.entries) {
    const std::string_view h = in.raw("IPC handle", e.handle.size());
    const std::string_view u = in.raw("device UUID", e.uuid.size());
    std::copy(h.begin(), h.end(), e.handle.begin());
    std::copy(u.begin(), u.end(), e.uuid.begin());
    e.vram_offset = in.u64("VRAM offset");
    e.alloc_len = in.u64("allocation length");
    e.host_addr = in.u64("host address");
    e.len = in.u64("length");
    if (e.len == 0 || e.vram_offset > e.alloc_len || e.len > e.alloc_len - e.vram_offset)
      in.fail("UCX copy request: {} bytes at offset {} of an allocation of {} bytes", e.len,
              e.vram_offset, e.alloc_len);
    if (e.host_addr == 0 || e.len > ~std::uint64_t{0} - e.host_addr)
      in.fail("UCX copy request: host range [{:#x}, +{}) wraps", e.host_addr, e.len);
  }
  in.finish();
  return r;
}

std::string encode_copy_ack(std::uint64_t token, status st, const ipc_events* events) {
  nixl::detail::writer w;
  w.u8(copy_version);
  w.u64(token);
  w.u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(st)));
  if (events != nullptr && events->n > 0) {
    w.u8(static_cast<std::uint8_t>(events->n));
    for (std::size_t i = 0; i < events->n; ++i)
      w.raw(std::string_view(events->handles[i].data(), events->handles[i].size()));
  }
  return w.take();
}

std::optional<copy_ack> parse_copy_ack(std::string_view data) noexcept {
  try {
    nixl::detail::reader in(data, "UCX copy ack");
    if (in.u8("version") != copy_version) return std::nullopt;
    copy_ack a;
    a.token = in.u64("token");
    const auto code = static_cast<std::int32_t>(in.u32("status"));
    if (in.remaining() > 0) {
      const std::uint8_t n = in.u8("event count");
      if (n == 0 || n > a.events.handles.size()) return std::nullopt;
      for (std::uint8_t i = 0; i < n; ++i) {
        const std::string_view h = in.raw("event handle", a.events.handles[i].size());
        std::copy(h.begin(), h.end(), a.events.handles[i].begin());
      }
      a.events.n = n;
    }
    in.finish();
    // only the statuses a copy can end with; anything else is a failure of the peer
    a.st = status::backend;
    for (status s : {status::success, status::invalid_param, status::not_supported,
                     status::not_found, status::backend, status::remote_disconnect})
      if (static_cast<std::int32_t>(s) == code) a.st = s;
    if (a.st != status::success) a.events.n = 0;
    return a;
  } catch (...) {
    return std::nullopt;
  }
}

// Notification: version, sender name (u16 length, bytes), then the message to the end.
std::string notif_prefix(std::string_view agent) {
  nixl::detail::writer w;
  w.u8(notif_version);
  w.u16(static_cast<std::uint16_t>(agent.size()));
  w.raw(agent);
  return w.take();
}

std::string encode_beat(std::string_view prefix, std::uint32_t period_ms) {
  nixl::detail::writer w;
  w.raw(prefix);
  w.u32(period_ms);
  return w.take();
}

std::optional<beat_record> parse_beat(std::string_view data, std::size_t max_name) noexcept {
  const auto n = parse_notif(data, max_name, 4);
  if (!n) return std::nullopt;
  try {
    nixl::detail::reader in(n->message, "UCX beat");
    beat_record b{n->sender, in.u32("period")};
    in.finish();
    return b;
  } catch (...) {
    return std::nullopt;  // not four bytes
  }
}

std::optional<notif_record> parse_notif(std::string_view data, std::size_t max_name,
                                        std::size_t max_message) noexcept {
  try {
    nixl::detail::reader in(data, "UCX notification");
    if (in.u8("version") != notif_version) return std::nullopt;
    const std::uint16_t name_len = in.u16("sender length");
    if (name_len > max_name) return std::nullopt;
    notif_record r;
    r.sender = in.raw("sender", name_len);
    if (in.remaining() > max_message) return std::nullopt;
    r.message = in.raw("message", in.remaining());
    return r;
  } catch (...) {
    return std::nullopt;  // truncated
  }
}

}  // namespace nixl::ucx::detail::wire
