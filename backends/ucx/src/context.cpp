// The UCX backend's context: the UCX context and workers of an engine, its identity and
// connection info, and its teardown.

#include <ifaddrs.h>
#include <net/if.h>

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nixl/log.hpp>

#include "internal.hpp"
#include "wire.hpp"

namespace nixl::ucx {
namespace detail {

namespace {

// Whether the context's transports are TCP alone (with `self`): what UCX_TLS=tcp gives. Read
// from UCX's own listing of the context's resources ("... -- tcp/lo"); a listing this does not
// recognise reads as "not only TCP", which keeps the default endpoint settings.
bool tcp_only(ucp_context_h ctx) noexcept {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* f = ::open_memstream(&text, &size);
  if (f == nullptr) return false;
  ucp_context_print_info(ctx, f);
  std::fclose(f);
  const std::string info(text != nullptr ? text : "", size);
  std::free(text);
  bool tcp = false;
  for (std::size_t at = info.find("-- "); at != std::string::npos; at = info.find("-- ", at)) {
    at += 3;
    const std::size_t slash = info.find('/', at);
    if (slash == std::string::npos || info.find('\n', at) < slash) return false;
    const std::string_view tl(info.data() + at, slash - at);
    if (tl == "tcp")
      tcp = true;
    else if (tl != "self")
      return false;
  }
  return tcp;
}

// UCX prints its own log lines (WARN and ERROR by default: a flush to a peer that died, a bad
// UCX_* variable) to stdout unless UCX_LOG_FILE names a file. A program's stdout is its own:
// those lines go to stderr instead, as the library's own do (nixl/log.hpp: one whole line
// each, or the sink set there), at UCX's level (UCX_LOG_LEVEL; NIXL_LOG_LEVEL does not filter
// them). Fatal messages and UCX's "print" level keep UCX's own handler.
ucs_log_func_rc_t ucx_log_line(const char* file, unsigned line, const char* /*function*/,
                               ucs_log_level_t level, const ucs_log_component_config_t* comp,
                               const char* format, va_list ap) {
  if (level == UCS_LOG_LEVEL_FATAL || level >= UCS_LOG_LEVEL_LAST) return UCS_LOG_FUNC_RC_CONTINUE;
  if (comp != nullptr && level > comp->log_level) return UCS_LOG_FUNC_RC_CONTINUE;
  char buf[2048];
  const int n = std::vsnprintf(buf, sizeof buf, format, ap);
  if (n < 0) return UCS_LOG_FUNC_RC_CONTINUE;
  log::level ours = level <= UCS_LOG_LEVEL_ERROR   ? log::level::error
                    : level == UCS_LOG_LEVEL_WARN  ? log::level::warn
                    : level <= UCS_LOG_LEVEL_INFO  ? log::level::info
                    : level == UCS_LOG_LEVEL_DEBUG ? log::level::debug
                                                   : log::level::trace;
  // the file's name without its folders: a suffix of UCX's __FILE__, so still a C string
  std::string_view name = file != nullptr ? file : "ucx";
  name.remove_prefix(name.find_last_of('/') + 1);
  std::string_view rest(buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
  // A flush that failed because its peer went away (an endpoint closed to an agent that left,
  // over TCP at every normal teardown) is reported by the backend itself: the peer-gone line
  // and the status of each request it ends. UCX's own line says it again: a debug line of
  // ours, which NIXL_LOG_LEVEL filters.
  if (ours < log::level::debug && name == "flush.c" &&
      rest.find("error during flush") != std::string_view::npos) {
    ours = log::level::debug;
    if (!log::enabled(ours)) return UCS_LOG_FUNC_RC_STOP;
  }
  while (!rest.empty()) {  // one line of ours per line of UCX's message
    const std::size_t end = rest.find('\n');
    const std::string_view one = rest.substr(0, end);
    if (!one.empty())
      log::detail::emit(ours, fmt::format("UCX {}", one), log::detail::where_t{name.data(), line});
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return UCS_LOG_FUNC_RC_STOP;
}

void route_ucx_log() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* f = std::getenv("UCX_LOG_FILE");
    if (f == nullptr || *f == '\0') ucs_log_push_handler(ucx_log_line);
  });
}

// UCX lists TCP devices from /sys/class/net. Where sysfs was mounted for another network
// namespace (`nsenter --net`, `unshare --net` without a sysfs mount, a container given the
// host's /sys), that list is not this namespace's: UCX then sees only interfaces whose names
// happen to exist in both, typically just lo, and every peer on another host is "unreachable".
// Returns a description of the mismatch, or "" when sysfs matches the interfaces we have.
std::string netdev_mismatch() {
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return {};
  std::set<std::string> ours;
  for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK))
      continue;
    if (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)
      ours.insert(i->ifa_name);
  }
  ::freeifaddrs(ifs);
  std::error_code ec;
  std::set<std::string> listed;
  for (const auto& e : std::filesystem::directory_iterator("/sys/class/net", ec))
    listed.insert(e.path().filename().string());
  if (ec) return {};
  std::string missing;
  for (const std::string& n : ours)
    if (!listed.contains(n)) missing += (missing.empty() ? "" : ",") + n;
  if (missing.empty()) return {};
  std::string seen;
  for (const std::string& n : listed) seen += (seen.empty() ? "" : ",") + n;
  return fmt::format(
      "this network namespace has interface(s) {} that /sys/class/net (where UCX looks for "
      "devices) does not list: it lists {}, so sysfs belongs to another network namespace and "
      "UCX cannot use {} for TCP; mount sysfs for this namespace (`ip netns exec` does; or "
      "`mount -t sysfs sysfs /sys` in the namespace's own mount namespace; containers need a "
      "/sys of their own, not the host's)",
      missing, seen, missing);
}

}  // namespace

