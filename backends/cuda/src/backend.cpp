// One file above 600 lines for now: it will be split along the backend layout of
// docs/architecture.md (config, wire format, registration, peers, transfers) once the
// concurrent work on the CUDA backend has landed.
// nixl::cuda::backend: registration, public data, peers, transfers and notifications.

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <nixl/backends/cuda.hpp>
#include <nixl/backends/cuda/check.hpp>
#include <nixl/backends/cuda/runtime.hpp>
#include <nixl/detail/params.hpp>
#include <nixl/log.hpp>

namespace nixl::cuda {

namespace detail {

void event_handle::reset() noexcept {
  if (e_ == nullptr) return;
  // A recorded event may still be pending: the work behind it reads memory this request owns.
  (void)NIXL_CUDA_WARN(cudaEventSynchronize(e_));
  (void)NIXL_CUDA_WARN(cudaEventDestroy(e_));
  e_ = nullptr;
}

void device_buffer::reset() noexcept {
  if (p_ == nullptr) return;
  device_guard g(dev_);
  (void)NIXL_CUDA_WARN(cudaFree(p_));
  p_ = nullptr;
}

namespace {

// Little-endian wire helpers

struct writer {
  std::string out;
  void u8(std::uint8_t v) { out.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void bytes(const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); }
};

struct reader {
  std::span<const std::byte> in;
  std::size_t pos = 0;
  bool ok = true;
  bool need(std::size_t n) {
    if (!ok || in.size() - pos < n) ok = false;
    return ok;
  }
  std::uint8_t u8() {
    if (!need(1)) return 0;
    return static_cast<std::uint8_t>(in[pos++]);
  }
  std::uint32_t u32() {
    if (!need(4)) return 0;
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in[pos + i]) << (8 * i);
    pos += 4;
    return v;
  }
  std::uint64_t u64() {
    if (!need(8)) return 0;
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[pos + i]) << (8 * i);
    pos += 8;
    return v;
  }
  void bytes(void* p, std::size_t n) {
    if (!need(n)) return;
    std::memcpy(p, in.data() + pos, n);
    pos += n;
  }
  std::string str(std::size_t n) {
    std::string s(n, '\0');
    bytes(s.data(), n);
    return s;
  }
};

constexpr std::uint32_t conn_magic = 0x4343584e;    // "NXCC"
constexpr std::uint32_t region_magic = 0x5243584e;  // "NXCR"
constexpr std::uint8_t wire_version = 1;
constexpr std::size_t region_blob_size = 144;
constexpr std::uint8_t flag_ipc = 1;
constexpr std::uint8_t flag_device_access = 2;

// IPC mappings, shared by every backend of the process
//
// cudaIpcOpenMemHandle maps a whole allocation; several registered regions of a peer (tensors
// of one caching-allocator segment) share it, and one process may open a handle only once per
// GPU. Mappings are therefore kept per (handle, GPU).

struct ipc_mapping {
  void* base = nullptr;
  int device = -1;
  std::size_t refs = 0;
};

static_assert(CUDA_IPC_HANDLE_SIZE == 64, "remote_region::ipc_handle holds 64 bytes");
using ipc_key = std::pair<std::array<char, CUDA_IPC_HANDLE_SIZE>, int>;

struct ipc_table {
  std::mutex mu;
  std::map<ipc_key, ipc_mapping> open;
  std::map<void*, ipc_key> by_base;
};

ipc_table& ipc() {
  static ipc_table t;
  return t;
}

void* ipc_open(const std::array<char, CUDA_IPC_HANDLE_SIZE>& h, int device) {
  auto& t = ipc();
  std::lock_guard lk(t.mu);
  auto it = t.open.find({h, device});
  if (it != t.open.end()) {
    ++it->second.refs;
    return it->second.base;
  }
  cudaIpcMemHandle_t handle{};
  std::memcpy(handle.reserved, h.data(), h.size());
  device_guard g(device);
  void* base = nullptr;
  NIXL_CUDA_CHECK_HINT(
      cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess),
      "the peer's memory could not be mapped: it must be alive, in a process of this host that "
      "sees the same GPUs, and allocated with cudaMalloc (not cuMemCreate/VMM)");
  t.open.emplace(ipc_key{h, device}, ipc_mapping{base, device, 1});
  t.by_base.emplace(base, ipc_key{h, device});
  return base;
}

