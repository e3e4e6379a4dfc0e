#ifndef _NIXL_TYPES_H
#define _NIXL_TYPES_H
/// NIXL's public types (nixl_types.h of NIXL 1.4): enums with NIXL's values, the typedefs of the
/// agent API and the optional arguments of its calls. Part of nixl::compat, a layer over
/// nixl::agent; see docs/compat.md.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

class nixlSerDes;
class nixlDlistH;
class nixlBackendH;
class nixlXferReqH;
class nixlAgentData;

/// Memory segment types. FILE_SEG must stay last (arrays are sized FILE_SEG + 1).
enum nixl_mem_t { DRAM_SEG = 0, VRAM_SEG = 1, BLK_SEG = 2, OBJ_SEG = 3, FILE_SEG = 4 };

/// One-sided operations: READ pulls remote into local, WRITE pushes local to remote.
enum nixl_xfer_op_t { NIXL_READ = 0, NIXL_WRITE = 1 };

/// Status of every agent call; the values are NIXL's.
enum nixl_status_t {
  NIXL_IN_PROG = 1,
  NIXL_SUCCESS = 0,
  NIXL_ERR_NOT_POSTED = -1,
  NIXL_ERR_INVALID_PARAM = -2,
  NIXL_ERR_BACKEND = -3,
  NIXL_ERR_NOT_FOUND = -4,
  NIXL_ERR_MISMATCH = -5,
  NIXL_ERR_NOT_ALLOWED = -6,
  NIXL_ERR_REPOST_ACTIVE = -7,
  NIXL_ERR_UNKNOWN = -8,
  NIXL_ERR_NOT_SUPPORTED = -9,
  NIXL_ERR_REMOTE_DISCONNECT = -10,
  NIXL_ERR_CANCELED = -11,
  NIXL_ERR_NO_TELEMETRY = -12,
  /// No completion within the agent's xferStallTimeout (or the request's): canceled.
  NIXL_ERR_XFER_STALLED = -13
};

/// Lock discipline of an agent.
enum class nixl_thread_sync_t {
  NIXL_THREAD_SYNC_NONE = 0,
  NIXL_THREAD_SYNC_STRICT = 1,
  NIXL_THREAD_SYNC_RW = 2,
  NIXL_THREAD_SYNC_DEFAULT = NIXL_THREAD_SYNC_NONE
};

/// How a cost estimate was made.
enum class nixl_cost_t { ANALYTICAL_BACKEND = 0 };

namespace nixlEnumStrings {
/// "DRAM_SEG" ... "FILE_SEG", else "BAD_SEG".
std::string memTypeStr(const nixl_mem_t& mem);
/// "READ" / "WRITE", else "BAD_OP".
std::string xferOpStr(const nixl_xfer_op_t& op);
/// The enumerator's name ("NIXL_SUCCESS", ...), else "BAD_STATUS".
std::string statusStr(const nixl_status_t& status);
}  // namespace nixlEnumStrings

using nixl_backend_t = std::string;
using nixl_telemetry_plugin_t = std::string;
using nixl_blob_t = std::string;
using nixl_mem_list_t = std::vector<nixl_mem_t>;
using nixl_b_params_t = std::unordered_map<std::string, std::string>;
using nixl_notifs_t = std::unordered_map<std::string, std::vector<nixl_blob_t>>;
using nixl_query_resp_t = std::optional<nixl_b_params_t>;
using nixlMemViewH = void*;
using chrono_point_t = std::chrono::steady_clock::time_point;
using chrono_period_us_t = std::chrono::microseconds;

/// Port of the metadata listener.
inline constexpr uint16_t default_comm_port = 8888;
/// Label of full metadata in the central store ("metadata").
extern const std::string default_metadata_label;
/// Declared by NIXL 1.4 and defined nowhere there; declared here the same way.
extern const std::string default_partial_metadata_label;
/// The initiator side of prepXferDlist.
#define NIXL_INIT_AGENT ""
/// Placeholder agent name of memory views ("NULL_AGENT").
extern const std::string nixl_null_agent;

/// Optional arguments of agent calls (an aggregate: the member order is NIXL's).
struct nixlAgentOptionalArgs {
  /// Restrict the call to these backends.
  std::vector<nixlBackendH*> backends;
  /// Notification to send (engaged: sent, even when empty).
  std::optional<nixl_blob_t> notif;
  /// Legacy notification payload, used when hasNotif is set and notif is not engaged.
  nixl_blob_t notifMsg;
  bool hasNotif = false;
  /// makeXferReq: keep contiguous descriptors apart.
  bool skipDescMerge = false;
  /// getLocalPartialMD / sendLocalPartialMD: add connection info to a non-empty list.
  bool includeConnInfo = false;
  /// Metadata calls: the peer's listener (empty: the central store).
  std::string ipAddr;
  int port = default_comm_port;
  /// Central store label.
  std::string metadataLabel;
  /// Backend-specific parameter (createXferReq).
  nixl_blob_t customParam;
  /// makeXferReq / createXferReq (not in NIXL): this request's stall timeout; > 0 overrides
  /// nixlAgentConfig::xferStallTimeout, 0 takes it, < 0 turns the check off for the request.
  std::chrono::microseconds xferStallTimeout{0};
};
using nixl_opt_args_t = nixlAgentOptionalArgs;

/// What one transfer measured (getXferTelemetry).
struct nixlXferTelemetry {
  chrono_point_t startTime;
  chrono_period_us_t postDuration;
  chrono_period_us_t xferDuration;
  size_t totalBytes;
  size_t descCount;
};
using nixl_xfer_telem_t = nixlXferTelemetry;

#endif
