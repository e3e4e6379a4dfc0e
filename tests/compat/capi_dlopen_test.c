/* libnixl_capi.so loaded the way nixl-sys's stub-api mode loads it: dlopen("libnixl_capi.so",
 * RTLD_NOW | RTLD_LOCAL) by its bare name from the loader path (LD_LIBRARY_PATH), then dlsym of
 * each of the 95 symbols that the 1.4.0 stubs resolve; a few calls go through the pointers. */

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "nixl_capi.h"

static const char* const symbols[] = {
    "nixl_capi_agent_make_connection",
    "nixl_capi_check_remote_md",
    "nixl_capi_create_agent",
    "nixl_capi_create_backend",
    "nixl_capi_create_configured_agent",
    "nixl_capi_create_notif_map",
    "nixl_capi_create_opt_args",
    "nixl_capi_create_params",
    "nixl_capi_create_query_resp_list",
    "nixl_capi_create_reg_dlist",
    "nixl_capi_create_xfer_dlist",
    "nixl_capi_create_xfer_req",
    "nixl_capi_deregister_mem",
    "nixl_capi_destroy_agent",
    "nixl_capi_destroy_backend",
    "nixl_capi_destroy_mem_list",
    "nixl_capi_destroy_notif_map",
    "nixl_capi_destroy_opt_args",
    "nixl_capi_destroy_params",
    "nixl_capi_destroy_query_resp_list",
    "nixl_capi_destroy_reg_dlist",
    "nixl_capi_destroy_string_list",
    "nixl_capi_destroy_xfer_dlist",
    "nixl_capi_destroy_xfer_req",
    "nixl_capi_estimate_xfer_cost",
    "nixl_capi_fetch_remote_md",
    "nixl_capi_gen_notif",
    "nixl_capi_get_available_plugins",
    "nixl_capi_get_backend_params",
    "nixl_capi_get_local_md",
    "nixl_capi_get_local_partial_md",
    "nixl_capi_get_notifs",
    "nixl_capi_get_plugin_params",
    "nixl_capi_get_xfer_status",
    "nixl_capi_get_xfer_telemetry",
    "nixl_capi_invalidate_local_md",
    "nixl_capi_invalidate_remote_md",
    "nixl_capi_load_remote_md",
    "nixl_capi_make_xfer_req",
    "nixl_capi_mem_list_get",
    "nixl_capi_mem_list_is_empty",
    "nixl_capi_mem_list_size",
    "nixl_capi_mem_type_to_string",
    "nixl_capi_notif_map_clear",
    "nixl_capi_notif_map_get_agent_at",
    "nixl_capi_notif_map_get_notif",
    "nixl_capi_notif_map_get_notifs_size",
    "nixl_capi_notif_map_size",
    "nixl_capi_opt_args_add_backend",
    "nixl_capi_opt_args_get_has_notif",
    "nixl_capi_opt_args_get_notif_msg",
    "nixl_capi_opt_args_get_skip_desc_merge",
    "nixl_capi_opt_args_set_has_notif",
    "nixl_capi_opt_args_set_ip_addr",
    "nixl_capi_opt_args_set_notif_msg",
    "nixl_capi_opt_args_set_port",
    "nixl_capi_opt_args_set_skip_desc_merge",
    "nixl_capi_params_add",
    "nixl_capi_params_create_iterator",
    "nixl_capi_params_destroy_iterator",
    "nixl_capi_params_is_empty",
    "nixl_capi_params_iterator_next",
    "nixl_capi_post_xfer_req",
    "nixl_capi_prep_xfer_dlist",
    "nixl_capi_query_mem",
    "nixl_capi_query_resp_list_get_params",
    "nixl_capi_query_resp_list_has_value",
    "nixl_capi_query_resp_list_size",
    "nixl_capi_query_xfer_backend",
    "nixl_capi_reg_dlist_add_desc",
    "nixl_capi_reg_dlist_clear",
    "nixl_capi_reg_dlist_desc_count",
    "nixl_capi_reg_dlist_get_type",
    "nixl_capi_reg_dlist_is_empty",
    "nixl_capi_reg_dlist_print",
    "nixl_capi_reg_dlist_rem_desc",
    "nixl_capi_reg_dlist_resize",
    "nixl_capi_reg_dlist_trim",
    "nixl_capi_register_mem",
    "nixl_capi_release_xfer_dlist_handle",
    "nixl_capi_release_xfer_req",
    "nixl_capi_send_local_md",
    "nixl_capi_send_local_partial_md",
    "nixl_capi_string_list_get",
    "nixl_capi_string_list_size",
    "nixl_capi_xfer_dlist_add_desc",
    "nixl_capi_xfer_dlist_clear",
    "nixl_capi_xfer_dlist_desc_count",
    "nixl_capi_xfer_dlist_get_type",
    "nixl_capi_xfer_dlist_is_empty",
    "nixl_capi_xfer_dlist_len",
    "nixl_capi_xfer_dlist_print",
    "nixl_capi_xfer_dlist_rem_desc",
    "nixl_capi_xfer_dlist_resize",
    "nixl_capi_xfer_dlist_trim",
};

