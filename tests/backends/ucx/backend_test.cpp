// The UCX backend driven directly (no agent): configuration, registration, loopback and two
// backends of one process, notifications, repost, release, progress without a thread.

#include <nixl/backends/ucx.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../../../backends/ucx/src/wire.hpp"
#include "backend_sides.hpp"
#include "nixl_test/catch.hpp"
#include "ucx_support.hpp"

using namespace ucx_test::backend_names;
using ucx_test::ctx;

namespace {

status run(backend& be, backend::request& r, nixl::notif_arg n = {}, backend* target = nullptr) {
  status s = be.post(r, n);
  if (s != status::in_progress) return s;
  return ucx_test::wait_done([&] {
    if (target != nullptr) target->progress();  // a target without a progress thread
    return be.check(r);
  });
}

/// Waits (a deadline in time) until `to` holds `n` notifications from `from_name` in `m`. Without
/// progress threads both sides progress while waiting: the sender's worker may still hold the
/// message (a UD endpoint still wiring up, a send queued), the receiver's must deliver it.
status wait_notifs(backend& from, backend& to, nixl::notif_map& m, const std::string& from_name,
                   std::size_t n, bool progress_both) {
  return ucx_test::wait_done([&] {
    if (progress_both) from.progress();
    to.take_notifications(m);  // progresses `to` when it has no progress thread
    return m[from_name].size() < n ? status::in_progress : status::success;
  });
}

}  // namespace

namespace {
// What `f` writes to this process's stdout and stderr (file descriptors 1 and 2).
template <class F>
std::pair<std::string, std::string> capture_stdio(F&& f) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::FILE* o = std::tmpfile();
  std::FILE* e = std::tmpfile();
  REQUIRE((o != nullptr && e != nullptr));
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(::fileno(o), 1);
  ::dup2(::fileno(e), 2);
  f();
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  const auto read_all = [](std::FILE* file) {
    std::string text;
    std::rewind(file);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;) text.append(buf, n);
    std::fclose(file);
    return text;
  };
  std::string out = read_all(o);
  return {std::move(out), read_all(e)};
}
}  // namespace

TEST_CASE("ucx backend satisfies the contracts it claims") {
  STATIC_REQUIRE(nixl::peer_backend<backend> && nixl::estimating_backend<backend>);
  STATIC_REQUIRE(nixl::backend_for_all<backend, nixl::route<nixl::dram_t, nixl::dram_t>>);
  STATIC_REQUIRE(nixl::backend_for_none<backend, nixl::route<nixl::dram_t, nixl::file_t>>);
  STATIC_REQUIRE_FALSE(nixl::querying_backend<backend>);
#if !NIXL_UCX_WITH_CUDA
  STATIC_REQUIRE_FALSE(nixl::backend_for<backend, nixl::vram_t, nixl::dram_t>);
  STATIC_REQUIRE_FALSE(nixl::backend_for<backend, nixl::vram_t, nixl::vram_t>);
#endif
  STATIC_REQUIRE(backend::name == "UCX");
}

