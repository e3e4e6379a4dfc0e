#pragma once
// What the OBJ / AZURE_BLOB VRAM tests share (on a GPU: obj_vram_gpu_test.cpp; with the stand-in
// driver: obj_vram_fake_test.cpp): each store's parameters against its local test server, and an
// agent with VRAM requests over any buffer type with `addr(offset)` and `n`.

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nixl/agent.hpp>
#include <nixl/backends/azure_blob.hpp>
#include <nixl/backends/obj.hpp>

#include "obj_test_support.hpp"

namespace obj_test {

struct s3_kind {
  using backend = nixl::obj::backend;
  static constexpr const char* server = "s3";
  static nixl::params params(const std::string& ep, const std::string& timeout_ms = "30000") {
    return {{"endpoint_override", ep},          {"scheme", "http"},        {"bucket", "nixl-test"},
            {"access_key", "S3RVER"},           {"secret_key", "S3RVER"},  {"region", "us-east-1"},
            {"request_timeout_ms", timeout_ms}, {"retry_backoff_ms", "20"}};
  }
};

struct az_kind {
  using backend = nixl::azure_blob::backend;
  static constexpr const char* server = "azure";
  static nixl::params params(const std::string& ep, const std::string& timeout_ms = "30000") {
    return {{"connection_string", "UseDevelopmentStorage=true"},
            {"container_name", "nixl-test"},
            {"account_url", "http://" + ep + "/devstoreaccount1"},
            {"request_timeout_ms", timeout_ms},
            {"retry_backoff_ms", "20"}};
  }
};

/// An agent with the backend of `K` (its bucket or container made), and VRAM requests over
/// buffers of type `Buf`.
template <class K, class Buf>
struct vrig : agent_rig<typename K::backend> {
  using base = agent_rig<typename K::backend>;
  explicit vrig(const nixl::params& p) : base(p) {
    this->ag.template get_backend<typename K::backend>().create_bucket();
  }
  void vram(const Buf& g) {
    this->ag.register_memory(nixl::reg_list<nixl::vram_t>{{{g.addr(), g.n, 0}, ""}});
  }
  auto vrequest(nixl::xfer_op op, const Buf& g, const std::vector<typename base::piece>& ps) {
    nixl::xfer_list<nixl::vram_t> mem;
    nixl::xfer_list<nixl::object_t> obj;
    for (const auto& p : ps) {
      mem.push_back({g.addr(p.mem_off), p.len, 0});
      obj.push_back({p.obj_off, p.len, p.dev});
    }
    nixl::xfer_options o;
    o.skip_merge = true;
    return this->ag.create_request(op, mem, obj, this->ag.name(), o);
  }

  /// `count` objects of `small` bytes and one of `big` (objects `keys_prefix`0 to count) from
  /// one buffer, written in order and read back to other places: the big object first, then the
  /// small ones in reverse order. Returns (write pieces, read pieces).
  std::pair<std::vector<typename base::piece>, std::vector<typename base::piece>> many(
      const std::string& keys_prefix, std::size_t count, std::size_t small, std::size_t big) {
    std::vector<std::string> keys;
    for (std::size_t i = 0; i <= count; ++i) keys.push_back(keys_prefix + std::to_string(i));
    const auto devs = this->objects(keys);
    std::vector<typename base::piece> w, r;
    for (std::size_t i = 0; i < count; ++i) w.push_back({i * small, devs[i], 0, small});
    w.push_back({count * small, devs[count], 0, big});
    r.push_back({0, devs[count], 0, big});
    for (std::size_t i = 0; i < count; ++i)
      r.push_back({big + i * small, devs[count - 1 - i], 0, small});
    return {w, r};
  }

  /// many()'s objects written from `src` (filled with `data` first, as are the objects then):
  /// returns (write pieces, the finished WRITE, the READ of them all into `dst`, not posted).
  auto write_many(const std::string& keys_prefix, std::size_t count, std::size_t small,
                  std::size_t big, const std::vector<std::byte>& data, Buf& src, Buf& dst) {
    auto [w_pieces, r_pieces] = many(keys_prefix, count, small, big);
    src.put(data);
    vram(src);
    vram(dst);
    auto w = vrequest(nixl::xfer_op::write, src, w_pieces);
    REQUIRE(run(w, 120s) == nixl::status::success);
    auto rd = vrequest(nixl::xfer_op::read, dst, r_pieces);
    return std::tuple(std::move(w_pieces), std::move(w), std::move(rd));
  }
};

}  // namespace obj_test
