#ifndef NIXL_SRC_API_CPP_NIXL_H
#define NIXL_SRC_API_CPP_NIXL_H
/// NIXL's agent API (nixl.h of NIXL 1.4): nixlAgent, with NIXL's signatures, defaults and status
/// codes, over one nixl::agent of every backend this build has and the metadata exchange
/// (nixl::compat; see docs/compat.md).

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "nixl_descriptors.h"
#include "nixl_params.h"
#include "nixl_types.h"

/// A backend an agent created (createBackend); owned by the agent.
class nixlBackendH {
 public:
  nixl_backend_t getType() const noexcept { return type_; }
  bool supportsRemote() const { return remote_; }
  bool supportsLocal() const { return local_; }
  bool supportsNotif() const { return notif_; }
  ~nixlBackendH() = default;
  nixlBackendH(const nixlBackendH&) = delete;
  nixlBackendH& operator=(const nixlBackendH&) = delete;

 private:
  friend class nixlAgent;
  friend class nixlAgentData;
  nixlBackendH(nixl_backend_t type, bool remote, bool local, bool notif)
      : type_(std::move(type)), remote_(remote), local_(local), notif_(notif) {}
  nixl_backend_t type_;
  bool remote_;
  bool local_;
  bool notif_;
};

/// An agent: registers memory with its backends, exchanges metadata with peers and moves data
/// with one-sided READ and WRITE requests. Every call returns a status and throws nothing,
/// except the constructor (std::invalid_argument for an empty name, nixl::error when the
/// metadata listener cannot start).
class nixlAgent {
 private:
  const std::unique_ptr<nixlAgentData> data;

 public:
  nixlAgent(const std::string& name, const nixlAgentConfig& cfg);
  nixlAgent(nixlAgent&&) noexcept = delete;
  nixlAgent& operator=(nixlAgent&&) noexcept = delete;
  ~nixlAgent();

  // Backends
  nixl_status_t getAvailPlugins(std::vector<nixl_backend_t>& plugins);
  nixl_status_t getPluginParams(const nixl_backend_t& type, nixl_mem_list_t& mems,
                                nixl_b_params_t& params) const;
  nixl_status_t getBackendParams(const nixlBackendH* backend, nixl_mem_list_t& mems,
                                 nixl_b_params_t& params) const;
  nixl_status_t createBackend(const nixl_backend_t& type, const nixl_b_params_t& params,
                              nixlBackendH*& backend);

  // Memory
  nixl_status_t registerMem(const nixl_reg_dlist_t& descs,
                            const nixl_opt_args_t* extra_params = nullptr);
  nixl_status_t deregisterMem(const nixl_reg_dlist_t& descs,
                              const nixl_opt_args_t* extra_params = nullptr);
  nixl_status_t queryMem(const nixl_reg_dlist_t& descs, std::vector<nixl_query_resp_t>& resp,
                         const nixl_opt_args_t* extra_params) const;
  nixl_status_t makeConnection(const std::string& remote_agent,
                               const nixl_opt_args_t* extra_params = nullptr);