void ipc_close(void* base) noexcept {
  auto& t = ipc();
  std::lock_guard lk(t.mu);
  auto b = t.by_base.find(base);
  if (b == t.by_base.end()) return;
  auto it = t.open.find(b->second);
  if (it != t.open.end() && --it->second.refs == 0) {
    device_guard g(it->second.device);
    (void)NIXL_CUDA_WARN(cudaIpcCloseMemHandle(base));
    t.open.erase(it);
    t.by_base.erase(b);
  }
}

// DRAM pinned by this library, shared by every backend of the process

struct pin_entry {
  std::size_t len = 0;
  std::size_t refs = 0;
};

struct pin_table {
  std::mutex mu;
  std::map<std::uintptr_t, pin_entry> pins;  // by start address; ranges do not overlap
};

pin_table& pins() {
  static pin_table t;
  return t;
}

enum class pin_result { none, pinned, overlap };

// Pins the range (when `may_pin`: nobody pinned it and pinning is on), or takes a reference on the
// same range pinned here before. `overlap` when it overlaps a different range pinned here.
pin_result pin(std::uintptr_t addr, std::size_t len, bool may_pin) {
  auto& t = pins();
  std::lock_guard lk(t.mu);
  auto it = t.pins.upper_bound(addr);
  if (it != t.pins.begin()) {
    auto prev = std::prev(it);
    if (prev->first == addr && prev->second.len == len) {
      ++prev->second.refs;
      return pin_result::pinned;
    }
    if (prev->first + prev->second.len > addr) return pin_result::overlap;
  }
  if (it != t.pins.end() && it->first < addr + len) return pin_result::overlap;
  if (!may_pin) return pin_result::none;
  const cudaError_t e = cudaHostRegister(reinterpret_cast<void*>(addr), len,
                                         cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    nixl::log::info(
        "CUDA backend: DRAM {:#x} + {} stays pageable (cudaHostRegister: {}); "
        "copies of it go through the copy engines, staged by the driver",
        addr, len, describe(e));
    return pin_result::none;
  }
  t.pins.emplace(addr, pin_entry{len, 1});
  return pin_result::pinned;
}

void unpin(std::uintptr_t addr, std::size_t len) noexcept {
  auto& t = pins();
  std::lock_guard lk(t.mu);
  auto it = t.pins.find(addr);
  if (it == t.pins.end() || it->second.len != len) return;
  if (--it->second.refs == 0) {
    (void)NIXL_CUDA_WARN(cudaHostUnregister(reinterpret_cast<void*>(addr)));
    t.pins.erase(it);
  }
}

// Whether GPUs reach host pointer `p` (pinned and mapped), and at which address.
bool host_device_pointer(const void* p, std::uintptr_t& dev) noexcept {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (a.type != cudaMemoryTypeHost || a.devicePointer == nullptr) return false;
  dev = reinterpret_cast<std::uintptr_t>(a.devicePointer);
  return true;
}

std::string hex(std::uintptr_t v) {
  return fmt::format("{:#x}", v);
}

}  // namespace

// Phases of a request.
enum : std::uint8_t { idle = 0, running = 1, notifying = 2, done = 3, failed = 4 };

struct device_state {
  int ordinal = 0;
  int sm_count = 1;
  std::vector<cudaStream_t> streams;
  std::atomic<unsigned> next{0};
  std::vector<std::int8_t> peer;  // 0 unknown, 1 enabled, -1 impossible
};

struct backend_state {
  backend::config cfg;
  std::string agent;
  std::unique_ptr<notif_socket> socket;
  std::mutex mu;  // setup path: streams, peer access
  std::vector<std::unique_ptr<device_state>> devs;
};

}  // namespace detail

using namespace detail;  // this file implements the backend on top of its internals

// Config

backend::config backend::config::from_params(const nixl::params& p) {
  config c;
  auto number = [](std::string_view key, const std::string& v, std::uint64_t lo, std::uint64_t hi) {
    return nixl::detail::parse_number("CUDA", key, v, lo, hi);
  };
  for (const auto& [k, v] : p) {
    if (k == "streams_per_gpu")
      c.streams_per_gpu = static_cast<unsigned>(number(k, v, 1, 64));
    else if (k == "kernel_max_bytes")
      c.kernel_max_bytes = number(k, v, 0, std::uint64_t{1} << 40);
    else if (k == "kernel_min_count")
      c.kernel_min_count = number(k, v, 1, 1u << 30);
    else if (k == "pin_dram")
      c.pin_dram = nixl::detail::parse_bool("CUDA", k, v);
    else
      nixl::log::warn(
          "CUDA backend: unknown parameter '{}' ignored (known: streams_per_gpu, "
          "kernel_max_bytes, kernel_min_count, pin_dram)",
          k);
  }
  return c;
}

