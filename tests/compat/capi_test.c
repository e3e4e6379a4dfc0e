/* NIXL's C API (libnixl_capi.so) end to end, as nixl-sys drives it: agents, plugins and
 * parameters, backends, optional arguments, registration, metadata, transfer lists, requests
 * (create/post/status/release/destroy), prepared lists and index requests, notification maps,
 * memory queries, telemetry, and the status codes of NIXL 1.4.0 (-1 for a NULL argument, -2 for
 * a failure of the agent, -3 for destroying an unreleased request). Exit status 0: all passed;
 * 77: skipped (no UCX backend in this build). */

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nixl_capi.h"

static int failures = 0;
#define CHECK(c)                                                            \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
      ++failures;                                                           \
    }                                                                       \
  } while (0)
#define REQUIRE(c)                                                            \
  do {                                                                        \
    if (!(c)) {                                                               \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #c); \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Polls a request until it is no longer in progress (bounded: 20 s). */
static nixl_capi_status_t wait_req(nixl_capi_agent_t a, nixl_capi_xfer_req_t r,
                                   nixl_capi_status_t s) {
  const double end = now_s() + 20;
  while (s == NIXL_CAPI_IN_PROG && now_s() < end) s = nixl_capi_get_xfer_status(a, r);
  return s;
}

/* Waits (bounded) until `from` sent `n` notifications into `m`. */
static size_t wait_notifs(nixl_capi_agent_t a, nixl_capi_notif_map_t m, const char* from,
                          size_t n) {
  const double end = now_s() + 10;
  size_t got = 0;
  while (now_s() < end) {
    if (nixl_capi_get_notifs(a, m, NULL) != NIXL_CAPI_SUCCESS) break;
    if (nixl_capi_notif_map_get_notifs_size(m, from, &got) == NIXL_CAPI_SUCCESS && got >= n)
      return got;
    usleep(1000);
  }
  return got;
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)((i * 7 + seed) & 0xff);
}
static int holds(const unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != (unsigned char)((i * 7 + seed) & 0xff)) return 0;
  return 1;
}

/* READs blocks 3,2 of prepared list `r` (over `dst`) into blocks 0,1 of `l` (over `src`) with
 * one index request, checks the bytes, then releases the request and both lists. */
static void read_blocks_3_2(nixl_capi_agent_t ini, nixl_capi_xfer_dlist_handle_t l,
                            nixl_capi_xfer_dlist_handle_t r, const unsigned char* src,
                            const unsigned char* dst, size_t blk) {
  const int li[] = {0, 1}, ri[] = {3, 2};
  nixl_capi_xfer_req_t req = NULL;
  REQUIRE(nixl_capi_make_xfer_req(ini, NIXL_CAPI_XFER_OP_READ, l, li, 2, r, ri, 2, &req, NULL) ==
          NIXL_CAPI_SUCCESS);
  REQUIRE(wait_req(ini, req, nixl_capi_post_xfer_req(ini, req, NULL)) == NIXL_CAPI_SUCCESS);
  CHECK(memcmp(src, dst + 3 * blk, blk) == 0);
  CHECK(memcmp(src + blk, dst + 2 * blk, blk) == 0);
  REQUIRE(nixl_capi_release_xfer_req(ini, req) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_destroy_xfer_req(req) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_release_xfer_dlist_handle(ini, l) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_release_xfer_dlist_handle(ini, r) == NIXL_CAPI_SUCCESS);
}

static int has_string(nixl_capi_string_list_t l, const char* s) {
  size_t n = 0;
  nixl_capi_string_list_size(l, &n);
  for (size_t i = 0; i < n; ++i) {
    const char* x = NULL;
    if (nixl_capi_string_list_get(l, i, &x) == NIXL_CAPI_SUCCESS && strcmp(x, s) == 0) return 1;
  }
  return 0;
}

