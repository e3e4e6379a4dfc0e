// The conformance suite: the same behaviour asked of every backend, each on what it moves.
//
// A backend is tested by joining nixl::enabled_backends (<nixl/nixl.hpp>). Which bodies it runs
// follows from its concepts (remote and notifying: DRAM <-> DRAM between two agents with
// notifications; DRAM <-> FILE, DRAM <-> OBJ and VRAM on one agent, loopback), and every backend
// runs the refusals. What a backend needs beyond its defaults (parameters, a server, a GPU) is its
// `setup<B>` below; a backend whose dependency is missing says why and is skipped, and the last
// test case fails unless every listed backend ran or said why, and one real backend ran.
#include <nixl/nixl.hpp>  // the linked backends and nixl::enabled_backends
#if defined(NIXL_CONFORMANCE_CUDART)
#include <cuda_runtime_api.h>
#endif

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "nixl_test/buffer.hpp"
#include "nixl_test/catch.hpp"
#include "nixl_test/errors.hpp"
#include "nixl_test/memcpy_backend.hpp"
#include "nixl_test/wait.hpp"
#if defined(NIXL_HAS_OBJ) && defined(NIXL_OBJ_TEST_SCRIPT)
#include "obj_test_support.hpp"
#endif

using nixl::status;
using nixl::xfer_op;
using nixl::test::buffer;

template <class List, class... More>
struct tuple_of;
template <class... B, class... More>
struct tuple_of<nixl::detail::type_list<B...>, More...> {
  using type = std::tuple<B..., More...>;
};

/// Every backend of the suite: the linked ones (nixl::enabled_backends, where a new backend
/// joins) and the test doubles.
using backends = typename tuple_of<nixl::enabled_backends, nixl::test::memcpy_backend,
                                   nixl::test::file_backend>::type;

