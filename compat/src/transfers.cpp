// nixlAgent: prepared lists, transfer requests, telemetry and notifications.

#include <algorithm>
#include <chrono>

#include "compat.hpp"

using namespace nixl::compat;

namespace {

/// NIXL's notification precedence: `notif` when engaged, else `notifMsg` when `hasNotif`.
std::optional<std::string> notif_of(const nixl_opt_args_t* x) {
  if (x == nullptr) return std::nullopt;
  if (x->notif) return *x->notif;
  if (x->hasNotif) return x->notifMsg;
  return std::nullopt;
}

/// makeXferReq: merges unless skipDescMerge, no customParam. createXferReq (`one_shot`): NIXL
/// never merges there (telemetry's descCount is the caller's count) and passes customParam on.
nixl::xfer_options xfer_opts(nixlAgentData& d, const nixl_opt_args_t* x, bool one_shot) {
  nixl::xfer_options o;
  o.backends = d.options(x).backends;
  o.notif = notif_of(x);
  o.skip_merge = one_shot || (x != nullptr && x->skipDescMerge);
  if (one_shot && x != nullptr) o.custom = x->customParam;
  if (x != nullptr) o.stall_timeout = x->xferStallTimeout;
  return o;
}

using nixl::compat::to_core;  // the expanded list's, beside this one

/// NIXL's strided rows as the core's strided list.
nixl::strided_dlist to_core(const nixl_stride_dlist_t& l) {
  nixl::strided_dlist out(kind_of(l.getType()));
  out.reserve(static_cast<std::size_t>(l.descCount()));
  for (const auto& d : l) out.push_back({d.addr, d.len, d.devId, d.stride, d.count});
  return out;
}

/// Both prepXferDlist forms (expanded or strided descriptors).
template <class List>
nixl_status_t prep_dlist(nixlAgentData& d, const std::string& agent_name, const List& descs,
                         nixlDlistH*& dlist_hndl, const nixl_opt_args_t* extra_params) {
  dlist_hndl = nullptr;  // as NIXL: a failed call leaves the out-handle null
  return guarded("prepXferDlist", [&] {
    auto h = std::make_shared<nixlDlistH>(d.rt);
    h->list = d.agent().prepare_list(agent_name, to_core(descs), d.options(extra_params));
    dlist_hndl = d.rt.lists.keep(std::move(h));
  });
}

/// True when `h` was handed out by the agent of `d`.
template <class H>
bool ours(const nixlAgentData& d, const H* h) noexcept {
  return h != nullptr && h->owner == &d.rt;
}

}  // namespace

// Prepared lists

nixl_status_t nixlAgent::prepXferDlist(const std::string& agent_name,
                                       const nixl_xfer_dlist_t& descs, nixlDlistH*& dlist_hndl,
                                       const nixl_opt_args_t* extra_params) const {
  return prep_dlist(*data, agent_name, descs, dlist_hndl, extra_params);
}

nixl_status_t nixlAgent::prepXferDlist(const nixl_xfer_dlist_t& descs, nixlDlistH*& dlist_hndl,
                                       const nixl_opt_args_t* extra_params) const {
  return prepXferDlist(NIXL_INIT_AGENT, descs, dlist_hndl, extra_params);
}

nixl_status_t nixlAgent::prepXferDlist(const std::string& agent_name,
                                       const nixl_stride_dlist_t& descs, nixlDlistH*& dlist_hndl,
                                       const nixl_opt_args_t* extra_params) const {
  return prep_dlist(*data, agent_name, descs, dlist_hndl, extra_params);
}

nixl_status_t nixlAgent::prepXferDlist(const nixl_stride_dlist_t& descs, nixlDlistH*& dlist_hndl,
                                       const nixl_opt_args_t* extra_params) const {
  return prepXferDlist(NIXL_INIT_AGENT, descs, dlist_hndl, extra_params);
}

nixl_status_t nixlAgent::releasedDlistH(nixlDlistH* dlist_hndl) const {
  if (!ours(*data, dlist_hndl)) return NIXL_ERR_INVALID_PARAM;
  data->rt.lists.drop(dlist_hndl);
  return NIXL_SUCCESS;
}

// Requests

