// Parameters of GDS and GDS_MT (NIXL's names), parsed with the core's parameter parsers.

#include <nixl/backends/gds.hpp>
#include <nixl/backends/gds_mt.hpp>

#include <algorithm>
#include <string>
#include <thread>

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
  if (auto v = find(p, "cufile_path")) c.cufile_path = *v;
  if (auto v = find(p, "cancel_timeout_ms"))
    c.cancel_timeout = std::chrono::milliseconds(
        nixl::detail::parse_number(who, "cancel_timeout_ms", *v, 1, 3'600'000));
}

}  // namespace

config config::from_params(const nixl::params& p) {
  config c;
  if (auto v = find(p, "batch_pool_size"))
    c.batch_pool_size =
        static_cast<unsigned>(nixl::detail::parse_number("GDS", "batch_pool_size", *v, 1, 1024));
  if (auto v = find(p, "batch_limit"))
    c.batch_limit =
        static_cast<unsigned>(nixl::detail::parse_number("GDS", "batch_limit", *v, 1, 4096));
  if (auto v = find(p, "dram_batch"))
    c.dram_batch = nixl::detail::parse_bool("GDS", "dram_batch", *v);
  common("GDS", p, c);
  return c;
}

nixl::params config::to_params() const {
  return {{"batch_pool_size", std::to_string(batch_pool_size)},
          {"batch_limit", std::to_string(batch_limit)},
          {"max_request_size", std::to_string(max_request_size)},
          {"dram_batch", dram_batch ? "true" : "false"},
          {"cufile_path", cufile_path},
          {"cancel_timeout_ms", std::to_string(cancel_timeout.count())}};
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
  return {{"thread_count", std::to_string(thread_count)},
          {"max_request_size", std::to_string(max_request_size)},
          {"cufile_path", cufile_path},
          {"cancel_timeout_ms", std::to_string(cancel_timeout.count())}};
}

nixl::params backend::default_params() {
  return config{}.to_params();
}

}  // namespace nixl::gds_mt