TEST_CASE("ucx config parses NIXL's parameters") {
  auto c = backend::config::from_params({{"num_workers", "3"},
                                         {"ucx_devices", "lo"},
                                         {"ucx_error_handling_mode", "peer"},
                                         {"engine_config", "TLS=sm,UCX_RNDV_THRESH=inf"},
                                         {"enable_prog_thread", "no"}});
  CHECK(c.num_workers == 3);
  CHECK(c.device_list == "lo");
  CHECK(c.error_handling == nixl::ucx::error_mode::peer);
  CHECK(c.enable_prog_thread == false);
  auto back = backend::config::from_params(c.to_params());
  CHECK(back.num_workers == 3);
  CHECK(back.engine_config == c.engine_config);
  // NIXL's `peer` is the default and what the backend reports; `auto` (the earlier name) reads
  // as it, `ucx_peer` asks for UCX's own mode on the data endpoints
  CHECK(backend::config::from_params({}).error_handling == nixl::ucx::error_mode::peer);
  CHECK(backend::config::from_params({{"ucx_error_handling_mode", "auto"}}).error_handling ==
        nixl::ucx::error_mode::peer);
  CHECK(backend::config::from_params({{"ucx_error_handling_mode", "UCX_PEER"}}).error_handling ==
        nixl::ucx::error_mode::ucx_peer);
  CHECK(backend::default_params().at("ucx_error_handling_mode") == "peer");
  CHECK(backend::config::from_params({}).to_params().at("ucx_error_handling_mode") == "peer");
  for (const auto& bad : {
           nixl::params{{"num_workers", "0"}},
           nixl::params{{"num_workers", "x"}},
           nixl::params{{"ucx_error_handling_mode", "maybe"}},
           nixl::params{{"engine_config", "TLS"}},
           nixl::params{{"enable_prog_thread", "perhaps"}},
       }) {
    INFO(bad.begin()->first << '=' << bad.begin()->second);
    CHECK(code_of([&] { backend::config::from_params(bad); }) == status::invalid_param);
  }
  // host_vram_copy: cuda (the default) or ucx, and back through to_params
  CHECK(backend::config::from_params({}).cuda_host_vram);
  CHECK_FALSE(backend::config::from_params({{"host_vram_copy", "UCX"}}).cuda_host_vram);
  CHECK(backend::config::from_params({{"host_vram_copy", "cuda"}}).cuda_host_vram);
  CHECK_FALSE(backend::config::from_params(
                  backend::config::from_params({{"host_vram_copy", "ucx"}}).to_params())
                  .cuda_host_vram);
  CHECK(code_of([] {
          backend::config::from_params({{"host_vram_copy", "gpu"}});
        }) == status::invalid_param);
  // host_dram_copy: cma (the default) or ucx, likewise
  CHECK(backend::config::from_params({}).cma_host_dram);
  CHECK_FALSE(backend::config::from_params({{"host_dram_copy", "UCX"}}).cma_host_dram);
  CHECK_FALSE(backend::config::from_params(
                  backend::config::from_params({{"host_dram_copy", "ucx"}}).to_params())
                  .cma_host_dram);
  CHECK(code_of([] {
          backend::config::from_params({{"host_dram_copy", "shm"}});
        }) == status::invalid_param);
  // shm_min_size: 64 MiB by default, 0 turns it off, a number of bytes, back through to_params
  CHECK(backend::config::from_params({}).shm_min_size == std::size_t{64} << 20);
  CHECK(backend::config::from_params({{"shm_min_size", "0"}}).shm_min_size == 0);
  CHECK(backend::config::from_params(
            backend::config::from_params({{"shm_min_size", "1048576"}}).to_params())
            .shm_min_size == 1048576);
  CHECK(code_of([] {
          backend::config::from_params({{"shm_min_size", "64M"}});
        }) == status::invalid_param);
  // the silence after which a sender of beats is gone
  CHECK(backend::config::from_params({}).peer_timeout == std::chrono::milliseconds(2000));
  CHECK(backend::config::from_params({{"peer_timeout_ms", "10000"}}).peer_timeout ==
        std::chrono::seconds(10));
  CHECK(backend::config::from_params(
            backend::config::from_params({{"peer_timeout_ms", "500"}}).to_params())
            .peer_timeout == std::chrono::milliseconds(500));
  for (const char* bad : {"0", "99", "3600001", "2s"})
    CHECK(code_of([&] {
            backend::config::from_params({{"peer_timeout_ms", bad}});
          }) == status::invalid_param);
  auto d = backend::default_params();
  CHECK(d.at("peer_timeout_ms") == "2000");
  CHECK(d.count("host_vram_copy") == 1);
  CHECK(d.at("host_dram_copy") == "cma");
  CHECK(backend::config::from_params(d).shm_min_size == std::size_t{64} << 20);
  CHECK(d.count("num_workers") == 1);
  CHECK(d.count("ucx_error_handling_mode") == 1);
  CHECK(d.count("engine_config") == 1);
  // a bad value of a UCX setting is named in the error; UCX's own complaint about it goes to
  // stderr as a whole line of ours, never to the program's stdout
  std::optional<nixl::error> err;
  const auto [out, errout] = capture_stdio([&] {
    try {
      backend b(backend::config::from_params({{"engine_config", "RNDV_THRESH=lots"}}), ctx("x"));
    } catch (const nixl::error& e) {
      err = e;
    }
  });
  REQUIRE(err.has_value());
  CHECK(err->status_code() == status::invalid_param);
  CHECK(std::string(err->what()).find("RNDV_THRESH") != std::string::npos);
  CHECK(out.empty());
  if (std::getenv("UCX_LOG_FILE") == nullptr) {
    INFO("stderr: " << errout);
    const auto at = errout.find("] UCX Invalid value for RNDV_THRESH: 'lots'");
    REQUIRE(at != std::string::npos);
    const auto nl = errout.rfind('\n', at);
    CHECK(errout[nl == std::string::npos ? 0 : nl + 1] == 'E');  // a line of ours, at error level
    CHECK(errout.find('\n', at) != std::string::npos);           // and a whole one
  }
  // A list value is written as UCX takes it: the items after TLS= that hold no '=' are its
  // value, so TLS=posix,self is accepted and the RNDV_THRESH after it is still read (and here
  // refused, by name).
  CHECK_NOTHROW(backend(backend::config::from_params({{"engine_config", "TLS=posix,self"}}),
                        ctx("tls-list")));
  err.reset();
  (void)capture_stdio([&] {
    try {
      backend b(
          backend::config::from_params({{"engine_config", "TLS=posix,self,UCX_RNDV_THRESH=lots"}}),
          ctx("tls-list-bad"));
    } catch (const nixl::error& e) {
      err = e;
    }
  });
  REQUIRE(err.has_value());
  CHECK(std::string(err->what()).find("RNDV_THRESH=lots") != std::string::npos);
  CHECK(std::string(err->what()).find("self") == std::string::npos);
}