nixl::params backend::config::to_params() const {
  return {{"streams_per_gpu", std::to_string(streams_per_gpu)},
          {"kernel_max_bytes", std::to_string(kernel_max_bytes)},
          {"kernel_min_count", std::to_string(kernel_min_count)},
          {"pin_dram", pin_dram ? "true" : "false"}};
}

// Life

backend::backend(const config& cfg, const nixl::backend_context& ctx)
    : st_(std::make_unique<detail::backend_state>()) {
  st_->cfg = cfg;
  st_->agent = ctx.agent_name;
  st_->socket = std::make_unique<detail::notif_socket>();
  const auto& devs = detail::devices();
  st_->devs.resize(devs.size());
  for (const auto& d : devs) {
    auto s = std::make_unique<detail::device_state>();
    s->ordinal = d.ordinal;
    s->sm_count = d.sm_count;
    s->peer.assign(devs.size(), 0);
    st_->devs[static_cast<std::size_t>(d.ordinal)] = std::move(s);
  }
  if (devs.empty())
    nixl::log::info("CUDA backend of '{}': no GPU ({}); registration will be refused",
                    ctx.agent_name, detail::no_device_reason());
}

backend::~backend() {
  if (!st_) return;
  for (auto& d : st_->devs) {
    if (!d) continue;
    detail::device_guard g(d->ordinal);
    for (auto s : d->streams) (void)NIXL_CUDA_WARN(cudaStreamDestroy(s));
  }
}

backend::backend(backend&&) noexcept = default;
backend& backend::operator=(backend&&) noexcept = default;

int backend::device_count() noexcept {
  return static_cast<int>(detail::devices().size());
}
std::string_view backend::no_device_reason() noexcept {
  return detail::no_device_reason();
}
const backend::config& backend::settings() const noexcept {
  return st_->cfg;
}

// Registration

backend::region backend::register_region(mem_kind kind, const nixl::reg_desc& d) {
  if (device_count() == 0)
    raise(status::not_supported, "CUDA backend: cannot register {} at {}: {}", kind, hex(d.addr),
          no_device_reason());
  if (kind != mem_kind::vram && kind != mem_kind::dram)
    raise(status::not_supported, "CUDA backend: cannot register {} memory; it moves vram and dram",
          kind);
  if (d.len == 0 || d.addr == 0)
    raise(status::invalid_param,
          "CUDA backend: cannot register {} {} of length {}; give a "
          "non-null address and a length > 0",
          kind, hex(d.addr), d.len);
  region r;
  r.kind = kind;
  r.addr = d.addr;
  r.len = d.len;
  const auto* p = reinterpret_cast<const void*>(d.addr);
  const auto& me = detail::self();
  detail::uuid gpu{};
  std::uintptr_t alloc_base = 0;
  std::size_t alloc_size = 0;
  std::array<char, CUDA_IPC_HANDLE_SIZE> handle{};
  std::uint8_t flags = 0;

  if (kind == mem_kind::vram) {
    if (d.dev >= static_cast<std::uint64_t>(device_count()))
      raise(status::invalid_param,
            "CUDA backend: VRAM descriptor {} names GPU {}, but this process "
            "sees {} GPU(s); dev must be a CUDA device ordinal",
            hex(d.addr), d.dev, device_count());
    const int dev = static_cast<int>(d.dev);
    detail::device_guard g(dev);
    cudaPointerAttributes a{};
    NIXL_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
      raise(status::invalid_param,
            "CUDA backend: {} is not GPU memory (cudaPointerGetAttributes "
            "type {}); register host memory as DRAM",
            hex(d.addr), static_cast<int>(a.type));
    if (a.type == cudaMemoryTypeDevice && a.device != dev)
      raise(status::invalid_param,
            "CUDA backend: {} lies on GPU {}, but the descriptor says dev {}", hex(d.addr),
            a.device, dev);
    r.device = dev;
    r.access = d.addr;
    r.device_access = true;
    if (a.type == cudaMemoryTypeDevice) {
      detail::allocation_range(p, alloc_base, alloc_size);
      if (d.addr - alloc_base + d.len > alloc_size)
        raise(status::invalid_param,
              "CUDA backend: VRAM {} + {} bytes runs past the end of its "
              "allocation ({} + {}); register ranges inside one allocation",
              hex(d.addr), d.len, hex(alloc_base), alloc_size);
      cudaIpcMemHandle_t h{};
      const cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(alloc_base));
      if (e == cudaSuccess) {
        std::memcpy(handle.data(), h.reserved, handle.size());
        flags |= flag_ipc;
      } else {
        (void)cudaGetLastError();
        nixl::log::info(
            "CUDA backend: VRAM {} cannot be shared with other processes "
            "(cudaIpcGetMemHandle: {}); it serves this process only",
            hex(d.addr), detail::describe(e));
      }
    } else {
      alloc_base = d.addr;
      alloc_size = d.len;
    }
    gpu = detail::devices()[static_cast<std::size_t>(dev)].id;
  } else {
    cudaPointerAttributes a{};
    NIXL_CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    if (a.type == cudaMemoryTypeDevice)
      raise(status::invalid_param, "CUDA backend: {} is GPU memory of GPU {}; register it as VRAM",
            hex(d.addr), a.device);
    // Pinning is shared by every backend of the process (two agents may register the same
    // buffer): an exact range already pinned here gains a reference; a range overlapping one
    // pinned here stays unpinned and off the kernel path, since the other owner may unpin it.
    const pin_result pr =
        pin(d.addr, d.len, a.type == cudaMemoryTypeUnregistered && st_->cfg.pin_dram);
    r.pinned_here = pr == pin_result::pinned;
    r.access = d.addr;
    std::uintptr_t dp = 0;
    if (pr != pin_result::overlap && host_device_pointer(p, dp)) {
      // Both ends must be pinned for kernels to reach the whole range.
      std::uintptr_t dp_end = 0;
      if (host_device_pointer(reinterpret_cast<const char*>(p) + d.len - 1, dp_end) &&
          dp_end == dp + d.len - 1) {
        r.access = dp;
        r.device_access = true;
      }
    }
    if (r.device_access) flags |= flag_device_access;
    alloc_base = d.addr;
    alloc_size = d.len;
  }

  detail::writer w;
  w.u32(region_magic);
  w.u8(wire_version);
  w.u8(static_cast<std::uint8_t>(kind));
  w.u8(flags);
  w.u8(0);
  w.bytes(me.boot_id.data(), 16);
  w.u64(me.process_token);
  w.bytes(gpu.data(), 16);
  w.u64(d.addr);
  w.u64(d.len);
  w.u64(d.addr - alloc_base);
  w.u64(alloc_size);
  w.bytes(handle.data(), handle.size());
  r.blob = std::move(w.out);
  return r;
}

