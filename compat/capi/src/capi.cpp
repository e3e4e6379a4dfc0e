// NIXL 1.4's C API over nixlAgent (nixl::compat). Conventions of 1.4.0, kept so that nixl-sys and
// its tests see the same results: a NULL required pointer gives INVALID_PARAM (-1) first; any
// failure of the agent gives BACKEND (-2), except IN_PROG (1) from post/status/telemetry and
// NO_TELEMETRY (-5) from telemetry; nothing throws across the boundary. Where 1.4.0 leaks or
// reads indeterminate memory this file does the safe thing; docs/compat.md lists each case.

#include "nixl_capi.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nixl.h"

#define NIXL_CAPI_EXPORT extern "C" __attribute__((visibility("default")))

struct nixl_capi_backend_s {
  nixlBackendH* inner;
};

struct nixl_capi_agent_s {
  std::unique_ptr<nixlAgent> inner;
  /// One wrapper per backend, owned here: create_backend and query_xfer_backend return it, so
  /// that no call leaks one (query_xfer_backend's are never freed by nixl-sys).
  std::mutex mutex;
  std::unordered_map<nixlBackendH*, std::unique_ptr<nixl_capi_backend_s>> backends;

  nixl_capi_backend_t wrap(nixlBackendH* b) {
    std::lock_guard g(mutex);
    auto& w = backends[b];
    if (!w) w = std::make_unique<nixl_capi_backend_s>(nixl_capi_backend_s{b});
    return w.get();
  }
};

struct nixl_capi_opt_args_s {
  nixl_opt_args_t args;
};
struct nixl_capi_params_s {
  nixl_b_params_t params;
};
struct nixl_capi_mem_list_s {
  nixl_mem_list_t mems;
};
struct nixl_capi_string_list_s {
  std::vector<std::string> strings;
};
/// A snapshot of the parameters: changing them later cannot invalidate it.
struct nixl_capi_param_iter_s {
  std::vector<std::pair<std::string, std::string>> items;
  std::size_t next = 0;
  std::string key;
  std::string value;
};
struct nixl_capi_xfer_dlist_s {
  std::unique_ptr<nixl_xfer_dlist_t> dlist;
};
struct nixl_capi_reg_dlist_s {
  std::unique_ptr<nixl_reg_dlist_t> dlist;
};
struct nixl_capi_xfer_dlist_handle_s {
  nixlDlistH* inner;
};
struct nixl_capi_xfer_req_s {
  nixlXferReqH* inner;
};
struct nixl_capi_notif_map_s {
  nixl_notifs_t map;
};
struct nixl_capi_query_resp_list_s {
  std::vector<nixl_query_resp_t> responses;
};

namespace {

constexpr nixl_capi_status_t ok = NIXL_CAPI_SUCCESS;
constexpr nixl_capi_status_t bad = NIXL_CAPI_ERROR_INVALID_PARAM;
constexpr nixl_capi_status_t failed = NIXL_CAPI_ERROR_BACKEND;

/// 1.4.0's mapping of most calls: success or BACKEND.
nixl_capi_status_t map(nixl_status_t s) noexcept {
  return s == NIXL_SUCCESS ? ok : failed;
}

/// Runs `f` (returning a nixl_capi_status_t); anything thrown gives BACKEND.
template <class F>
nixl_capi_status_t guard(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return failed;
  }
}

const nixl_opt_args_t* opt(nixl_capi_opt_args_t a) noexcept {
  return a == nullptr ? nullptr : &a->args;
}

/// A malloc'ed copy for the caller to free(); never NULL on success.
void* copy_out(const std::string& s) {
  void* p = std::malloc(s.size() == 0 ? 1 : s.size());
  if (p == nullptr) throw std::bad_alloc();
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  return p;
}

// The shapes most calls share, each written once: a new empty object, freeing one, and reading
// one value of one.

/// `*out` = a new, empty T, for the caller to destroy.
template <class T>
nixl_capi_status_t make(T** out) {
  if (out == nullptr) return bad;
  return guard([&] {
    *out = new T{};
    return ok;
  });
}

/// Frees `p`, which this library made.
template <class T>
nixl_capi_status_t destroy(T* p) {
  if (p == nullptr) return bad;
  delete p;
  return ok;
}

/// `*out` = get(*p).
template <class T, class Out, class Get>
nixl_capi_status_t read_out(T* p, Out* out, Get&& get) {
  if (p == nullptr || out == nullptr) return bad;
  *out = static_cast<Out>(get(*p));
  return ok;
}

nixl_capi_status_t make_agent(const char* name, const nixlAgentConfig& cfg,
                              nixl_capi_agent_t* agent) {
  return guard([&] {
    auto a = std::make_unique<nixl_capi_agent_s>();
    a->inner = std::make_unique<nixlAgent>(name, cfg);
    *agent = a.release();
    return ok;
  });
}

/// Fills new memory-type and parameter lists with `get(mems, params)` and hands both out when it
/// succeeds (any other status: BACKEND, nothing written).
template <class Get>
nixl_capi_status_t params_out(nixl_capi_mem_list_t* mems, nixl_capi_params_t* params, Get&& get) {
  return guard([&] {
    auto m = std::make_unique<nixl_capi_mem_list_s>();
    auto p = std::make_unique<nixl_capi_params_s>();
    if (get(m->mems, p->params) != NIXL_SUCCESS) return failed;
    *mems = m.release();
    *params = p.release();
    return ok;
  });
}

}  // namespace