TEST_CASE("ucx registration refuses what it cannot move") {
  backend be({}, ctx("reg"));
  buffer b(4096);
  if (!be.cuda_supported()) {
    try {
      (void)be.register_region(mem_kind::vram, {{b.addr(), 4096, 0}, ""});
      FAIL("vram registration should fail without CUDA support in UCX");
    } catch (const nixl::error& e) {
      CHECK(e.status_code() == status::not_supported);
      CHECK(std::string(e.what()).find("CUDA") != std::string::npos);
    }
  }
  CHECK(code_of([&] {
          (void)be.register_region(mem_kind::file, {{0, 10, 3}, "/tmp/x"});
        }) == status::not_supported);
  CHECK(code_of([&] {
          (void)be.register_region(mem_kind::dram, {{b.addr(), 0, 0}, ""});
        }) == status::invalid_param);
  auto r = be.register_region(mem_kind::dram, {{b.addr(), 4096, 0}, ""});
  CHECK_FALSE(be.public_data(r).empty());
  be.deregister_region(r);
}

TEST_CASE("ucx rejects malformed peer data") {
  side a("a", 4096), b("b", 4096);
  std::string ci = b.be.connection_info();
  CHECK(code_of([&] { (void)a.be.load_peer("b", bytes_of(std::string("garbage"))); }) ==
        status::mismatch);
  std::string flipped = ci;
  flipped[flipped.size() / 2] ^= 0x5a;
  CHECK(code_of([&] { (void)a.be.load_peer("b", bytes_of(flipped)); }) == status::mismatch);
  CHECK(code_of([&] { (void)a.be.load_peer("b", bytes_of(ci.substr(0, ci.size() - 3))); }) ==
        status::mismatch);
  auto p = a.be.load_peer("b", bytes_of(ci));
  std::string pub = b.be.public_data(b.reg);
  std::string bad = pub;
  bad.back() ^= 1;
  CHECK(code_of([&] {
          (void)a.be.unpack(p, mem_kind::dram, {b.buf.addr(), 4096, 0}, bytes_of(bad));
        }) == status::mismatch);
  CHECK(code_of([&] {
          (void)a.be.unpack(p, mem_kind::dram, {b.buf.addr(), 4096, 0}, bytes_of(pub.substr(0, 9)));
        }) == status::mismatch);
  a.be.unload_peer(p);
}

TEST_CASE("ucx loopback write and read") {
  side a("self", 1 << 20);
  auto self = a.be.self_peer();
  auto rr = a.be.load_local(a.reg);
  a.buf.fill(1, 0, 4096);
  backend::request w;
  std::vector<nixl::bound_desc<backend::region>> l{bd(a.buf.addr(), 4096, a.reg)};
  std::vector<nixl::bound_desc<backend::remote_region>> r{bd(a.buf.addr() + 8192, 4096, rr)};
  a.be.prepare(w, xfer_op::write, l, r, self);
  CHECK(run(a.be, w) == status::success);
  CHECK(a.buf.holds(1, 8192, 4096, 0));
  a.buf.fill(2, 8192, 4096);
  backend::request rd;
  a.be.prepare(rd, xfer_op::read, l, r, self);
  CHECK(run(a.be, rd, std::string_view("self-notif")) == status::success);
  CHECK(a.buf.holds(2, 0, 4096, 8192));
  nixl::notif_map m;
  CHECK(ucx_test::wait_done([&] {
          a.be.take_notifications(m);
          return m["self"].empty() ? status::in_progress : status::success;
        }) == status::success);
  CHECK(m["self"] == std::vector<std::string>{"self-notif"});
  CHECK(a.be.release(w) == status::success);
  CHECK(a.be.release(rd) == status::success);
  a.be.unload_region(rr);
}

