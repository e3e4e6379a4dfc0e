#pragma once
// The two sides of a run, each a whole program: the initiator (runs the sweep) and the target.

#include <sys/types.h>

#include <optional>

#include "options.hpp"

namespace nixl_bench {

/// The initiator: the sweep against a target in this process (--processes 1), the forked
/// `child` (its listener port read from `port_fd`), or a separate --role target. Returns the
/// exit status.
int run_initiator(const options& o, std::optional<pid_t> child, int port_fd);

/// The target process: registers its segment, serves the initiator's fill/verify requests
/// until it says "done". With `port_fd`, writes its listener port there (forked by the
/// initiator); else prints it (or publishes through etcd) for a separate initiator.
int run_target(const options& o, int port_fd);

}  // namespace nixl_bench