  // Transfers
  nixl_status_t prepXferDlist(const std::string& agent_name, const nixl_xfer_dlist_t& descs,
                              nixlDlistH*& dlist_hndl,
                              const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t prepXferDlist(const nixl_xfer_dlist_t& descs, nixlDlistH*& dlist_hndl,
                              const nixl_opt_args_t* extra_params = nullptr) const;
  /// NIXL 1.5: strided rows; the handle indexes their blocks in row order (flat indices).
  nixl_status_t prepXferDlist(const std::string& agent_name, const nixl_stride_dlist_t& descs,
                              nixlDlistH*& dlist_hndl,
                              const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t prepXferDlist(const nixl_stride_dlist_t& descs, nixlDlistH*& dlist_hndl,
                              const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t makeXferReq(const nixl_xfer_op_t& operation, const nixlDlistH* local_side,
                            const std::vector<int>& local_indices, const nixlDlistH* remote_side,
                            const std::vector<int>& remote_indices, nixlXferReqH*& req_hndl,
                            const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t createXferReq(const nixl_xfer_op_t& operation, const nixl_xfer_dlist_t& local_descs,
                              const nixl_xfer_dlist_t& remote_descs,
                              const std::string& remote_agent, nixlXferReqH*& req_hndl,
                              const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t estimateXferCost(const nixlXferReqH* req_hndl, std::chrono::microseconds& duration,
                                 std::chrono::microseconds& err_margin, nixl_cost_t& method,
                                 const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t postXferReq(nixlXferReqH* req_hndl,
                            const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t getXferStatus(nixlXferReqH* req_hndl) const;
  nixl_status_t getXferTelemetry(const nixlXferReqH* req_hndl, nixl_xfer_telem_t& telemetry) const;
  nixl_status_t queryXferBackend(const nixlXferReqH* req_hndl, nixlBackendH*& backend) const;
  nixl_status_t releaseXferReq(nixlXferReqH* req_hndl) const;
  /// nixl-cpp's own (docs/waiting.md): sleeps until the request ends, then answers what
  /// getXferStatus would; NIXL_IN_PROG when `timeout` passed first.
  nixl_status_t waitXferReq(nixlXferReqH* req_hndl, std::chrono::microseconds timeout) const;
  /// nixl-cpp's own (docs/waiting.md): what getXferStatus would answer, read from what the
  /// backend already knows without driving the transport (NIXL_IN_PROG while its completion
  /// record says so): for a thread that sleeps on getEventFd with many requests in flight.
  nixl_status_t peekXferReq(nixlXferReqH* req_hndl) const;
  /// The GPU device API is not part of this build: NIXL_ERR_NOT_SUPPORTED.
  nixl_status_t prepMemView(const nixl_remote_dlist_t& dlist, nixlMemViewH& mvh,
                            const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t prepMemView(const nixl_local_dlist_t& dlist, nixlMemViewH& mvh,
                            const nixl_opt_args_t* extra_params = nullptr) const;
  void releaseMemView(nixlMemViewH mvh) const;
  nixl_status_t releasedDlistH(nixlDlistH* dlist_hndl) const;

  // Notifications
  nixl_status_t getNotifs(nixl_notifs_t& notif_map, const nixl_opt_args_t* extra_params = nullptr);
  /// nixl-cpp's own: appends the abort notices that arrived (per initiator, the notification
  /// messages of its transfers that ended without success; docs/error-model.md).
  nixl_status_t getAbortedNotifs(nixl_notifs_t& notif_map,
                                 const nixl_opt_args_t* extra_params = nullptr);
  /// nixl-cpp's own (docs/error-model.md, "Agents found gone"): replaces `agents` with the
  /// names of the agents found gone (loaded peers, and agents that only sent to this one), each
  /// until that name comes back; left as it was on failure.
  nixl_status_t getGoneAgents(std::vector<std::string>& agents,
                              const nixl_opt_args_t* extra_params = nullptr);
  /// nixl-cpp's own: sleeps until notifications arrive and appends them (NIXL_SUCCESS), or
  /// answers NIXL_IN_PROG when `timeout` passed first.
  nixl_status_t waitNotifs(nixl_notifs_t& notif_map, std::chrono::microseconds timeout,
                           const nixl_opt_args_t* extra_params = nullptr);
  /// nixl-cpp's own: the agent's event fd, readable when one of its requests ends or a
  /// notification or abort notice arrives (for poll/epoll; the agent keeps it), and emptying
  /// it before looking at requests and notifications (docs/waiting.md).
  int getEventFd();
  void drainEvents();
  nixl_status_t genNotif(const std::string& remote_agent, const nixl_blob_t& msg,
                         const nixl_opt_args_t* extra_params = nullptr) const;

  // Metadata
  nixl_status_t getLocalMD(nixl_blob_t& str) const;
  nixl_status_t getLocalPartialMD(const nixl_reg_dlist_t& descs, nixl_blob_t& str,
                                  const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t loadRemoteMD(const nixl_blob_t& remote_metadata, std::string& agent_name);
  nixl_status_t invalidateRemoteMD(const std::string& remote_agent);
  nixl_status_t sendLocalMD(const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t sendLocalPartialMD(const nixl_reg_dlist_t& descs,
                                   const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t fetchRemoteMD(const std::string remote_name,
                              const nixl_opt_args_t* extra_params = nullptr);
  nixl_status_t invalidateLocalMD(const nixl_opt_args_t* extra_params = nullptr) const;
  nixl_status_t checkRemoteMD(const std::string remote_name, const nixl_xfer_dlist_t& descs) const;
};

#endif
