// nixlAgent: local and remote metadata, and the metadata exchange (listener, etcd). Exchange
// calls are asynchronous as in NIXL: the status covers what runs on the caller's thread, and
// completion is observed with checkRemoteMD.

#include <chrono>
#include <future>

#include "compat.hpp"

using namespace nixl::compat;

namespace {

#if defined(NIXL_HAS_METADATA)
/// Where `x` sends a metadata call: a peer's listener when ipAddr is set, else the central store.
nixl::metadata::target target_of(const nixl_opt_args_t* x, bool with_label) {
  nixl::metadata::target t;
  if (x == nullptr) return t;
  if (x->port < 0 || x->port > 65535)
    nixl::raise(nixl::status::invalid_param, "port {} is not a TCP port", x->port);
  t.ip = x->ipAddr;
  t.port = static_cast<std::uint16_t>(x->port == 0 ? default_comm_port : x->port);
  if (with_label) t.label = x->metadataLabel;
  return t;
}

/// Surfaces the error of an operation that already ended (the exchange runs no thread, or it
/// failed at once); an operation still under way is left to run.
void settle(std::future<void>&& f) {
  if (f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) f.get();
}
#endif

template <class F>
nixl_status_t with_exchange(std::string_view call, F&& f) {
#if defined(NIXL_HAS_METADATA)
  return guarded(call, [&] { settle(f()); });
#else
  (void)f;
  nixl::log::error("{}: this build has no metadata exchange; build with NIXL_WITH_METADATA=ON",
                   call);
  return NIXL_ERR_NOT_SUPPORTED;
#endif
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
  return with_exchange("sendLocalMD", [&] {
    return data->exchange().send_local_metadata(target_of(extra_params, false));
  });
}

nixl_status_t nixlAgent::sendLocalPartialMD(const nixl_reg_dlist_t& descs,
                                            const nixl_opt_args_t* extra_params) const {
  return with_exchange("sendLocalPartialMD", [&] {
    const bool conn = extra_params != nullptr && extra_params->includeConnInfo;
    return data->exchange().send_partial_metadata(
        to_core(descs), conn, target_of(extra_params, true), data->options(extra_params));
  });
}

nixl_status_t nixlAgent::fetchRemoteMD(const std::string remote_name,
                                       const nixl_opt_args_t* extra_params) {
  return with_exchange("fetchRemoteMD", [&] {
    return data->exchange().fetch_remote_metadata(remote_name, target_of(extra_params, true));
  });
}

nixl_status_t nixlAgent::invalidateLocalMD(const nixl_opt_args_t* extra_params) const {
  return with_exchange("invalidateLocalMD", [&] {
    return data->exchange().invalidate_local_metadata(target_of(extra_params, false));
  });
}