int main(void) {
  void* h = dlopen("libnixl_capi.so", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen(libnixl_capi.so): %s\n", dlerror());
    return 1;
  }
  int missing = 0;
  const size_t n = sizeof symbols / sizeof symbols[0];
  for (size_t i = 0; i < n; ++i) {
    dlerror();
    void* p = dlsym(h, symbols[i]);
    const char* e = dlerror();
    if (p == NULL || e != NULL) {
      fprintf(stderr, "missing symbol %s: %s\n", symbols[i], e ? e : "NULL");
      ++missing;
    }
  }
  if (n != 95 || missing) {
    fprintf(stderr, "%zu symbols, %d missing\n", n, missing);
    return 1;
  }
  typedef nixl_capi_status_t (*create_t)(const char*, nixl_capi_agent_t*);
  typedef nixl_capi_status_t (*destroy_t)(nixl_capi_agent_t);
  typedef nixl_capi_status_t (*plugins_t)(nixl_capi_agent_t, nixl_capi_string_list_t*);
  typedef nixl_capi_status_t (*size_t_fn)(nixl_capi_string_list_t, size_t*);
  typedef nixl_capi_status_t (*free_list_t)(nixl_capi_string_list_t);
  typedef bool (*is_stub_t)(void);
  create_t create = (create_t)dlsym(h, "nixl_capi_create_agent");
  destroy_t destroy = (destroy_t)dlsym(h, "nixl_capi_destroy_agent");
  plugins_t plugins = (plugins_t)dlsym(h, "nixl_capi_get_available_plugins");
  size_t_fn list_size = (size_t_fn)dlsym(h, "nixl_capi_string_list_size");
  free_list_t free_list = (free_list_t)dlsym(h, "nixl_capi_destroy_string_list");
  is_stub_t is_stub = (is_stub_t)dlsym(h, "nixl_capi_is_stub");
  if (is_stub == NULL || is_stub()) {
    fprintf(stderr, "nixl_capi_is_stub: missing or true\n");
    return 1;
  }
  nixl_capi_agent_t a = NULL;
  if (create(NULL, &a) != NIXL_CAPI_ERROR_INVALID_PARAM || create("dl", &a) != NIXL_CAPI_SUCCESS) {
    fprintf(stderr, "nixl_capi_create_agent failed\n");
    return 1;
  }
  nixl_capi_string_list_t l = NULL;
  size_t count = 0;
  if (plugins(a, &l) != NIXL_CAPI_SUCCESS || list_size(l, &count) != NIXL_CAPI_SUCCESS ||
      count == 0) {
    fprintf(stderr, "nixl_capi_get_available_plugins failed\n");
    return 1;
  }
  free_list(l);
  if (destroy(a) != NIXL_CAPI_SUCCESS) return 1;
  /* Only the nixl_capi_* names are exported: the library's internals stay private. */
  if (dlsym(h, "_ZN9nixlAgentD1Ev") != NULL) {
    fprintf(stderr, "nixlAgent's symbols are exported\n");
    return 1;
  }
  printf("95 symbols resolved, %zu plugins\n", count);
  return 0;
}
