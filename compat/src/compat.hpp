#pragma once
// What the files of nixl::compat share: the run-time facade (nixl::runtime: one nixl::agent of
// every backend this build links, its metadata exchange and the objects it hands out) behind
// NIXL's opaque handles, and the conversions between NIXL's types and the core's. Internal:
// programs see only nixl.h and the headers it includes.

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nixl/runtime/agent.hpp>  // the run-time facade, the core and every linked component

#include "nixl.h"

namespace nixl::compat {

/// Every backend of the build, in the umbrella's order; new backends join through
/// nixl::enabled_backends without changes here.
using runtime::agent_t;

inline nixl_status_t to_nixl(nixl::status s) noexcept {
  return static_cast<nixl_status_t>(s);
}

/// Runs `f` (a setup call that may throw) and turns what it throws into NIXL's status: the
/// status a nixl::error carries, INVALID_PARAM for std::invalid_argument and std::out_of_range,
/// UNKNOWN for anything else. Failures are logged at error level, naming `call`.
template <class F>
nixl_status_t guarded(std::string_view call, F&& f) noexcept {
  try {
    f();
    return NIXL_SUCCESS;
  } catch (const nixl::error& e) {
    nixl::log::error("{}: {}", call, e.what());
    return to_nixl(e.status_code());
  } catch (const std::invalid_argument& e) {
    nixl::log::error("{}: {}", call, e.what());
    return NIXL_ERR_INVALID_PARAM;
  } catch (const std::out_of_range& e) {
    nixl::log::error("{}: {}", call, e.what());
    return NIXL_ERR_INVALID_PARAM;
  } catch (const std::exception& e) {
    nixl::log::error("{}: {}", call, e.what());
    return NIXL_ERR_UNKNOWN;
  } catch (...) {
    nixl::log::error("{}: unknown exception", call);
    return NIXL_ERR_UNKNOWN;
  }
}

/// NIXL's segment type as a core kind; throws invalid_param for a value outside DRAM..FILE.
inline mem_kind kind_of(nixl_mem_t m) {
  return runtime::kind_of(static_cast<int>(m));
}
inline nixl_mem_t mem_of(mem_kind k) noexcept {
  return static_cast<nixl_mem_t>(static_cast<int>(k));
}
xfer_op op_of(nixl_xfer_op_t op);

xfer_dlist to_core(const nixl_xfer_dlist_t& l);
reg_dlist to_core(const nixl_reg_dlist_t& l);
nixl_b_params_t to_nixl(const params& p);
nixl_mem_list_t to_nixl(const std::vector<mem_kind>& ks);

}  // namespace nixl::compat

/// What a nixlAgent holds: the run-time facade (the agent, its metadata exchange, the requests
/// and prepared lists it handed out, freed with it if the program did not) and NIXL's face of
/// each backend handle.
class nixlAgentData {
 public:
  nixlAgentData(const std::string& name, const nixlAgentConfig& cfg);
  nixlAgentData(const nixlAgentData&) = delete;
  nixlAgentData& operator=(const nixlAgentData&) = delete;

  nixl::runtime::agent rt;
  nixl::compat::agent_t& agent() noexcept { return rt.core(); }

  /// The handle of backend `name` (created on first call); null when it was not created.
  nixlBackendH* backend(std::string_view name);
  /// True when `b` is one of this agent's handles.
  bool owns(const nixlBackendH* b) const noexcept;
  /// Backend names of optional arguments; throws invalid_param for a handle of another agent.
  nixl::backend_options options(const nixl_opt_args_t* x) const;

 private:
  mutable std::mutex backends_mutex_;  ///< createBackend may run beside data-path calls
  /// NIXL's nixlBackendH of each of the facade's backends.
  std::vector<std::pair<const nixl::runtime::backend*, std::unique_ptr<nixlBackendH>>> backends_;
};

/// A transfer request: the facade's (the core's run-time-dispatched request and its agent).
class nixlXferReqH : public nixl::runtime::request {
 public:
  using request::request;
};

/// A prepared descriptor list: the facade's.
class nixlDlistH : public nixl::runtime::prepared {
 public:
  using prepared::prepared;
};
