// Parameters of the CUDA backend, parsed with the core's parameter parsers.

#include <string>

#include <nixl/backends/cuda/config.hpp>
#include <nixl/detail/params.hpp>
#include <nixl/log.hpp>

namespace nixl::cuda {

config config::from_params(const nixl::params& p) {
  config c;
  auto number = [](std::string_view key, const std::string& v, std::uint64_t lo, std::uint64_t hi) {
    return nixl::detail::parse_number("CUDA", key, v, lo, hi);
  };
  for (const auto& [k, v] : p) {
    if (k == "streams_per_gpu")
      c.streams_per_gpu = static_cast<unsigned>(number(k, v, 1, 64));
    else if (k == "kernel_max_bytes")
      c.kernel_max_bytes = number(k, v, 0, std::uint64_t{1} << 40);
    else if (k == "kernel_min_count")
      c.kernel_min_count = number(k, v, 1, 1u << 30);
    else if (k == "pin_dram")
      c.pin_dram = nixl::detail::parse_bool("CUDA", k, v);
    else
      nixl::log::warn(
          "CUDA backend: unknown parameter '{}' ignored (known: streams_per_gpu, "
          "kernel_max_bytes, kernel_min_count, pin_dram)",
          k);
  }
  return c;
}

nixl::params config::to_params() const {
  return {{"streams_per_gpu", std::to_string(streams_per_gpu)},
          {"kernel_max_bytes", std::to_string(kernel_max_bytes)},
          {"kernel_min_count", std::to_string(kernel_min_count)},
          {"pin_dram", pin_dram ? "true" : "false"}};
}

}  // namespace nixl::cuda