void backend::deregister_region(region& r) noexcept {
  if (r.pinned_here) {
    unpin(r.addr, r.len);
    r.pinned_here = false;
  }
  r.device_access = false;
}

// Peers and remote regions

std::string backend::connection_info() const {
  const auto& me = detail::self();
  const std::string_view host = std::string_view(me.hostname).substr(0, 255);
  const std::string_view sock = st_->socket->name();
  detail::writer w;
  w.u32(detail::conn_magic);
  w.u8(detail::wire_version);
  w.u8(static_cast<std::uint8_t>(host.size()));
  w.u8(static_cast<std::uint8_t>(sock.size()));
  w.u8(0);
  w.bytes(me.boot_id.data(), 16);
  w.u64(me.process_token);
  w.bytes(host.data(), host.size());
  w.bytes(sock.data(), sock.size());
  return std::move(w.out);
}

namespace {
enum : std::uint8_t {
  unreachable_host = 1,
  unreachable_dram = 2,
  unreachable_no_ipc = 3,
  unreachable_no_gpu = 4
};

[[noreturn]] void refuse(const backend::peer& p, const backend::remote_region& rr) {
  switch (rr.unreachable) {
    case unreachable_host:
      raise(status::not_supported,
            "CUDA backend: agent '{}' runs on host '{}', not on this one "
            "('{}'); the CUDA backend moves data within one host: reach it through UCX",
            p.agent, p.host, detail::self().hostname);
    case unreachable_dram:
      raise(status::not_supported,
            "CUDA backend: DRAM {} belongs to agent '{}' in another "
            "process; CUDA IPC shares GPU memory only. Move it with UCX, or register a VRAM "
            "buffer on that side",
            hex(rr.addr), p.agent);
    case unreachable_no_ipc:
      raise(status::not_supported,
            "CUDA backend: VRAM {} of agent '{}' cannot be shared across "
            "processes (its owner could not export a CUDA IPC handle: memory from cuMemCreate "
            "or managed memory); allocate it with cudaMalloc",
            hex(rr.addr), p.agent);
    default:
      raise(status::not_supported, "CUDA backend: cannot map VRAM {} of agent '{}': {}",
            hex(rr.addr), p.agent, detail::no_device_reason());
  }
}
}  // namespace

