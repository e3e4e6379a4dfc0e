// The LIBFABRIC backend's wire formats: connection info, region data, rail-0 messages.

#include "wire.hpp"

#include <nixl/detail/codec.hpp>
#include <nixl/detail/fnv1a.hpp>

namespace nixl::libfabric::detail::wire {

using nixl::detail::fnv1a;

namespace {

std::string framed(std::uint32_t magic, std::uint8_t version, const std::string& body) {
  nixl::detail::writer w;
  w.u32(magic);
  w.u8(version);
  w.u64(fnv1a(body));
  w.raw(body);
  return w.take();
}

}  // namespace

// Connection info: magic, version, FNV-1a of the body, then the body: the backend id, the
// provider, and per rail the domain name and the endpoint address.
std::string encode_conn_info(std::uint64_t uid, std::string_view provider,
                             std::span<const std::string> domains,
                             std::span<const std::string> addresses) {
  nixl::detail::writer body;
  body.u64(uid);
  body.bytes(provider);
  body.u32(static_cast<std::uint32_t>(addresses.size()));
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    body.bytes(domains[i]);
    body.bytes(addresses[i]);
  }
  return framed(conn_magic, conn_version, body.take());
}

conn_record parse_conn_info(std::string_view agent, std::span<const std::byte> blob,
                            std::size_t max_rails) {
  nixl::detail::reader in(blob, "LIBFABRIC connection info");
  if (in.u32("magic") != conn_magic)
    in.fail(
        "LIBFABRIC connection info of '{}': bad magic; the blob is not LIBFABRIC connection "
        "info",
        agent);
  if (const auto v = in.u8("version"); v != conn_version)
    in.fail(
        "LIBFABRIC connection info of '{}': version {} (this build reads {}); use the same "
        "nixl-cpp release on every host",
        agent, v, conn_version);
  const std::uint64_t sum = in.u64("checksum");
  const std::string_view rest(reinterpret_cast<const char*>(blob.data()) + in.position(),
                              blob.size() - in.position());
  if (fnv1a(rest) != sum)
    in.fail("LIBFABRIC connection info of '{}': checksum mismatch; the blob is corrupted", agent);
  conn_record r;
  r.uid = in.u64("backend id");
  r.provider = in.bytes("provider", max_text_size);
  const std::uint32_t n = in.count("rail count", 8, max_rails);
  if (n == 0) in.fail("LIBFABRIC connection info of '{}': no rail", agent);
  for (std::uint32_t i = 0; i < n; ++i) {
    r.domains.push_back(in.bytes("domain", max_text_size));
    const std::string_view a = in.bytes("address", max_address_size);
    if (a.empty()) in.fail("LIBFABRIC connection info of '{}': empty address of rail {}", agent, i);
    r.addresses.push_back(a);
  }
  in.finish();
  return r;
}

// Region data: magic, version, FNV-1a of the body, then kind, addressing, base, length, and
// one key per rail.
std::string encode_rkey(const rkey_record& r) {
  nixl::detail::writer body;
  body.u8(static_cast<std::uint8_t>(r.kind));
  body.u8(r.virt_addr ? 1 : 0);
  body.u64(r.base);
  body.u64(r.len);
  body.u32(static_cast<std::uint32_t>(r.keys.size()));
  for (std::uint64_t k : r.keys) body.u64(k);
  return framed(rkey_magic, rkey_version, body.take());
}