namespace {

// --- What a backend needs to run here -----------------------------------------------------

/// The default: no parameters, nothing to start; a backend that cannot be created fails the
/// test (`optional` false), one with `optional` true is skipped with the error as the reason.
template <class B>
struct setup {
  static constexpr bool optional = false;
  std::string why_not;  ///< empty when the backend can run here
  nixl::params params() const { return {}; }
  template <class Agent>
  void created(Agent&) {}
  /// Why the VRAM body cannot run here, or empty.
  std::string vram_why_not() const;
};

#if defined(NIXL_HAS_LIBFABRIC)
template <>
struct setup<nixl::libfabric::backend> : setup<void> {
  static constexpr bool optional = true;  // a provider the machine may lack
  nixl::params params() const { return {{"provider", "tcp;ofi_rxm"}, {"interfaces", "lo"}}; }
};
#endif

#if defined(NIXL_HAS_GDS)
/// GDS and GDS_MT over the fake libcufile of tests/backends/gds (pread/pwrite, DRAM only).
template <class B>
struct gds_setup : setup<void> {
  static constexpr bool optional = true;
  gds_setup() {
#if !defined(NIXL_CONFORMANCE_FAKE_CUFILE)
    why_not = "built without the fake libcufile (tests/backends/gds)";
#endif
  }
  nixl::params params() const {
#if defined(NIXL_CONFORMANCE_FAKE_CUFILE)
    return {{"cufile_path", NIXL_CONFORMANCE_FAKE_CUFILE}, { "compat_mode", "false" }};
#else
    return {};
#endif
  }
  std::string vram_why_not() const {
    return "the fake libcufile moves DRAM only";
  }
};
template <>
struct setup<nixl::gds::backend> : gds_setup<nixl::gds::backend> {};
template <>
struct setup<nixl::gds_mt::backend> : gds_setup<nixl::gds_mt::backend> {};
#endif

#if defined(NIXL_HAS_CUDA)
template <>
struct setup<nixl::cuda::backend> : setup<void> {
  static constexpr bool optional = true;
  setup();
};
#endif

#if defined(NIXL_HAS_OBJ)
/// OBJ and AZURE_BLOB against s3rver and azurite, started for the test on a free port.
template <class B>
struct store_setup : setup<void> {
  static constexpr bool optional = true;
#if defined(NIXL_OBJ_TEST_SCRIPT)
  std::unique_ptr<obj_test::server> srv;
  explicit store_setup(const char* kind) : srv(std::make_unique<obj_test::server>(kind)) {
    if (srv->endpoint().empty()) why_not = std::string(kind) + " server: " + srv->why();
  }
  std::string endpoint() const {
    return srv->endpoint();
  }
#else
  explicit store_setup(const char*) {
    why_not = "built without scripts/obj-test-server.sh";
  }
  std::string endpoint() const {
    return {};
  }
#endif
  template <class Agent>
  void created(Agent& a) {
    a.template get_backend<B>().create_bucket();
  }
};
template <>
struct setup<nixl::obj::backend> : store_setup<nixl::obj::backend> {
  setup() : store_setup("s3") {}
  nixl::params params() const {
    return {{"endpoint_override", endpoint()}, {"scheme", "http"},       {"bucket", "nixl-conf"},
            {"access_key", "S3RVER"},          {"secret_key", "S3RVER"}, {"region", "us-east-1"},
            {"request_timeout_ms", "20000"}};
  }
};
template <>
struct setup<nixl::azure_blob::backend> : store_setup<nixl::azure_blob::backend> {
  setup() : store_setup("azure") {}
  nixl::params params() const {
    // azurite's well-known development account
    return {{"connection_string", "UseDevelopmentStorage=true"},
            {"container_name", "nixl-conf"},
            {"account_url", "http://" + endpoint() + "/devstoreaccount1"},
            {"request_timeout_ms", "20000"}};
  }
};
#endif

/// Why this process cannot use a GPU, or empty when it can.
std::string no_gpu() {
#if defined(NIXL_CONFORMANCE_CUDART)
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no GPU: cudaGetDeviceCount: ") + cudaGetErrorString(e);
  if (n == 0) return "no GPU: cudaGetDeviceCount found none";
  return {};
#else
  return "built without the CUDA runtime";
#endif
}

template <class B>
std::string setup<B>::vram_why_not() const {
  return no_gpu();
}

#if defined(NIXL_HAS_CUDA)
setup<nixl::cuda::backend>::setup() {
  why_not = no_gpu();
}
#endif

// --- What ran ------------------------------------------------------------------------------

/// Per backend name: how many bodies ran, and the reasons of those skipped.
struct record {
  int ran = 0;
  std::vector<std::string> skipped;
};
std::map<std::string, record, std::less<>>& records() {
  static std::map<std::string, record, std::less<>> r;
  return r;
}

template <class B>
constexpr bool test_backend =
    std::is_same_v<B, nixl::test::memcpy_backend> || std::is_same_v<B, nixl::test::file_backend>;

/// One agent (or two) with backend `B` created, or the reason it could not be.
template <class B>
struct rig {
  using agent = nixl::agent<B>;
  setup<B> env;
  std::unique_ptr<agent> a, b;
  std::string why_not;

