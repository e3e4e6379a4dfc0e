// OBJ against s3rver: round trips, many objects in one request, ranges, overwrite, the errors a
// store gives (with its own message), a server that stops answering, and query_memory.

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/obj.hpp>

#include "obj_test_support.hpp"

using namespace obj_test;
using backend = nixl::obj::backend;
using agent_t = nixl::agent<backend>;
using rig = obj_test::agent_rig<backend>;

namespace {

nixl::params s3_params(const std::string& endpoint) {
  return {{"endpoint_override", endpoint}, {"scheme", "http"},        {"bucket", "nixl-test"},
          {"access_key", "S3RVER"},        {"secret_key", "S3RVER"},  {"region", "us-east-1"},
          {"request_timeout_ms", "20000"}, {"retry_backoff_ms", "20"}};
}

}  // namespace

TEST_CASE("obj: 1 B, 4 KiB and 64 MiB round trips; overwrite; query_memory", "[obj][s3]") {
  server srv("s3");
  NIXL_REQUIRE_SERVER(srv);
  rig r(s3_params(srv.endpoint()));
  const std::vector<std::size_t> sizes = {1, 4096, 64u << 20};
  const auto devs = r.objects({"one-byte", "dir/four kib", "big"});
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto src = pattern(sizes[i], static_cast<std::uint32_t>(i + 1));
    std::vector<std::byte> dst(sizes[i]);
    r.memory(src);
    r.memory(dst);
    auto w = r.request(nixl::xfer_op::write, src, {{0, devs[i], 0, src.size()}});
    REQUIRE(run(w) == nixl::status::success);
    auto rd = r.request(nixl::xfer_op::read, dst, {{0, devs[i], 0, dst.size()}});
    REQUIRE(run(rd) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  }

  // HEAD: sizes of the three, and a missing key as "not there".
  nixl::reg_dlist q(nixl::mem_kind::object);
  q.push_back({{0, 0, devs[0]}, "one-byte"});
  q.push_back({{0, 0, 7}, "dir/four kib"});
  q.push_back({{0, 0, 8}, "big"});
  q.push_back({{0, 0, 9}, "no-such-key"});
  auto info = r.ag.query_memory(q, {{"OBJ"}});
  REQUIRE(info.size() == 4);
  REQUIRE(info[0].has_value());
  CHECK(info[0]->at("size") == "1");
  REQUIRE(info[1].has_value());
  CHECK(info[1]->at("size") == "4096");
  REQUIRE(info[2].has_value());
  CHECK(info[2]->at("size") == std::to_string(64u << 20));
  CHECK_FALSE(info[3].has_value());

  // Overwrite: a shorter object replaces the longer one.
  auto small = pattern(100, 99);
  r.memory(small);
  auto w = r.request(nixl::xfer_op::write, small, {{0, devs[1], 0, small.size()}});
  REQUIRE(run(w) == nixl::status::success);
  std::vector<std::byte> back(100);
  r.memory(back);
  auto rd = r.request(nixl::xfer_op::read, back, {{0, devs[1], 0, back.size()}});
  REQUIRE(run(rd) == nixl::status::success);
  CHECK(std::memcmp(small.data(), back.data(), 100) == 0);
  auto again = r.ag.query_memory(q, {{"OBJ"}});
  REQUIRE(again[1].has_value());
  CHECK(again[1]->at("size") == "100");

  // A key given only as devId (empty registration string) is the decimal devId.
  nixl::reg_list<nixl::object_t> bydev{{{0, 0, 4242}, ""}};
  r.ag.register_memory(bydev);
  auto w2 = r.request(nixl::xfer_op::write, small, {{0, 4242, 0, small.size()}});
  REQUIRE(run(w2) == nixl::status::success);
  nixl::reg_dlist q2(nixl::mem_kind::object);
  q2.push_back({{0, 0, 4242}, ""});
  auto i2 = r.ag.query_memory(q2, {{"OBJ"}});
  REQUIRE(i2[0].has_value());
  CHECK(i2[0]->at("size") == "100");
}

