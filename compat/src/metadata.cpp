// nixlAgent: local and remote metadata, and the metadata exchange (listener, etcd). Exchange
// calls are asynchronous as in NIXL: the status covers what runs on the caller's thread, never
// how the I/O ended, and completion is observed with checkRemoteMD.

#include <future>

#include "compat.hpp"

using namespace nixl::compat;

namespace {

/// Where `x` sends a metadata call: a peer's listener when ipAddr is set, else the central store.
nixl::runtime::address address_of(const nixl_opt_args_t* x, bool with_label) {
  if (x == nullptr) return {};
  return nixl::runtime::address_of(x->ipAddr, x->port, with_label ? x->metadataLabel : "");
}

/// The status of an exchange call, the same whatever the timing. An exchange without threads
/// ran the I/O on the caller's thread (its future is ready): its error is the call's. With
/// threads the I/O is theirs, as NIXL hands it to its listener thread: the call has succeeded
/// once queued, and a peer's refusal is logged there (never surfaced, even if it came back
/// before the call returned).
template <class Exchange, class Future>
void settle(const Exchange& x, Future&& f) {
  if (!x.runs_threads() && f.valid()) f.get();
}

/// Runs exchange call `f(exchange, target)` towards the address in `x`.
template <class F>
nixl_status_t with_exchange(nixlAgentData& d, std::string_view call, const nixl_opt_args_t* x,
                            bool with_label, F&& f) {
  return guarded(call, [&] {
    d.rt.with_exchange(call, address_of(x, with_label),
                       [&](auto& ex, const auto& t) { settle(ex, f(ex, t)); });
  });
}

}  // namespace

nixl_status_t nixlAgent::getLocalMD(nixl_blob_t& str) const {
  return guarded("getLocalMD", [&] { str = data->agent().local_metadata(); });
}

nixl_status_t nixlAgent::getLocalPartialMD(const nixl_reg_dlist_t& descs, nixl_blob_t& str,
                                           const nixl_opt_args_t* extra_params) const {
  return guarded("getLocalPartialMD", [&] {
    const bool conn = extra_params != nullptr && extra_params->includeConnInfo;
    str = data->agent().local_partial_metadata(to_core(descs), conn, data->options(extra_params));
  });
}

nixl_status_t nixlAgent::loadRemoteMD(const nixl_blob_t& remote_metadata, std::string& agent_name) {
  return guarded("loadRemoteMD", [&] {
    agent_name = data->agent().load_remote_metadata(std::string_view(remote_metadata));
  });
}

nixl_status_t nixlAgent::invalidateRemoteMD(const std::string& remote_agent) {
  return guarded("invalidateRemoteMD",
                 [&] { data->agent().invalidate_remote_metadata(remote_agent); });
}

nixl_status_t nixlAgent::checkRemoteMD(const std::string remote_name,
                                       const nixl_xfer_dlist_t& descs) const {
  // As NIXL: a status, never an error log.
  try {
    return data->agent().check_remote_metadata(remote_name, to_core(descs)) ? NIXL_SUCCESS
                                                                            : NIXL_ERR_NOT_FOUND;
  } catch (const nixl::error& e) {
    return to_nixl(e.status_code());
  } catch (...) {
    return NIXL_ERR_UNKNOWN;
  }
}

nixl_status_t nixlAgent::sendLocalMD(const nixl_opt_args_t* extra_params) const {
  return with_exchange(*data, "sendLocalMD", extra_params, false,
                       [](auto& x, const auto& t) { return x.send_local_metadata(t); });
}

nixl_status_t nixlAgent::sendLocalPartialMD(const nixl_reg_dlist_t& descs,
                                            const nixl_opt_args_t* extra_params) const {
  const bool conn = extra_params != nullptr && extra_params->includeConnInfo;
  return with_exchange(
      *data, "sendLocalPartialMD", extra_params, true, [&](auto& x, const auto& t) {
        return x.send_partial_metadata(to_core(descs), conn, t, data->options(extra_params));
      });
}

nixl_status_t nixlAgent::fetchRemoteMD(const std::string remote_name,
                                       const nixl_opt_args_t* extra_params) {
  return with_exchange(*data, "fetchRemoteMD", extra_params, true, [&](auto& x, const auto& t) {
    return x.fetch_remote_metadata(remote_name, t);
  });
}

nixl_status_t nixlAgent::invalidateLocalMD(const nixl_opt_args_t* extra_params) const {
  return with_exchange(*data, "invalidateLocalMD", extra_params, false,
                       [](auto& x, const auto& t) { return x.invalidate_local_metadata(t); });
}
