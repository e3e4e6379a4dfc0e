// Identity of this host and process (identity.hpp).

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "identity.hpp"

namespace nixl::cuda::detail {

namespace {

// /proc/sys/kernel/random/boot_id holds "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": it differs
// between hosts and between boots of one host.
uuid read_boot_id() noexcept {
  uuid out{};
  char buf[64] = {};
  const int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    std::size_t k = 0;
    for (ssize_t i = 0; i + 1 < n && k < 16; ++i) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex(buf[i]);
      if (hi < 0) continue;
      const int lo = hex(buf[i + 1]);
      if (lo < 0) continue;
      out[k++] = static_cast<std::uint8_t>(hi * 16 + lo);
      ++i;
    }
    if (k == 16) return out;
  }
  // No boot id (not Linux, or /proc hidden): fall back to the host name alone, hashed.
  char host[256] = {};
  (void)::gethostname(host, sizeof(host) - 1);
  std::uint64_t h = 1469598103934665603ull;
  for (const char* c = host; *c != 0; ++c)
    h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}

}  // namespace

const identity& self() noexcept {
  static const identity id = [] {
    identity me;
    me.boot_id = read_boot_id();
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) me.hostname = host;
    std::random_device rd;
    me.process_token =
        (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(::getpid());
    if (me.process_token == 0) me.process_token = 1;
    return me;
  }();
  return id;
}

void identity::encode(nixl::detail::writer& w) const {
  w.raw({reinterpret_cast<const char*>(boot_id.data()), boot_id.size()});
  w.u64(process_token);
}

identity identity::decode(nixl::detail::reader& r) {
  identity id;
  const std::string_view boot = r.raw("boot id", id.boot_id.size());
  std::memcpy(id.boot_id.data(), boot.data(), boot.size());
  id.process_token = r.u64("process token");
  return id;
}

}  // namespace nixl::cuda::detail