backend::peer backend::load_peer(std::string_view agent, std::span<const std::byte> info) {
  detail::reader r{info};
  const auto magic = r.u32();
  const auto version = r.u8();
  const auto host_len = r.u8();
  const auto sock_len = r.u8();
  (void)r.u8();
  detail::uuid boot{};
  r.bytes(boot.data(), 16);
  const auto token = r.u64();
  std::string host = r.str(host_len);
  std::string sock = r.str(sock_len);
  if (!r.ok || r.pos != info.size() || magic != detail::conn_magic || sock_len > 100 ||
      sock_len == 0)
    raise(status::invalid_param,
          "CUDA backend: connection info of agent '{}' is malformed ({} "
          "bytes); it must come from a CUDA backend of this library",
          agent, info.size());
  if (version != detail::wire_version)
    raise(status::mismatch,
          "CUDA backend: agent '{}' speaks CUDA wire version {}, this build {}; "
          "use the same library version on both sides",
          agent, version, detail::wire_version);
  peer p;
  p.agent = std::string(agent);
  p.host = std::move(host);
  p.same_host = boot == detail::self().boot_id;
  p.same_process = p.same_host && token == detail::self().process_token;
  p.socket = detail::notif_socket::address_of(sock);
  if (!p.same_host)
    nixl::log::info(
        "CUDA backend: agent '{}' is on another host ('{}'); the CUDA backend will "
        "not move data to it",
        agent, p.host);
  return p;
}

void backend::unload_peer(peer& p) noexcept {
  p.same_host = false;
}

backend::peer backend::self_peer() {
  peer p;
  p.agent = st_->agent;
  p.host = detail::self().hostname;
  p.same_host = true;
  p.same_process = true;
  p.socket = detail::notif_socket::address_of(st_->socket->name());
  return p;
}

backend::remote_region backend::load_local(const region& r) {
  remote_region rr;
  rr.kind = r.kind;
  rr.addr = r.addr;
  rr.len = r.len;
  rr.device = r.device;
  rr.owner_gpu = r.kind == mem_kind::vram;
  rr.access = r.access;
  rr.device_access = r.device_access;
  return rr;
}

void backend::unload_region(remote_region& r) noexcept {
  if (r.ipc_base != nullptr) {
    detail::ipc_close(r.ipc_base);
    r.ipc_base = nullptr;
  }
  for (auto& [dev, base] : r.ipc_more) detail::ipc_close(base);
  r.ipc_more.clear();
  r.access = 0;
}

backend::remote_region backend::unpack(peer& p, mem_kind kind, const nixl::desc& d,
                                       std::span<const std::byte> data) {
  detail::reader r{data};
  const auto magic = r.u32();
  const auto version = r.u8();
  const auto k = r.u8();
  const auto flags = r.u8();
  (void)r.u8();
  detail::uuid boot{}, gpu{};
  r.bytes(boot.data(), 16);
  const auto token = r.u64();
  r.bytes(gpu.data(), 16);
  const auto addr = r.u64();
  const auto len = r.u64();
  const auto offset = r.u64();
  const auto alloc_size = r.u64();
  std::array<char, CUDA_IPC_HANDLE_SIZE> handle{};
  r.bytes(handle.data(), handle.size());
  if (!r.ok || r.pos != data.size() || data.size() != detail::region_blob_size ||
      magic != detail::region_magic || version != detail::wire_version)
    raise(status::invalid_param,
          "CUDA backend: public data of a region of agent '{}' is "
          "malformed ({} bytes)",
          p.agent, data.size());
  if (k != static_cast<std::uint8_t>(kind) || addr != d.addr || len != d.len ||
      offset > alloc_size || len > alloc_size - offset)
    raise(status::mismatch, "CUDA backend: public data of agent '{}' does not describe {} {} + {}",
          p.agent, kind, hex(d.addr), d.len);
  remote_region rr;
  rr.kind = kind;
  rr.addr = addr;
  rr.len = len;
  if (boot != detail::self().boot_id) {
    rr.unreachable = unreachable_host;
    return rr;
  }
  const bool same_process = token == detail::self().process_token;
  if (kind == mem_kind::dram) {
    if (!same_process) {
      rr.unreachable = unreachable_dram;
      return rr;
    }
    rr.access = addr;
    std::uintptr_t dp = 0;
    if ((flags & detail::flag_device_access) &&
        host_device_pointer(reinterpret_cast<void*>(addr), dp)) {
      rr.access = dp;
      rr.device_access = true;
    }
    return rr;
  }
  const int ordinal = detail::ordinal_of(gpu);
  if (same_process) {
    if (ordinal < 0)
      raise(status::not_found, "CUDA backend: GPU {} of agent '{}' is unknown here",
            detail::to_string(gpu), p.agent);
    rr.device = ordinal;
    rr.owner_gpu = true;
    rr.access = addr;
    rr.device_access = true;
    return rr;
  }
  if (!(flags & detail::flag_ipc)) {
    rr.unreachable = unreachable_no_ipc;
    return rr;
  }
  if (device_count() == 0) {
    rr.unreachable = unreachable_no_gpu;
    return rr;
  }
  // Map on the owning GPU when this process sees it, else on GPU 0 (peer access is enabled
  // lazily by the driver).
  rr.device = ordinal >= 0 ? ordinal : 0;
  rr.owner_gpu = ordinal >= 0;
  rr.ipc_base = detail::ipc_open(handle, rr.device);
  rr.access = reinterpret_cast<std::uintptr_t>(rr.ipc_base) + offset;
  rr.ipc_handle = handle;
  rr.ipc_offset = offset;
  rr.device_access = true;
  return rr;
}

