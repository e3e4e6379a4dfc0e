// UCX backend parameters: nixl::ucx::config from NIXL's parameter names and back, and the UCX
// configuration (ucp_config_t) they give.

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/detail/enum_names.hpp>
#include <nixl/detail/params.hpp>
#include <nixl/log.hpp>

#include "internal.hpp"

namespace nixl::ucx {

namespace {

// `host_vram_copy`, `host_dram_copy`: `ours` (or empty: the default) is true, `ucx` false.
bool who_copies(std::string_view key, std::string_view value, std::string_view ours) {
  const std::string v = nixl::detail::lower(value);
  if (v == ours || v.empty()) return true;
  if (v == "ucx") return false;
  raise(status::invalid_param, "UCX parameter {}='{}': use {} or ucx", key, value, ours);
}

// `KEY=VALUE,KEY=VALUE`; an item without `=` continues the value before it, so that UCX's list
// values read as written: `TLS=posix,self,RNDV_THRESH=inf` is TLS=posix,self and RNDV_THRESH=inf.
std::vector<std::pair<std::string, std::string>> parse_engine_config(std::string_view s) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos && !out.empty()) {
      out.back().second.append(",").append(item);
      continue;
    }
    if (eq == std::string_view::npos || eq == 0)
      raise(status::invalid_param,
            "UCX parameter engine_config: item '{}' is not KEY=VALUE; write e.g. "
            "engine_config=TLS=posix,self,RNDV_THRESH=inf",
            item);
    std::string_view key = item.substr(0, eq);
    if (key.substr(0, 4) == "UCX_") key.remove_prefix(4);
    out.emplace_back(std::string(key), std::string(item.substr(eq + 1)));
  }
  return out;
}

// An InfiniBand device name gets UCX's port suffix (mlx5_0 -> mlx5_0:1); others stay as given.
std::string net_devices(std::string_view list) {
  std::string out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string dev(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (dev.empty()) continue;
    if (dev.find(':') == std::string::npos &&
        ::access(fmt::format("/sys/class/infiniband/{}", dev).c_str(), F_OK) == 0)
      dev += ":1";
    if (!out.empty()) out += ',';
    out += dev;
  }
  return out;
}

}  // namespace

std::string_view to_string(error_mode m) noexcept {
  static constexpr auto names =
      nixl::detail::make_enum_names<error_mode>({"peer", "ucx_peer", "none"}, "peer");
  return names(m);
}

config config::from_params(const params& p) {
  config c;
  for (const auto& [key, value] : p) {
    if (key == "num_workers") {
      c.num_workers = nixl::detail::parse_number("UCX", key, value, 1, max_workers);
    } else if (key == "num_threads") {
      c.num_threads = nixl::detail::parse_number("UCX", key, value, 0, max_workers);
    } else if (key == "split_batch_size") {
      c.split_batch_size = nixl::detail::parse_number("UCX", key, value, 0, std::size_t{1} << 30);
    } else if (key == "device_list" || key == "ucx_devices") {
      if (!value.empty()) c.device_list = value;
    } else if (key == "ucx_error_handling_mode") {
      const std::string v = nixl::detail::lower(value);
      if (v == "peer" || v == "auto" || v.empty())
        c.error_handling = error_mode::peer;
      else if (v == "ucx_peer" || v == "ucp_err_handling_mode_peer")
        c.error_handling = error_mode::ucx_peer;
      else if (v == "none" || v == "ucp_err_handling_mode_none")
        c.error_handling = error_mode::none;
      else
        raise(status::invalid_param,
              "UCX parameter ucx_error_handling_mode='{}': use peer (the default), ucx_peer or "
              "none",
              value);
    } else if (key == "engine_config") {
      parse_engine_config(value);  // validates
      c.engine_config = value;
    } else if (key == "progress_spin_us") {
      c.progress_spin =
          std::chrono::microseconds(nixl::detail::parse_number("UCX", key, value, 0, 1000000));
    } else if (key == "peer_timeout_ms") {
      c.peer_timeout =
          std::chrono::milliseconds(nixl::detail::parse_number("UCX", key, value, 100, 3600000));
    } else if (key == "host_vram_copy") {
      c.cuda_host_vram = who_copies(key, value, "cuda");
    } else if (key == "host_dram_copy") {
      c.cma_host_dram = who_copies(key, value, "cma");
    } else if (key == "shm_min_size") {
      c.shm_min_size = nixl::detail::parse_number("UCX", key, value, 0, std::uint64_t{1} << 40);
    } else if (key == "post_thread") {
      c.post_thread = nixl::detail::parse_post_thread("UCX", key, value);
    } else if (key == "enable_prog_thread") {
      c.enable_prog_thread = nixl::detail::parse_bool("UCX", key, value);
    } else {
      log::warn("UCX: ignoring unknown parameter '{}'", key);
    }
  }
  return c;
}

