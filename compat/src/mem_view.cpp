// nixlAgent: memory views for GPU-initiated transfers (prepMemView / releaseMemView), over
// nixl::agent::prepare_view (include/nixl/agent/views.hpp). Local views keep NIXL's
// base-address behaviour: entry i points at the start of the registration covering it, so a
// kernel's src.offset counts from that registration's start (docs/device.md).

#include <string>
#include <string_view>
#include <vector>

#include "compat.hpp"

using namespace nixl::compat;

namespace {

nixl::view_options view_opts(nixlAgentData& d, const nixl_opt_args_t* x) {
  nixl::view_options o;
  o.backends = d.options(x).backends;
  if (x != nullptr) o.custom = x->customParam;
  return o;
}

}  // namespace

nixl_status_t nixlAgent::prepMemView(const nixl_remote_dlist_t& dlist, nixlMemViewH& mvh,
                                     const nixl_opt_args_t* extra_params) const {
  mvh = nullptr;  // as NIXL: a failed call leaves the out-handle null
  return guarded("prepMemView", [&] {
    std::vector<nixl::remote_entry> list;
    list.reserve(static_cast<std::size_t>(dlist.descCount()));
    for (const auto& d : dlist) list.push_back({d.remoteAgent, {d.addr, d.len, d.devId}});
    mvh =
        data->agent().prepare_view(kind_of(dlist.getType()), list, view_opts(*data, extra_params));
  });
}

nixl_status_t nixlAgent::prepMemView(const nixl_local_dlist_t& dlist, nixlMemViewH& mvh,
                                     const nixl_opt_args_t* extra_params) const {
  mvh = nullptr;  // as NIXL: a failed call leaves the out-handle null
  return guarded("prepMemView", [&] {
    auto o = view_opts(*data, extra_params);
    o.registration_base = true;  // NIXL's local-view addresses
    mvh = data->agent().prepare_view(to_core(dlist), o);
  });
}

void nixlAgent::releaseMemView(nixlMemViewH mvh) const {
  if (!data->agent().release_view(mvh))
    nixl::log::warn("releaseMemView: Invalid memory view handle {}", mvh);
}