TEST_CASE("obj: 1000 objects in one request", "[obj][s3]") {
  server srv("s3");
  NIXL_REQUIRE_SERVER(srv);
  rig r(s3_params(srv.endpoint()));
  constexpr std::size_t n = 1000, len = 1024;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < n; ++i) keys.push_back("many/" + std::to_string(i));
  const auto devs = r.objects(keys);
  auto src = pattern(n * len, 5);
  std::vector<std::byte> dst(n * len);
  r.memory(src);
  r.memory(dst);
  std::vector<rig::piece> pieces;
  for (std::size_t i = 0; i < n; ++i) pieces.push_back({i * len, devs[i], 0, len});
  auto w = r.request(nixl::xfer_op::write, src, pieces);
  REQUIRE(w.descriptor_count() == n);
  REQUIRE(run(w, 120s) == nixl::status::success);
  auto rd = r.request(nixl::xfer_op::read, dst, pieces);
  REQUIRE(run(rd, 120s) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  // The same request again: requests are reusable.
  std::memset(dst.data(), 0, dst.size());
  REQUIRE(run(rd, 120s) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
}

TEST_CASE("obj: ranged reads, and a range past the end", "[obj][s3]") {
  server srv("s3");
  NIXL_REQUIRE_SERVER(srv);
  auto p = s3_params(srv.endpoint());
  p["multipart_threshold"] = std::to_string(5u << 20);
  p["part_size"] = std::to_string(5u << 20);
  rig r(p);
  const auto devs = r.objects({"ranged", "parts"});
  auto src = pattern(1u << 20, 3);
  r.memory(src);
  auto w = r.request(nixl::xfer_op::write, src, {{0, devs[0], 0, src.size()}});
  REQUIRE(run(w) == nixl::status::success);

  std::vector<std::byte> dst(3 * 5000);
  r.memory(dst);
  auto rd = r.request(nixl::xfer_op::read, dst,
                      {{0, devs[0], 1000, 5000},
                       {5000, devs[0], 0, 5000},
                       {10000, devs[0], src.size() - 5000, 5000}});
  REQUIRE(run(rd) == nixl::status::success);
  CHECK(std::memcmp(dst.data(), src.data() + 1000, 5000) == 0);
  CHECK(std::memcmp(dst.data() + 5000, src.data(), 5000) == 0);
  CHECK(std::memcmp(dst.data() + 10000, src.data() + src.size() - 5000, 5000) == 0);

  // Past the end: the server's InvalidRange, as invalid_param.
  auto past = r.request(nixl::xfer_op::read, dst, {{0, devs[0], src.size() + 10, 100}});
  CHECK(run(past) == nixl::status::invalid_param);
  const std::string m = r.message(past);
  INFO(m);
  CHECK(contains(m, "InvalidRange"));
  CHECK(contains(m, "ranged"));
  // Straddling the end: fewer bytes than asked is an error, not a short success.
  auto straddle = r.request(nixl::xfer_op::read, dst, {{0, devs[0], src.size() - 10, 100}});
  CHECK(run(straddle) != nixl::status::success);

  // 12 MiB with 5 MiB parts: three parts written, read back in three ranged GETs.
  auto big = pattern(12u << 20, 8);
  std::vector<std::byte> big_back(big.size());
  r.memory(big);
  r.memory(big_back);
  auto& be = r.ag.get_backend<backend>();
  auto wb = r.request(nixl::xfer_op::write, big, {{0, devs[1], 0, big.size()}});
  auto before = be.stats().attempts;
  REQUIRE(run(wb) == nixl::status::success);
  CHECK(be.stats().attempts - before == 5);  // start, three parts, complete
  auto rb = r.request(nixl::xfer_op::read, big_back, {{0, devs[1], 0, big.size()}});
  before = be.stats().attempts;
  REQUIRE(run(rb) == nixl::status::success);
  CHECK(be.stats().attempts - before == 3);
  CHECK(std::memcmp(big.data(), big_back.data(), big.size()) == 0);
  nixl::reg_dlist q(nixl::mem_kind::object);
  q.push_back({{0, 0, devs[1]}, "parts"});
  auto info = r.ag.query_memory(q, {{"OBJ"}});
  REQUIRE(info[0].has_value());
  CHECK(info[0]->at("size") == std::to_string(big.size()));

  // A write at an offset is refused before anything is sent.
  CHECK_THROWS_AS(r.request(nixl::xfer_op::write, src, {{0, devs[0], 10, 100}}), nixl::error);
}

// s3rver 3.7.1 checks the access key id but not the Signature V4 itself ("unimplemented" in its
// authentication middleware), so a wrong secret is refused only by real stores; the signer is
// held to AWS's vectors instead (sigv4_test.cpp), and a wrong key is refused here. AZURE_BLOB's
// wrong-key test runs against azurite, which checks Shared Key signatures.
TEST_CASE("obj: a missing object, a wrong access key and a missing bucket say so", "[obj][s3]") {
  server srv("s3");
  NIXL_REQUIRE_SERVER(srv);
  std::vector<std::byte> buf(4096);
  {  // missing object
    rig r(s3_params(srv.endpoint()));
    const auto devs = r.objects({"never-written"});
    r.memory(buf);
    auto rd = r.request(nixl::xfer_op::read, buf, {{0, devs[0], 0, buf.size()}});
    CHECK(run(rd) == nixl::status::not_found);
    const std::string m = r.message(rd);
    INFO(m);
    CHECK(contains(m, "NoSuchKey"));
    CHECK(contains(m, "The specified key does not exist"));
    CHECK(contains(m, "never-written"));
  }
  {  // wrong access key
    auto p = s3_params(srv.endpoint());
    p["access_key"] = "NOT-A-KEY";
    rig r(p);
    const auto devs = r.objects({"k"});
    r.memory(buf);
    auto w = r.request(nixl::xfer_op::write, buf, {{0, devs[0], 0, buf.size()}});
    CHECK(run(w) == nixl::status::not_allowed);
    const std::string m = r.message(w);
    INFO(m);
    CHECK(contains(m, "InvalidAccessKeyId"));
    CHECK(contains(m, "does not exist in our records"));
    CHECK(contains(m, "check access_key, secret_key"));
    nixl::reg_dlist q(nixl::mem_kind::object);
    q.push_back({{0, 0, 1}, "k"});
    CHECK_THROWS_AS(r.ag.query_memory(q, {{"OBJ"}}), nixl::error);
  }
  {  // missing bucket
    auto p = s3_params(srv.endpoint());
    p["bucket"] = "no-such-bucket";
    rig r(p);
    const auto devs = r.objects({"k"});
    r.memory(buf);
    auto w = r.request(nixl::xfer_op::write, buf, {{0, devs[0], 0, buf.size()}});
    CHECK(run(w) == nixl::status::not_found);
    const std::string m = r.message(w);
    INFO(m);
    CHECK(contains(m, "NoSuchBucket"));
  }
  {  // bad parameters
    agent_t ag("bad");
    auto p = s3_params(srv.endpoint());
    p.erase("bucket");
    ::unsetenv("AWS_DEFAULT_BUCKET");
    CHECK_THROWS_AS(ag.create_backend<backend>(p), nixl::error);
    p = s3_params(srv.endpoint());
    p["request_timeout_ms"] = "soon";
    CHECK_THROWS_AS(ag.create_backend<backend>(p), nixl::error);
  }
}

TEST_CASE("obj: a server that stops answering gives an error within the deadline", "[obj][s3]") {
  server srv("s3");
  NIXL_REQUIRE_SERVER(srv);
  auto p = s3_params(srv.endpoint());
  p["request_timeout_ms"] = "2000";
  rig r(p);
  const auto devs = r.objects({"alive"});
  auto src = pattern(8u << 20, 4);
  std::vector<std::byte> dst(src.size());
  r.memory(src);
  r.memory(dst);
  auto w = r.request(nixl::xfer_op::write, src, {{0, devs[0], 0, src.size()}});
  REQUIRE(run(w) == nixl::status::success);
  auto rd = r.request(nixl::xfer_op::read, dst, {{0, devs[0], 0, dst.size()}});

  // Paused: connections are accepted by the kernel, nothing answers.
  srv.pause();
  auto t0 = std::chrono::steady_clock::now();
  const auto s = run(rd, 10s);
  auto took = std::chrono::steady_clock::now() - t0;
  srv.resume();
  CHECK(s == nixl::status::backend);
  CHECK(took < 4s);
  CHECK(took >= 1500ms);
  INFO(r.message(rd));
  CHECK(contains(r.message(rd), "deadline"));

  // Killed: refused connections, retried with back-off, then an error within the deadline.
  srv.kill();
  t0 = std::chrono::steady_clock::now();
  CHECK(run(rd, 10s) == nixl::status::backend);
  took = std::chrono::steady_clock::now() - t0;
  CHECK(took < 4s);
  INFO(r.message(rd));
  CHECK(contains(r.message(rd), "running?"));

  // Restarted on the same port with the same data: the next request works.
  REQUIRE(srv.restart());
  std::memset(dst.data(), 0, dst.size());
  REQUIRE(run(rd) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), dst.size()) == 0);
}

TEST_CASE("obj: release cancels a request in flight", "[obj][s3]") {
  server srv("s3");
  NIXL_REQUIRE_SERVER(srv);
  rig r(s3_params(srv.endpoint()));
  const auto devs = r.objects({"c"});
  auto src = pattern(1u << 20, 6);
  r.memory(src);
  auto w = r.request(nixl::xfer_op::write, src, {{0, devs[0], 0, src.size()}});
  REQUIRE(run(w) == nixl::status::success);
  srv.pause();
  auto w2 = r.request(nixl::xfer_op::write, src, {{0, devs[0], 0, src.size()}});
  CHECK(w2.post() == nixl::status::in_progress);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(w2.release() == nixl::status::success);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  srv.resume();
}