  explicit rig(const char* shape, bool two = false) {
    why_not = env.why_not;
    if (why_not.empty()) {
      try {
        a = std::make_unique<agent>("conf-a");
        a->template create_backend<B>(env.params());
        env.created(*a);
        if (two) {
          b = std::make_unique<agent>("conf-b");
          b->template create_backend<B>(env.params());
          a->load_remote_metadata(b->local_metadata());
          b->load_remote_metadata(a->local_metadata());
        }
      } catch (const nixl::error& e) {
        if (!setup<B>::optional) throw;
        why_not = e.what();
      }
    }
    if (why_not.empty())
      ++records()[std::string(B::name)].ran;
    else
      records()[std::string(B::name)].skipped.push_back(std::string(shape) + ": " + why_not);
  }
  bool ready() const { return why_not.empty(); }
};

#define CONF_RIG(r, ...)        \
  rig<TestType> r(__VA_ARGS__); \
  if (!r.ready()) NIXL_SKIP(TestType::name << ": " << r.why_not)

/// Runs request `r` to its end (a deadline in time).
template <class R>
status run(R& r) {
  const status s = r.post();
  return s == status::in_progress ? nixl::test::wait(r) : s;
}

/// A scratch file, removed at the end.
struct scratch_file {
  std::string path = "/tmp/nixl-conformance-XXXXXX";
  int fd = ::mkstemp(path.data());
  ~scratch_file() {
    if (fd >= 0) ::close(fd);
    ::unlink(path.c_str());
  }
  std::uint64_t dev() const { return static_cast<std::uint64_t>(fd); }
};

// --- Which backend runs which body ---------------------------------------------------------

template <template <class> class P, class List>
struct filter;
template <template <class> class P, class... Bs>
struct filter<P, std::tuple<Bs...>> {
  using type = decltype(std::tuple_cat(
      std::declval<std::conditional_t<P<Bs>::value, std::tuple<Bs>, std::tuple<>>>()...));
};
template <template <class> class P>
using only = typename filter<P, backends>::type;

template <class B>
using remote_dram = std::bool_constant<nixl::remote_backend<B> && nixl::notifying_backend<B> &&
                                       nixl::backend_for<B, nixl::dram_t, nixl::dram_t>>;
template <class B>
using dram_file = std::bool_constant<nixl::backend_for<B, nixl::dram_t, nixl::file_t>>;
template <class B>
using dram_object = std::bool_constant<nixl::backend_for<B, nixl::dram_t, nixl::object_t>>;
template <class B>
using vram = std::bool_constant<nixl::backend_for<B, nixl::vram_t, nixl::vram_t> ||
                                nixl::backend_for<B, nixl::vram_t, nixl::file_t>>;
template <class B>
using any = std::true_type;

/// Byte pattern seeds per test.
constexpr unsigned seed_a = 3, seed_b = 11;

}  // namespace

// --- The bodies ----------------------------------------------------------------------------

TEMPLATE_LIST_TEST_CASE("conformance: remote DRAM: write, read, notifications", "[conformance]",
                        only<remote_dram>) {
  CONF_RIG(r, "remote DRAM", true);
  auto& a = *r.a;
  auto& b = *r.b;
  constexpr std::size_t n = 1000, block = 96;
  buffer src(n * block), dst(n * block), back(n * block);
  src.fill(seed_a);
  a.register_memory(src.reg());
  a.register_memory(back.reg());
  b.register_memory(dst.reg());
  a.load_remote_metadata(b.local_metadata());

  // scattered on the local side (blocks reversed) so nothing merges
  nixl::xfer_list<nixl::dram_t> l, rl;
  for (std::size_t i = 0; i < n; ++i) {
    l.push_back({src.addr((n - 1 - i) * block), block, 0});
    rl.push_back({dst.addr(i * block), block, 0});
  }
  auto w = a.create_request(xfer_op::write, l, rl, "conf-b", {.notif = std::string("w\0x", 3)});
  CHECK(w.descriptor_count() == n);
  REQUIRE(run(w) == status::success);
  nixl::notif_map m;
  CHECK(nixl::test::wait_until([&] {
    b.notifications(m);
    return !m["conf-a"].empty();
  }));
  REQUIRE(m["conf-a"].size() == 1);
  CHECK(m["conf-a"][0] == std::string("w\0x", 3));
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(dst.holds(seed_a, i * block, block, (n - 1 - i) * block));

  auto rd = a.create_request(xfer_op::read, back.whole(), dst.whole(), "conf-b");
  REQUIRE(run(rd) == status::success);
  CHECK(std::memcmp(back.data(), dst.data(), back.size()) == 0);
  // a completed request posts again
  CHECK(run(rd) == status::success);

  // standalone notifications, both ways
  m.clear();
  a.notify("conf-b", "ping");
  b.notify("conf-a", "pong");
  nixl::notif_map ma;
  CHECK(nixl::test::wait_until([&] {
    b.notifications(m);
    a.notifications(ma);
    return !m["conf-a"].empty() && !ma["conf-b"].empty();
  }));
  CHECK(m["conf-a"] == std::vector<std::string>{"ping"});
  CHECK(ma["conf-b"] == std::vector<std::string>{"pong"});
}

