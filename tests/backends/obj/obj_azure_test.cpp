// AZURE_BLOB against azurite (which checks Shared Key signatures): round trips, many blobs in one
// request, block lists above the threshold, ranges, overwrite, errors with the server's message,
// a server that stops answering, and query_memory.

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/azure_blob.hpp>

#include "obj_test_support.hpp"

using namespace obj_test;
using backend = nixl::azure_blob::backend;
using rig = obj_test::agent_rig<backend>;

namespace {

// azurite's well-known development account.
constexpr const char* account = "devstoreaccount1";
constexpr const char* account_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

nixl::params az_params(const std::string& endpoint) {
  return {{"account_name", account},       {"account_key", account_key},
          {"container_name", "nixl-test"}, {"account_url", "http://" + endpoint + "/" + account},
          {"request_timeout_ms", "20000"}, {"retry_backoff_ms", "20"}};
}

/// A rig whose container exists.
struct az_rig : rig {
  explicit az_rig(const nixl::params& p) : rig(p) { ag.get_backend<backend>().create_bucket(); }
};

}  // namespace

TEST_CASE("azure: round trips of 1 B, 4 KiB and 64 MiB; overwrite; query_memory", "[obj][azure]") {
  server srv("azure");
  NIXL_REQUIRE_SERVER(srv);
  az_rig r(az_params(srv.endpoint()));
  r.ag.get_backend<backend>().create_bucket();  // a second time: already there is fine
  const std::vector<std::size_t> sizes = {1, 4096, 64u << 20};
  const auto devs = r.objects({"one-byte", "dir/four kib", "big"});
  auto& be = r.ag.get_backend<backend>();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto src = pattern(sizes[i], static_cast<std::uint32_t>(i + 1));
    std::vector<std::byte> dst(sizes[i]);
    r.memory(src);
    r.memory(dst);
    auto w = r.request(nixl::xfer_op::write, src, {{0, devs[i], 0, src.size()}});
    const auto before = be.stats().attempts;
    REQUIRE(run(w) == nixl::status::success);
    // 64 MiB: eight 8 MiB blocks and the block list.
    CHECK(be.stats().attempts - before == (sizes[i] > (16u << 20) ? 9u : 1u));
    auto rd = r.request(nixl::xfer_op::read, dst, {{0, devs[i], 0, dst.size()}});
    REQUIRE(run(rd) == nixl::status::success);
    CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);
  }
  nixl::reg_dlist q(nixl::mem_kind::object);
  q.push_back({{0, 0, devs[0]}, "one-byte"});
  q.push_back({{0, 0, 7}, "big"});
  q.push_back({{0, 0, 8}, "no-such-blob"});
  auto info = r.ag.query_memory(q, {{"AZURE_BLOB"}});
  REQUIRE(info.size() == 3);
  REQUIRE(info[0].has_value());
  CHECK(info[0]->at("size") == "1");
  REQUIRE(info[1].has_value());
  CHECK(info[1]->at("size") == std::to_string(64u << 20));
  CHECK_FALSE(info[2].has_value());

  auto small = pattern(100, 42);
  std::vector<std::byte> back(100);
  r.memory(small);
  r.memory(back);
  auto w = r.request(nixl::xfer_op::write, small, {{0, devs[2], 0, small.size()}});
  REQUIRE(run(w) == nixl::status::success);
  auto rd = r.request(nixl::xfer_op::read, back, {{0, devs[2], 0, back.size()}});
  REQUIRE(run(rd) == nixl::status::success);
  CHECK(std::memcmp(small.data(), back.data(), 100) == 0);
  info = r.ag.query_memory(q, {{"AZURE_BLOB"}});
  REQUIRE(info[1].has_value());
  CHECK(info[1]->at("size") == "100");
}

TEST_CASE("azure: 1000 blobs in one request, and ranged reads", "[obj][azure]") {
  server srv("azure");
  NIXL_REQUIRE_SERVER(srv);
  az_rig r(az_params(srv.endpoint()));
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
  REQUIRE(run(w, 120s) == nixl::status::success);
  auto rd = r.request(nixl::xfer_op::read, dst, pieces);
  REQUIRE(run(rd, 120s) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), src.size()) == 0);

  // Ranges of one blob in one request.
  std::vector<std::byte> part(3 * 100);
  r.memory(part);
  auto rr = r.request(nixl::xfer_op::read, part,
                      {{0, devs[7], 10, 100}, {100, devs[7], 924, 100}, {200, devs[8], 0, 100}});
  REQUIRE(run(rr) == nixl::status::success);
  CHECK(std::memcmp(part.data(), src.data() + 7 * len + 10, 100) == 0);
  CHECK(std::memcmp(part.data() + 100, src.data() + 7 * len + 924, 100) == 0);
  CHECK(std::memcmp(part.data() + 200, src.data() + 8 * len, 100) == 0);
  auto past = r.request(nixl::xfer_op::read, part, {{0, devs[7], 5000, 100}});
  CHECK(run(past) == nixl::status::invalid_param);
  INFO(r.message(past));
  CHECK(contains(r.message(past), "InvalidRange"));
}

