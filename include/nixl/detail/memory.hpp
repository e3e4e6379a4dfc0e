#pragma once
/// Memory kinds, descriptors and descriptor lists.

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <nixl/detail/enum_names.hpp>
#include <nixl/detail/status.hpp>

namespace nixl {

/// Kind of memory a descriptor points into. Same numbering as NIXL's `nixl_mem_t`.
enum class mem_kind : std::uint8_t { dram = 0, vram = 1, block = 2, object = 3, file = 4 };

inline constexpr std::size_t mem_kind_count = 5;

/// Names of the kinds: lower-case ("dram", ...) and NIXL's ("DRAM_SEG", ...).
inline constexpr auto mem_kind_names =
    detail::make_enum_names<mem_kind>({"dram", "vram", "block", "object", "file"}, "invalid");
inline constexpr auto mem_kind_nixl_names = detail::make_enum_names<mem_kind>(
    {"DRAM_SEG", "VRAM_SEG", "BLK_SEG", "OBJ_SEG", "FILE_SEG"}, "BAD_SEG");

/// Lower-case name of a kind ("dram", "vram", "block", "object", "file").
constexpr std::string_view to_string(mem_kind k) noexcept {
  return mem_kind_names(k);
}

/// NIXL's name of a kind ("DRAM_SEG", ...).
constexpr std::string_view nixl_name(mem_kind k) noexcept {
  return mem_kind_nixl_names(k);
}

/// True when `v` is the value of a known kind (for bytes read from a peer).
constexpr bool valid_kind(std::uint8_t v) noexcept {
  return v < mem_kind_count;
}

/// Kind tags for the compile-time path.
struct dram_t {
  static constexpr mem_kind value = mem_kind::dram;
};
struct vram_t {
  static constexpr mem_kind value = mem_kind::vram;
};
struct block_t {
  static constexpr mem_kind value = mem_kind::block;
};
struct object_t {
  static constexpr mem_kind value = mem_kind::object;
};
struct file_t {
  static constexpr mem_kind value = mem_kind::file;
};
inline constexpr dram_t dram{};
inline constexpr vram_t vram{};
inline constexpr block_t block{};
inline constexpr object_t object{};
inline constexpr file_t file{};

/// A compile-time list of kind tags.
template <class... Kinds>
struct kind_list {};

/// A kind tag: an empty type with a `mem_kind value`.
template <class K>
concept kind_tag = std::is_empty_v<K> && requires {
  { K::value } -> std::convertible_to<mem_kind>;
};

/// True when tag `K` is in `List`.
template <class K, class List>
inline constexpr bool kind_in = false;
template <class K, class... Ks>
inline constexpr bool kind_in<K, kind_list<Ks...>> = (std::is_same_v<K, Ks> || ...);

/// True when run-time kind `k` is in `List`.
template <class... Ks>
constexpr bool contains(kind_list<Ks...>, mem_kind k) noexcept {
  return ((Ks::value == k) || ...);
}

/// Calls `f(tag)` with the kind tag of run-time kind `k`. The one place that turns a run-time
/// kind into a compile-time one. Throws `nixl::error(invalid_param)` for an unknown kind.
template <class F>
decltype(auto) visit_kind(mem_kind k, F&& f) {
  switch (k) {
    case mem_kind::dram:
      return f(dram);
    case mem_kind::vram:
      return f(vram);
    case mem_kind::block:
      return f(block);
    case mem_kind::object:
      return f(object);
    case mem_kind::file:
      return f(file);
  }
  raise(status::invalid_param,
        "visit_kind: unknown memory kind {}; use dram, vram, block, object or file",
        static_cast<int>(k));
}

/// Address range on a device: 24 bytes, trivially copyable. For file, block and object kinds
/// `addr` is an offset and `dev` the file descriptor, volume or key id.
struct desc {
  std::uintptr_t addr = 0;
  std::size_t len = 0;
  std::uint64_t dev = 0;