/// Writes `n` blocks of `block` bytes of a pattern to `far` (registered on `a`), reads them back
/// and compares: loopback on one agent.
template <class Agent, class Far>
void round_trip(Agent& a, std::size_t n, std::size_t block, const nixl::xfer_list<Far>& far) {
  buffer mem(n * block), back(n * block);
  mem.fill(seed_b);
  a.register_memory(mem.reg());
  a.register_memory(back.reg());
  auto w = a.create_request(xfer_op::write, mem.blocks(n, block), far, a.name());
  REQUIRE(run(w) == status::success);
  auto rd = a.create_request(xfer_op::read, back.blocks(n, block), far, a.name());
  REQUIRE(run(rd) == status::success);
  CHECK(back.holds(seed_b));
}

TEMPLATE_LIST_TEST_CASE("conformance: DRAM <-> FILE: write then read back", "[conformance]",
                        only<dram_file>) {
  CONF_RIG(r, "DRAM <-> FILE");
  scratch_file f;
  REQUIRE(f.fd >= 0);
  constexpr std::size_t n = 64, block = 4096;
  r.a->register_memory(nixl::reg_list<nixl::file_t>{{{0, 0, f.dev()}, f.path}});
  nixl::xfer_list<nixl::file_t> fl;  // blocks reversed in the file
  for (std::size_t i = 0; i < n; ++i) fl.push_back({(n - 1 - i) * block, block, f.dev()});
  round_trip(*r.a, n, block, fl);
}

TEMPLATE_LIST_TEST_CASE("conformance: DRAM <-> OBJ: write objects, read them back", "[conformance]",
                        only<dram_object>) {
  CONF_RIG(r, "DRAM <-> OBJ");
  constexpr std::size_t n = 8, len = 4096 + 17;
  nixl::reg_list<nixl::object_t> objs;
  nixl::xfer_list<nixl::object_t> ol;
  for (std::size_t i = 0; i < n; ++i) {
    objs.push_back({{0, 0, i + 1}, "conf/" + std::to_string(i)});
    ol.push_back({0, len, i + 1});
  }
  r.a->register_memory(objs);
  round_trip(*r.a, n, len, ol);
}