params config::to_params() const {
  params p;
  p["num_workers"] = std::to_string(num_workers);
  p["num_threads"] = std::to_string(num_threads);
  p["split_batch_size"] = std::to_string(split_batch_size);
  p["device_list"] = device_list;
  p["ucx_error_handling_mode"] = std::string(to_string(error_handling));
  p["engine_config"] = engine_config;
  p["progress_spin_us"] = std::to_string(progress_spin.count());
  p["peer_timeout_ms"] = std::to_string(peer_timeout.count());
  p["host_vram_copy"] = cuda_host_vram ? "cuda" : "ucx";
  p["host_dram_copy"] = cma_host_dram ? "cma" : "ucx";
  p["shm_min_size"] = std::to_string(shm_min_size);
  p["post_thread"] = std::string(nixl::detail::to_string(post_thread));
  if (enable_prog_thread) p["enable_prog_thread"] = *enable_prog_thread ? "true" : "false";
  return p;
}

params backend::default_params() {
  return {{"num_workers", "1"},       {"num_threads", "0"},
          {"split_batch_size", "0"},  {"device_list", ""},
          {"ucx_devices", ""},        {"ucx_error_handling_mode", "peer"},
          {"engine_config", ""},      {"enable_prog_thread", "true"},
          {"progress_spin_us", "50"}, {"host_vram_copy", "cuda"},
          {"host_dram_copy", "cma"},  {"shm_min_size", "67108864"},
          {"post_thread", "auto"},    {"peer_timeout_ms", "2000"}};
}

namespace detail {

config_handle read_ucp_config(const config& cfg) {
  ucp_config_t* raw_cfg = nullptr;
  NIXL_UCX_CHECK(ucp_config_read(nullptr, nullptr, &raw_cfg));
  config_handle ucfg(raw_cfg);
  if (!cfg.device_list.empty()) {
    const std::string devs = net_devices(cfg.device_list);
    if (ucp_config_modify(ucfg.get(), "NET_DEVICES", devs.c_str()) != UCS_OK)
      raise(status::invalid_param, "UCX parameter device_list='{}': UCX rejects NET_DEVICES={}",
            cfg.device_list, devs);
  }
  // GPU memory without a GPU transport between the peers (two hosts over TCP): by default UCX
  // emulates the put in software, packing each fragment with a synchronous copy from the GPU
  // (0.38 GB/s between two H200 processes over TCP). UCX 1.22's RMA rendezvous pipelines the
  // staging through host buffers instead (about 4 GB/s); it only applies when one side is not
  // host memory, and direct transports (cuda_ipc) still win the selection. On unless the
  // environment or engine_config says otherwise (docs/ucx.md, "GPU memory").
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const bool ucx_1_22 = major > 1 || (major == 1 && minor >= 22);
  if (ucx_1_22 && std::getenv("UCX_RMA_PPLN_ENABLE") == nullptr)
    (void)ucp_config_modify(ucfg.get(), "RMA_PPLN_ENABLE", "y");
  // Large same-host DRAM blocks through UCX's shared-memory protocol (shm_min_size): UCX picks
  // it over cma only when RMA lanes are chosen by speed and cma's is rated low. Between hosts
  // UCX's zero-copy puts keep winning the selection. The FIFO's segment size stays UCX's: a
  // sender packs into the receiver's segments up to its own size, so peers must agree on it.
  if (ucx_1_22 && cfg.cma_host_dram && cfg.shm_min_size > 0)
    for (const auto& [k, v] : {std::pair{"PREFER_OFFLOAD", "n"}, std::pair{"CMA_BW", "100MBs"}})
      if (std::getenv(fmt::format("UCX_{}", k).c_str()) == nullptr)
        (void)ucp_config_modify(ucfg.get(), k, v);
  for (const auto& [k, v] : parse_engine_config(cfg.engine_config)) {
    if (const ucs_status_t s = ucp_config_modify(ucfg.get(), k.c_str(), v.c_str()); s != UCS_OK)
      raise(status::invalid_param, "UCX parameter engine_config: UCX rejects {}={}: {}", k, v,
            ucs_status_string(s));
  }
  return ucfg;
}

}  // namespace detail
}  // namespace nixl::ucx
