#pragma once
// nixlAgent's C++ side: the run-time facade (nixl::runtime::agent: the agent, its metadata
// exchange and the objects it hands out) adapted to Python: handles cross as integers (the
// addresses of the facade's objects), calls release the GIL, results become Python objects.
// The members are defined by concern: agent.cpp (construction, backends, memory), transfers.cpp
// (prepared lists, requests, notifications), metadata.cpp (the exchange).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "module.hpp"

namespace nixl::python {

/// nixlAgentConfig: NIXL's fields and defaults.
struct py_config {
  bool useProgThread = false;
  bool useListenThread = false;
  int listenPort = default_comm_port;
  thread_sync syncMode = thread_sync::none;
  bool captureTelemetry = false;
  std::uint64_t pthrDelay = 0;
  std::uint64_t lthrDelay = 100000;  ///< accepted for NIXL's API; the listener does not poll
  std::uint64_t etcdWatchTimeout = 5000000;
  std::chrono::microseconds xferStallTimeout{0};  ///< NIXL's; a datetime.timedelta in Python
  std::string listenAddress;                      ///< empty: NIXL_LISTEN_ADDRESS, else 127.0.0.1
  std::string metadataSecret;                     ///< empty: NIXL_METADATA_SECRET, else none
};

/// nixlXferTelemetry: times in microseconds.
struct py_telemetry {
  std::int64_t startTime = 0;
  std::int64_t postDuration = 0;
  std::int64_t xferDuration = 0;
  std::uint64_t totalBytes = 0;
  std::uint64_t descCount = 0;
};

class py_agent;

/// nixlAgent.prepMemView / releaseMemView (views.cpp): memory views for GPU-initiated
/// transfers, of an nixlXferDList (local) or an nixlRemoteDList (remote); the handle is
/// NIXL's nixlMemViewH as an integer.
std::uintptr_t prep_mem_view(py_agent& a, const py::object& descs,
                             const std::vector<std::uintptr_t>& bs);
void release_mem_view(py_agent& a, std::uintptr_t h);

class py_agent {
 public:
  py_agent(const std::string& name, const py_config& c);
  py_agent(const py_agent&) = delete;
  py_agent& operator=(const py_agent&) = delete;

  agent_t& get() { return rt_.core(); }

  // -- backends (agent.cpp) --
  std::vector<std::string> avail_plugins() const;
  py::tuple plugin_params(const std::string& name) const;
  std::uintptr_t create_backend(const std::string& name,
                                const std::map<std::string, std::string>& p);
  const std::string& backend_name(std::uintptr_t h) const;
  std::uintptr_t backend_handle(std::string_view name);
  py::tuple backend_params(std::uintptr_t h) const;
  /// The backends named by handles (none: the agent chooses).
  backend_options options(const std::vector<std::uintptr_t>& hs) const;

  // -- memory (agent.cpp) --
  status register_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs);
  status deregister_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs);
  py::list query_mem(const reg_dlist& l, std::uintptr_t b);

  // -- prepared lists and requests (transfers.cpp) --
  std::uintptr_t prep_dlist(std::string agent, const xfer_dlist& l,
                            const std::vector<std::uintptr_t>& bs);
  std::uintptr_t prep_dlist(std::string agent, const strided_dlist& l,
                            const std::vector<std::uintptr_t>& bs);
  std::shared_ptr<runtime::prepared> dlist(std::uintptr_t h) const;
  void release_dlist(std::uintptr_t h);
  std::uintptr_t make_req(xfer_op op, std::uintptr_t lh, py::object li, std::uintptr_t rh,
                          py::object ri, const std::string& notif,
                          const std::vector<std::uintptr_t>& bs, bool skip);
  std::uintptr_t create_req(xfer_op op, const xfer_dlist& l, const xfer_dlist& r,
                            const std::string& remote, const std::string& notif,
                            const std::vector<std::uintptr_t>& bs);
  std::shared_ptr<runtime::request> req(std::uintptr_t h) const;
  status post(std::uintptr_t h, const std::string& notif);
  status xfer_status(std::uintptr_t h);
  /// What the request's backend already knows, without progress (xfer_request::peek).
  status peek_xfer(std::uintptr_t h);
  /// request::wait without the GIL; a negative `timeout_s` waits without a deadline.
  status wait_xfer(std::uintptr_t h, double timeout_s);
  void release_req(std::uintptr_t h);
  py_telemetry telemetry(std::uintptr_t h);
  std::uintptr_t query_backend(std::uintptr_t h);
  py::tuple estimate(std::uintptr_t h);

  // -- notifications (transfers.cpp) --
  py::dict get_notifs(py::dict d, const std::vector<std::uintptr_t>& bs);
  /// agent::wait_notifications without the GIL, appended to `d` as get_notifs does.
  py::dict wait_notifs(py::dict d, const std::vector<std::uintptr_t>& bs, double timeout_s);
  /// agent::aborted_notifications, appended to `d` as get_notifs does.
  py::dict get_aborts(py::dict d, const std::vector<std::uintptr_t>& bs);
  /// agent::wait_notifications(out, aborts, ...) without the GIL: (notifications, notices).
  py::tuple wait_notifs_or_aborts(const std::vector<std::uintptr_t>& bs, double timeout_s);
  void gen_notif(const std::string& remote, const std::string& msg,
                 const std::vector<std::uintptr_t>& bs);
  /// agent::gone_agents without the GIL.
  std::vector<std::string> gone_agents(const std::vector<std::uintptr_t>& bs);

  // -- metadata (metadata.cpp) --
  /// Calls `f(exchange, target)` without the GIL; not_supported in a build without it.
  template <class F>
  void with_exchange(std::string_view call, const std::string& ip, int port,
                     const std::string& label, F&& f);
  std::uint16_t listen_port() const noexcept { return rt_.listen_port(); }

 private:
  std::uintptr_t keep(request_t&& r);
  template <class List>
  std::uintptr_t prep_any(std::string agent, const List& l, const std::vector<std::uintptr_t>& bs);

  runtime::agent rt_;
};

}  // namespace nixl::python