  /// One past the last byte (saturating).
  constexpr std::uintptr_t end() const noexcept {
    return len > std::numeric_limits<std::uintptr_t>::max() - addr
               ? std::numeric_limits<std::uintptr_t>::max()
               : addr + len;
  }
  /// True when `q` lies inside this range on the same device.
  constexpr bool covers(const desc& q) const noexcept {
    return dev == q.dev && q.addr >= addr && q.end() <= end() && q.addr <= end();
  }
  /// True when both ranges share at least one byte on the same device.
  constexpr bool overlaps(const desc& q) const noexcept {
    return dev == q.dev && addr < q.end() && q.addr < end();
  }
  friend constexpr bool operator==(const desc&, const desc&) = default;
  /// NIXL's order: device, then address, then length.
  friend constexpr std::strong_ordering operator<=>(const desc& a, const desc& b) noexcept {
    if (auto c = a.dev <=> b.dev; c != 0) return c;
    if (auto c = a.addr <=> b.addr; c != 0) return c;
    return a.len <=> b.len;
  }
};
static_assert(sizeof(desc) == 24 && std::is_trivially_copyable_v<desc>);

/// Registration entry: a range plus a metadata string (file path, object key, ...).
struct reg_desc : desc {
  std::string meta;
  friend bool operator==(const reg_desc&, const reg_desc&) = default;
};

/// A descriptor resolved against a registered region: what a backend sees in `prepare`.
template <class Region>
struct bound_desc : desc {
  const Region* region = nullptr;
};

/// One-sided operation: `read` pulls remote into local, `write` pushes local to remote.
enum class xfer_op : std::uint8_t { read = 0, write = 1 };

constexpr std::string_view to_string(xfer_op op) noexcept {
  return op == xfer_op::read ? "READ" : "WRITE";
}

/// NIXL-style backend parameters: every value is a string.
using params = std::map<std::string, std::string, std::less<>>;

/// Notifications received, by sender agent name, in arrival order.
using notif_map = std::unordered_map<std::string, std::vector<std::string>>;

/// Notification to deliver after a transfer, if any (an empty message is a valid notification).
using notif_arg = std::optional<std::string_view>;

/// A run-time-kinded list of descriptors (`desc` for transfers, `reg_desc` for registration).
template <class Desc>
class basic_list {
 public:
  using value_type = Desc;

  basic_list() = default;
  explicit basic_list(mem_kind kind) : kind_(kind) {}
  basic_list(mem_kind kind, std::initializer_list<Desc> d) : kind_(kind), descs_(d) {}
  basic_list(mem_kind kind, std::vector<Desc> d) : kind_(kind), descs_(std::move(d)) {}