engine::engine(const config& cfg, const backend_context& bctx)
    : cfg_(cfg), agent_name_(bctx.agent_name), waker_(bctx.waker) {
  if (cfg_.num_workers == 0 || cfg_.num_workers > config::max_workers)
    raise(status::invalid_param, "UCX: num_workers={}: use a number from 1 to {}", cfg_.num_workers,
          config::max_workers);
  if (cfg_.num_threads > config::max_workers)
    raise(status::invalid_param, "UCX: num_threads={}: use a number from 0 to {}", cfg_.num_threads,
          config::max_workers);
  // one worker per posting thread
  cfg_.num_workers = std::max(cfg_.num_workers, cfg_.num_threads);
  if (agent_name_.size() > max_name_size)
    raise(status::invalid_param, "UCX: agent name of {} bytes exceeds the limit of {}",
          agent_name_.size(), max_name_size);

  route_ucx_log();  // before UCX reads its configuration, whose complaints it logs
  id_ = nixl::detail::host_identity::self();
  netdev_problem_ = netdev_mismatch();
  if (!netdev_problem_.empty()) log::warn("UCX: agent '{}': {}", bctx.agent_name, netdev_problem_);
  {
    std::random_device rd;
    uid_ = (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ reinterpret_cast<std::uintptr_t>(this);
    auto& reg = local_registry::get();
    std::lock_guard lk(reg.mu);
    reg.live[uid_] = alive_;
  }

  const bool want_thread = cfg_.enable_prog_thread.value_or(bctx.progress_thread);
  const bool multi = want_thread || bctx.sync == thread_sync::rw;

  const config_handle ucfg = read_ucp_config(cfg_);

  ucp_params_t up{};
  up.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  up.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | (want_thread ? UCP_FEATURE_WAKEUP : 0);
  up.mt_workers_shared = multi ? 1 : 0;
  const std::string ctx_name = "nixl:" + agent_name_;
  up.name = ctx_name.c_str();
  ucp_context_h raw_ctx = nullptr;
  NIXL_UCX_CHECK(ucp_init(&up, ucfg.get(), &raw_ctx));
  ctx_ = context_handle(raw_ctx);

  ucp_context_attr_t ca{};
  ca.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(ctx_.get(), &ca) == UCS_OK)
    cuda_ = (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  tcp_only_ = tcp_only(ctx_.get());

  watch_ = std::make_unique<worker_watch[]>(cfg_.num_workers);
  for (std::size_t i = 0; i < cfg_.num_workers; ++i) {
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = multi ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SERIALIZED;
    ucp_worker_h w = nullptr;
    NIXL_UCX_CHECK(ucp_worker_create(ctx_.get(), &wp, &w));
    workers_.emplace_back(w);

    const std::pair<unsigned, ucp_am_recv_callback_t> handlers[] = {
        {notif_am_id, &engine::on_notif}, {abort_am_id, &engine::on_abort},
        {copy_am_id, &engine::on_copy},   {ack_am_id, &engine::on_copy_ack},
        {hello_am_id, &engine::on_hello}, {beat_am_id, &engine::on_beat}};
    ucp_am_handler_param_t ap{};
    ap.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    ap.arg = this;
    for (const auto& [id, cb] : handlers) {  // one handler per message kind
      ap.id = id;
      ap.cb = cb;
      NIXL_UCX_CHECK(ucp_worker_set_am_recv_handler(w, &ap));
    }

    ucp_address_t* addr = nullptr;
    std::size_t len = 0;
    NIXL_UCX_CHECK(ucp_worker_get_address(w, &addr, &len));
    addresses_.emplace_back(reinterpret_cast<const char*>(addr), len);
    ucp_worker_release_address(w, addr);
  }

  conn_info_ = wire::encode_conn_info(id_, uid_, addresses_, runs_host_copies(), want_thread);
  notif_prefix_ = wire::notif_prefix(agent_name_);
  hello_ = notif_prefix_ + wire::encode_conn_info(id_, uid_, std::span(addresses_.data(), 1),
                                                  runs_host_copies(), want_thread);

  connect_self();
  if (want_thread) start_progress_thread(bctx.progress_delay);
  log::info("UCX: agent '{}' up: {} worker(s), progress thread {}, error mode {}, CUDA {}",
            agent_name_, workers_.size(), want_thread ? "on" : "off",
            to_string(cfg_.error_handling), cuda_ ? "yes" : "no");
}

engine::~engine() {
  alive_->store(false, std::memory_order_release);  // agents of this process see us go
  {
    auto& reg = local_registry::get();
    std::lock_guard lk(reg.mu);
    reg.live.erase(uid_);
  }
  {
    // driver copies of released requests end before the memory they use is let go
    std::lock_guard lk(gpu_mu_);
    for (auto [s, g] : gpu_slots_) gpu_wait(*g);
  }
  if (thread_.joinable()) {
    stop_.store(true);
    wake();
    thread_.join();
    run_queued_posts(true);  // posts handed to the thread that it did not make end as canceled
  }
  {
    std::vector<peer_state*> live;
    {
      std::lock_guard lk(peers_mu_);
      for (auto& p : peers_)
        if (!p->closed) live.push_back(p.get());
    }
    for (peer_state* p : live) {
      if (p->pidfd >= 0) {
        ::close(p->pidfd);
        p->pidfd = -1;
      }
      close_eps(p);
    }
  }
  // rkeys come from the workers' pools: release them first. Destroying the workers then
  // completes what a dead peer left pending (callbacks see live slots); registrations last.
  {
    std::lock_guard lk(deferred_mu_);
    deferred_rkeys_.clear();
  }
  workers_.clear();
  drain_deferred(true);
  wake_fd_.reset();
  epoll_fd_.reset();
  // copies run for peers (into this process's memory) end too, once no worker can take more;
  // then the peers' VRAM that copy requests opened here and that stayed open for the next one
  reap_served(true);
  nixl::detail::cu::ipc_table::get().close_idle(this);
}

}  // namespace detail

backend::backend(const config& cfg, const backend_context& ctx)
    : eng_(std::make_unique<detail::engine>(cfg, ctx)) {}

}  // namespace nixl::ucx