static void test_values(void) {
  /* The ABI of wrapper.h: offsets of the configuration, 4-byte enums, 1-byte bool. */
  CHECK(sizeof(nixl_capi_agent_config_t) == 40);
  CHECK(offsetof(nixl_capi_agent_config_t, enable_listen_thread) == 1);
  CHECK(offsetof(nixl_capi_agent_config_t, listen_port) == 4);
  CHECK(offsetof(nixl_capi_agent_config_t, thread_sync) == 8);
  CHECK(offsetof(nixl_capi_agent_config_t, num_workers) == 12);
  CHECK(offsetof(nixl_capi_agent_config_t, pthr_delay_us) == 16);
  CHECK(offsetof(nixl_capi_agent_config_t, lthr_delay_us) == 24);
  CHECK(offsetof(nixl_capi_agent_config_t, capture_telemetry) == 32);
  CHECK(sizeof(struct nixl_capi_xfer_telemetry_s) == 40);
  CHECK(sizeof(nixl_capi_status_t) == 4 && sizeof(nixl_capi_mem_type_t) == 4);
  CHECK(sizeof(bool) == 1);
  CHECK(NIXL_CAPI_ERROR_NO_TELEMETRY == -5);
  CHECK(NIXL_CAPI_MEM_UNKNOWN == 5);
  CHECK(!nixl_capi_is_stub());
  const char* s = NULL;
  CHECK(nixl_capi_mem_type_to_string(NIXL_CAPI_MEM_OBJECT, &s) == NIXL_CAPI_SUCCESS &&
        strcmp(s, "OBJECT") == 0);
  CHECK(nixl_capi_mem_type_to_string(NIXL_CAPI_MEM_UNKNOWN, &s) == NIXL_CAPI_SUCCESS &&
        strcmp(s, "UNKNOWN") == 0);
  CHECK(nixl_capi_mem_type_to_string((nixl_capi_mem_type_t)6, &s) == NIXL_CAPI_ERROR_INVALID_PARAM);
  /* NULL arguments: -1 before anything happens. */
  nixl_capi_agent_t a = NULL;
  CHECK(nixl_capi_create_agent(NULL, &a) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_create_agent("x", NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_destroy_agent(NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_post_xfer_req(NULL, NULL, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_create_agent("", &a) == NIXL_CAPI_ERROR_BACKEND); /* empty name */
}

static void test_params_and_opt_args(void) {
  nixl_capi_params_t p = NULL;
  REQUIRE(nixl_capi_create_params(&p) == NIXL_CAPI_SUCCESS);
  bool empty = false;
  CHECK(nixl_capi_params_is_empty(p, &empty) == NIXL_CAPI_SUCCESS && empty);
  CHECK(nixl_capi_params_add(p, "k1", "v1") == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_params_add(p, "k2", "v2") == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_params_add(p, "k1", "v1b") == NIXL_CAPI_SUCCESS); /* overwrites */
  CHECK(nixl_capi_params_add(p, NULL, "v") == NIXL_CAPI_ERROR_INVALID_PARAM);
  nixl_capi_param_iter_t it = NULL;
  REQUIRE(nixl_capi_params_create_iterator(p, &it) == NIXL_CAPI_SUCCESS);
  int seen = 0, k1 = 0;
  for (;;) {
    const char *k = NULL, *v = NULL;
    bool more = true;
    REQUIRE(nixl_capi_params_iterator_next(it, &k, &v, &more) == NIXL_CAPI_SUCCESS);
    if (k == NULL) {
      CHECK(!more);
      break; /* exhausted: key untouched (still NULL) */
    }
    ++seen;
    if (strcmp(k, "k1") == 0) k1 = strcmp(v, "v1b") == 0;
    if (seen > 2) break;
  }
  CHECK(seen == 2);
  CHECK(k1);
  CHECK(nixl_capi_params_destroy_iterator(it) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_destroy_params(p) == NIXL_CAPI_SUCCESS);

  nixl_capi_opt_args_t o = NULL;
  REQUIRE(nixl_capi_create_opt_args(&o) == NIXL_CAPI_SUCCESS);
  bool has = true;
  void* data = (void*)1;
  size_t len = 9;
  CHECK(nixl_capi_opt_args_get_has_notif(o, &has) == NIXL_CAPI_SUCCESS && !has);
  CHECK(nixl_capi_opt_args_get_notif_msg(o, &data, &len) == NIXL_CAPI_SUCCESS && data == NULL &&
        len == 0);
  CHECK(nixl_capi_opt_args_set_notif_msg(o, NULL, 3) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_opt_args_set_notif_msg(o, "msg", 3) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_opt_args_get_has_notif(o, &has) == NIXL_CAPI_SUCCESS && !has);
  CHECK(nixl_capi_opt_args_set_has_notif(o, true) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_opt_args_get_has_notif(o, &has) == NIXL_CAPI_SUCCESS && has);
  CHECK(nixl_capi_opt_args_get_notif_msg(o, &data, &len) == NIXL_CAPI_SUCCESS && len == 3 &&
        memcmp(data, "msg", 3) == 0);
  free(data);
  CHECK(nixl_capi_opt_args_set_has_notif(o, false) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_opt_args_get_has_notif(o, &has) == NIXL_CAPI_SUCCESS && !has);
  bool skip = true;
  CHECK(nixl_capi_opt_args_get_skip_desc_merge(o, &skip) == NIXL_CAPI_SUCCESS && !skip);
  CHECK(nixl_capi_opt_args_set_skip_desc_merge(o, true) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_opt_args_get_skip_desc_merge(o, &skip) == NIXL_CAPI_SUCCESS && skip);
  CHECK(nixl_capi_opt_args_set_ip_addr(o, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_opt_args_set_ip_addr(o, "127.0.0.1") == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_opt_args_set_port(o, 1234) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_destroy_opt_args(o) == NIXL_CAPI_SUCCESS);
}

static void test_lists(void) {
  nixl_capi_xfer_dlist_t x = NULL;
  REQUIRE(nixl_capi_create_xfer_dlist(NIXL_CAPI_MEM_DRAM, &x) == NIXL_CAPI_SUCCESS);
  size_t n = 9;
  bool empty = false;
  nixl_capi_mem_type_t t = NIXL_CAPI_MEM_UNKNOWN;
  CHECK(nixl_capi_xfer_dlist_is_empty(x, &empty) == NIXL_CAPI_SUCCESS && empty);
  CHECK(nixl_capi_xfer_dlist_add_desc(x, 0x1000, 64, 0) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_add_desc(x, 0x2000, 64, 0) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_desc_count(x, &n) == NIXL_CAPI_SUCCESS && n == 2);
  CHECK(nixl_capi_xfer_dlist_len(x, &n) == NIXL_CAPI_SUCCESS && n == 2);
  CHECK(nixl_capi_xfer_dlist_get_type(x, &t) == NIXL_CAPI_SUCCESS && t == NIXL_CAPI_MEM_DRAM);
  CHECK(nixl_capi_xfer_dlist_trim(x) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_rem_desc(x, 5) == NIXL_CAPI_ERROR_BACKEND);
  CHECK(nixl_capi_xfer_dlist_rem_desc(x, 0) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_resize(x, 4) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_desc_count(x, &n) == NIXL_CAPI_SUCCESS && n == 4);
  CHECK(nixl_capi_xfer_dlist_print(x) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_clear(x) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_is_empty(x, &empty) == NIXL_CAPI_SUCCESS && empty);
  CHECK(nixl_capi_destroy_xfer_dlist(x) == NIXL_CAPI_SUCCESS);

  nixl_capi_reg_dlist_t r = NULL;
  REQUIRE(nixl_capi_create_reg_dlist(NIXL_CAPI_MEM_FILE, &r) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_reg_dlist_add_desc(r, 0, 0, 3, "path", 4) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_reg_dlist_add_desc(r, 0, 0, 4, NULL, 0) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_reg_dlist_desc_count(r, &n) == NIXL_CAPI_SUCCESS && n == 2);
  CHECK(nixl_capi_reg_dlist_get_type(r, &t) == NIXL_CAPI_SUCCESS && t == NIXL_CAPI_MEM_FILE);
  CHECK(nixl_capi_reg_dlist_is_empty(r, &empty) == NIXL_CAPI_SUCCESS && !empty);
  CHECK(nixl_capi_reg_dlist_trim(r) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_reg_dlist_rem_desc(r, -1) == NIXL_CAPI_ERROR_BACKEND);
  CHECK(nixl_capi_reg_dlist_rem_desc(r, 1) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_reg_dlist_resize(r, 3) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_reg_dlist_print(r) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_reg_dlist_clear(r) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_destroy_reg_dlist(r) == NIXL_CAPI_SUCCESS);
}

static nixl_capi_agent_t make_agent(const char* name, nixl_capi_backend_t* ucx) {
  nixl_capi_agent_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.enable_prog_thread = true;
  cfg.listen_port = 8888;
  cfg.thread_sync = NIXL_CAPI_THREAD_SYNC_DEFAULT;
  cfg.num_workers = 1;
  cfg.lthr_delay_us = 100000;
  cfg.capture_telemetry = true;
  nixl_capi_agent_t a = NULL;
  REQUIRE(nixl_capi_create_configured_agent(name, &cfg, &a) == NIXL_CAPI_SUCCESS);
  nixl_capi_params_t p = NULL;
  REQUIRE(nixl_capi_create_params(&p) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_create_backend(a, "UCX", p, ucx) == NIXL_CAPI_SUCCESS);
  nixl_capi_backend_t dup = NULL;
  CHECK(nixl_capi_create_backend(a, "UCX", p, &dup) == NIXL_CAPI_ERROR_BACKEND);
  CHECK(nixl_capi_create_backend(a, "NO_SUCH", p, &dup) == NIXL_CAPI_ERROR_BACKEND);
  nixl_capi_destroy_params(p);
  return a;
}

static nixl_capi_reg_dlist_t reg1(nixl_capi_mem_type_t t, uintptr_t addr, size_t len, uint64_t dev,
                                  const char* meta) {
  nixl_capi_reg_dlist_t r = NULL;
  REQUIRE(nixl_capi_create_reg_dlist(t, &r) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_reg_dlist_add_desc(r, addr, len, dev, meta, meta ? strlen(meta) : 0) ==
          NIXL_CAPI_SUCCESS);
  return r;
}
static nixl_capi_xfer_dlist_t xfer1(nixl_capi_mem_type_t t, uintptr_t addr, size_t len,
                                    uint64_t dev) {
  nixl_capi_xfer_dlist_t x = NULL;
  REQUIRE(nixl_capi_create_xfer_dlist(t, &x) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_xfer_dlist_add_desc(x, addr, len, dev) == NIXL_CAPI_SUCCESS);
  return x;
}

static void test_agents(void) {
  nixl_capi_agent_t probe = NULL;
  REQUIRE(nixl_capi_create_agent("probe", &probe) == NIXL_CAPI_SUCCESS);
  nixl_capi_string_list_t plugins = NULL;
  REQUIRE(nixl_capi_get_available_plugins(probe, &plugins) == NIXL_CAPI_SUCCESS);
  const char* s = NULL;
  size_t n = 0;
  CHECK(nixl_capi_string_list_size(plugins, &n) == NIXL_CAPI_SUCCESS && n > 0);
  CHECK(nixl_capi_string_list_get(plugins, n, &s) == NIXL_CAPI_ERROR_INVALID_PARAM);
  const int ucx = has_string(plugins, "UCX");
  const int posix = has_string(plugins, "POSIX");
  nixl_capi_destroy_string_list(plugins);
  nixl_capi_mem_list_t mems = NULL;
  nixl_capi_params_t params = NULL;
  CHECK(nixl_capi_get_plugin_params(probe, "NO_SUCH", &mems, &params) == NIXL_CAPI_ERROR_BACKEND);
  if (!ucx) {
    nixl_capi_destroy_agent(probe);
    printf("SKIPPED: this build has no UCX backend\n");
    exit(failures ? 1 : 77);
  }
  REQUIRE(nixl_capi_get_plugin_params(probe, "UCX", &mems, &params) == NIXL_CAPI_SUCCESS);
  bool empty = true;
  nixl_capi_mem_type_t m0 = NIXL_CAPI_MEM_UNKNOWN;
  CHECK(nixl_capi_mem_list_is_empty(mems, &empty) == NIXL_CAPI_SUCCESS && !empty);
  CHECK(nixl_capi_mem_list_size(mems, &n) == NIXL_CAPI_SUCCESS && n > 0);
  CHECK(nixl_capi_mem_list_get(mems, 0, &m0) == NIXL_CAPI_SUCCESS && m0 == NIXL_CAPI_MEM_DRAM);
  CHECK(nixl_capi_mem_list_get(mems, n, &m0) == NIXL_CAPI_ERROR_INVALID_PARAM);
  nixl_capi_destroy_mem_list(mems);
  nixl_capi_destroy_params(params);
  nixl_capi_destroy_agent(probe);

  nixl_capi_backend_t bi = NULL, bt = NULL;
  nixl_capi_agent_t ini = make_agent("c-init", &bi);
  nixl_capi_agent_t tgt = make_agent("c-target", &bt);
  REQUIRE(nixl_capi_get_backend_params(ini, bi, &mems, &params) == NIXL_CAPI_SUCCESS);
  nixl_capi_destroy_mem_list(mems);
  nixl_capi_destroy_params(params);

  enum { N = 1 << 16, BLK = 4096 };
  unsigned char* src = aligned_alloc(4096, N);
  unsigned char* dst = aligned_alloc(4096, N);
  REQUIRE(src && dst);
  fill(src, N, 1);
  fill(dst, N, 2);
  nixl_capi_reg_dlist_t rs = reg1(NIXL_CAPI_MEM_DRAM, (uintptr_t)src, N, 0, NULL);
  nixl_capi_reg_dlist_t rd = reg1(NIXL_CAPI_MEM_DRAM, (uintptr_t)dst, N, 0, NULL);
  nixl_capi_opt_args_t only = NULL;
  REQUIRE(nixl_capi_create_opt_args(&only) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_opt_args_add_backend(only, bt) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_register_mem(ini, rs, NULL) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_register_mem(tgt, rd, only) == NIXL_CAPI_SUCCESS);

  /* Metadata both ways. */
  void* md = NULL;
  size_t md_len = 0;
  char* name = NULL;
  REQUIRE(nixl_capi_get_local_md(tgt, &md, &md_len) == NIXL_CAPI_SUCCESS && md_len > 0);
  CHECK(nixl_capi_load_remote_md(ini, md, 0, &name) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_load_remote_md(ini, "garbage", 7, &name) == NIXL_CAPI_ERROR_BACKEND);
  REQUIRE(nixl_capi_load_remote_md(ini, md, md_len, &name) == NIXL_CAPI_SUCCESS);
  CHECK(strcmp(name, "c-target") == 0);
  free(name);
  free(md);
  REQUIRE(nixl_capi_get_local_partial_md(ini, rs, &md, &md_len, NULL) == NIXL_CAPI_SUCCESS);
  free(md);
  REQUIRE(nixl_capi_get_local_md(ini, &md, &md_len) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_load_remote_md(tgt, md, md_len, &name) == NIXL_CAPI_SUCCESS);
  free(name);
  free(md);
  CHECK(nixl_capi_check_remote_md(ini, "c-target", NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_check_remote_md(ini, "nobody", NULL) == NIXL_CAPI_ERROR_BACKEND);
  CHECK(nixl_capi_agent_make_connection(ini, "c-target", NULL) == NIXL_CAPI_SUCCESS);
  /* Without ipAddr and without etcd the exchange has nowhere to go. */
  CHECK(nixl_capi_send_local_md(ini, NULL) == NIXL_CAPI_ERROR_BACKEND);

  /* One-shot WRITE with a notification. */
  nixl_capi_xfer_dlist_t xs = xfer1(NIXL_CAPI_MEM_DRAM, (uintptr_t)src, N, 0);
  nixl_capi_xfer_dlist_t xd = xfer1(NIXL_CAPI_MEM_DRAM, (uintptr_t)dst, N, 0);
  CHECK(nixl_capi_check_remote_md(ini, "c-target", xd) == NIXL_CAPI_SUCCESS);
  nixl_capi_opt_args_t with = NULL;
  REQUIRE(nixl_capi_create_opt_args(&with) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_opt_args_set_notif_msg(with, "hello", 5) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_opt_args_set_has_notif(with, true) == NIXL_CAPI_SUCCESS);
  nixl_capi_xfer_req_t req = NULL;
  CHECK(nixl_capi_create_xfer_req(ini, NIXL_CAPI_XFER_OP_WRITE, xs, xd, "nobody", &req, with) ==
        NIXL_CAPI_ERROR_BACKEND);
  REQUIRE(nixl_capi_create_xfer_req(ini, NIXL_CAPI_XFER_OP_WRITE, xs, xd, "c-target", &req, with) ==
          NIXL_CAPI_SUCCESS);
  struct nixl_capi_xfer_telemetry_s tel;
  CHECK(nixl_capi_get_xfer_status(ini, req) == NIXL_CAPI_ERROR_BACKEND); /* not posted */
  CHECK(nixl_capi_get_xfer_telemetry(ini, req, &tel) == NIXL_CAPI_ERROR_BACKEND);
  nixl_capi_status_t st = nixl_capi_post_xfer_req(ini, req, NULL);
  CHECK(st == NIXL_CAPI_SUCCESS || st == NIXL_CAPI_IN_PROG);
  REQUIRE(wait_req(ini, req, st) == NIXL_CAPI_SUCCESS);
  CHECK(holds(dst, N, 1));
  REQUIRE(nixl_capi_get_xfer_telemetry(ini, req, &tel) == NIXL_CAPI_SUCCESS);
  CHECK(tel.total_bytes == N);
  CHECK(tel.desc_count == 1);
  CHECK(tel.start_time_us > 0);
  CHECK(tel.xfer_duration_us >= tel.post_duration_us);
  nixl_capi_backend_t used = NULL, again = NULL;
  REQUIRE(nixl_capi_query_xfer_backend(ini, req, &used) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_query_xfer_backend(ini, req, &again) == NIXL_CAPI_SUCCESS);
  CHECK(used == bi && again == bi); /* the agent's wrapper every time: nothing leaks */
  CHECK(nixl_capi_destroy_backend(used) == NIXL_CAPI_SUCCESS);
  int64_t dur = -1, margin = -1;
  nixl_capi_cost_t method = NIXL_CAPI_COST_ANALYTICAL_BACKEND;
  st = nixl_capi_estimate_xfer_cost(ini, req, NULL, &dur, &margin, &method);
  CHECK(st == NIXL_CAPI_SUCCESS || (st == NIXL_CAPI_ERROR_BACKEND && dur == 0 && margin == 0));
  CHECK(nixl_capi_destroy_xfer_req(req) == NIXL_CAPI_ERROR_INVALID_STATE); /* not released */
  REQUIRE(nixl_capi_release_xfer_req(ini, req) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_release_xfer_req(ini, req) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_destroy_xfer_req(req) == NIXL_CAPI_SUCCESS);

  nixl_capi_notif_map_t map = NULL;
  REQUIRE(nixl_capi_create_notif_map(&map) == NIXL_CAPI_SUCCESS);
  CHECK(wait_notifs(tgt, map, "c-init", 1) == 1);
  const char* agent = NULL;
  const void* msg = NULL;
  size_t msg_len = 0;
  CHECK(nixl_capi_notif_map_size(map, &n) == NIXL_CAPI_SUCCESS && n == 1);
  CHECK(nixl_capi_notif_map_get_agent_at(map, 0, &agent) == NIXL_CAPI_SUCCESS &&
        strcmp(agent, "c-init") == 0);
  CHECK(nixl_capi_notif_map_get_agent_at(map, 1, &agent) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_notif_map_get_agent_at(map, 7, &agent) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_notif_map_get_notif(map, "c-init", 0, &msg, &msg_len) == NIXL_CAPI_SUCCESS &&
        msg_len == 5 && memcmp(msg, "hello", 5) == 0);
  CHECK(nixl_capi_notif_map_get_notif(map, "c-init", 1, &msg, &msg_len) ==
        NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_notif_map_get_notifs_size(map, "nobody", &n) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_notif_map_clear(map) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_notif_map_size(map, &n) == NIXL_CAPI_SUCCESS && n == 0);
  /* A completed transfer sends its notification and no abort notice. */
  CHECK(nixl_capi_get_aborted_notifs(tgt, map, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_notif_map_size(map, &n) == NIXL_CAPI_SUCCESS && n == 0);
  CHECK(nixl_capi_get_aborted_notifs(NULL, map, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);

  /* Binary-safe standalone notification back. */
  CHECK(nixl_capi_gen_notif(tgt, "c-init", "a\0b", 3, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_gen_notif(tgt, "c-init", NULL, 1, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(wait_notifs(ini, map, "c-target", 1) == 1);
  CHECK(nixl_capi_notif_map_get_notif(map, "c-target", 0, &msg, &msg_len) == NIXL_CAPI_SUCCESS &&
        msg_len == 3 && memcmp(msg, "a\0b", 3) == 0);
  nixl_capi_notif_map_clear(map);

  /* nixl-cpp's waits: at the deadline IN_PROG; a notification ends the wait at once; a request
   * waited for ends with its status and its data in place; the event fd is the agent's. */
  int efd = -1;
  CHECK(nixl_capi_get_event_fd(tgt, &efd) == NIXL_CAPI_SUCCESS && efd >= 0);
  CHECK(nixl_capi_get_event_fd(NULL, &efd) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_drain_events(tgt) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_wait_notifs(tgt, map, 1000, NULL) == NIXL_CAPI_IN_PROG);
  CHECK(nixl_capi_gen_notif(ini, "c-target", "w", 1, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_wait_notifs(tgt, map, 10 * 1000 * 1000, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_notif_map_get_notif(map, "c-init", 0, &msg, &msg_len) == NIXL_CAPI_SUCCESS &&
        msg_len == 1 && memcmp(msg, "w", 1) == 0);
  CHECK(nixl_capi_wait_notifs(NULL, map, 0, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  nixl_capi_notif_map_clear(map);
  {
    nixl_capi_xfer_req_t w = NULL;
    fill(src, N, 7);
    fill(dst, N, 0);
    REQUIRE(nixl_capi_create_xfer_req(ini, NIXL_CAPI_XFER_OP_WRITE, xs, xd, "c-target", &w, NULL) ==
            NIXL_CAPI_SUCCESS);
    const nixl_capi_status_t ps = nixl_capi_post_xfer_req(ini, w, NULL);
    CHECK((ps == NIXL_CAPI_SUCCESS || ps == NIXL_CAPI_IN_PROG));
    const nixl_capi_status_t pk = nixl_capi_peek_xfer(ini, w);
    CHECK((pk == NIXL_CAPI_SUCCESS || pk == NIXL_CAPI_IN_PROG));
    CHECK(nixl_capi_wait_xfer(ini, w, 10 * 1000 * 1000) == NIXL_CAPI_SUCCESS);
    CHECK(nixl_capi_peek_xfer(ini, w) == NIXL_CAPI_SUCCESS);
    CHECK(holds(dst, N, 7));
    CHECK(nixl_capi_wait_xfer(NULL, w, 0) == NIXL_CAPI_ERROR_INVALID_PARAM);
    CHECK(nixl_capi_peek_xfer(ini, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
    REQUIRE(nixl_capi_release_xfer_req(ini, w) == NIXL_CAPI_SUCCESS);
    CHECK(nixl_capi_destroy_xfer_req(w) == NIXL_CAPI_SUCCESS);
  }

  /* Prepared lists and index requests: READ blocks 3,2 of the target into blocks 0,1. */
  nixl_capi_xfer_dlist_t ls = NULL, ld = NULL;
  REQUIRE(nixl_capi_create_xfer_dlist(NIXL_CAPI_MEM_DRAM, &ls) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_create_xfer_dlist(NIXL_CAPI_MEM_DRAM, &ld) == NIXL_CAPI_SUCCESS);
  for (int i = 0; i < 4; ++i) {
    nixl_capi_xfer_dlist_add_desc(ls, (uintptr_t)src + (uintptr_t)i * BLK, BLK, 0);
    nixl_capi_xfer_dlist_add_desc(ld, (uintptr_t)dst + (uintptr_t)i * BLK, BLK, 0);
  }
  nixl_capi_xfer_dlist_handle_t lh = NULL, rh = NULL, bad = NULL;
  REQUIRE(nixl_capi_prep_xfer_dlist(ini, "", ls, &lh, NULL) == NIXL_CAPI_SUCCESS);
  REQUIRE(nixl_capi_prep_xfer_dlist(ini, "c-target", ld, &rh, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_prep_xfer_dlist(ini, "nobody", ld, &bad, NULL) == NIXL_CAPI_ERROR_BACKEND);
  CHECK(bad == NULL); /* written only on success */
  const int li[] = {0, 1}, ri[] = {3, 2}, oor[] = {0, 9};
  CHECK(nixl_capi_make_xfer_req(ini, NIXL_CAPI_XFER_OP_READ, lh, li, 2, rh, oor, 2, &req, NULL) ==
        NIXL_CAPI_ERROR_BACKEND);
  CHECK(nixl_capi_make_xfer_req(ini, NIXL_CAPI_XFER_OP_READ, lh, NULL, 2, rh, ri, 2, &req, NULL) ==
        NIXL_CAPI_ERROR_INVALID_PARAM);
  fill(dst, N, 5);
  fill(src, N, 0);
  read_blocks_3_2(ini, lh, rh, src, dst, BLK);

  /* nixl-cpp's strided extension: the same READ from rows {addr, len, dev, stride, count}. */
  {
    const uint64_t lrow[5] = {(uint64_t)(uintptr_t)src, BLK, 0, BLK, 4};
    const uint64_t rrow[5] = {(uint64_t)(uintptr_t)dst, BLK, 0, BLK, 4};
    const uint64_t bad_row[5] = {(uint64_t)(uintptr_t)dst, BLK, 0, BLK / 2, 4}; /* stride < len */
    nixl_capi_xfer_dlist_handle_t sl = NULL, sr = NULL, sb = NULL;
    REQUIRE(nixl_capi_prep_xfer_stride_dlist(ini, "", NIXL_CAPI_MEM_DRAM, lrow, 1, &sl, NULL) ==
            NIXL_CAPI_SUCCESS);
    REQUIRE(nixl_capi_prep_xfer_stride_dlist(ini, "c-target", NIXL_CAPI_MEM_DRAM, rrow, 1, &sr,
                                             NULL) == NIXL_CAPI_SUCCESS);
    CHECK(nixl_capi_prep_xfer_stride_dlist(ini, "c-target", NIXL_CAPI_MEM_DRAM, bad_row, 1, &sb,
                                           NULL) == NIXL_CAPI_ERROR_BACKEND);
    CHECK(sb == NULL);
    CHECK(nixl_capi_prep_xfer_stride_dlist(ini, "", NIXL_CAPI_MEM_UNKNOWN, lrow, 1, &sb, NULL) ==
          NIXL_CAPI_ERROR_INVALID_PARAM);
    fill(src, N, 0);
    read_blocks_3_2(ini, sl, sr, src, dst, BLK);
  }

  /* Memory queries through POSIX: exactly one backend. */
  if (posix) {
    nixl_capi_params_t p = NULL;
    nixl_capi_backend_t bp = NULL;
    nixl_capi_create_params(&p);
    REQUIRE(nixl_capi_create_backend(ini, "POSIX", p, &bp) == NIXL_CAPI_SUCCESS);
    nixl_capi_destroy_params(p);
    char path[] = "/tmp/nixl_capi_testXXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "0123456789", 10) == 10);
    nixl_capi_reg_dlist_t q = NULL;
    REQUIRE(nixl_capi_create_reg_dlist(NIXL_CAPI_MEM_FILE, &q) == NIXL_CAPI_SUCCESS);
    nixl_capi_reg_dlist_add_desc(q, 0, 0, 0, path, strlen(path));
    nixl_capi_reg_dlist_add_desc(q, 0, 0, 0, "/nonexistent/nixl", 17);
    nixl_capi_query_resp_list_t resp = NULL;
    REQUIRE(nixl_capi_create_query_resp_list(&resp) == NIXL_CAPI_SUCCESS);
    CHECK(nixl_capi_query_mem(ini, q, resp, NULL) == NIXL_CAPI_ERROR_BACKEND);
    nixl_capi_opt_args_t one = NULL;
    nixl_capi_create_opt_args(&one);
    nixl_capi_opt_args_add_backend(one, bp);
    REQUIRE(nixl_capi_query_mem(ini, q, resp, one) == NIXL_CAPI_SUCCESS);
    bool hv = false;
    CHECK(nixl_capi_query_resp_list_size(resp, &n) == NIXL_CAPI_SUCCESS && n == 2);
    CHECK(nixl_capi_query_resp_list_has_value(resp, 0, &hv) == NIXL_CAPI_SUCCESS && hv);
    CHECK(nixl_capi_query_resp_list_has_value(resp, 1, &hv) == NIXL_CAPI_SUCCESS && !hv);
    CHECK(nixl_capi_query_resp_list_has_value(resp, 2, &hv) == NIXL_CAPI_ERROR_INVALID_PARAM);
    nixl_capi_params_t info = NULL;
    CHECK(nixl_capi_query_resp_list_get_params(resp, 1, &info) == NIXL_CAPI_ERROR_INVALID_PARAM);
    REQUIRE(nixl_capi_query_resp_list_get_params(resp, 0, &info) == NIXL_CAPI_SUCCESS);
    nixl_capi_param_iter_t it = NULL;
    nixl_capi_params_create_iterator(info, &it);
    int size_ok = 0;
    for (;;) {
      const char *k = NULL, *v = NULL;
      bool more = false;
      if (nixl_capi_params_iterator_next(it, &k, &v, &more) != NIXL_CAPI_SUCCESS || k == NULL)
        break;
      if (strcmp(k, "size") == 0) size_ok = strcmp(v, "10") == 0;
    }
    CHECK(size_ok);
    nixl_capi_params_destroy_iterator(it);
    nixl_capi_destroy_params(info);
    nixl_capi_destroy_query_resp_list(resp);
    nixl_capi_destroy_opt_args(one);
    nixl_capi_destroy_reg_dlist(q);
    nixl_capi_destroy_backend(bp);
    close(fd);
    unlink(path);
  }

  /* Invalidation: once, then the peer is unknown. */
  CHECK(nixl_capi_invalidate_remote_md(ini, "c-target") == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_invalidate_remote_md(ini, "c-target") == NIXL_CAPI_ERROR_BACKEND);
  CHECK(nixl_capi_check_remote_md(ini, "c-target", NULL) == NIXL_CAPI_ERROR_BACKEND);

  CHECK(nixl_capi_deregister_mem(ini, rs, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_deregister_mem(tgt, rd, only) == NIXL_CAPI_SUCCESS);
  nixl_capi_destroy_notif_map(map);
  nixl_capi_destroy_xfer_dlist(xs);
  nixl_capi_destroy_xfer_dlist(xd);
  nixl_capi_destroy_xfer_dlist(ls);
  nixl_capi_destroy_xfer_dlist(ld);
  nixl_capi_destroy_reg_dlist(rs);
  nixl_capi_destroy_reg_dlist(rd);
  nixl_capi_destroy_opt_args(only);
  nixl_capi_destroy_opt_args(with);
  nixl_capi_destroy_backend(bi);
  nixl_capi_destroy_backend(bt);
  /* nixl-cpp's own: the target loaded the initiator; once the initiator is destroyed, the
   * target finds it gone (within 10 s here; at once in practice: same process). */
  nixl_capi_string_list_t gone = NULL;
  size_t n_gone = 1;
  REQUIRE(nixl_capi_get_gone_agents(tgt, &gone, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_string_list_size(gone, &n_gone) == NIXL_CAPI_SUCCESS && n_gone == 0);
  nixl_capi_destroy_string_list(gone);
  CHECK(nixl_capi_get_gone_agents(NULL, &gone, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_get_gone_agents(tgt, NULL, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_destroy_agent(ini) == NIXL_CAPI_SUCCESS);
  int found = 0;
  for (const double end = now_s() + 10; !found && now_s() < end; usleep(1000)) {
    gone = NULL;
    REQUIRE(nixl_capi_get_gone_agents(tgt, &gone, NULL) == NIXL_CAPI_SUCCESS);
    found = has_string(gone, "c-init");
    nixl_capi_destroy_string_list(gone);
  }
  CHECK(found);
  CHECK(nixl_capi_destroy_agent(tgt) == NIXL_CAPI_SUCCESS);
  free(src);
  free(dst);
}

/* Memory views without a GPU: NIXL's NOT_FOUND rules (-6), NULL checks, release. */
static void test_mem_views(void) {
  nixl_capi_agent_t a = NULL;
  CHECK(nixl_capi_create_agent("mv", &a) == NIXL_CAPI_SUCCESS);
  nixl_capi_remote_dlist_t r = NULL;
  CHECK(nixl_capi_create_remote_dlist(NIXL_CAPI_MEM_VRAM, &r) == NIXL_CAPI_SUCCESS);
  nixl_capi_mem_view_t mv = (nixl_capi_mem_view_t)0x1;
  CHECK(nixl_capi_remote_dlist_add_desc(r, 0, 0, 0, NULL) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_prep_mem_view_remote(a, r, &mv, NULL) == NIXL_CAPI_ERROR_NOT_FOUND);
  CHECK(nixl_capi_remote_dlist_add_desc(r, 0x1000, 64, 0, "nobody") == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_prep_mem_view_remote(a, r, &mv, NULL) == NIXL_CAPI_ERROR_NOT_FOUND);
  CHECK(mv == (nixl_capi_mem_view_t)0x1); /* written only on success */
  CHECK(nixl_capi_prep_mem_view_remote(NULL, r, &mv, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_prep_mem_view_remote(a, r, NULL, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_destroy_remote_dlist(r) == NIXL_CAPI_SUCCESS);
  nixl_capi_xfer_dlist_t l = NULL;
  CHECK(nixl_capi_create_xfer_dlist(NIXL_CAPI_MEM_VRAM, &l) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_xfer_dlist_add_desc(l, 0x1000, 64, 0) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_prep_mem_view_local(a, l, &mv, NULL) == NIXL_CAPI_ERROR_NOT_FOUND);
  CHECK(nixl_capi_prep_mem_view_local(a, NULL, &mv, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_destroy_xfer_dlist(l) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_release_mem_view(a, (nixl_capi_mem_view_t)0x1) == NIXL_CAPI_SUCCESS);
  CHECK(nixl_capi_release_mem_view(a, NULL) == NIXL_CAPI_ERROR_INVALID_PARAM);
  CHECK(nixl_capi_destroy_agent(a) == NIXL_CAPI_SUCCESS);
}

int main(void) {
  test_values();
  test_mem_views();
  test_params_and_opt_args();
  test_lists();
  test_agents();
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all C API checks passed\n");
  return 0;
}