  mem_kind kind() const noexcept { return kind_; }
  std::size_t size() const noexcept { return descs_.size(); }
  bool empty() const noexcept { return descs_.empty(); }
  const Desc& operator[](std::size_t i) const noexcept { return descs_[i]; }
  Desc& operator[](std::size_t i) noexcept { return descs_[i]; }
  /// Element `i`; throws `nixl::error(invalid_param)` when out of range.
  const Desc& at(std::size_t i) const {
    if (i >= descs_.size())
      raise(status::invalid_param, "descriptor index {} out of range (list holds {})", i,
            descs_.size());
    return descs_[i];
  }
  auto begin() const noexcept { return descs_.begin(); }
  auto end() const noexcept { return descs_.end(); }
  auto begin() noexcept { return descs_.begin(); }
  auto end() noexcept { return descs_.end(); }
  void push_back(Desc d) { descs_.push_back(std::move(d)); }
  template <class... A>
  Desc& emplace_back(A&&... a) {
    return descs_.emplace_back(Desc{std::forward<A>(a)...});
  }
  void reserve(std::size_t n) { descs_.reserve(n); }
  void resize(std::size_t n) { descs_.resize(n); }
  void clear() noexcept { descs_.clear(); }
  /// Removes element `i`; throws `nixl::error(invalid_param)` when out of range.
  void erase(std::size_t i) {
    (void)at(i);
    descs_.erase(descs_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  /// Index of the first element equal (as a range) to `d`, if any.
  std::optional<std::size_t> index_of(const desc& d) const noexcept {
    for (std::size_t i = 0; i < descs_.size(); ++i)
      if (static_cast<const desc&>(descs_[i]) == d) return i;
    return std::nullopt;
  }
  std::span<const Desc> span() const noexcept { return descs_; }
  const std::vector<Desc>& vector() const noexcept { return descs_; }
  /// The same ranges without metadata strings.
  basic_list<desc> trim() const {
    basic_list<desc> out(kind_);
    out.reserve(descs_.size());
    for (const auto& d : descs_) out.push_back(static_cast<const desc&>(d));
    return out;
  }
  friend bool operator==(const basic_list&, const basic_list&) = default;

 protected:
  mem_kind kind_ = mem_kind::dram;
  std::vector<Desc> descs_;
};

/// Run-time-kinded transfer list (what the Python module and config files use).
using xfer_dlist = basic_list<desc>;
/// Run-time-kinded registration list.
using reg_dlist = basic_list<reg_desc>;

/// A list whose kind is a compile-time tag: the static path.
template <kind_tag Kind, class Desc>
class typed_list : public basic_list<Desc> {
 public:
  using kind_type = Kind;
  typed_list() : basic_list<Desc>(Kind::value) {}
  typed_list(std::initializer_list<Desc> d) : basic_list<Desc>(Kind::value, d) {}
  explicit typed_list(std::vector<Desc> d) : basic_list<Desc>(Kind::value, std::move(d)) {}
  explicit typed_list(Kind) : typed_list() {}
};

/// Transfer list of kind `Kind`, e.g. `xfer_list<dram_t>`.
template <kind_tag Kind>
using xfer_list = typed_list<Kind, desc>;
/// Registration list of kind `Kind`.
template <kind_tag Kind>
using reg_list = typed_list<Kind, reg_desc>;

/// One row of a strided list: `count` blocks of `len` bytes each, block k at `addr + k*stride`
/// (NIXL 1.5's nixlStrideDesc, the same 40 bytes). `stride == len` is a dense run.
struct stride_desc {
  std::uintptr_t addr = 0;
  std::size_t len = 0;
  std::uint64_t dev = 0;
  std::size_t stride = 0;
  std::size_t count = 0;

  /// True when the row can be prepared: `count > 0`, `len > 0`, `stride >= len` and its span
  /// fits in the address space.
  constexpr bool valid() const noexcept {
    if (count == 0 || len == 0 || stride < len) return false;
    const auto max = std::numeric_limits<std::uintptr_t>::max();
    return (count - 1) <= (max - len) / stride && addr <= max - ((count - 1) * stride + len);
  }
  /// The bytes the run touches: `[addr, addr + (count-1)*stride + len)` (for a valid row).
  constexpr desc span() const noexcept { return {addr, (count - 1) * stride + len, dev}; }
  /// Block `k` of the run.
  constexpr desc block(std::size_t k) const noexcept { return {addr + k * stride, len, dev}; }
  friend constexpr bool operator==(const stride_desc&, const stride_desc&) = default;
};
static_assert(sizeof(stride_desc) == 40 && std::is_trivially_copyable_v<stride_desc>);

/// A run-time-kinded list of strided rows. It stands for the blocks of its rows in row order:
/// `size()` is their number (kept as rows are added, never by expanding), `row_count()` the
/// rows'. A prepared strided list indexes those blocks as if each had been listed one by one.
class strided_dlist {
 public:
  using value_type = stride_desc;

  strided_dlist() = default;
  explicit strided_dlist(mem_kind kind) : kind_(kind) {}
  strided_dlist(mem_kind kind, std::initializer_list<stride_desc> rows) : kind_(kind) {
    for (const auto& r : rows) push_back(r);
  }
  strided_dlist(mem_kind kind, std::vector<stride_desc> rows)
      : kind_(kind), rows_(std::move(rows)) {
    for (const auto& r : rows_) blocks_ += r.count;
  }

  mem_kind kind() const noexcept { return kind_; }
  /// Number of blocks (the sum of the rows' counts).
  std::size_t size() const noexcept { return blocks_; }
  std::size_t row_count() const noexcept { return rows_.size(); }
  bool empty() const noexcept { return rows_.empty(); }
  const stride_desc& operator[](std::size_t row) const noexcept { return rows_[row]; }
  std::span<const stride_desc> rows() const noexcept { return rows_; }
  auto begin() const noexcept { return rows_.begin(); }
  auto end() const noexcept { return rows_.end(); }
  void push_back(const stride_desc& r) {
    rows_.push_back(r);
    blocks_ += r.count;
  }
  stride_desc& emplace_back(std::uintptr_t addr, std::size_t len, std::uint64_t dev,
                            std::size_t stride, std::size_t count) {
    push_back({addr, len, dev, stride, count});
    return rows_.back();
  }
  void reserve(std::size_t rows) { rows_.reserve(rows); }
  void clear() noexcept {
    rows_.clear();
    blocks_ = 0;
  }
  /// The same blocks listed one by one (for callers that need the expanded form).
  basic_list<desc> expand() const {
    basic_list<desc> out(kind_);
    out.reserve(blocks_);
    for (const auto& r : rows_)
      for (std::size_t k = 0; k < r.count; ++k) out.push_back(r.block(k));
    return out;
  }
  friend bool operator==(const strided_dlist&, const strided_dlist&) = default;

 protected:
  mem_kind kind_ = mem_kind::dram;
  std::vector<stride_desc> rows_;
  std::size_t blocks_ = 0;
};

/// A strided list whose kind is a compile-time tag, e.g. `strided_list<vram_t>`.
template <kind_tag Kind>
class strided_list : public strided_dlist {
 public:
  using kind_type = Kind;
  strided_list() : strided_dlist(Kind::value) {}
  strided_list(std::initializer_list<stride_desc> rows) : strided_dlist(Kind::value, rows) {}
  explicit strided_list(std::vector<stride_desc> rows)
      : strided_dlist(Kind::value, std::move(rows)) {}
};

/// True for file, block and object kinds, where a registered length of 0 means "unbounded".
constexpr bool unbounded_allowed(mem_kind k) noexcept {
  return k == mem_kind::file || k == mem_kind::block || k == mem_kind::object;
}

}  // namespace nixl

template <>
struct fmt::formatter<nixl::mem_kind> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(nixl::mem_kind k, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(nixl::to_string(k), ctx);
  }
};
template <>
struct fmt::formatter<nixl::xfer_op> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(nixl::xfer_op k, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(nixl::to_string(k), ctx);
  }
};
