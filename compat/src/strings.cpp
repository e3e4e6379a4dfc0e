// NIXL's enum strings, constants and descriptor printing.

#include "compat.hpp"

const std::string default_metadata_label = "metadata";
const std::string nixl_null_agent = "NULL_AGENT";

static_assert(std::is_same_v<nixl_notifs_t, nixl::notif_map>,
              "getNotifs hands NIXL's map to the core as it is");
static_assert(sizeof(nixlBasicDesc) == sizeof(nixl::desc));

namespace nixlEnumStrings {

namespace {

// NIXL's C enums carry the core's values: one in [lo, hi] gets the core's name, others `bad`.
template <class Core, class C, class Name>
std::string core_name(C v, Core lo, Core hi, Name name, const char* bad) {
  const auto i = static_cast<long long>(v);
  if (i < static_cast<long long>(lo) || i > static_cast<long long>(hi)) return bad;
  return std::string(name(static_cast<Core>(i)));
}

}  // namespace

std::string memTypeStr(const nixl_mem_t& mem) {
  return core_name(
      mem, nixl::mem_kind::dram, nixl::mem_kind::file,
      [](nixl::mem_kind k) { return nixl::nixl_name(k); }, "BAD_SEG");
}

std::string xferOpStr(const nixl_xfer_op_t& op) {
  return core_name(
      op, nixl::xfer_op::read, nixl::xfer_op::write,
      [](nixl::xfer_op o) { return nixl::to_string(o); }, "BAD_OP");
}

std::string statusStr(const nixl_status_t& status) {
  return core_name(
      status, nixl::last_error, nixl::status::in_progress,
      [](nixl::status s) { return nixl::to_string(s); }, "BAD_STATUS");
}

}  // namespace nixlEnumStrings

void nixlBasicDesc::print(const std::string& suffix) const {
  nixl::log::info("Desc ({:#x}, {}) from devID {}{}", addr, len, devId, suffix);
}

void nixlBlobDesc::print(const std::string& suffix) const {
  nixl::log::info("Desc ({:#x}, {}) from devID {}, meta '{}'{}", addr, len, devId, metaInfo,
                  suffix);
}
