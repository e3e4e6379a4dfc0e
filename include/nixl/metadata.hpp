#pragma once
/// Agent metadata and descriptor lists on the wire: one versioned, bounds-checked binary format.
///
/// Every blob starts with a header: magic "NXMD" (4 bytes), u16 version, u8 type, u8 flags.
/// Integers are little-endian; byte strings are a u32 length then the bytes. See
/// docs/metadata-format.md for the full layout and limits.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/detail/codec.hpp>
#include <nixl/memory.hpp>

namespace nixl {

/// Limits applied when decoding bytes from a peer.
namespace limits {
inline constexpr std::size_t agent_name = 1024;
inline constexpr std::size_t backend_name = 64;
inline constexpr std::size_t connection_info = 1 << 20;
inline constexpr std::size_t public_data = 1 << 16;
inline constexpr std::size_t reg_meta = 1 << 16;
inline constexpr std::size_t backends = 64;
inline constexpr std::size_t sections = 64 * mem_kind_count;
inline constexpr std::size_t descriptors = std::size_t{1} << 28;
}  // namespace limits

inline constexpr std::uint16_t wire_version = 1;

/// What a blob holds.
enum class blob_type : std::uint8_t { agent_metadata = 1, xfer_list = 2, reg_list = 3 };

/// One backend's connection information.
struct connection_entry {
  std::string backend;
  std::string info;
  friend bool operator==(const connection_entry&, const connection_entry&) = default;
};

/// One registered region as a peer sees it: the range and the backend's public data.
struct public_region {
  desc range;
  std::string data;
  friend bool operator==(const public_region&, const public_region&) = default;
};

/// Regions of one (backend, kind) pair.
struct section {
  std::string backend;
  mem_kind kind = mem_kind::dram;
  std::vector<public_region> regions;
  friend bool operator==(const section&, const section&) = default;
};

/// An agent's metadata: who it is, how to reach it, and what it exposes.
struct agent_metadata {
  std::string agent;
  bool partial = false;
  std::vector<connection_entry> connections;
  std::vector<section> sections;
  friend bool operator==(const agent_metadata&, const agent_metadata&) = default;
};

namespace detail {
inline void write_header(writer& w, blob_type t, std::uint8_t flags) {
  w.raw("NXMD");
  w.u16(wire_version);
  w.u8(static_cast<std::uint8_t>(t));
  w.u8(flags);
}
inline std::uint8_t read_header(reader& r, blob_type expected, std::uint8_t known_flags = 0) {
  auto magic = r.raw("magic", 4);
  if (magic != "NXMD") r.fail("not a nixl blob (bad magic); pass bytes produced by nixl");
  const auto v = r.u16("version");
  if (v != wire_version)
    r.fail("wire version {} is not supported (this library speaks {}); upgrade the older side", v,
           wire_version);
  const auto t = r.u8("type");
  if (t != static_cast<std::uint8_t>(expected))
    r.fail("blob type {} where {} was expected", t, static_cast<int>(expected));
  const auto flags = r.u8("flags");
  if ((flags & ~known_flags) != 0) r.fail("unknown flags {:#x}", flags);
  return flags;
}
inline mem_kind read_kind(reader& r) {
  const auto k = r.u8("memory kind");
  if (!valid_kind(k)) r.fail("unknown memory kind {}", k);
  return static_cast<mem_kind>(k);
}
inline void write_desc(writer& w, const desc& d) {
  w.u64(d.addr);
  w.u64(d.len);
  w.u64(d.dev);
}
inline desc read_desc(reader& r) {
  desc d;
  d.addr = static_cast<std::uintptr_t>(r.u64("addr"));
  d.len = static_cast<std::size_t>(r.u64("len"));
  d.dev = r.u64("dev");
  return d;
}
inline std::string_view as_view(std::span<const std::byte> b) noexcept {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
}  // namespace detail

/// Encodes agent metadata.
inline std::string encode(const agent_metadata& md) {
  detail::writer w;
  detail::write_header(w, blob_type::agent_metadata, md.partial ? 1 : 0);
  w.bytes(md.agent);
  w.u32(static_cast<std::uint32_t>(md.connections.size()));
  for (const auto& c : md.connections) {
    w.bytes(c.backend);
    w.bytes(c.info);
  }
  w.u32(static_cast<std::uint32_t>(md.sections.size()));
  for (const auto& s : md.sections) {
    w.bytes(s.backend);
    w.u8(static_cast<std::uint8_t>(s.kind));
    w.u32(static_cast<std::uint32_t>(s.regions.size()));
    for (const auto& r : s.regions) {
      detail::write_desc(w, r.range);
      w.bytes(r.data);
    }
  }
  return w.take();
}

/// Decodes agent metadata from untrusted bytes. Throws `nixl::error(mismatch)` on any defect.
inline agent_metadata decode_metadata(std::span<const std::byte> bytes) {
  detail::reader r(bytes, "agent metadata");
  agent_metadata md;
  md.partial = (detail::read_header(r, blob_type::agent_metadata, 1) & 1) != 0;
  md.agent = std::string(r.bytes("agent name", limits::agent_name));
  if (md.agent.empty()) r.fail("empty agent name");
  const auto nconn = r.count("connection", 8, limits::backends);
  md.connections.reserve(nconn);
  for (std::uint32_t i = 0; i < nconn; ++i) {
    connection_entry c;
    c.backend = std::string(r.bytes("backend name", limits::backend_name));
    c.info = std::string(r.bytes("connection info", limits::connection_info));
    md.connections.push_back(std::move(c));
  }
  const auto nsec = r.count("section", 9, limits::sections);
  md.sections.reserve(nsec);
  for (std::uint32_t i = 0; i < nsec; ++i) {
    section s;
    s.backend = std::string(r.bytes("backend name", limits::backend_name));
    s.kind = detail::read_kind(r);
    const auto n = r.count("region", 28, limits::descriptors);
    s.regions.reserve(n);
    for (std::uint32_t j = 0; j < n; ++j) {
      public_region pr;
      pr.range = detail::read_desc(r);
      pr.data = std::string(r.bytes("public data", limits::public_data));
      s.regions.push_back(std::move(pr));
    }
    md.sections.push_back(std::move(s));
  }
  r.finish();
  return md;
}
inline agent_metadata decode_metadata(std::string_view bytes) {
  return decode_metadata(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

/// Encodes a transfer list.
inline std::string encode(const xfer_dlist& l) {
  detail::writer w;
  w.reserve(16 + 24 * l.size());
  detail::write_header(w, blob_type::xfer_list, 0);
  w.u8(static_cast<std::uint8_t>(l.kind()));
  w.u32(static_cast<std::uint32_t>(l.size()));
  for (const auto& d : l) detail::write_desc(w, d);
  return w.take();
}

/// Encodes a registration list (ranges and metadata strings).
inline std::string encode(const reg_dlist& l) {
  detail::writer w;
  detail::write_header(w, blob_type::reg_list, 0);
  w.u8(static_cast<std::uint8_t>(l.kind()));
  w.u32(static_cast<std::uint32_t>(l.size()));
  for (const auto& d : l) {
    detail::write_desc(w, d);
    w.bytes(d.meta);
  }
  return w.take();
}

/// Decodes a transfer list from untrusted bytes; throws `nixl::error(mismatch)`.
inline xfer_dlist decode_xfer_list(std::span<const std::byte> bytes) {
  detail::reader r(bytes, "transfer descriptor list");
  detail::read_header(r, blob_type::xfer_list);
  xfer_dlist l(detail::read_kind(r));
  const auto n = r.count("descriptor", 24, limits::descriptors);
  l.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) l.push_back(detail::read_desc(r));
  r.finish();
  return l;
}
inline xfer_dlist decode_xfer_list(std::string_view b) {
  return decode_xfer_list(std::as_bytes(std::span(b.data(), b.size())));
}

/// Decodes a registration list from untrusted bytes; throws `nixl::error(mismatch)`.
inline reg_dlist decode_reg_list(std::span<const std::byte> bytes) {
  detail::reader r(bytes, "registration descriptor list");
  detail::read_header(r, blob_type::reg_list);
  reg_dlist l(detail::read_kind(r));
  const auto n = r.count("descriptor", 28, limits::descriptors);
  l.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    reg_desc d;
    static_cast<desc&>(d) = detail::read_desc(r);
    d.meta = std::string(r.bytes("descriptor metadata", limits::reg_meta));
    l.push_back(std::move(d));
  }
  r.finish();
  return l;
}
inline reg_dlist decode_reg_list(std::string_view b) {
  return decode_reg_list(std::as_bytes(std::span(b.data(), b.size())));
}

}  // namespace nixl