// Transfers

// The GPU that executes a copy: for VRAM <-> VRAM the one holding the source, so that data is
// pushed over NVLink (stores, measured a little faster than pulls) when this process sees that
// GPU; else the local GPU; for VRAM <-> DRAM the GPU side.
int backend::exec_device(const region& l, const remote_region& r, xfer_op op) const {
  if (l.kind == mem_kind::vram && r.kind == mem_kind::vram && op == xfer_op::read && r.owner_gpu)
    return r.device;
  if (l.kind == mem_kind::vram) return l.device;
  if (r.kind == mem_kind::vram) return r.device;
  raise(status::not_supported, "CUDA backend: DRAM -> DRAM needs no GPU; use another backend");
}

// The address through which GPU `device` reaches remote region `r`. A peer process's memory
// is mapped on its owning GPU at load (or GPU 0 when the owner is not visible here). A copy
// issued on another GPU's stream into that mapping went through a staged path: 38 GB/s instead
// of 390 between two H200s, and the batch kernel faulted (docs/cuda.md, "Across processes").
// So the memory is mapped again on the executing GPU, by the first request that runs there,
// and every copy runs in the context that holds its mapping.
std::uintptr_t backend::access_on(const remote_region& r, int device) const {
  if (r.ipc_base == nullptr || device == r.device) return r.access;
  {
    std::lock_guard lk(st_->mu);
    for (const auto& [dev, base] : r.ipc_more)
      if (dev == device) return reinterpret_cast<std::uintptr_t>(base) + r.ipc_offset;
  }
  void* base = detail::ipc_open(r.ipc_handle, device);
  std::lock_guard lk(st_->mu);
  for (const auto& [dev, b] : r.ipc_more)
    if (dev == device) {  // another thread mapped it meanwhile: keep one reference
      detail::ipc_close(base);
      return reinterpret_cast<std::uintptr_t>(b) + r.ipc_offset;
    }
  r.ipc_more.emplace_back(device, base);
  return reinterpret_cast<std::uintptr_t>(base) + r.ipc_offset;
}

bool backend::ensure_peer_access(int from, int to) {
  if (from == to || to < 0) return true;
  std::lock_guard lk(st_->mu);
  auto& s = *st_->devs[static_cast<std::size_t>(from)];
  auto& slot = s.peer[static_cast<std::size_t>(to)];
  if (slot != 0) return slot > 0;
  int can = 0;
  NIXL_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) {
    slot = -1;
    nixl::log::info(
        "CUDA backend: GPU {} cannot reach GPU {} directly; copies between them go "
        "through the copy engines, staged by the driver",
        from, to);
    return false;
  }
  detail::device_guard g(from);
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
    detail::throw_cuda(e, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
  (void)cudaGetLastError();
  slot = 1;
  return true;
}

CUstream_st* backend::take_stream(int device) {
  auto& s = *st_->devs[static_cast<std::size_t>(device)];
  {
    std::lock_guard lk(st_->mu);
    if (s.streams.empty()) {
      detail::device_guard g(device);
      for (unsigned i = 0; i < st_->cfg.streams_per_gpu; ++i) {
        cudaStream_t st = nullptr;
        NIXL_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        s.streams.push_back(st);
      }
    }
  }
  return s.streams[s.next.fetch_add(1, std::memory_order_relaxed) % s.streams.size()];
}

