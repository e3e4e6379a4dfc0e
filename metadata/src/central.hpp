#pragma once
// The central-store part of an exchange (private header): our etcd lease and published keys,
// fetches that wait for a key, and watches that drop peers whose keys go away, all driven by
// the etcd thread. The HTTP client itself is etcd.hpp.
//
// The constructor connects to ctx.cfg.etcd_endpoints and starts the etcd thread (`ctx` must
// outlive it); the destructor stops the etcd thread (waiting fetches fail with
// status::canceled) and revokes our lease, so our keys disappear at once.

#include "store.hpp"

namespace nixl::metadata::detail {

struct etcd_kind;
using central_store = store<etcd_kind>;

}  // namespace nixl::metadata::detail
