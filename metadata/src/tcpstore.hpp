#pragma once
// The TCPStore central store of an exchange (private header): NIXL's keys, a worker thread that
// runs the requests, and fetches re-probed until their deadline. The client is tcpstore.hpp.
//
// The constructor checks ctx.cfg.tcpstore_endpoint and starts the worker, which connects lazily
// (`ctx` must outlive it); the destructor stops the worker (waiting fetches fail with
// status::canceled) and deletes nothing, as NIXL.

#include "store.hpp"

namespace nixl::metadata::detail {

struct tcpstore_kind;
using tcpstore_store = store<tcpstore_kind>;

/// Fills c's TCPStore settings from NIXL_TCPSTORE_ENDPOINT / NIXL_TCPSTORE_TIMEOUT_MS /
/// NIXL_TCPSTORE_OP_TIMEOUT_MS (endpoint only when empty). Throws nixl::error(invalid_param)
/// for a timeout that is not a positive number of milliseconds.
void tcpstore_env(config& c);
/// Throws when both etcd and TCPStore are configured or the endpoint is malformed.
void tcpstore_check(const config& c);

}  // namespace nixl::metadata::detail