void backend::prepare(request& req, xfer_op op, std::span<const nixl::bound_desc<region>> local,
                      std::span<const nixl::bound_desc<remote_region>> remote, peer& p) {
  if (local.size() != remote.size())
    raise(status::invalid_param, "CUDA backend: {} local descriptors but {} remote ones",
          local.size(), remote.size());
  if (!p.same_host)
    raise(status::not_supported,
          "CUDA backend: agent '{}' runs on host '{}'; the CUDA backend "
          "moves data within one host: use UCX",
          p.agent, p.host);
  (void)release(req);
  request out;
  struct plan {
    int device;
    std::vector<copy_item> small, large;
  };
  std::vector<plan> plans;
  const auto& cfg = st_->cfg;

  for (std::size_t i = 0; i < local.size(); ++i) {
    const auto& l = local[i];
    const auto& r = remote[i];
    if (l.region == nullptr || r.region == nullptr)
      raise(status::invalid_param, "CUDA backend: descriptor {} is not bound to a region", i);
    const region& lr = *l.region;
    const remote_region& rr = *r.region;
    if (l.len != r.len)
      raise(status::invalid_param, "CUDA backend: descriptor {}: local length {} != remote {}", i,
            l.len, r.len);
    if (l.addr < lr.addr || l.len > lr.len || l.addr - lr.addr > lr.len - l.len)
      raise(status::not_found,
            "CUDA backend: local descriptor {} ({} + {}) lies outside its "
            "region ({} + {})",
            i, hex(l.addr), l.len, hex(lr.addr), lr.len);
    if (r.addr < rr.addr || r.len > rr.len || r.addr - rr.addr > rr.len - r.len)
      raise(status::not_found,
            "CUDA backend: remote descriptor {} ({} + {}) lies outside its "
            "region ({} + {})",
            i, hex(r.addr), r.len, hex(rr.addr), rr.len);
    if (rr.unreachable != 0) refuse(p, rr);
    if (rr.access == 0)
      raise(status::not_found, "CUDA backend: remote region {} of agent '{}' is not mapped",
            hex(rr.addr), p.agent);
    if (l.len == 0) continue;
    const int dev = exec_device(lr, rr, op);
    const std::uint64_t lp = lr.access + (l.addr - lr.addr);
    const std::uint64_t rp = access_on(rr, dev) + (r.addr - rr.addr);
    copy_item it = op == xfer_op::write ? copy_item{lp, rp, l.len} : copy_item{rp, lp, l.len};
    // The kernel needs both ends reachable from the executing GPU.
    const int other = lr.kind == mem_kind::vram && lr.device == dev ? rr.device : lr.device;
    const bool kernel_ok = cfg.kernel_max_bytes > 0 && l.len <= cfg.kernel_max_bytes &&
                           lr.device_access && rr.device_access && ensure_peer_access(dev, other);
    if (lr.kind == mem_kind::vram && rr.kind == mem_kind::vram)
      (void)ensure_peer_access(dev, other);
    auto pl =
        std::find_if(plans.begin(), plans.end(), [&](const plan& x) { return x.device == dev; });
    if (pl == plans.end()) pl = plans.insert(plans.end(), plan{dev, {}, {}});
    auto& list = kernel_ok ? pl->small : pl->large;
    // Merge with the previous copy when both ends continue it.
    if (!list.empty() && list.back().src + list.back().len == it.src &&
        list.back().dst + list.back().len == it.dst &&
        (!kernel_ok || list.back().len + it.len <= cfg.kernel_max_bytes)) {
      list.back().len += it.len;
    } else {
      list.push_back(it);
    }
    out.bytes += l.len;
  }

  for (auto& pl : plans) {
    lane ln;
    ln.device = pl.device;
    if (!pl.small.empty() && pl.small.size() < cfg.kernel_min_count) {
      pl.large.insert(pl.large.end(), pl.small.begin(), pl.small.end());
      pl.small.clear();
    }
    detail::device_guard g(pl.device);
    if (!pl.small.empty()) {
      std::vector<copy_item> items;
      items.reserve(pl.small.size());
      for (const auto& it : pl.small) detail::append_chunked(items, it);
      void* buf = nullptr;
      NIXL_CUDA_CHECK(cudaMalloc(&buf, items.size() * sizeof(copy_item)));
      ln.items = detail::device_buffer(buf, pl.device);
      NIXL_CUDA_CHECK(
          cudaMemcpy(buf, items.data(), items.size() * sizeof(copy_item), cudaMemcpyHostToDevice));
      ln.kernel_count = static_cast<std::uint32_t>(items.size());
      ln.grid =
          detail::copy_grid(items.size(), st_->devs[static_cast<std::size_t>(pl.device)]->sm_count);
    }
    ln.engine = std::move(pl.large);
    cudaEvent_t ev = nullptr;
    NIXL_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    ln.done = detail::event_handle(ev);
    ln.stream = take_stream(pl.device);
    out.lanes.push_back(std::move(ln));
  }
  detail::start_datagram(out.datagram, st_->agent);
  out.prefix = out.datagram.size();
  out.datagram.reserve(out.prefix + 256);
  out.target = &p;
  req = std::move(out);
}