// Agent

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_agent(const char* name,
                                                           nixl_capi_agent_t* agent) {
  if (name == nullptr || agent == nullptr) return bad;
  nixlAgentConfig cfg;
  cfg.useProgThread = true;
  return make_agent(name, cfg, agent);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_configured_agent(
    const char* name, const nixl_capi_agent_config_t* c, nixl_capi_agent_t* agent) {
  if (name == nullptr || c == nullptr || agent == nullptr) return bad;
  nixlAgentConfig cfg;
  cfg.useProgThread = c->enable_prog_thread;
  cfg.useListenThread = c->enable_listen_thread;
  cfg.listenPort = static_cast<uint16_t>(c->listen_port);  // truncates, as 1.4.0
  switch (c->thread_sync) {
    case NIXL_CAPI_THREAD_SYNC_STRICT:
      cfg.syncMode = nixl_thread_sync_t::NIXL_THREAD_SYNC_STRICT;
      break;
    case NIXL_CAPI_THREAD_SYNC_RW:
      cfg.syncMode = nixl_thread_sync_t::NIXL_THREAD_SYNC_RW;
      break;
    default:
      cfg.syncMode = nixl_thread_sync_t::NIXL_THREAD_SYNC_DEFAULT;
  }
  cfg.pthrDelay = c->pthr_delay_us;
  cfg.lthrDelay = c->lthr_delay_us;
  cfg.captureTelemetry = c->capture_telemetry;
  return make_agent(name, cfg, agent);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_agent(nixl_capi_agent_t agent) {
  if (agent == nullptr) return bad;
  return guard([&] {
    delete agent;
    return ok;
  });
}

// Plugins and parameters

NIXL_CAPI_EXPORT nixl_capi_status_t
nixl_capi_get_available_plugins(nixl_capi_agent_t agent, nixl_capi_string_list_t* plugins) {
  if (agent == nullptr || plugins == nullptr) return bad;
  return guard([&] {
    auto l = std::make_unique<nixl_capi_string_list_s>();
    if (agent->inner->getAvailPlugins(l->strings) != NIXL_SUCCESS) return failed;
    *plugins = l.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_string_list(nixl_capi_string_list_t list) {
  return destroy(list);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_string_list_size(nixl_capi_string_list_t list,
                                                               size_t* size) {
  return read_out(list, size, [](auto& l) { return l.strings.size(); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_string_list_get(nixl_capi_string_list_t list,
                                                              size_t index, const char** str) {
  if (list == nullptr || str == nullptr) return bad;
  if (index >= list->strings.size()) return bad;
  *str = list->strings[index].c_str();
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_plugin_params(nixl_capi_agent_t agent,
                                                                const char* plugin_name,
                                                                nixl_capi_mem_list_t* mems,
                                                                nixl_capi_params_t* params) {
  if (agent == nullptr || plugin_name == nullptr || mems == nullptr || params == nullptr)
    return bad;
  return params_out(mems, params, [&](nixl_mem_list_t& m, nixl_b_params_t& p) {
    return agent->inner->getPluginParams(plugin_name, m, p);
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_mem_list(nixl_capi_mem_list_t list) {
  return destroy(list);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_params(nixl_capi_params_t params) {
  return destroy(params);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_params(nixl_capi_params_t* params) {
  return make(params);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_params_add(nixl_capi_params_t params, const char* key,
                                                         const char* value) {
  if (params == nullptr || key == nullptr || value == nullptr) return bad;
  return guard([&] {
    params->params[key] = value;
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_params_is_empty(nixl_capi_params_t params,
                                                              bool* is_empty) {
  return read_out(params, is_empty, [](auto& p) { return p.params.empty(); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_params_create_iterator(nixl_capi_params_t params,
                                                                     nixl_capi_param_iter_t* iter) {
  if (params == nullptr || iter == nullptr) return bad;
  return guard([&] {
    auto it = std::make_unique<nixl_capi_param_iter_s>();
    it->items.assign(params->params.begin(), params->params.end());
    *iter = it.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_params_iterator_next(nixl_capi_param_iter_t iter,
                                                                   const char** key,
                                                                   const char** value,
                                                                   bool* has_next) {
  if (iter == nullptr || key == nullptr || value == nullptr || has_next == nullptr) return bad;
  return guard([&] {
    if (iter->next >= iter->items.size()) {
      *has_next = false;  // exhausted: key and value untouched, as 1.4.0
      return ok;
    }
    iter->key = iter->items[iter->next].first;
    iter->value = iter->items[iter->next].second;
    ++iter->next;
    *key = iter->key.c_str();
    *value = iter->value.c_str();
    *has_next = iter->next < iter->items.size();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_params_destroy_iterator(nixl_capi_param_iter_t iter) {
  return destroy(iter);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_mem_list_is_empty(nixl_capi_mem_list_t list,
                                                                bool* is_empty) {
  return read_out(list, is_empty, [](auto& l) { return l.mems.empty(); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_mem_list_size(nixl_capi_mem_list_t list,
                                                            size_t* size) {
  return read_out(list, size, [](auto& l) { return l.mems.size(); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_mem_list_get(nixl_capi_mem_list_t list, size_t index,
                                                           nixl_capi_mem_type_t* mem_type) {
  if (list == nullptr || mem_type == nullptr) return bad;
  if (index >= list->mems.size()) return bad;
  *mem_type = static_cast<nixl_capi_mem_type_t>(list->mems[index]);
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_mem_type_to_string(nixl_capi_mem_type_t mem_type,
                                                                 const char** str) {
  if (str == nullptr) return bad;
  static const char* const names[] = {"DRAM", "VRAM", "BLOCK", "OBJECT", "FILE", "UNKNOWN"};
  const int v = static_cast<int>(mem_type);
  if (v < 0 || v > 5) return bad;
  *str = names[v];
  return ok;
}

// Backends and optional arguments

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_backend(nixl_capi_agent_t agent,
                                                             const char* plugin_name,
                                                             nixl_capi_params_t params,
                                                             nixl_capi_backend_t* backend) {
  if (agent == nullptr || plugin_name == nullptr || params == nullptr || backend == nullptr)
    return bad;
  return guard([&] {
    nixlBackendH* b = nullptr;
    if (agent->inner->createBackend(plugin_name, params->params, b) != NIXL_SUCCESS) return failed;
    *backend = agent->wrap(b);
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_backend(nixl_capi_backend_t backend) {
  // The wrapper belongs to its agent (freed with it), as the backend does: nothing to free here.
  return backend == nullptr ? bad : ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_backend_params(nixl_capi_agent_t agent,
                                                                 nixl_capi_backend_t backend,
                                                                 nixl_capi_mem_list_t* mems,
                                                                 nixl_capi_params_t* params) {
  if (agent == nullptr || backend == nullptr || mems == nullptr || params == nullptr) return bad;
  return params_out(mems, params, [&](nixl_mem_list_t& m, nixl_b_params_t& p) {
    return agent->inner->getBackendParams(backend->inner, m, p);
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_opt_args(nixl_capi_opt_args_t* args) {
  return make(args);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_opt_args(nixl_capi_opt_args_t args) {
  return destroy(args);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_opt_args_add_backend(nixl_capi_opt_args_t args,
                                                                   nixl_capi_backend_t backend) {
  if (args == nullptr || backend == nullptr) return bad;
  return guard([&] {
    args->args.backends.push_back(backend->inner);
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_opt_args_set_notif_msg(nixl_capi_opt_args_t args,
                                                                     const void* data, size_t len) {
  if (args == nullptr || (data == nullptr && len > 0)) return bad;
  return guard([&] {
    args->args.notifMsg.assign(static_cast<const char*>(data), len);
    if (args->args.hasNotif || args->args.notif) args->args.notif = args->args.notifMsg;
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_opt_args_get_notif_msg(nixl_capi_opt_args_t args,
                                                                     void** data, size_t* len) {
  if (args == nullptr || data == nullptr || len == nullptr) return bad;
  return guard([&] {
    const std::string& s = args->args.notif ? *args->args.notif : args->args.notifMsg;
    if (s.empty()) {
      *data = nullptr;
      *len = 0;
      return ok;
    }
    *data = copy_out(s);
    *len = s.size();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_opt_args_set_has_notif(nixl_capi_opt_args_t args,
                                                                     bool has_notif) {
  if (args == nullptr) return bad;
  return guard([&] {
    args->args.hasNotif = has_notif;
    if (has_notif)
      args->args.notif = args->args.notifMsg;
    else
      args->args.notif.reset();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_opt_args_get_has_notif(nixl_capi_opt_args_t args,
                                                                     bool* has_notif) {
  return read_out(args, has_notif,
                  [](auto& a) { return a.args.notif.has_value() || a.args.hasNotif; });
}

NIXL_CAPI_EXPORT nixl_capi_status_t
nixl_capi_opt_args_set_skip_desc_merge(nixl_capi_opt_args_t args, bool skip_merge) {
  if (args == nullptr) return bad;
  args->args.skipDescMerge = skip_merge;
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t
nixl_capi_opt_args_get_skip_desc_merge(nixl_capi_opt_args_t args, bool* skip_merge) {
  return read_out(args, skip_merge, [](auto& a) { return a.args.skipDescMerge; });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_opt_args_set_ip_addr(nixl_capi_opt_args_t args,
                                                                   const char* ip_addr) {
  if (args == nullptr || ip_addr == nullptr) return bad;
  return guard([&] {
    args->args.ipAddr = ip_addr;
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_opt_args_set_port(nixl_capi_opt_args_t args,
                                                                uint16_t port) {
  if (args == nullptr) return bad;
  args->args.port = port;
  return ok;
}

// Descriptor lists

namespace {

template <class W>
nixl_capi_status_t list_create(nixl_capi_mem_type_t mem_type, W** out) {
  if (out == nullptr) return bad;
  return guard([&] {
    auto w = std::make_unique<W>();
    // The type is not validated here (as 1.4.0); calls that use the list refuse a bad one.
    w->dlist = std::make_unique<typename decltype(w->dlist)::element_type>(
        static_cast<nixl_mem_t>(mem_type));
    *out = w.release();
    return ok;
  });
}

}  // namespace

// The calls both kinds of list have, from one table: nixl_capi_<call>_xfer_dlist and
// nixl_capi_<call>_reg_dlist (and nixl_capi_<kind>_dlist_<call>).
#define NIXL_CAPI_DLIST_READ(kind, call, Out, value)                     \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_##kind##_dlist_##call(   \
      nixl_capi_##kind##_dlist_t dlist, Out* out) {                      \
    return read_out(dlist, out, [](auto& w) { return w.dlist->value; }); \
  }
#define NIXL_CAPI_DLIST_CALLS(kind)                                                        \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_##kind##_dlist(                     \
      nixl_capi_mem_type_t mem_type, nixl_capi_##kind##_dlist_t* dlist) {                  \
    return list_create(mem_type, dlist);                                                   \
  }                                                                                        \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_##kind##_dlist(                    \
      nixl_capi_##kind##_dlist_t dlist) {                                                  \
    return destroy(dlist);                                                                 \
  }                                                                                        \
  NIXL_CAPI_DLIST_READ(kind, get_type, nixl_capi_mem_type_t, getType())                    \
  NIXL_CAPI_DLIST_READ(kind, desc_count, size_t, descCount())                              \
  NIXL_CAPI_DLIST_READ(kind, is_empty, bool, isEmpty())                                    \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_##kind##_dlist_trim(                       \
      nixl_capi_##kind##_dlist_t dlist) {                                                  \
    return dlist == nullptr ? bad : ok; /* 1.4.0 computes the trimmed list and drops it */ \
  }                                                                                        \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_##kind##_dlist_rem_desc(                   \
      nixl_capi_##kind##_dlist_t dlist, int index) {                                       \
    if (dlist == nullptr) return bad;                                                      \
    return guard([&] {                                                                     \
      dlist->dlist->remDesc(index); /* std::out_of_range gives BACKEND, as 1.4.0 */        \
      return ok;                                                                           \
    });                                                                                    \
  }                                                                                        \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_##kind##_dlist_clear(                      \
      nixl_capi_##kind##_dlist_t dlist) {                                                  \
    if (dlist == nullptr) return bad;                                                      \
    dlist->dlist->clear();                                                                 \
    return ok;                                                                             \
  }                                                                                        \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_##kind##_dlist_resize(                     \
      nixl_capi_##kind##_dlist_t dlist, size_t new_size) {                                 \
    if (dlist == nullptr) return bad;                                                      \
    return guard([&] {                                                                     \
      dlist->dlist->resize(new_size); /* new descriptors are zero, not indeterminate */    \
      return ok;                                                                           \
    });                                                                                    \
  }                                                                                        \
  NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_##kind##_dlist_print(                      \
      nixl_capi_##kind##_dlist_t dlist) {                                                  \
    if (dlist == nullptr) return bad;                                                      \
    return guard([&] {                                                                     \
      dlist->dlist->print();                                                               \
      for (const auto& d : *dlist->dlist) d.print("");                                     \
      return ok;                                                                           \
    });                                                                                    \
  }

NIXL_CAPI_DLIST_CALLS(xfer)
NIXL_CAPI_DLIST_CALLS(reg)
#undef NIXL_CAPI_DLIST_CALLS
#undef NIXL_CAPI_DLIST_READ

// What only one kind has: the descriptor each adds, and xfer's len (desc_count again).

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_xfer_dlist_add_desc(nixl_capi_xfer_dlist_t dlist,
                                                                  uintptr_t addr, size_t len,
                                                                  uint64_t dev_id) {
  if (dlist == nullptr) return bad;
  return guard([&] {
    dlist->dlist->addDesc(nixlBasicDesc(addr, len, dev_id));
    return ok;
  });
}
NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_xfer_dlist_len(nixl_capi_xfer_dlist_t dlist,
                                                             size_t* len) {
  return nixl_capi_xfer_dlist_desc_count(dlist, len);
}
NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_reg_dlist_add_desc(nixl_capi_reg_dlist_t dlist,
                                                                 uintptr_t addr, size_t len,
                                                                 uint64_t dev_id,
                                                                 const void* metadata,
                                                                 size_t metadata_len) {
  if (dlist == nullptr) return bad;
  return guard([&] {
    nixlBlobDesc d(addr, len, dev_id);
    if (metadata != nullptr && metadata_len > 0)
      d.metaInfo.assign(static_cast<const char*>(metadata), metadata_len);
    dlist->dlist->addDesc(d);
    return ok;
  });
}

// Registration, connection, transfers

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_register_mem(nixl_capi_agent_t agent,
                                                           nixl_capi_reg_dlist_t dlist,
                                                           nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || dlist == nullptr) return bad;
  return guard([&] { return map(agent->inner->registerMem(*dlist->dlist, opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_deregister_mem(nixl_capi_agent_t agent,
                                                             nixl_capi_reg_dlist_t dlist,
                                                             nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || dlist == nullptr) return bad;
  return guard([&] { return map(agent->inner->deregisterMem(*dlist->dlist, opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_agent_make_connection(nixl_capi_agent_t agent,
                                                                    const char* remote_agent,
                                                                    nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || remote_agent == nullptr) return bad;
  return guard([&] { return map(agent->inner->makeConnection(remote_agent, opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_prep_xfer_dlist(
    nixl_capi_agent_t agent, const char* agent_name, nixl_capi_xfer_dlist_t descs,
    nixl_capi_xfer_dlist_handle_t* dlist_hndl, nixl_capi_opt_args_t opt_args) {
  // 1.4.0 neither checks dlist_hndl nor waits for success before writing it (a leak on failure);
  // here it is checked and written only on success.
  if (agent == nullptr || agent_name == nullptr || descs == nullptr || dlist_hndl == nullptr)
    return bad;
  return guard([&] {
    auto w =
        std::make_unique<nixl_capi_xfer_dlist_handle_s>(nixl_capi_xfer_dlist_handle_s{nullptr});
    const auto s = agent->inner->prepXferDlist(agent_name, *descs->dlist, w->inner, opt(opt_args));
    if (s != NIXL_SUCCESS) return failed;
    *dlist_hndl = w.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_prep_xfer_stride_dlist(
    nixl_capi_agent_t agent, const char* agent_name, nixl_capi_mem_type_t mem_type,
    const uint64_t* rows, size_t row_count, nixl_capi_xfer_dlist_handle_t* dlist_hndl,
    nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || agent_name == nullptr || (rows == nullptr && row_count > 0) ||
      dlist_hndl == nullptr || static_cast<int>(mem_type) < 0 ||
      static_cast<int>(mem_type) >= static_cast<int>(NIXL_CAPI_MEM_UNKNOWN))
    return bad;
  return guard([&] {
    nixl_stride_dlist_t descs(static_cast<nixl_mem_t>(mem_type));
    descs.reserve(row_count);
    for (size_t i = 0; i < row_count; ++i) {
      const uint64_t* r = rows + 5 * i;
      descs.addDesc(nixlStrideDesc(static_cast<uintptr_t>(r[0]), r[1], r[2], r[3], r[4]));
    }
    auto w =
        std::make_unique<nixl_capi_xfer_dlist_handle_s>(nixl_capi_xfer_dlist_handle_s{nullptr});
    const auto s = agent->inner->prepXferDlist(agent_name, descs, w->inner, opt(opt_args));
    if (s != NIXL_SUCCESS) return failed;
    *dlist_hndl = w.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t
nixl_capi_release_xfer_dlist_handle(nixl_capi_agent_t agent, nixl_capi_xfer_dlist_handle_t h) {
  if (agent == nullptr || h == nullptr) return bad;
  return guard([&] {
    const auto s = agent->inner->releasedDlistH(h->inner);
    delete h;  // 1.4.0 keeps the wrapper (a leak); nixl-sys never uses a handle again
    return map(s);
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_make_xfer_req(
    nixl_capi_agent_t agent, nixl_capi_xfer_op_t operation,
    nixl_capi_xfer_dlist_handle_t local_descs, const int* local_indices, size_t local_indices_count,
    nixl_capi_xfer_dlist_handle_t remote_descs, const int* remote_indices,
    size_t remote_indices_count, nixl_capi_xfer_req_t* req_hndl, nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || local_descs == nullptr || remote_descs == nullptr ||
      req_hndl == nullptr || (local_indices == nullptr && local_indices_count > 0) ||
      (remote_indices == nullptr && remote_indices_count > 0))
    return bad;
  return guard([&] {
    std::vector<int> li, ri;
    if (local_indices_count > 0) li.assign(local_indices, local_indices + local_indices_count);
    if (remote_indices_count > 0) ri.assign(remote_indices, remote_indices + remote_indices_count);
    auto w = std::make_unique<nixl_capi_xfer_req_s>(nixl_capi_xfer_req_s{nullptr});
    const auto s =
        agent->inner->makeXferReq(static_cast<nixl_xfer_op_t>(operation), local_descs->inner, li,
                                  remote_descs->inner, ri, w->inner, opt(opt_args));
    if (s != NIXL_SUCCESS) return failed;
    *req_hndl = w.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_xfer_req(
    nixl_capi_agent_t agent, nixl_capi_xfer_op_t operation, nixl_capi_xfer_dlist_t local_descs,
    nixl_capi_xfer_dlist_t remote_descs, const char* remote_agent, nixl_capi_xfer_req_t* req_hndl,
    nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || local_descs == nullptr || remote_descs == nullptr ||
      remote_agent == nullptr || req_hndl == nullptr)
    return bad;
  return guard([&] {
    auto w = std::make_unique<nixl_capi_xfer_req_s>(nixl_capi_xfer_req_s{nullptr});
    const auto s =
        agent->inner->createXferReq(static_cast<nixl_xfer_op_t>(operation), *local_descs->dlist,
                                    *remote_descs->dlist, remote_agent, w->inner, opt(opt_args));
    if (s != NIXL_SUCCESS) return failed;
    *req_hndl = w.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_estimate_xfer_cost(
    nixl_capi_agent_t agent, nixl_capi_xfer_req_t req_hndl, nixl_capi_opt_args_t opt_args,
    int64_t* duration_us, int64_t* err_margin_us, nixl_capi_cost_t* method) {
  if (agent == nullptr || req_hndl == nullptr || duration_us == nullptr ||
      err_margin_us == nullptr || method == nullptr)
    return bad;
  return guard([&] {
    std::chrono::microseconds d{0}, e{0};
    nixl_cost_t m = nixl_cost_t::ANALYTICAL_BACKEND;
    const auto s = agent->inner->estimateXferCost(req_hndl->inner, d, e, m, opt(opt_args));
    // 1.4.0 writes the outputs whatever happened (indeterminate on failure); here they are
    // zero on failure.
    *duration_us = s == NIXL_SUCCESS ? d.count() : 0;
    *err_margin_us = s == NIXL_SUCCESS ? e.count() : 0;
    *method = static_cast<nixl_capi_cost_t>(m);
    return map(s);
  });
}

namespace {

/// The hot calls on a request: `call(agent, request)` answered as success, in progress or a
/// failure; a null agent or request is `bad`.
template <class Call>
nixl_capi_status_t on_request(nixl_capi_agent_t agent, nixl_capi_xfer_req_t req_hndl, Call call) {
  if (agent == nullptr || req_hndl == nullptr) [[unlikely]]
    return bad;
  const nixl_status_t s = call(*agent->inner, req_hndl->inner);
  return s == NIXL_SUCCESS ? ok : s == NIXL_IN_PROG ? NIXL_CAPI_IN_PROG : failed;
}

}  // namespace

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_post_xfer_req(nixl_capi_agent_t agent,
                                                            nixl_capi_xfer_req_t req_hndl,
                                                            nixl_capi_opt_args_t opt_args) {
  return on_request(agent, req_hndl, [&](const nixlAgent& a, nixlXferReqH* r) {
    return a.postXferReq(r, opt(opt_args));
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_xfer_status(nixl_capi_agent_t agent,
                                                              nixl_capi_xfer_req_t req_hndl) {
  return on_request(agent, req_hndl,
                    [](const nixlAgent& a, nixlXferReqH* r) { return a.getXferStatus(r); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_wait_xfer(nixl_capi_agent_t agent,
                                                        nixl_capi_xfer_req_t req_hndl,
                                                        int64_t timeout_us) {
  return on_request(agent, req_hndl, [timeout_us](const nixlAgent& a, nixlXferReqH* r) {
    return a.waitXferReq(r, std::chrono::microseconds(timeout_us));
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_peek_xfer(nixl_capi_agent_t agent,
                                                        nixl_capi_xfer_req_t req_hndl) {
  return on_request(agent, req_hndl,
                    [](const nixlAgent& a, nixlXferReqH* r) { return a.peekXferReq(r); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_query_xfer_backend(nixl_capi_agent_t agent,
                                                                 nixl_capi_xfer_req_t req_hndl,
                                                                 nixl_capi_backend_t* backend) {
  if (agent == nullptr || req_hndl == nullptr || backend == nullptr) return bad;
  return guard([&] {
    nixlBackendH* b = nullptr;
    if (agent->inner->queryXferBackend(req_hndl->inner, b) != NIXL_SUCCESS) return failed;
    *backend = agent->wrap(b);  // the agent's wrapper: no leak per call
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_release_xfer_req(nixl_capi_agent_t agent,
                                                               nixl_capi_xfer_req_t req_hndl) {
  if (agent == nullptr || req_hndl == nullptr || req_hndl->inner == nullptr) return bad;
  return guard([&] {
    const auto s = agent->inner->releaseXferReq(req_hndl->inner);
    if (s != NIXL_SUCCESS) return failed;  // REPOST_ACTIVE: still usable
    req_hndl->inner = nullptr;
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_xfer_req(nixl_capi_xfer_req_t req_hndl) {
  if (req_hndl == nullptr) return bad;
  if (req_hndl->inner != nullptr) return NIXL_CAPI_ERROR_INVALID_STATE;
  delete req_hndl;
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_xfer_telemetry(
    nixl_capi_agent_t agent, nixl_capi_xfer_req_t req_hndl, nixl_capi_xfer_telemetry_t telemetry) {
  if (agent == nullptr || req_hndl == nullptr || telemetry == nullptr) return bad;
  return guard([&] {
    nixl_xfer_telem_t t{};
    const auto s = agent->inner->getXferTelemetry(req_hndl->inner, t);
    if (s == NIXL_IN_PROG) return NIXL_CAPI_IN_PROG;
    if (s == NIXL_ERR_NO_TELEMETRY) return NIXL_CAPI_ERROR_NO_TELEMETRY;
    if (s != NIXL_SUCCESS) return failed;
    using std::chrono::duration_cast;
    using std::chrono::microseconds;
    telemetry->start_time_us =
        static_cast<uint64_t>(duration_cast<microseconds>(t.startTime.time_since_epoch()).count());
    telemetry->post_duration_us = static_cast<uint64_t>(t.postDuration.count());
    telemetry->xfer_duration_us = static_cast<uint64_t>(t.xferDuration.count());
    telemetry->total_bytes = t.totalBytes;
    telemetry->desc_count = t.descCount;
    return ok;
  });
}

// Metadata

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_local_md(nixl_capi_agent_t agent, void** data,
                                                           size_t* len) {
  if (agent == nullptr || data == nullptr || len == nullptr) return bad;
  return guard([&] {
    nixl_blob_t md;
    if (agent->inner->getLocalMD(md) != NIXL_SUCCESS) return failed;
    *data = copy_out(md);
    *len = md.size();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_local_partial_md(nixl_capi_agent_t agent,
                                                                   nixl_capi_reg_dlist_t descs,
                                                                   void** data, size_t* len,
                                                                   nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || descs == nullptr || data == nullptr || len == nullptr) return bad;
  return guard([&] {
    nixl_blob_t md;
    if (agent->inner->getLocalPartialMD(*descs->dlist, md, opt(opt_args)) != NIXL_SUCCESS)
      return failed;
    *data = copy_out(md);
    *len = md.size();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_load_remote_md(nixl_capi_agent_t agent,
                                                             const void* data, size_t len,
                                                             char** agent_name) {
  if (agent == nullptr || data == nullptr || len == 0 || agent_name == nullptr) return bad;
  return guard([&] {
    std::string name;
    if (agent->inner->loadRemoteMD(nixl_blob_t(static_cast<const char*>(data), len), name) !=
        NIXL_SUCCESS)
      return failed;
    char* s = ::strdup(name.c_str());
    if (s == nullptr) return failed;
    *agent_name = s;
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_invalidate_remote_md(nixl_capi_agent_t agent,
                                                                   const char* remote_agent) {
  if (agent == nullptr || remote_agent == nullptr) return bad;
  return guard([&] { return map(agent->inner->invalidateRemoteMD(remote_agent)); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_send_local_md(nixl_capi_agent_t agent,
                                                            nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr) return bad;
  return guard([&] { return map(agent->inner->sendLocalMD(opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_send_local_partial_md(nixl_capi_agent_t agent,
                                                                    nixl_capi_reg_dlist_t descs,
                                                                    nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || descs == nullptr) return bad;
  return guard([&] { return map(agent->inner->sendLocalPartialMD(*descs->dlist, opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_fetch_remote_md(nixl_capi_agent_t agent,
                                                              const char* remote_name,
                                                              nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || remote_name == nullptr) return bad;
  return guard([&] { return map(agent->inner->fetchRemoteMD(remote_name, opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_invalidate_local_md(nixl_capi_agent_t agent,
                                                                  nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr) return bad;
  return guard([&] { return map(agent->inner->invalidateLocalMD(opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_check_remote_md(nixl_capi_agent_t agent,
                                                              const char* remote_name,
                                                              nixl_capi_xfer_dlist_t descs) {
  if (agent == nullptr || remote_name == nullptr) return bad;
  return guard([&] {
    if (descs == nullptr)
      return map(agent->inner->checkRemoteMD(remote_name, nixl_xfer_dlist_t(DRAM_SEG)));
    return map(agent->inner->checkRemoteMD(remote_name, *descs->dlist));
  });
}

// Notifications

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_notif_map(nixl_capi_notif_map_t* notif_map) {
  return make(notif_map);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_notif_map(nixl_capi_notif_map_t notif_map) {
  return destroy(notif_map);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_notif_map_clear(nixl_capi_notif_map_t notif_map) {
  if (notif_map == nullptr) return bad;
  notif_map->map.clear();
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_notifs(nixl_capi_agent_t agent,
                                                         nixl_capi_notif_map_t notif_map,
                                                         nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || notif_map == nullptr) return bad;
  return guard([&] { return map(agent->inner->getNotifs(notif_map->map, opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_aborted_notifs(nixl_capi_agent_t agent,
                                                                 nixl_capi_notif_map_t notif_map,
                                                                 nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || notif_map == nullptr) return bad;
  return guard([&] { return map(agent->inner->getAbortedNotifs(notif_map->map, opt(opt_args))); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_gone_agents(nixl_capi_agent_t agent,
                                                              nixl_capi_string_list_t* agents,
                                                              nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || agents == nullptr) return bad;
  return guard([&] {
    auto l = std::make_unique<nixl_capi_string_list_s>();
    const nixl_status_t st = agent->inner->getGoneAgents(l->strings, opt(opt_args));
    if (st != NIXL_SUCCESS) return map(st);
    *agents = l.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_wait_notifs(nixl_capi_agent_t agent,
                                                          nixl_capi_notif_map_t notif_map,
                                                          int64_t timeout_us,
                                                          nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || notif_map == nullptr) return bad;
  return guard([&] {
    const auto s = agent->inner->waitNotifs(notif_map->map, std::chrono::microseconds(timeout_us),
                                            opt(opt_args));
    return s == NIXL_IN_PROG ? NIXL_CAPI_IN_PROG : map(s);
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_get_event_fd(nixl_capi_agent_t agent, int* fd) {
  if (agent == nullptr || fd == nullptr) return bad;
  return guard([&] {
    *fd = agent->inner->getEventFd();
    return *fd >= 0 ? ok : failed;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_drain_events(nixl_capi_agent_t agent) {
  if (agent == nullptr) return bad;
  agent->inner->drainEvents();
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_gen_notif(nixl_capi_agent_t agent,
                                                        const char* remote_agent, const void* data,
                                                        size_t len, nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || remote_agent == nullptr || (data == nullptr && len > 0)) return bad;
  return guard([&] {
    const nixl_blob_t msg =
        len == 0 ? nixl_blob_t() : nixl_blob_t(static_cast<const char*>(data), len);
    return map(agent->inner->genNotif(remote_agent, msg, opt(opt_args)));
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_notif_map_size(nixl_capi_notif_map_t map,
                                                             size_t* size) {
  return read_out(map, size, [](auto& m) { return m.map.size(); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_notif_map_get_agent_at(nixl_capi_notif_map_t map,
                                                                     size_t index,
                                                                     const char** agent_name) {
  // 1.4.0 reads past the end for index > size; any index outside the map gives -1 here.
  if (map == nullptr || agent_name == nullptr || index >= map->map.size()) return bad;
  auto it = map->map.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(index));
  *agent_name = it->first.c_str();
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_notif_map_get_notifs_size(nixl_capi_notif_map_t map,
                                                                        const char* agent_name,
                                                                        size_t* size) {
  if (map == nullptr || agent_name == nullptr || size == nullptr) return bad;
  return guard([&] {
    auto it = map->map.find(agent_name);
    if (it == map->map.end()) return bad;
    *size = it->second.size();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_notif_map_get_notif(nixl_capi_notif_map_t map,
                                                                  const char* agent_name,
                                                                  size_t index, const void** data,
                                                                  size_t* len) {
  if (map == nullptr || agent_name == nullptr || data == nullptr || len == nullptr) return bad;
  return guard([&] {
    auto it = map->map.find(agent_name);
    if (it == map->map.end() || index >= it->second.size()) return bad;
    *data = it->second[index].data();
    *len = it->second[index].size();
    return ok;
  });
}

// Memory queries

NIXL_CAPI_EXPORT nixl_capi_status_t
nixl_capi_create_query_resp_list(nixl_capi_query_resp_list_t* list) {
  return make(list);
}

NIXL_CAPI_EXPORT nixl_capi_status_t
nixl_capi_destroy_query_resp_list(nixl_capi_query_resp_list_t list) {
  return destroy(list);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_query_resp_list_size(nixl_capi_query_resp_list_t list,
                                                                   size_t* size) {
  return read_out(list, size, [](auto& l) { return l.responses.size(); });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_query_resp_list_has_value(
    nixl_capi_query_resp_list_t list, size_t index, bool* has_value) {
  if (list == nullptr || has_value == nullptr || index >= list->responses.size()) return bad;
  *has_value = list->responses[index].has_value();
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_query_resp_list_get_params(
    nixl_capi_query_resp_list_t list, size_t index, nixl_capi_params_t* params) {
  if (list == nullptr || params == nullptr || index >= list->responses.size() ||
      !list->responses[index].has_value())
    return bad;
  return guard([&] {
    *params = new nixl_capi_params_s{*list->responses[index]};
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_query_mem(nixl_capi_agent_t agent,
                                                        nixl_capi_reg_dlist_t descs,
                                                        nixl_capi_query_resp_list_t resp,
                                                        nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || descs == nullptr || resp == nullptr) return bad;
  return guard(
      [&] { return map(agent->inner->queryMem(*descs->dlist, resp->responses, opt(opt_args))); });
}

NIXL_CAPI_EXPORT bool nixl_capi_is_stub(void) {
  return false;
}

// Memory views (NIXL after 1.4.0): NOT_FOUND is -6 here, other failures -2.

struct nixl_capi_remote_dlist_s {
  std::unique_ptr<nixl_remote_dlist_t> dlist;
};

namespace {

nixl_capi_status_t map_view(nixl_status_t s) noexcept {
  if (s == NIXL_SUCCESS) return ok;
  return s == NIXL_ERR_NOT_FOUND ? NIXL_CAPI_ERROR_NOT_FOUND : failed;
}

/// prepMemView over a local or a remote list; `*mvh` is written only on success.
template <class List>
nixl_capi_status_t prep_view(nixl_capi_agent_t agent, List* descs, nixl_capi_mem_view_t* mvh,
                             nixl_capi_opt_args_t opt_args) {
  if (agent == nullptr || descs == nullptr || mvh == nullptr) return bad;
  return guard([&] {
    nixlMemViewH h = nullptr;
    const auto s = agent->inner->prepMemView(*descs->dlist, h, opt(opt_args));
    if (s == NIXL_SUCCESS) *mvh = static_cast<nixl_capi_mem_view_t>(h);
    return map_view(s);
  });
}

}  // namespace

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_create_remote_dlist(nixl_capi_mem_type_t mem_type,
                                                                  nixl_capi_remote_dlist_t* dlist) {
  if (dlist == nullptr || mem_type < NIXL_CAPI_MEM_DRAM || mem_type > NIXL_CAPI_MEM_FILE)
    return bad;
  return guard([&] {
    auto l = std::make_unique<nixl_capi_remote_dlist_s>();
    l->dlist = std::make_unique<nixl_remote_dlist_t>(static_cast<nixl_mem_t>(mem_type));
    *dlist = l.release();
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_destroy_remote_dlist(nixl_capi_remote_dlist_t dlist) {
  if (dlist == nullptr) return bad;
  delete dlist;
  return ok;
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_remote_dlist_add_desc(nixl_capi_remote_dlist_t dlist,
                                                                    uintptr_t addr, size_t len,
                                                                    uint64_t dev_id,
                                                                    const char* remote_agent) {
  if (dlist == nullptr) return bad;
  return guard([&] {
    dlist->dlist->addDesc(nixlRemoteDesc(addr, len, dev_id,
                                         remote_agent != nullptr ? remote_agent : nixl_null_agent));
    return ok;
  });
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_prep_mem_view_local(nixl_capi_agent_t agent,
                                                                  nixl_capi_xfer_dlist_t descs,
                                                                  nixl_capi_mem_view_t* mvh,
                                                                  nixl_capi_opt_args_t opt_args) {
  return prep_view(agent, descs, mvh, opt_args);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_prep_mem_view_remote(nixl_capi_agent_t agent,
                                                                   nixl_capi_remote_dlist_t descs,
                                                                   nixl_capi_mem_view_t* mvh,
                                                                   nixl_capi_opt_args_t opt_args) {
  return prep_view(agent, descs, mvh, opt_args);
}

NIXL_CAPI_EXPORT nixl_capi_status_t nixl_capi_release_mem_view(nixl_capi_agent_t agent,
                                                               nixl_capi_mem_view_t mvh) {
  if (agent == nullptr || mvh == nullptr) return bad;
  return guard([&] {
    agent->inner->releaseMemView(static_cast<nixlMemViewH>(mvh));
    return ok;
  });
}