rkey_record parse_rkey(std::span<const std::byte> data, std::size_t max_rails) {
  nixl::detail::reader in(data, "LIBFABRIC region data");
  if (in.u32("magic") != rkey_magic)
    in.fail("LIBFABRIC region data: bad magic; not a LIBFABRIC remote key");
  if (const auto v = in.u8("version"); v != rkey_version)
    in.fail("LIBFABRIC region data: version {} (this build reads {})", v, rkey_version);
  const std::uint64_t sum = in.u64("checksum");
  const std::string_view rest(reinterpret_cast<const char*>(data.data()) + in.position(),
                              data.size() - in.position());
  if (fnv1a(rest) != sum)
    in.fail("LIBFABRIC region data: checksum mismatch; the blob is corrupted");
  rkey_record r;
  const std::uint8_t k = in.u8("memory kind");
  if (k != static_cast<std::uint8_t>(mem_kind::dram))
    in.fail("LIBFABRIC region data: memory kind {} (this backend moves DRAM only)", k);
  const std::uint8_t v = in.u8("addressing");
  if (v > 1)
    in.fail("LIBFABRIC region data: addressing {} is neither offset (0) nor virtual (1)", v);
  r.virt_addr = v == 1;
  r.base = in.u64("base");
  r.len = in.u64("length");
  const std::uint32_t n = in.count("key count", 8, max_rails);
  if (n == 0) in.fail("LIBFABRIC region data: no key");
  for (std::uint32_t i = 0; i < n; ++i) r.keys.push_back(in.u64("key"));
  in.finish();
  return r;
}

std::string encode_header(msg_type t, std::uint64_t uid) {
  nixl::detail::writer w;
  w.u32(msg_magic);
  w.u8(msg_version);
  w.u8(static_cast<std::uint8_t>(t));
  w.u64(uid);
  return w.take();
}

std::string encode_ping(std::uint64_t uid, std::uint64_t token, std::uint64_t seq,
                        std::string_view address, std::uint32_t period_ms,
                        std::string_view sender) {
  nixl::detail::writer w;
  w.raw(encode_header(msg_type::ping, uid));
  w.u64(token);
  w.u64(seq);
  w.bytes(address);
  w.u32(period_ms);
  w.u16(static_cast<std::uint16_t>(sender.size()));
  w.raw(sender);
  return w.take();
}

std::string encode_pong(std::uint64_t uid, std::uint64_t token, std::uint64_t seq) {
  nixl::detail::writer w;
  w.raw(encode_header(msg_type::pong, uid));
  w.u64(token);
  w.u64(seq);
  return w.take();
}

// A notification or abort notice: header, u16 sender length, sender, then the message to the
// end.
std::optional<message> parse_message(std::string_view data, std::size_t max_name,
                                     std::size_t max_text) noexcept {
  try {
    nixl::detail::reader in(data, "LIBFABRIC message");
    if (in.u32("magic") != msg_magic || in.u8("version") != msg_version) return std::nullopt;
    message m;
    const std::uint8_t t = in.u8("type");
    m.uid = in.u64("sender id");
    switch (t) {
      case static_cast<std::uint8_t>(msg_type::notif):
      case static_cast<std::uint8_t>(msg_type::abort): {
        m.type = static_cast<msg_type>(t);
        const std::uint16_t n = in.u16("sender length");
        if (n > max_name) return std::nullopt;
        m.sender = in.raw("sender", n);
        if (in.remaining() > max_text) return std::nullopt;
        m.text = in.raw("message", in.remaining());
        return m;
      }
      case static_cast<std::uint8_t>(msg_type::ping):
        m.type = msg_type::ping;
        m.token = in.u64("token");
        m.seq = in.u64("sequence");
        m.address = in.bytes("address", max_address_size);
        if (in.remaining() > 0) {  // the period and the name (absent from older senders)
          m.period_ms = in.u32("period");
          const std::uint16_t n = in.u16("sender length");
          if (n > max_name) return std::nullopt;
          m.sender = in.raw("sender", n);
        }
        in.finish();
        return m;
      case static_cast<std::uint8_t>(msg_type::bye):
        m.type = msg_type::bye;
        in.finish();
        return m;
      case static_cast<std::uint8_t>(msg_type::pong):
        m.type = msg_type::pong;
        m.token = in.u64("token");
        m.seq = in.u64("sequence");
        in.finish();
        return m;
      default:
        return std::nullopt;
    }
  } catch (...) {
    return std::nullopt;  // truncated
  }
}

}  // namespace nixl::libfabric::detail::wire