TEST_CASE("ucx two backends in one process: many descriptors, notifications, repost") {
  const bool thread = GENERATE(true, false);
  const std::size_t workers = GENERATE(1, 3);
  CAPTURE(thread, workers);
  nixl::params p{{"num_workers", std::to_string(workers)}};
  side init("init", 1 << 20, p, thread), tgt("tgt", 1 << 20, p, thread);
  peer_link l(init, tgt, "tgt");
  // without a progress thread the target must progress itself (same thread: the workers are
  // single-threaded then)
  backend* pump = thread ? nullptr : &tgt.be;

  constexpr std::size_t n = 1000, sz = 1000;
  init.buf.fill(7);
  const reversed_blocks b(init, tgt.buf.addr(), l, n, sz);
  const auto& lo = b.lo;
  const auto& re = b.re;
  backend::request w;
  init.be.prepare(w, xfer_op::write, lo, re, l.peer);
  CHECK(w.size() == n);
  CHECK(init.be.check(w) == status::not_posted);
  const std::string msg("done\0with\0nul", 13);
  CHECK(run(init.be, w, std::string_view(msg), pump) == status::success);
  CHECK(b.written(tgt.buf, 7));
  nixl::notif_map m;
  CHECK(wait_notifs(init.be, tgt.be, m, "init", 1, pump != nullptr) == status::success);
  REQUIRE(m["init"].size() == 1);
  CHECK(m["init"][0] == msg);
  CHECK(m["init"][0].size() == 13);

  // repost with new data, with an empty notification
  init.buf.fill(9);
  CHECK(run(init.be, w, std::string_view(), pump) == status::success);
  CHECK(b.written(tgt.buf, 9));
  CHECK(wait_notifs(init.be, tgt.be, m, "init", 2, pump != nullptr) == status::success);
  CHECK(m["init"].size() == 2);
  CHECK(m["init"][1].empty());

  // read back
  tgt.buf.fill(11);
  backend::request rd;
  init.be.prepare(rd, xfer_op::read, lo, re, l.peer);
  CHECK(run(init.be, rd, {}, pump) == status::success);
  CHECK(b.read(init.buf, 11));

  // standalone notifications both ways
  init.be.notify(l.peer, "hello");
  CHECK(wait_notifs(init.be, tgt.be, m, "init", 3, pump != nullptr) == status::success);
  CHECK(m["init"].back() == "hello");
  CHECK(init.be.estimate(w).has_value());
  CHECK(init.be.release(w) == status::success);
  CHECK(init.be.release(rd) == status::success);
}

TEST_CASE("ucx refuses descriptors outside their regions") {
  side init("init", 8192), tgt("tgt", 8192);
  peer_link l(init, tgt, "tgt");
  backend::request r;
  std::vector<nixl::bound_desc<backend::region>> lo{bd(init.buf.addr(), 4096, init.reg)};
  std::vector<nixl::bound_desc<backend::remote_region>> re{bd(tgt.buf.addr() + 8000, 4096, l.rr)};
  CHECK(code_of([&] { init.be.prepare(r, xfer_op::write, lo, re, l.peer); }) ==
        status::invalid_param);
  std::vector<nixl::bound_desc<backend::region>> lo2{bd(init.buf.addr() + 8000, 4096, init.reg)};
  std::vector<nixl::bound_desc<backend::remote_region>> re2{bd(tgt.buf.addr(), 4096, l.rr)};
  CHECK(code_of([&] { init.be.prepare(r, xfer_op::write, lo2, re2, l.peer); }) ==
        status::invalid_param);
  // a region of another peer
  auto self = init.be.self_peer();
  CHECK(code_of([&] { init.be.prepare(r, xfer_op::write, lo, re2, self); }) ==
        status::invalid_param);
  CHECK(init.be.post(r, {}) == status::invalid_param);  // never prepared
}

