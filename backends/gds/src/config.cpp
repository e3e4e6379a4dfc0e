// Parameters of GDS and GDS_MT (NIXL's names), parsed with the core's parameter parsers.

#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds_mt.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include <nixl/detail/enum_names.hpp>
#include <nixl/detail/params.hpp>

namespace nixl::gds {
namespace {

const std::string* find(const nixl::params& p, std::string_view key) {
  auto it = p.find(std::string(key));
  if (it == p.end() || it->second.empty()) return nullptr;
  return &it->second;
}

template <class Config>
void common(std::string_view who, const nixl::params& p, Config& c) {
  if (auto v = find(p, "max_request_size"))
    c.max_request_size =
        nixl::detail::parse_number(who, "max_request_size", *v, 4096, std::uint64_t{1} << 31);
  if (auto v = find(p, "compat_mode"))
    c.compat_mode = nixl::detail::lower(*v) == "auto"
                        ? compat_setting::automatic
                        : (nixl::detail::parse_bool(who, "compat_mode", *v) ? compat_setting::on
                                                                            : compat_setting::off);
  if (auto v = find(p, "compat_chunk_size")) {
    c.compat_chunk_size =
        nixl::detail::parse_number(who, "compat_chunk_size", *v, 4096, std::uint64_t{1} << 31);
    if (c.compat_chunk_size % 4096 != 0)
      raise(status::invalid_param,
            "{}: compat_chunk_size {} is not a multiple of 4096; chunks must stay page-aligned "
            "for O_DIRECT files",
            who, *v);
  }
  if (auto v = find(p, "cufile_path")) c.cufile_path = *v;
  if (auto v = find(p, "cancel_timeout_ms"))
    c.cancel_timeout = std::chrono::milliseconds(
        nixl::detail::parse_number(who, "cancel_timeout_ms", *v, 1, 3'600'000));
  if (auto v = find(p, "thread_spin_us"))
    c.thread_spin = std::chrono::microseconds(
        nixl::detail::parse_number(who, "thread_spin_us", *v, 0, 100'000));
}

/// The parameters both backends take, as strings, added to `p`.
template <class Config>
nixl::params with_common(const Config& c, nixl::params p) {
  p.emplace("max_request_size", std::to_string(c.max_request_size));
  p.emplace("compat_mode", to_string(c.compat_mode));
  p.emplace("compat_chunk_size", std::to_string(c.compat_chunk_size));
  p.emplace("cufile_path", c.cufile_path);
  p.emplace("cancel_timeout_ms", std::to_string(c.cancel_timeout.count()));
  p.emplace("thread_spin_us", std::to_string(c.thread_spin.count()));
  return p;
}

}  // namespace

std::string to_string(compat_setting s) {
  static constexpr auto names =
      nixl::detail::make_enum_names<compat_setting>({"auto", "true", "false"}, "auto");
  return std::string(names(s));
}

bool resolve_compat(compat_setting s, std::string_view module_dir) {
  if (s == compat_setting::on) return true;
  if (s == compat_setting::off) return false;
  if (const char* e = std::getenv("NIXL_GDS_COMPAT_MODE");
      e != nullptr && *e != '\0' && nixl::detail::lower(e) != "auto")
    return nixl::detail::parse_bool("GDS", "NIXL_GDS_COMPAT_MODE", e);
  struct stat st {};
  return ::stat(std::string(module_dir).c_str(), &st) != 0;
}

std::size_t chunk_size(bool compat, std::size_t max_request, std::size_t compat_chunk,
                       std::size_t max_chunks, std::size_t total) noexcept {
  max_request = std::max<std::size_t>(max_request, 1);
  if (!compat) return max_request;
  std::size_t c = std::clamp<std::size_t>(compat_chunk, 1, max_request);
  if (max_chunks > 0 && total / c + (total % c != 0 ? 1 : 0) > max_chunks) {
    const std::size_t want = total / max_chunks + (total % max_chunks != 0 ? 1 : 0);
    c = std::min(max_request, std::max(c, (want + 4095) / 4096 * 4096));
  }
  return c;
}

config config::from_params(const nixl::params& p) {
  config c;
  const auto count = [&p](std::string_view key, unsigned& out, std::uint64_t lo, std::uint64_t hi) {
    if (auto v = find(p, key))
      out = static_cast<unsigned>(nixl::detail::parse_number("GDS", key, *v, lo, hi));
  };
  count("batch_pool_size", c.batch_pool_size, 1, 1024);
  count("batch_limit", c.batch_limit, 1, 4096);
  count("max_inflight", c.max_inflight, 0, 1 << 20);
  count("io_threads", c.io_threads, 1, 256);
  if (auto v = find(p, "dram_batch"))
    c.dram_batch = nixl::detail::parse_bool("GDS", "dram_batch", *v);
  if (auto v = find(p, "compat_thread_size"))
    c.compat_thread_size =
        nixl::detail::parse_number("GDS", "compat_thread_size", *v, 0, std::uint64_t{1} << 31);
  common("GDS", p, c);
  return c;
}

nixl::params config::to_params() const {
  return with_common(*this, {{"batch_pool_size", std::to_string(batch_pool_size)},
                             {"batch_limit", std::to_string(batch_limit)},
                             {"max_inflight", std::to_string(max_inflight)},
                             {"dram_batch", dram_batch ? "true" : "false"},
                             {"io_threads", std::to_string(io_threads)},
                             {"compat_thread_size", std::to_string(compat_thread_size)}});
}

nixl::params backend::default_params() {
  return config{}.to_params();
}

}  // namespace nixl::gds

namespace nixl::gds_mt {

unsigned config::default_threads() noexcept {
  return std::max(1u, std::thread::hardware_concurrency() / 2);
}

config config::from_params(const nixl::params& p) {
  config c;
  if (auto it = p.find("thread_count"); it != p.end() && !it->second.empty())
    c.thread_count = static_cast<unsigned>(
        nixl::detail::parse_number("GDS_MT", "thread_count", it->second, 1, 1024));
  gds::common("GDS_MT", p, c);
  return c;
}

nixl::params config::to_params() const {
  return gds::with_common(*this, {{"thread_count", std::to_string(thread_count)}});
}

nixl::params backend::default_params() {
  return config{}.to_params();
}

}  // namespace nixl::gds_mt
