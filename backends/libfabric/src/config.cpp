// LIBFABRIC backend parameters: nixl::libfabric::config from NIXL's parameter names and back.

#include <cstdlib>
#include <string>
#include <string_view>

#include <nixl/backends/libfabric.hpp>
#include <nixl/detail/params.hpp>
#include <nixl/log.hpp>

namespace nixl::libfabric {

std::vector<std::string> config::split_list(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

namespace {

std::chrono::milliseconds millis(std::string_view key, std::string_view v, std::uint64_t lo,
                                 std::uint64_t hi) {
  return std::chrono::milliseconds(nixl::detail::parse_number("LIBFABRIC", key, v, lo, hi));
}

}  // namespace

config config::from_params(const params& p) {
  config c;
  for (const auto& [key, value] : p) {
    if (key == "provider") {
      c.provider = value;
    } else if (key == "interfaces" || key == "device_list") {
      c.interfaces = split_list(value);
      if (c.interfaces.size() > max_rails)
        raise(status::invalid_param, "LIBFABRIC parameter {}='{}': at most {} rails", key, value,
              max_rails);
    } else if (key == "stripe_threshold") {
      c.stripe_threshold =
          nixl::detail::parse_number("LIBFABRIC", key, value, 4096, std::uint64_t{1} << 40);
    } else if (key == "max_notif_size") {
      c.max_notif_size =
          nixl::detail::parse_number("LIBFABRIC", key, value, 64, std::size_t{16} << 20);
    } else if (key == "rx_buffers") {
      c.rx_buffers = nixl::detail::parse_number("LIBFABRIC", key, value, 4, 4096);
    } else if (key == "heartbeat_ms") {
      c.heartbeat = millis(key, value, 10, 60000);
    } else if (key == "peer_timeout_ms") {
      c.peer_timeout = millis(key, value, 50, 600000);
    } else if (key == "num_threads") {
      c.num_threads = nixl::detail::parse_number("LIBFABRIC", key, value, 0, 1024);
    } else if (key == "split_batch_size") {
      c.split_batch_size =
          nixl::detail::parse_number("LIBFABRIC", key, value, 0, std::size_t{1} << 30);
    } else if (key == "post_thread") {
      c.post_thread = nixl::detail::parse_post_thread("LIBFABRIC", key, value);
    } else if (key == "enable_prog_thread") {
      c.enable_prog_thread = nixl::detail::parse_bool("LIBFABRIC", key, value);
    } else if (key == "progress_spin_us") {
      c.progress_spin = std::chrono::microseconds(
          nixl::detail::parse_number("LIBFABRIC", key, value, 0, 1000000));
    } else {
      log::warn("LIBFABRIC: ignoring unknown parameter '{}'", key);
    }
  }
  if (c.peer_timeout <= c.heartbeat)
    raise(status::invalid_param,
          "LIBFABRIC parameters: peer_timeout_ms={} must exceed heartbeat_ms={}",
          c.peer_timeout.count(), c.heartbeat.count());
  return c;
}

params config::to_params() const {
  params p;
  p["provider"] = provider;
  std::string ifs;
  for (const std::string& i : interfaces) ifs += (ifs.empty() ? "" : ",") + i;
  p["interfaces"] = ifs;
  p["stripe_threshold"] = std::to_string(stripe_threshold);
  p["max_notif_size"] = std::to_string(max_notif_size);
  p["rx_buffers"] = std::to_string(rx_buffers);
  p["heartbeat_ms"] = std::to_string(heartbeat.count());
  p["peer_timeout_ms"] = std::to_string(peer_timeout.count());
  p["num_threads"] = std::to_string(num_threads);
  p["split_batch_size"] = std::to_string(split_batch_size);
  p["progress_spin_us"] = std::to_string(progress_spin.count());
  p["post_thread"] = std::string(nixl::detail::to_string(post_thread));
  if (enable_prog_thread) p["enable_prog_thread"] = *enable_prog_thread ? "true" : "false";
  return p;
}

std::string config::effective_provider() const {
  if (!provider.empty()) return provider;
  if (const char* e = std::getenv("FI_PROVIDER"); e != nullptr && *e != '\0') return e;
  return "tcp;ofi_rxm";
}

params backend::default_params() {
  return {{"provider", ""},
          {"interfaces", ""},
          {"stripe_threshold", "131072"},
          {"max_notif_size", "65536"},
          {"rx_buffers", "64"},
          {"heartbeat_ms", "100"},
          {"peer_timeout_ms", "1200"},
          {"num_threads", "0"},
          {"split_batch_size", "1024"},
          {"enable_prog_thread", "true"},
          {"progress_spin_us", "50"},
          {"post_thread", "auto"}};
}

}  // namespace nixl::libfabric