nixl::status backend::post(request& req, nixl::notif_arg notif) noexcept {
  if (req.phase == detail::running || req.phase == detail::notifying) return status::repost_active;
  req.notify = notif.has_value();
  if (req.notify) {
    if (notif->size() > detail::max_notif_message) return status::invalid_param;
    try {
      detail::finish_datagram(req.datagram, req.prefix, *notif);
    } catch (...) {
      return status::backend;
    }
  }
  req.next_lane = 0;
  for (auto& ln : req.lanes) {
    detail::device_guard g(ln.device);
    cudaError_t e = g.ok() ? cudaSuccess : cudaErrorInvalidDevice;
    for (const auto& it : ln.engine) {
      if (e != cudaSuccess) break;
      e = cudaMemcpyAsync(reinterpret_cast<void*>(it.dst), reinterpret_cast<const void*>(it.src),
                          it.len, cudaMemcpyDefault, ln.stream);
    }
    if (e == cudaSuccess && ln.kernel_count != 0)
      e = static_cast<cudaError_t>(detail::launch_batch_copy(
          static_cast<const copy_item*>(ln.items.get()), ln.kernel_count, ln.grid, ln.stream));
    if (e == cudaSuccess) e = cudaEventRecord(ln.done.get(), ln.stream);
    if (e != cudaSuccess) {
      detail::report_cuda(e, "CUDA backend post", __FILE__, __LINE__);
      req.phase = detail::failed;
      return status::backend;
    }
  }
  req.phase = detail::running;
  return check(req);
}

nixl::status backend::check(request& req) noexcept {
  switch (req.phase) {
    case detail::idle:
      return status::not_posted;
    case detail::done:
      return status::success;
    case detail::failed:
      return status::backend;
    default:
      break;
  }
  if (req.phase == detail::running) {
    for (; req.next_lane < req.lanes.size(); ++req.next_lane) {
      const cudaError_t e = cudaEventQuery(req.lanes[req.next_lane].done.get());
      if (e == cudaErrorNotReady) return status::in_progress;
      if (e != cudaSuccess) {
        detail::report_cuda(e, "CUDA backend check: cudaEventQuery", __FILE__, __LINE__);
        req.phase = detail::failed;
        return status::backend;
      }
    }
    req.phase = req.notify ? detail::notifying : detail::done;
  }
  if (req.phase == detail::notifying) {
    const int rc = st_->socket->send(req.target->socket, req.datagram);
    if (rc == EAGAIN) return status::in_progress;  // the target's queue is full: retry
    if (rc != 0) {
      req.phase = detail::failed;
      nixl::log::error("CUDA backend: notification to '{}' failed: {}", req.target->agent,
                       std::strerror(rc));
      return rc == ECONNREFUSED || rc == ENOENT ? status::remote_disconnect : status::backend;
    }
    req.phase = detail::done;
  }
  return status::success;
}

nixl::status backend::release(request& req) noexcept {
  // Copies cannot be cancelled: the event handles wait for what is in flight.
  req.lanes.clear();
  req.phase = detail::idle;
  req.target = nullptr;
  return status::success;
}

// Notifications

void backend::notify(peer& p, std::string_view msg) {
  if (!p.same_host)
    raise(status::not_supported,
          "CUDA backend: agent '{}' runs on host '{}'; notifications of "
          "the CUDA backend stay within one host",
          p.agent, p.host);
  if (msg.size() > detail::max_notif_message)
    raise(status::invalid_param, "CUDA backend: notification of {} bytes exceeds the limit of {}",
          msg.size(), detail::max_notif_message);
  std::string d;
  detail::start_datagram(d, st_->agent);
  detail::finish_datagram(d, d.size(), msg);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    const int rc = st_->socket->send(p.socket, d);
    if (rc == 0) return;
    if (rc != EAGAIN)
      raise(rc == ECONNREFUSED || rc == ENOENT ? status::remote_disconnect : status::backend,
            "CUDA backend: notification to '{}': sendto: {}", p.agent, std::strerror(rc));
    if (std::chrono::steady_clock::now() > deadline)
      raise(status::backend,
            "CUDA backend: notification to '{}': its queue stayed full for 2 s; "
            "the target must call get notifications",
            p.agent);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void backend::take_notifications(nixl::notif_map& out) {
  st_->socket->drain(out);
}

}  // namespace nixl::cuda