TEST_CASE("azure: a missing blob, a wrong key and a missing container say so", "[obj][azure]") {
  server srv("azure");
  NIXL_REQUIRE_SERVER(srv);
  std::vector<std::byte> buf(4096);
  {  // missing blob
    az_rig r(az_params(srv.endpoint()));
    const auto devs = r.objects({"never-written"});
    r.memory(buf);
    auto rd = r.request(nixl::xfer_op::read, buf, {{0, devs[0], 0, buf.size()}});
    CHECK(run(rd) == nixl::status::not_found);
    const std::string m = r.message(rd);
    INFO(m);
    CHECK(contains(m, "BlobNotFound"));
    CHECK(contains(m, "The specified blob does not exist."));
  }
  {  // wrong key
    auto p = az_params(srv.endpoint());
    p["account_key"] = "d3Jvbmcta2V5LXdyb25nLWtleQ==";
    rig r(p);
    const auto devs = r.objects({"k"});
    r.memory(buf);
    auto w = r.request(nixl::xfer_op::write, buf, {{0, devs[0], 0, buf.size()}});
    CHECK(run(w) == nixl::status::not_allowed);
    const std::string m = r.message(w);
    INFO(m);
    CHECK(contains(m, "Server failed to authenticate the request"));
    CHECK(contains(m, "check account_name and account_key"));
  }
  {  // missing container
    auto p = az_params(srv.endpoint());
    p["container_name"] = "no-such-container";
    rig r(p);
    const auto devs = r.objects({"k"});
    r.memory(buf);
    auto w = r.request(nixl::xfer_op::write, buf, {{0, devs[0], 0, buf.size()}});
    CHECK(run(w) == nixl::status::not_found);
    INFO(r.message(w));
    CHECK(contains(r.message(w), "ContainerNotFound"));
  }
  {  // bad parameters
    nixl::agent<backend> ag("bad");
    auto p = az_params(srv.endpoint());
    p["account_key"] = "not base64!";
    CHECK_THROWS_AS(ag.create_backend<backend>(p), nixl::error);
    p = az_params(srv.endpoint());
    p.erase("container_name");
    CHECK_THROWS_AS(ag.create_backend<backend>(p), nixl::error);
  }
}

TEST_CASE("azure: a connection string, as Azure's tools give it", "[obj][azure]") {
  server srv("azure");
  NIXL_REQUIRE_SERVER(srv);
  const nixl::params p{
      {"connection_string", std::string("DefaultEndpointsProtocol=http;AccountName=") + account +
                                ";AccountKey=" + account_key + ";BlobEndpoint=http://" +
                                srv.endpoint() + "/" + account + ";"},
      {"container_name", "nixl-test"}};
  az_rig r(p);
  const auto devs = r.objects({"cs"});
  auto src = pattern(5000, 9);
  std::vector<std::byte> dst(5000);
  r.memory(src);
  r.memory(dst);
  auto w = r.request(nixl::xfer_op::write, src, {{0, devs[0], 0, src.size()}});
  REQUIRE(run(w) == nixl::status::success);
  auto rd = r.request(nixl::xfer_op::read, dst, {{0, devs[0], 0, dst.size()}});
  REQUIRE(run(rd) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), dst.size()) == 0);
}

TEST_CASE("azure: a server that stops answering, then restarts", "[obj][azure]") {
  server srv("azure");
  NIXL_REQUIRE_SERVER(srv);
  auto p = az_params(srv.endpoint());
  p["request_timeout_ms"] = "2000";
  az_rig r(p);
  const auto devs = r.objects({"alive"});
  auto src = pattern(1u << 20, 4);
  std::vector<std::byte> dst(src.size());
  r.memory(src);
  r.memory(dst);
  auto w = r.request(nixl::xfer_op::write, src, {{0, devs[0], 0, src.size()}});
  REQUIRE(run(w) == nixl::status::success);
  auto rd = r.request(nixl::xfer_op::read, dst, {{0, devs[0], 0, dst.size()}});
  srv.pause();
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(run(rd, 10s) == nixl::status::backend);
  CHECK(std::chrono::steady_clock::now() - t0 < 4s);
  srv.kill();
  REQUIRE(srv.restart());
  REQUIRE(run(rd) == nixl::status::success);
  CHECK(std::memcmp(src.data(), dst.data(), dst.size()) == 0);
}