nixl_status_t nixlAgent::makeXferReq(const nixl_xfer_op_t& operation, const nixlDlistH* local_side,
                                     const std::vector<int>& local_indices,
                                     const nixlDlistH* remote_side,
                                     const std::vector<int>& remote_indices,
                                     nixlXferReqH*& req_hndl,
                                     const nixl_opt_args_t* extra_params) const {
  req_hndl = nullptr;  // as NIXL: a failed call leaves the out-handle null
  if (!ours(*data, local_side) || !ours(*data, remote_side)) return NIXL_ERR_INVALID_PARAM;
  if (!local_side->list.is_local() || remote_side->list.is_local()) {
    nixl::log::error(
        "makeXferReq: the local side must be prepared for NIXL_INIT_AGENT and the remote side "
        "for a remote agent (or this agent's own name)");
    return NIXL_ERR_INVALID_PARAM;
  }
  return guarded("makeXferReq", [&] {
    const auto op = op_of(operation);
    // NIXL's makeXferReq does not pass customParam on.
    auto o = xfer_opts(*data, extra_params, false);
    auto h = std::make_shared<nixlXferReqH>(data->rt);
    h->req = data->agent().make_request(op, local_side->list, local_indices, remote_side->list,
                                        remote_indices, o);
    req_hndl = data->rt.requests.keep(std::move(h));
  });
}

nixl_status_t nixlAgent::createXferReq(const nixl_xfer_op_t& operation,
                                       const nixl_xfer_dlist_t& local_descs,
                                       const nixl_xfer_dlist_t& remote_descs,
                                       const std::string& remote_agent, nixlXferReqH*& req_hndl,
                                       const nixl_opt_args_t* extra_params) const {
  req_hndl = nullptr;  // as NIXL: a failed call leaves the out-handle null
  return guarded("createXferReq", [&] {
    const auto op = op_of(operation);
    auto o = xfer_opts(*data, extra_params, true);
    auto h = std::make_shared<nixlXferReqH>(data->rt);
    h->req = data->agent().create_request(op, to_core(local_descs), to_core(remote_descs),
                                          remote_agent, o);
    req_hndl = data->rt.requests.keep(std::move(h));
  });
}

nixl_status_t nixlAgent::estimateXferCost(const nixlXferReqH* req_hndl,
                                          std::chrono::microseconds& duration,
                                          std::chrono::microseconds& err_margin,
                                          nixl_cost_t& method,
                                          const nixl_opt_args_t* extra_params) const {
  (void)extra_params;
  if (!ours(*data, req_hndl)) return NIXL_ERR_INVALID_PARAM;
  std::optional<std::chrono::microseconds> e;
  const auto s =
      guarded("estimateXferCost", [&] { e = data->agent().estimate_cost(req_hndl->req); });
  if (s != NIXL_SUCCESS) return s;
  if (!e) return NIXL_ERR_NOT_SUPPORTED;
  duration = *e;
  err_margin = std::chrono::microseconds(0);
  method = nixl_cost_t::ANALYTICAL_BACKEND;
  return NIXL_SUCCESS;
}

// The hot path: one owner check, then the core request's post or status.

nixl_status_t nixlAgent::postXferReq(nixlXferReqH* req_hndl,
                                     const nixl_opt_args_t* extra_params) const {
  if (!ours(*data, req_hndl)) [[unlikely]]
    return NIXL_ERR_INVALID_PARAM;
  if (extra_params == nullptr) return to_nixl(req_hndl->req.post());
  // With arguments, their notification replaces the stored one (none clears it), as in NIXL.
  if (extra_params->notif)
    return to_nixl(req_hndl->req.post(nixl::notif_arg{*extra_params->notif}));
  if (extra_params->hasNotif)
    return to_nixl(req_hndl->req.post(nixl::notif_arg{extra_params->notifMsg}));
  return to_nixl(req_hndl->req.post(nixl::notif_arg{}));
}

nixl_status_t nixlAgent::getXferStatus(nixlXferReqH* req_hndl) const {
  if (!ours(*data, req_hndl)) [[unlikely]]
    return NIXL_ERR_INVALID_PARAM;
  return to_nixl(req_hndl->req.status());
}