TEMPLATE_LIST_TEST_CASE("conformance: VRAM: write then read back through the GPU", "[conformance]",
                        only<vram>) {
  using B = TestType;
  if (const auto why = setup<B>{}.vram_why_not(); !why.empty()) {
    records()[std::string(B::name)].skipped.push_back("VRAM: " + why);
    NIXL_SKIP(B::name << ": VRAM: " << why);
  }
#if defined(NIXL_CONFORMANCE_CUDART)
  CONF_RIG(r, "VRAM");
  auto& a = *r.a;
  constexpr std::size_t n = 1 << 20;
  void* gpu = nullptr;
  REQUIRE(cudaMalloc(&gpu, n) == cudaSuccess);
  std::unique_ptr<void, decltype(&cudaFree)> own(gpu, &cudaFree);
  const auto g = reinterpret_cast<std::uintptr_t>(gpu);
  buffer host(n), back(n);
  host.fill(seed_b);
  nixl::reg_list<nixl::vram_t> vr{{{g, n, 0}, ""}};
  nixl::xfer_list<nixl::vram_t> vl{{g, n, 0}};
  a.register_memory(vr);
  if constexpr (nixl::backend_for<B, nixl::vram_t, nixl::vram_t>) {
    // host -> first half of the GPU buffer -> second half -> host, all through the backend
    void* gpu2 = nullptr;
    REQUIRE(cudaMalloc(&gpu2, n) == cudaSuccess);
    std::unique_ptr<void, decltype(&cudaFree)> own2(gpu2, &cudaFree);
    const auto g2 = reinterpret_cast<std::uintptr_t>(gpu2);
    a.register_memory(nixl::reg_list<nixl::vram_t>{{{g2, n, 0}, ""}});
    REQUIRE(cudaMemcpy(gpu, host.data(), n, cudaMemcpyHostToDevice) == cudaSuccess);
    auto w =
        a.create_request(xfer_op::write, vl, nixl::xfer_list<nixl::vram_t>{{g2, n, 0}}, "conf-a");
    REQUIRE(run(w) == status::success);
    REQUIRE(cudaMemcpy(back.data(), gpu2, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  } else {
    scratch_file f;
    REQUIRE(f.fd >= 0);
    a.register_memory(nixl::reg_list<nixl::file_t>{{{0, 0, f.dev()}, f.path}});
    nixl::xfer_list<nixl::file_t> fl{{0, n, f.dev()}};
    REQUIRE(cudaMemcpy(gpu, host.data(), n, cudaMemcpyHostToDevice) == cudaSuccess);
    auto w = a.create_request(xfer_op::write, vl, fl, "conf-a");
    REQUIRE(run(w) == status::success);
    REQUIRE(cudaMemset(gpu, 0, n) == cudaSuccess);
    auto rd = a.create_request(xfer_op::read, vl, fl, "conf-a");
    REQUIRE(run(rd) == status::success);
    REQUIRE(cudaMemcpy(back.data(), gpu, n, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  CHECK(back.holds(seed_b));
#endif
}

TEMPLATE_LIST_TEST_CASE("conformance: refusals: outside every region, a pair it does not move",
                        "[conformance]", backends) {
  using B = TestType;
  constexpr bool remote = nixl::remote_backend<B>;
  CONF_RIG(r, "refusals", remote);
  auto& a = *r.a;
  const std::string peer = remote ? "conf-b" : "conf-a";
  const auto kinds = nixl::detail::kinds_of<B>();
  REQUIRE(!kinds.empty());
  // A descriptor of a kind it moves that no registered region covers: the request is refused
  // when it is made.
  buffer mem(8192);
  a.register_memory(mem.reg());
  if (remote) {
    r.b->register_memory(mem.reg());
    a.load_remote_metadata(r.b->local_metadata());
  }
  static_assert(nixl::contains(typename B::memory_kinds{}, nixl::mem_kind::dram));
  for (const auto rk : kinds) {
    nixl::xfer_dlist l(nixl::mem_kind::dram), rl(rk);
    l.push_back({mem.addr(), 16, 0});
    rl.push_back({mem.addr(8192 - 8), 16, rk == nixl::mem_kind::dram ? 0u : 999u});
    INFO(B::name << ": dram -> " << nixl::to_string(rk));
    CHECK(nixl::test::code_of([&] { (void)a.create_request(xfer_op::write, l, rl, peer); }) !=
          status::success);
  }
  // Every pair of kinds it does not move is refused with an error, not moved.
  int refused = 0;
  for (std::size_t i = 0; i < nixl::mem_kind_count; ++i)
    for (std::size_t j = 0; j < nixl::mem_kind_count; ++j) {
      const auto lk = static_cast<nixl::mem_kind>(i), rk = static_cast<nixl::mem_kind>(j);
      const bool moves = nixl::visit_kind(lk, [&](auto lt) {
        return nixl::visit_kind(
            rk, [&](auto rt) { return nixl::backend_for<B, decltype(lt), decltype(rt)>; });
      });
      if (moves) continue;
      nixl::xfer_dlist l(lk), rl(rk);
      l.push_back({mem.addr(), 16, 0});
      rl.push_back({mem.addr(), 16, 0});
      INFO(B::name << ": " << nixl::to_string(lk) << " -> " << nixl::to_string(rk));
      CHECK(nixl::test::code_of([&] { (void)a.create_request(xfer_op::write, l, rl, peer); }) !=
            status::success);
      ++refused;
    }
  CHECK(refused > 0);
}

/// Checks the records of every backend of `backends`; returns how many real ones ran.
template <class... Bs>
int check_records(std::tuple<Bs...>*) {
  int real = 0;
  (
      [&] {
        const auto& rec = records()[std::string(Bs::name)];
        for (const auto& why : rec.skipped) WARN(Bs::name << " skipped " << why);
        INFO(Bs::name << " ran " << rec.ran << " bodies");
        CHECK((rec.ran > 0 || !rec.skipped.empty()));
        if (!test_backend<Bs> && rec.ran > 0) ++real;
      }(),
      ...);
  return real;
}

// Runs last (ctest passes --order decl): the suite never passes by skipping everything.
TEST_CASE("conformance: every backend ran or said why, and a real one ran", "[conformance]") {
  CHECK(check_records(static_cast<backends*>(nullptr)) > 0);
}
