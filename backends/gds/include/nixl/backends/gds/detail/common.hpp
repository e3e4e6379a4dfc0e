#pragma once
/// What GDS and GDS_MT share: the loaded library and open driver, registered files (one cuFile
/// handle per file descriptor) and buffers, and the cutting of descriptor pairs into chunks.

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nixl/backends/gds/detail/cufile.hpp>
#include <nixl/detail/file_region.hpp>
#include <nixl/detail/recycled.hpp>
#include <nixl/memory.hpp>
#include <nixl/status.hpp>

namespace nixl::gds::detail {

class shared_state;

/// A registered range: DRAM or VRAM (a cuFile buffer registration, when it took) or a file
/// (its descriptor, opened here in path mode, and cuFile handle). Move-only; gives its
/// registration back when destroyed.
struct region : nixl::detail::file_ref {
  mem_kind kind = mem_kind::dram;
  cufile::CUfileHandle_t fh = nullptr;
  const void* buf = nullptr;  // registered with cuFileBufRegister
  int device = -1;            // VRAM: the GPU of the buffer
  shared_state* owner = nullptr;

  region() = default;
  region(region&& o) noexcept;
  region& operator=(region&& o) noexcept;
  ~region();
};

/// The same range as a transfer target of the agent itself.
struct remote_region {
  mem_kind kind = mem_kind::dram;
  int fd = -1;
  cufile::CUfileHandle_t fh = nullptr;
  int device = -1;
  const void* buf = nullptr;  // the base cuFile registered, when it did
};

/// One cuFile read or write of at most `max_request_size` bytes.
/// The buffer is given to cuFile as the base it registered and an offset from it (as cuFile asks
/// for registered buffers), or as its own address and offset 0 when it is not registered.
struct chunk {
  void* buf;
  off_t buf_offset;
  off_t file_offset;
  std::size_t size;
  cufile::CUfileHandle_t fh;
  int device;          // >= 0 for VRAM
  std::uint32_t desc;  // the descriptor it came from, for messages
};

/// A request cut into chunks, all in one direction.
struct plan {
  nixl::detail::recycled_vector<chunk> chunks;
  bool write = false;
};

/// Agent `agent`'s one cuFile backend, held for as long as the claim lives: NIXL refuses GDS and
/// GDS_MT in one agent (`not_allowed`), and so does the second of them here. Agents are told
/// apart by name (names are unique in a process); a claim without a name holds nothing.
class agent_claim {
 public:
  /// Throws `nixl::error(not_allowed)` when the agent holds the other cuFile backend.
  agent_claim(std::string_view who, std::string_view agent);
  ~agent_claim();
  agent_claim(agent_claim&& o) noexcept;
  agent_claim& operator=(agent_claim&& o) noexcept;
  agent_claim(const agent_claim&) = delete;
  agent_claim& operator=(const agent_claim&) = delete;

 private:
  void drop() noexcept;
  std::string agent_;
  bool held_ = false;
};

/// The library, the driver, and the cuFile handles of registered files.
class shared_state {
 public:
  /// Loads the library and opens the driver; throws `nixl::error(backend)` "libcufile not
  /// found (...)" without the library.
  shared_state(std::string_view who, std::string_view agent, std::string_view lib_path);
  ~shared_state();
  shared_state(const shared_state&) = delete;
  shared_state& operator=(const shared_state&) = delete;

  const cufile::library& lib() const noexcept { return *lib_; }
  std::string_view who() const noexcept { return who_; }

  /// Registers a region (throws `nixl::error`, see the backends' register_region).
  region register_region(mem_kind kind, const reg_desc& d);
  /// Gives a region's registrations back (no-throw; the region's destructor calls it).
  void drop(region& r) noexcept;
  /// `{size, mode, mtime}` per entry, nullopt for a file that does not exist.
  std::vector<std::optional<params>> query_memory(std::span<const reg_desc> d) const;
  /// Files with a cuFile handle now (for tests).
  std::size_t open_handles() const;

 private:
  struct handle_entry {
    cufile::CUfileHandle_t fh = nullptr;
    unsigned refs = 0;
  };
  cufile::CUfileHandle_t acquire_handle(int fd, const std::string& path);
  void register_memory(region& r, const reg_desc& d);