nixl_status_t nixlAgent::waitXferReq(nixlXferReqH* req_hndl,
                                     std::chrono::microseconds timeout) const {
  if (!ours(*data, req_hndl)) [[unlikely]]
    return NIXL_ERR_INVALID_PARAM;
  return to_nixl(req_hndl->req.wait(std::max(timeout, std::chrono::microseconds(0))));
}

nixl_status_t nixlAgent::peekXferReq(nixlXferReqH* req_hndl) const {
  if (!ours(*data, req_hndl)) [[unlikely]]
    return NIXL_ERR_INVALID_PARAM;
  return to_nixl(req_hndl->req.peek());
}

nixl_status_t nixlAgent::getXferTelemetry(const nixlXferReqH* req_hndl,
                                          nixl_xfer_telem_t& telemetry) const {
  if (!ours(*data, req_hndl)) return NIXL_ERR_INVALID_PARAM;
  nixl::xfer_telemetry t{};
  const auto s = req_hndl->req.telemetry(t);
  if (s != nixl::status::success) return to_nixl(s);
  telemetry.startTime = t.start;
  telemetry.postDuration = t.post_duration;
  telemetry.xferDuration = t.xfer_duration;
  telemetry.totalBytes = t.total_bytes;
  telemetry.descCount = t.desc_count;
  return NIXL_SUCCESS;
}

nixl_status_t nixlAgent::queryXferBackend(const nixlXferReqH* req_hndl,
                                          nixlBackendH*& backend) const {
  backend = nullptr;  // as NIXL: a failed call leaves the out-handle null
  if (!ours(*data, req_hndl)) return NIXL_ERR_INVALID_PARAM;
  return guarded("queryXferBackend", [&] {
    auto* b = data->backend(req_hndl->req.backend_name());
    if (b == nullptr)
      nixl::raise(nixl::status::not_found, "queryXferBackend: the request holds no backend");
    backend = b;
  });
}

nixl_status_t nixlAgent::releaseXferReq(nixlXferReqH* req_hndl) const {
  if (!ours(*data, req_hndl)) return NIXL_ERR_INVALID_PARAM;
  if (data->rt.release(*req_hndl) == nixl::status::repost_active) {
    nixl::log::error(
        "releaseXferReq: the backend could not cancel the transfer in flight; the handle stays "
        "valid, wait for it to finish and release again");
    return NIXL_ERR_REPOST_ACTIVE;
  }
  return NIXL_SUCCESS;
}

// Memory views (GPU device API): mem_view.cpp

// Notifications

nixl_status_t nixlAgent::getNotifs(nixl_notifs_t& notif_map, const nixl_opt_args_t* extra_params) {
  // nixl_notifs_t and the core's notif_map are the same type: new messages are appended.
  return guarded("getNotifs",
                 [&] { data->agent().notifications(notif_map, data->options(extra_params)); });
}

nixl_status_t nixlAgent::getAbortedNotifs(nixl_notifs_t& notif_map,
                                          const nixl_opt_args_t* extra_params) {
  return guarded("getAbortedNotifs", [&] {
    data->agent().aborted_notifications(notif_map, data->options(extra_params));
  });
}

nixl_status_t nixlAgent::getGoneAgents(std::vector<std::string>& agents,
                                       const nixl_opt_args_t* extra_params) {
  return guarded("getGoneAgents",
                 [&] { agents = data->agent().gone_agents(data->options(extra_params)); });
}

nixl_status_t nixlAgent::waitNotifs(nixl_notifs_t& notif_map, std::chrono::microseconds timeout,
                                    const nixl_opt_args_t* extra_params) {
  bool got = false;
  const nixl_status_t st = guarded("waitNotifs", [&] {
    got = data->agent().wait_notifications(
        notif_map, std::max(timeout, std::chrono::microseconds(0)), data->options(extra_params));
  });
  return st != NIXL_SUCCESS ? st : got ? NIXL_SUCCESS : NIXL_IN_PROG;
}

int nixlAgent::getEventFd() {
  return data->agent().event_fd();
}

void nixlAgent::drainEvents() {
  data->agent().drain_events();
}

nixl_status_t nixlAgent::genNotif(const std::string& remote_agent, const nixl_blob_t& msg,
                                  const nixl_opt_args_t* extra_params) const {
  return guarded("genNotif",
                 [&] { data->agent().notify(remote_agent, msg, data->options(extra_params)); });
}
