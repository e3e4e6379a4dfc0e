/* A C program against NIXL's C API (nixl_capi.h), linked with nixl::capi. */
#include <stdio.h>
#include <stdlib.h>

#include "nixl_capi.h"

int main(void) {
  nixl_capi_agent_t agent = NULL;
  nixl_capi_string_list_t plugins = NULL;
  size_t n = 0;
  if (nixl_capi_create_agent("c-program", &agent) != NIXL_CAPI_SUCCESS) return 1;
  if (nixl_capi_get_available_plugins(agent, &plugins) != NIXL_CAPI_SUCCESS) return 1;
  nixl_capi_string_list_size(plugins, &n);
  for (size_t i = 0; i < n; ++i) {
    const char* s = NULL;
    nixl_capi_string_list_get(plugins, i, &s);
    printf("plugin %s\n", s);
  }
  nixl_capi_destroy_string_list(plugins);
  nixl_capi_destroy_agent(agent);
  printf("C program: OK\n");
  return n > 0 ? 0 : 1;
}