TEST_CASE("ucx release of a request in flight") {
  side init("init", ucx_test::big), tgt("tgt", ucx_test::big);
  peer_link l(init, tgt, "tgt");
  std::vector<nixl::bound_desc<backend::region>> lo{bd(init.buf.addr(), ucx_test::big, init.reg)};
  std::vector<nixl::bound_desc<backend::remote_region>> re{bd(tgt.buf.addr(), ucx_test::big, l.rr)};
  for (int i = 0; i < 3; ++i) {
    backend::request r;
    init.be.prepare(r, xfer_op::write, lo, re, l.peer);
    const status s = init.be.post(r, std::string_view("x"));
    CHECK((s == status::in_progress || s == status::success));
    if (s == status::in_progress) {
      // repost_active while it runs; if the progress thread finished it meanwhile, the post
      // starts the next transfer
      const status again = init.be.post(r, {});
      CHECK((again == status::repost_active || nixl::ok(again)));
    }
    CHECK(init.be.release(r) == status::success);
  }
}

// Region data with the CUDA IPC export of VRAM (wire version 3): what a peer sends is checked.
TEST_CASE("ucx region data: the VRAM's CUDA IPC export round trip and malformed exports") {
  namespace wire = nixl::ucx::detail::wire;
  nixl::ucx::detail::ipc_export x;
  for (std::size_t i = 0; i < x.handle.size(); ++i) x.handle[i] = static_cast<char>(i * 7 + 1);
  for (std::size_t i = 0; i < x.uuid.size(); ++i) x.uuid[i] = static_cast<char>(0xa0 + i);
  x.offset = 4096;
  x.alloc_len = 1 << 20;
  const std::string packed = "packed-rkey-bytes";
  const std::string blob = wire::encode_rkey(mem_kind::vram, packed, &x);
  const auto rec = wire::parse_rkey(std::as_bytes(std::span(blob)));
  CHECK(rec.kind == mem_kind::vram);
  CHECK(rec.packed == packed);
  REQUIRE(rec.ipc.has_value());
  CHECK(rec.ipc->handle == x.handle);
  CHECK(rec.ipc->uuid == x.uuid);
  CHECK(rec.ipc->offset == 4096);
  CHECK(rec.ipc->alloc_len == (1u << 20));
  // without an export
  const std::string plain = wire::encode_rkey(mem_kind::dram, packed);
  CHECK_FALSE(wire::parse_rkey(std::as_bytes(std::span(plain))).ipc.has_value());
  auto code = [](const std::string& b) {
    return code_of([&] { (void)wire::parse_rkey(std::as_bytes(std::span(b))); });
  };
  // an export for DRAM, an offset outside the allocation, an empty allocation, truncated
  CHECK(code(wire::encode_rkey(mem_kind::dram, packed, &x)) == status::mismatch);
  auto far = x;
  far.offset = far.alloc_len;
  CHECK(code(wire::encode_rkey(mem_kind::vram, packed, &far)) == status::mismatch);
  auto empty = x;
  empty.alloc_len = 0;
  empty.offset = 0;
  CHECK(code(wire::encode_rkey(mem_kind::vram, packed, &empty)) == status::mismatch);
  CHECK(code(blob.substr(0, blob.size() - 1)) == status::mismatch);
  CHECK(code(blob + "x") == status::mismatch);
  // any flipped byte of the body fails the checksum (or a field check)
  for (std::size_t at : {std::size_t{20}, blob.size() - 20, blob.size() - 1}) {
    std::string bad = blob;
    bad[at] ^= 0x11;
    CHECK(code(bad) == status::mismatch);
  }
}

