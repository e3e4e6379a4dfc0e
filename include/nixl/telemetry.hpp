#pragma once
/// Per-request telemetry (NIXL's `nixl_xfer_telem_t`) and its gating.

#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <string>

namespace nixl {

/// What one request measured. Durations are in microseconds from the last post's start.
struct xfer_telemetry {
  std::chrono::steady_clock::time_point start{};
  std::chrono::microseconds post_duration{0};  ///< start -> post returned
  std::chrono::microseconds xfer_duration{0};  ///< start -> completion observed
  std::size_t total_bytes = 0;                 ///< sum of descriptor lengths
  std::size_t desc_count =
      0;  ///< as NIXL: the caller's count (create_request), merged (make_request)
};

namespace detail {
/// `NIXL_TELEMETRY_ENABLE` wins when set: truthy (y, yes, on, true, 1) enables, anything else
/// disables; otherwise the config flag decides.
inline bool telemetry_enabled(bool config_flag) {
  const char* env = std::getenv("NIXL_TELEMETRY_ENABLE");
  if (env == nullptr) return config_flag;
  std::string v(env);
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "y" || v == "yes" || v == "on" || v == "true" || v == "1";
}
}  // namespace detail

}  // namespace nixl
