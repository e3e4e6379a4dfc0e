// What GDS and GDS_MT share: registration of files (path mode, one cuFile handle per
// descriptor) and buffers, queries, and the cutting of descriptor pairs into chunks.

#include <nixl/backends/gds/check.hpp>
#include <nixl/backends/gds/detail/common.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <nixl/log.hpp>

namespace nixl::gds::detail {
namespace {

/// Why cuFile may refuse a file, for the message: tmpfs and other file systems it cannot use.
std::string file_hint(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == TMPFS_MAGIC)
    return "the file is on tmpfs, which cuFile cannot use; put it on ext4 or xfs (such as "
           "/tmp on most hosts, not /dev/shm)";
  return "cuFile refuses this file: it needs a local ext4 or xfs file (or a file system of "
         "GPUDirect Storage); without nvidia-fs, compatibility mode must be on "
         "(allow_compat_mode in cufile.json), and error 5027 there means cuFile found no udev "
         "record of the block device (docs/gds.md)";
}

}  // namespace

namespace {

/// The cuFile backend of each agent that has one, and how many claims hold it.
struct agent_claims {
  std::mutex mu;
  std::map<std::string, std::pair<std::string, unsigned>, std::less<>> held;
};

agent_claims& claims() {
  static agent_claims c;
  return c;
}

}  // namespace

agent_claim::agent_claim(std::string_view who, std::string_view agent) : agent_(agent) {
  if (agent_.empty()) return;
  auto& c = claims();
  std::lock_guard g(c.mu);
  auto [it, fresh] = c.held.try_emplace(agent_, std::string(who), 0);
  if (!fresh && it->second.first != who)
    raise(status::not_allowed,
          "{} create_backend: agent '{}' has a {} backend already, and NIXL allows only one of GDS "
          "and GDS_MT in one agent; use one of them (or two agents)",
          who, agent_, it->second.first);
  ++it->second.second;
  held_ = true;
}

agent_claim::~agent_claim() {
  drop();
}

agent_claim::agent_claim(agent_claim&& o) noexcept
    : agent_(std::move(o.agent_)), held_(std::exchange(o.held_, false)) {}

agent_claim& agent_claim::operator=(agent_claim&& o) noexcept {
  if (this != &o) {
    drop();
    agent_ = std::move(o.agent_);
    held_ = std::exchange(o.held_, false);
  }
  return *this;
}

void agent_claim::drop() noexcept {
  if (!held_) return;
  held_ = false;
  auto& c = claims();
  std::lock_guard g(c.mu);
  if (auto it = c.held.find(agent_); it != c.held.end() && --it->second.second == 0)
    c.held.erase(it);
}

region::region(region&& o) noexcept
    : nixl::detail::file_ref(std::move(o)),
      kind(o.kind),
      fh(std::exchange(o.fh, nullptr)),
      buf(std::exchange(o.buf, nullptr)),
      device(o.device),
      owner(std::exchange(o.owner, nullptr)) {}

region& region::operator=(region&& o) noexcept {
  if (this != &o) {
    if (owner != nullptr) owner->drop(*this);
    nixl::detail::file_ref::operator=(std::move(o));
    kind = o.kind;
    fh = std::exchange(o.fh, nullptr);
    buf = std::exchange(o.buf, nullptr);
    device = o.device;
    owner = std::exchange(o.owner, nullptr);
  }
  return *this;
}

region::~region() {
  if (owner != nullptr) owner->drop(*this);
}

shared_state::shared_state(std::string_view who, std::string_view agent, std::string_view path)
    : who_(who),
      agent_(agent),
      lib_(&cufile::library::load(cufile::library_path(path), who)),
      driver_(*lib_) {}

shared_state::~shared_state() {
  std::lock_guard g(mu_);
  for (auto& [fd, h] : handles_) lib_->cuFileHandleDeregister(h.fh);
  handles_.clear();
}

cufile::CUfileHandle_t shared_state::acquire_handle(int fd, const std::string& path) {
  std::lock_guard g(mu_);
  if (auto it = handles_.find(fd); it != handles_.end()) {
    ++it->second.refs;
    return it->second.fh;
  }
  cufile::CUfileDescr_t d{};
  d.type = cufile::CU_FILE_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = fd;
  cufile::CUfileHandle_t fh = nullptr;
  const cufile::CUfileError_t e = lib_->cuFileHandleRegister(&fh, &d);
  if (e.err != cufile::CU_FILE_SUCCESS)
    throw_cufile(e, "cuFileHandleRegister(&fh, &descr)", __FILE__, __LINE__,
                 fmt::format("{} register_region: fd {}{}{}: {}", who_, fd,
                             path.empty() ? "" : " path ", path, file_hint(fd)));
  handles_.emplace(fd, handle_entry{fh, 1});
  return fh;
}