  std::string who_;
  std::string agent_;
  const cufile::library* lib_;
  cufile::driver driver_;
  mutable std::mutex mu_;
  std::map<int, handle_entry> handles_;  // by fd
};

/// Makes the calling thread's current GPU `device` (VRAM chunks); false when it cannot.
bool use_device(int device) noexcept;
/// The calling thread's current GPU, or -1.
int current_device() noexcept;
/// True when this build handles VRAM (the CUDA runtime was found at build time).
bool vram_built() noexcept;

/// Logs a failed chunk: "GDS: read of N bytes at file offset X (descriptor d) failed: ...".
void report_chunk(std::string_view who, bool write, const chunk& c, long long ret) noexcept;

/// Cuts descriptor pairs into chunks of at most `max_request` bytes (DRAM ones at most
/// `max_dram` when that is not 0). `who` names the backend in messages. Throws
/// `nixl::error(invalid_param)` for a pair that is not memory <-> file, different lengths,
/// mixed directions or a deregistered file.
template <class Region, class Remote>
plan make_plan(std::string_view who, xfer_op op, std::span<const bound_desc<Region>> local,
               std::span<const bound_desc<Remote>> remote, std::size_t max_request,
               std::size_t max_dram = 0) {
  if (local.size() != remote.size())
    raise(status::invalid_param,
          "{} prepare: {} local and {} remote descriptors; give both the same count", who,
          local.size(), remote.size());
  if (max_request == 0) max_request = 1;
  if (max_dram == 0) max_dram = max_request;
  const std::size_t smallest = std::min(max_request, max_dram);
  plan p;
  std::size_t total = 0;
  for (std::size_t i = 0; i < local.size(); ++i) total += (local[i].len + smallest - 1) / smallest;
  p.chunks.reserve(total);
  std::optional<bool> write;
  for (std::size_t i = 0; i < local.size(); ++i) {
    const auto& l = local[i];
    const auto& r = remote[i];
    const mem_kind lk = l.region != nullptr ? l.region->kind : mem_kind::dram;
    const mem_kind rk = r.region != nullptr ? r.region->kind : mem_kind::dram;
    const bool file_remote = rk == mem_kind::file;
    const bool ok = (file_remote && (lk == mem_kind::dram || lk == mem_kind::vram)) ||
                    (lk == mem_kind::file && (rk == mem_kind::dram || rk == mem_kind::vram));
    if (!ok)
      raise(status::invalid_param,
            "{} prepare: descriptor {} pairs local {} with remote {}; {} moves dram or vram <-> "
            "file only",
            who, i, lk, rk, who);
    if (l.len != r.len)
      raise(status::invalid_param,
            "{} prepare: descriptor {} has local length {} and remote length {}", who, i, l.len,
            r.len);
    const desc& mem = file_remote ? static_cast<const desc&>(l) : static_cast<const desc&>(r);
    const desc& fil = file_remote ? static_cast<const desc&>(r) : static_cast<const desc&>(l);
    const cufile::CUfileHandle_t fh = file_remote ? r.region->fh : l.region->fh;
    const int device = file_remote ? (l.region != nullptr ? l.region->device : -1)
                                   : (r.region != nullptr ? r.region->device : -1);
    const void* reg = file_remote ? (l.region != nullptr ? l.region->buf : nullptr)
                                  : (r.region != nullptr ? r.region->buf : nullptr);
    const auto reg_base = reinterpret_cast<std::uintptr_t>(reg);
    const bool w = (op == xfer_op::read) != file_remote;  // READ with the file remote: file -> mem
    if (write && *write != w)
      raise(status::invalid_param,
            "{} prepare: descriptor {} moves in the other direction than descriptor 0", who, i);
    write = w;
    if (fh == nullptr)
      raise(status::invalid_param,
            "{} prepare: descriptor {} lies in a file region that was deregistered", who, i);
    if (fil.addr > static_cast<std::uint64_t>(LLONG_MAX) - fil.len)
      raise(status::invalid_param, "{} prepare: descriptor {}: file offset {} is out of range", who,
            i, fil.addr);
    const std::size_t step = device >= 0 ? max_request : max_dram;
    for (std::size_t off = 0; off < mem.len; off += step) {
      const std::size_t n = std::min(step, mem.len - off);
      const std::uintptr_t at = mem.addr + off;
      const bool in_reg = reg != nullptr && at >= reg_base;
      p.chunks.push_back(chunk{reinterpret_cast<void*>(in_reg ? reg_base : at),
                               static_cast<off_t>(in_reg ? at - reg_base : 0),
                               static_cast<off_t>(fil.addr + off), n, fh, device,
                               static_cast<std::uint32_t>(i)});
    }
  }
  p.write = write.value_or(false);
  return p;
}

}  // namespace nixl::gds::detail
