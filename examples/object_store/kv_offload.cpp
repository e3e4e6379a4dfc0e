// KV-cache blocks offloaded to an object store and fetched back: S3 (OBJ) or Azure Blob
// (AZURE_BLOB), configured the way those clouds' own tools are, from the environment.
//
// One agent registers a DRAM buffer of 8 blocks of 256 KiB and one object per block (key
// "<prefix>/block-<i>"), WRITEs every block in one request, READs them back into a second
// buffer in one request, and checks the bytes. It waits with `wait(timeout)` (no polling loop),
// and a request that does not end in time ends with `timeout`.
//
//   AWS_ENDPOINT_OVERRIDE=http://host:port AWS_ACCESS_KEY_ID=.. AWS_SECRET_ACCESS_KEY=..
//     AWS_DEFAULT_BUCKET=kv-cache ./nixl_kv_offload s3 [prefix]
//   AZURE_STORAGE_CONNECTION_STRING="UseDevelopmentStorage=true" NIXL_CONTAINER=kv-cache
//     ./nixl_kv_offload azure [prefix]      # azurite; a real account's string works alike
//
// Without an endpoint override OBJ talks to AWS itself (https, the region's endpoint).
// `--create` makes the bucket or container first (for a throw-away local server; the backends
// never create one on their own). run.sh runs both against s3rver and azurite.
#include <nixl/agent.hpp>
#include <nixl/backends/azure_blob.hpp>
#include <nixl/backends/obj.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

using namespace std::chrono_literals;

namespace {

constexpr std::size_t block = 256 * 1024, blocks = 8, size = block * blocks;

std::uintptr_t addr(std::vector<unsigned char>& v, std::size_t off = 0) {
  return reinterpret_cast<std::uintptr_t>(v.data() + off);
}

/// Writes the blocks, reads them back, checks them: 0 when all went well.
template <class Backend>
int offload(const nixl::params& p, const std::string& prefix, bool create) {
  nixl::agent<Backend> ag("kv-offload");
  ag.template create_backend<Backend>(p);
  if (create) ag.template get_backend<Backend>().create_bucket();

  std::vector<unsigned char> kv(size), back(size, 0);
  for (std::size_t i = 0; i < size; ++i) kv[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
  ag.register_memory(
      nixl::reg_list<nixl::dram_t>{{{addr(kv), size, 0}, ""}, {{addr(back), size, 0}, ""}});
  // One object per block: the device id names it in transfers, the string is its key.
  nixl::reg_list<nixl::object_t> objects;
  for (std::size_t i = 0; i < blocks; ++i)
    objects.push_back({{0, 0, i + 1}, prefix + "/block-" + std::to_string(i)});
  ag.register_memory(objects);

  nixl::xfer_list<nixl::dram_t> from, into;
  nixl::xfer_list<nixl::object_t> to;
  for (std::size_t i = 0; i < blocks; ++i) {
    from.push_back({addr(kv, i * block), block, 0});
    into.push_back({addr(back, i * block), block, 0});
    to.push_back({0, block, i + 1});
  }
  // An object store is "remote" to the agent itself: the target is the agent's own name.
  auto w = ag.create_request(nixl::xfer_op::write, from, to, ag.name());
  auto t0 = std::chrono::steady_clock::now();
  w.post();
  nixl::status s = w.wait(30s);
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  std::printf("WRITE %zu blocks of %zu KiB to %s: %s in %.1f ms\n", blocks, block / 1024,
              std::string(w.backend_name()).c_str(), std::string(nixl::to_string(s)).c_str(),
              ms.count());
  if (s != nixl::status::success) return 1;

  auto r = ag.create_request(nixl::xfer_op::read, into, to, ag.name());
  t0 = std::chrono::steady_clock::now();
  r.post();
  s = r.wait(30s);
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  const bool same = back == kv;
  std::printf("READ them back: %s in %.1f ms, %s\n", std::string(nixl::to_string(s)).c_str(),
              ms.count(), same ? "same bytes" : "DIFFERENT bytes");
  return s == nixl::status::success && same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string_view store = argc > 1 ? argv[1] : "";
  std::string prefix = "nixl-example";
  bool create = false;
  for (int i = 2; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--create")
      create = true;
    else
      prefix = argv[i];
  }
  if (store == "s3") return offload<nixl::obj::backend>({}, prefix, create);  // AWS_* variables
  if (store == "azure") {
    const char* container = std::getenv("NIXL_CONTAINER");
    return offload<nixl::azure_blob::backend>(
        {{"container_name", container != nullptr ? container : "nixl-example"}}, prefix, create);
  }
  std::fprintf(stderr, "usage: %s s3|azure [prefix] [--create]\n", argv[0]);
  return 2;
} catch (const nixl::error& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
