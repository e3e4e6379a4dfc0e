// Parameters of the POSIX backend (NIXL's names), parsed with the core's parameter parsers.

#include <nixl/backends/posix.hpp>

#include <string>

#include <nixl/detail/params.hpp>

namespace nixl::posix {

using detail::engine_kind;

config config::from_params(const nixl::params& p) {
  config c;
  struct flag {
    std::string_view key;
    engine_kind kind;
  };
  // NIXL's order: the first "true" wins.
  static constexpr flag flags[] = {{"use_aio", engine_kind::aio},
                                   {"use_uring", engine_kind::uring},
                                   {"use_posix", engine_kind::posix},
                                   {"use_posix_aio", engine_kind::posix}};
  for (const auto& f : flags) {
    auto it = p.find(f.key);
    if (it == p.end()) continue;
    if (it->second.empty()) continue;
    const bool v = nixl::detail::parse_bool("POSIX", f.key, it->second);
    if (v && !c.preferred) c.preferred = f.kind;
    if (!v) c.allowed[static_cast<int>(f.kind)] = false;
  }
  if (c.preferred) c.allowed[static_cast<int>(*c.preferred)] = true;
  if (auto it = p.find("kernel_queue_size"); it != p.end() && !it->second.empty())
    c.queue_depth =
        static_cast<unsigned>(nixl::detail::parse_number("POSIX", it->first, it->second, 1, 4096));
  if (auto it = p.find("num_threads"); it != p.end() && !it->second.empty())
    c.threads =
        static_cast<unsigned>(nixl::detail::parse_number("POSIX", it->first, it->second, 0, 256));
  if (auto it = p.find("ios_pool_size"); it != p.end() && !it->second.empty())
    c.ios_pool_size =
        nixl::detail::parse_number("POSIX", it->first, it->second, 1, std::uint64_t{1} << 32);
  return c;
}

nixl::params config::to_params() const {
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  nixl::params p;
  p["use_uring"] = b(preferred == engine_kind::uring);
  p["use_aio"] = b(preferred == engine_kind::aio);
  p["use_posix"] = b(preferred == engine_kind::posix);
  p["kernel_queue_size"] = std::to_string(queue_depth);
  p["num_threads"] = std::to_string(threads);
  p["ios_pool_size"] = std::to_string(ios_pool_size);
  return p;
}

nixl::params backend::default_params() {
  return {{"use_uring", "true"},        {"use_aio", "false"}, {"use_posix", "false"},
          {"kernel_queue_size", "256"}, {"num_threads", "4"}, {"ios_pool_size", "65536"}};
}

}  // namespace nixl::posix
