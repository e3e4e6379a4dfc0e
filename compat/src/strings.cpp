// NIXL's enum strings, constants and descriptor printing.

#include "compat.hpp"

const std::string default_metadata_label = "metadata";
const std::string nixl_null_agent = "NULL_AGENT";

static_assert(std::is_same_v<nixl_notifs_t, nixl::notif_map>,
              "getNotifs hands NIXL's map to the core as it is");
static_assert(sizeof(nixlBasicDesc) == sizeof(nixl::desc));

namespace nixlEnumStrings {

std::string memTypeStr(const nixl_mem_t& mem) {
  switch (mem) {
    case DRAM_SEG:
      return "DRAM_SEG";
    case VRAM_SEG:
      return "VRAM_SEG";
    case BLK_SEG:
      return "BLK_SEG";
    case OBJ_SEG:
      return "OBJ_SEG";
    case FILE_SEG:
      return "FILE_SEG";
  }
  return "BAD_SEG";
}

std::string xferOpStr(const nixl_xfer_op_t& op) {
  switch (op) {
    case NIXL_READ:
      return "READ";
    case NIXL_WRITE:
      return "WRITE";
  }
  return "BAD_OP";
}

std::string statusStr(const nixl_status_t& status) {
  const int v = static_cast<int>(status);
  if (v < static_cast<int>(NIXL_ERR_NO_TELEMETRY) || v > static_cast<int>(NIXL_IN_PROG))
    return "BAD_STATUS";
  return std::string(nixl::to_string(static_cast<nixl::status>(v)));
}

}  // namespace nixlEnumStrings

void nixlBasicDesc::print(const std::string& suffix) const {
  nixl::log::info("Desc ({:#x}, {}) from devID {}{}", addr, len, devId, suffix);
}

void nixlBlobDesc::print(const std::string& suffix) const {
  nixl::log::info("Desc ({:#x}, {}) from devID {}, meta '{}'{}", addr, len, devId, metaInfo,
                  suffix);
}