// Copy requests (a peer asks this backend to copy between its host memory and the peer's VRAM):
// every field from the peer is checked.
TEST_CASE("ucx copy requests: round trip and malformed requests and answers") {
  namespace wire = nixl::ucx::detail::wire;
  std::vector<wire::copy_entry> es(3);
  for (std::size_t i = 0; i < es.size(); ++i) {
    es[i].handle.fill(static_cast<char>(i + 1));
    es[i].uuid.fill(static_cast<char>(0x40 + i));
    es[i].alloc_len = 1 << 20;
    es[i].vram_offset = 4096 * i;
    es[i].host_addr = 0x10000 + 0x1000 * i;
    es[i].len = 4096;
  }
  std::string msg = wire::encode_copy_request(true, es, false);
  wire::set_copy_token(msg, 0x1122334455667788ull);
  const auto req = wire::parse_copy_request(msg);
  CHECK(req.token == 0x1122334455667788ull);
  CHECK(req.to_host);
  CHECK_FALSE(req.events);
  REQUIRE(req.entries.size() == 3);
  CHECK(req.entries[2].handle == es[2].handle);
  CHECK(req.entries[2].uuid == es[2].uuid);
  CHECK(req.entries[2].vram_offset == 8192);
  CHECK(req.entries[2].host_addr == 0x12000);
  CHECK(req.entries[2].len == 4096);
  const auto evreq = wire::parse_copy_request(wire::encode_copy_request(false, es, true));
  CHECK_FALSE(evreq.to_host);
  CHECK(evreq.events);
  auto code = [](const std::string& b) {
    return code_of([&] { (void)wire::parse_copy_request(b); });
  };
  auto with = [&](auto change) {
    auto v = es;
    change(v[1]);
    return wire::encode_copy_request(false, v, false);
  };
  CHECK(code(with([](wire::copy_entry& e) { e.len = 0; })) == status::mismatch);
  CHECK(code(with([](wire::copy_entry& e) { e.vram_offset = e.alloc_len; })) == status::mismatch);
  CHECK(code(with([](wire::copy_entry& e) { e.len = e.alloc_len; })) == status::mismatch);
  CHECK(code(with([](wire::copy_entry& e) { e.host_addr = 0; })) == status::mismatch);
  CHECK(code(with([](wire::copy_entry& e) { e.host_addr = ~std::uint64_t{0} - 10; })) ==
        status::mismatch);
  CHECK(code(msg.substr(0, msg.size() - 1)) == status::mismatch);
  CHECK(code(msg + "x") == status::mismatch);
  std::string bad_dir = msg;
  bad_dir[9] = 4;  // version (1), token (8), flags: only bits 0 and 1 exist
  CHECK(code(bad_dir) == status::mismatch);
  std::string huge = msg;
  huge[10] = huge[11] = huge[12] = huge[13] = '\xff';  // count far above what the bytes hold
  CHECK(code(huge) == status::mismatch);
  // answers: token and status; an unknown status is a failure of the peer; garbage is dropped
  const auto ack = wire::parse_copy_ack(wire::encode_copy_ack(7, status::success));
  REQUIRE(ack.has_value());
  CHECK(ack->token == 7);
  CHECK(ack->st == status::success);
  CHECK(ack->events.n == 0);
  CHECK(wire::parse_copy_ack(wire::encode_copy_ack(8, status::invalid_param))->st ==
        status::invalid_param);
  CHECK(wire::parse_copy_ack(wire::encode_copy_ack(9, status::in_progress))->st == status::backend);
  CHECK_FALSE(wire::parse_copy_ack("junk").has_value());
  // an answer with the events of the copies: count (1 to 8) and handles
  nixl::ucx::detail::ipc_events ev;
  ev.n = 2;
  ev.handles[0].fill('a');
  ev.handles[1].fill('b');
  const std::string with_ev = wire::encode_copy_ack(10, status::success, &ev);
  const auto evack = wire::parse_copy_ack(with_ev);
  REQUIRE(evack.has_value());
  CHECK(evack->token == 10);
  CHECK(evack->st == status::success);
  REQUIRE(evack->events.n == 2);
  CHECK(evack->events.handles[1] == ev.handles[1]);
  CHECK_FALSE(wire::parse_copy_ack(with_ev.substr(0, with_ev.size() - 1)).has_value());
  CHECK_FALSE(wire::parse_copy_ack(with_ev + "x").has_value());
  std::string many = with_ev;
  many[13] = 9;  // version (1), token (8), status (4), count: more than 8 streams
  CHECK_FALSE(wire::parse_copy_ack(many).has_value());
  many[13] = 0;
  CHECK_FALSE(wire::parse_copy_ack(many).has_value());
  // a failure carries no events, whatever the bytes say
  const auto failed = wire::parse_copy_ack(wire::encode_copy_ack(11, status::backend, &ev));
  REQUIRE(failed.has_value());
  CHECK(failed->events.n == 0);
  CHECK_FALSE(wire::parse_copy_ack(wire::encode_copy_ack(7, status::success) + "x").has_value());
}

// The connection info's flags: bit 0 runs copy requests, bit 1 runs a progress thread.
TEST_CASE("ucx connection info: flags") {
  namespace wire = nixl::ucx::detail::wire;
  const std::vector<std::string> addrs{"worker-address"};
  const auto& id = nixl::detail::host_identity::self();
  for (const auto& [copies, thread] : {std::pair{false, false}, std::pair{true, false},
                                       std::pair{true, true}, std::pair{false, true}}) {
    const auto r =
        wire::parse_conn_info("peer", wire::encode_conn_info(id, 5, addrs, copies, thread));
    CHECK(r.uid == 5);
    CHECK(r.host_copies == copies);
    CHECK(r.progress_thread == thread);
  }
}