void shared_state::register_memory(region& r, const reg_desc& d) {
  if (d.len == 0) return;
  const void* p = reinterpret_cast<const void*>(d.addr);
  if (r.kind == mem_kind::vram) {
    if (!vram_built())
      raise(status::not_supported,
            "{} register_region: VRAM needs a build with the CUDA runtime (the CUDA toolkit was "
            "not found when nixl was configured); register DRAM or rebuild with CUDA",
            who_);
    r.device = static_cast<int>(d.dev);
    const int before = current_device();
    if (d.dev > static_cast<std::uint64_t>(INT_MAX) || !use_device(static_cast<int>(d.dev)))
      raise(status::invalid_param,
            "{} register_region: VRAM dev {} is not a GPU of this process; pass the CUDA device "
            "ordinal as dev",
            who_, d.dev);
    const cufile::CUfileError_t e = lib_->cuFileBufRegister(p, d.len, 0);
    if (before >= 0) use_device(before);  // the caller's thread keeps its current GPU
    if (e.err != cufile::CU_FILE_SUCCESS)
      throw_cufile(e, "cuFileBufRegister(ptr, len, 0)", __FILE__, __LINE__,
                   fmt::format("{} register_region: VRAM 0x{:x} of {} bytes on GPU {}; register "
                               "memory from cudaMalloc of that GPU",
                               who_, d.addr, d.len, d.dev));
    r.buf = p;
    return;
  }
  // DRAM: a registration lets cuFile skip a copy; without one the I/O still works.
  const cufile::CUfileError_t e = lib_->cuFileBufRegister(p, d.len, 0);
  if (e.err == cufile::CU_FILE_SUCCESS) {
    r.buf = p;
  } else {
    log::debug("{} ({}): cuFileBufRegister of DRAM 0x{:x} ({} bytes): {}; I/O goes unregistered",
               who_, agent_, d.addr, d.len, cufile::describe(e));
  }
}

region shared_state::register_region(mem_kind kind, const reg_desc& d) {
  region r;
  r.kind = kind;
  if (kind == mem_kind::dram || kind == mem_kind::vram) {
    register_memory(r, d);
    r.owner = this;
    return r;
  }
  if (kind != mem_kind::file)
    raise(status::not_supported,
          "{} register_region: memory kind {} is not supported; use dram, vram or file", who_,
          kind);
  r.owner = this;  // from here on, the region closes what it opened
  static_cast<nixl::detail::file_ref&>(r) = nixl::detail::open_file(who_, d);
  // cuFile cannot use files on tmpfs (in compatibility mode it fails them one way or another):
  // say so here, with the fix, rather than at the first transfer.
  struct statfs fs {};
  if (::fstatfs(r.fd, &fs) == 0 && static_cast<unsigned long>(fs.f_type) == TMPFS_MAGIC)
    raise(status::invalid_param,
          "{} register_region: fd {}{}{} is on tmpfs, which cuFile cannot use; put the file on "
          "ext4 or xfs (such as /tmp on most hosts, not /dev/shm)",
          who_, r.fd, r.path.empty() ? "" : " path ", r.path);
  r.fh = acquire_handle(r.fd, r.path);
  return r;
}

void shared_state::drop(region& r) noexcept {
  if (r.fh != nullptr) {
    std::lock_guard g(mu_);
    if (auto it = handles_.find(r.fd); it != handles_.end() && it->second.fh == r.fh) {
      if (--it->second.refs == 0) {
        lib_->cuFileHandleDeregister(it->second.fh);
        handles_.erase(it);
      }
    }
    r.fh = nullptr;
  }
  if (r.buf != nullptr) {
    if (r.kind == mem_kind::vram) use_device(r.device);
    NIXL_CUFILE_WARN(lib_->cuFileBufDeregister(r.buf));
    r.buf = nullptr;
  }
  r.close();
  r.owner = nullptr;
}

std::size_t shared_state::open_handles() const {
  std::lock_guard g(mu_);
  return handles_.size();
}

std::vector<std::optional<params>> shared_state::query_memory(
    std::span<const reg_desc> descs) const {
  return nixl::detail::query_files(who_, descs);
}

void report_chunk(std::string_view who, bool write, const chunk& c, long long ret) noexcept {
  try {
    std::string why;
    if (ret >= 0)
      why = fmt::format("moved {} of {} bytes{}", ret, c.size,
                        write ? "" : " (a read past the end of the file?)");
    else if (ret == -1)
      why = std::strerror(errno);
    else if (-ret >= 5000)
      why = cufile::describe({static_cast<int>(-ret), 0});
    else
      why = std::strerror(static_cast<int>(-ret));
    log::error("{}: {} of {} bytes at file offset {} ({} 0x{:x}, descriptor {}) failed: {}", who,
               write ? "write" : "read", c.size, static_cast<long long>(c.file_offset),
               c.device >= 0 ? "VRAM" : "DRAM",
               reinterpret_cast<std::uintptr_t>(c.buf) + static_cast<std::uintptr_t>(c.buf_offset),
               c.desc, why);
  } catch (...) {
  }
}

}  // namespace nixl::gds::detail
