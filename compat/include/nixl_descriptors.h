#ifndef _NIXL_DESCRIPTORS_H
#define _NIXL_DESCRIPTORS_H
/// NIXL's descriptor classes (nixl_descriptors.h of NIXL 1.4): nixlBasicDesc (24 bytes),
/// nixlBlobDesc (plus metadata), nixlRemoteDesc (plus agent name), nixlStrideDesc (NIXL 1.5's
/// strided run) and nixlDescList.

#include <cstdint>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nixl_types.h"

/// An address range on a device. For file, block and object segments `addr` is an offset and
/// `devId` the file descriptor, volume or key id.
class nixlBasicDesc {
 public:
  uintptr_t addr = 0;
  size_t len = 0;
  uint64_t devId = 0;

  /// Zeroed (NIXL leaves the fields indeterminate; zero is one of its possible values).
  nixlBasicDesc() {}
  nixlBasicDesc(const uintptr_t& addr, const size_t& len, const uint64_t& dev_id)
      : addr(addr), len(len), devId(dev_id) {}
  /// From serialize()'s 24 bytes; any other size gives a zero descriptor.
  nixlBasicDesc(const nixl_blob_t& blob) {
    if (blob.size() == sizeof(nixlBasicDesc))
      std::memcpy(raw(), blob.data(), sizeof(nixlBasicDesc));
  }
  nixlBasicDesc(const nixlBasicDesc&) = default;
  nixlBasicDesc& operator=(const nixlBasicDesc&) = default;
  ~nixlBasicDesc() = default;

  /// Orders by devId, then addr, then len.
  bool operator<(const nixlBasicDesc& o) const noexcept {
    if (devId != o.devId) return devId < o.devId;
    if (addr != o.addr) return addr < o.addr;
    return len < o.len;
  }
  friend bool operator==(const nixlBasicDesc& a, const nixlBasicDesc& b) {
    return a.addr == b.addr && a.len == b.len && a.devId == b.devId;
  }
  friend bool operator!=(const nixlBasicDesc& a, const nixlBasicDesc& b) { return !(a == b); }

  /// Same devId and `q` lies inside this range.
  bool covers(const nixlBasicDesc& q) const noexcept {
    return devId == q.devId && q.addr >= addr && q.len <= len && q.addr - addr <= len - q.len;
  }
  /// Same devId and the ranges share at least one byte.
  bool overlaps(const nixlBasicDesc& q) const {
    return devId == q.devId && addr < q.addr + q.len && q.addr < addr + len;
  }
  /// The raw 24 bytes.
  nixl_blob_t serialize() const {
    return nixl_blob_t(reinterpret_cast<const char*>(raw()), sizeof(nixlBasicDesc));
  }
  /// Logs the descriptor at INFO.
  void print(const std::string& suffix) const;

 private:
  void* raw() noexcept { return static_cast<void*>(this); }
  const void* raw() const noexcept { return static_cast<const void*>(this); }
};
static_assert(sizeof(nixlBasicDesc) == 24, "nixlBasicDesc is NIXL's 24-byte descriptor");

/// A registration entry: a range plus metadata (file path, object key, ...).
class nixlBlobDesc : public nixlBasicDesc {
 public:
  nixl_blob_t metaInfo;

  using nixlBasicDesc::nixlBasicDesc;
  nixlBlobDesc() {}
  nixlBlobDesc(const uintptr_t& addr, const size_t& len, const uint64_t& dev_id,
               const nixl_blob_t& meta_info)
      : nixlBasicDesc(addr, len, dev_id), metaInfo(meta_info) {}
  nixlBlobDesc(const nixlBasicDesc& desc, const nixl_blob_t& meta_info)
      : nixlBasicDesc(desc), metaInfo(meta_info) {}
  /// From serialize(): 24 bytes, then the metadata; shorter input gives a zero descriptor.
  nixlBlobDesc(const nixl_blob_t& blob) {
    if (blob.size() >= sizeof(nixlBasicDesc)) {
      static_cast<nixlBasicDesc&>(*this) = nixlBasicDesc(blob.substr(0, sizeof(nixlBasicDesc)));
      metaInfo = blob.substr(sizeof(nixlBasicDesc));
    }
  }
  friend bool operator==(const nixlBlobDesc& a, const nixlBlobDesc& b) {
    return static_cast<const nixlBasicDesc&>(a) == static_cast<const nixlBasicDesc&>(b) &&
           a.metaInfo == b.metaInfo;
  }
  nixl_blob_t serialize() const { return nixlBasicDesc::serialize() + metaInfo; }
  void print(const std::string& suffix) const;
};

/// A range in another agent's memory (memory views).
struct nixlRemoteDesc : public nixlBasicDesc {
  std::string remoteAgent;

  using nixlBasicDesc::nixlBasicDesc;
  nixlRemoteDesc() {}
  nixlRemoteDesc(const uintptr_t addr, const size_t len, const uint64_t dev_id,
                 const std::string& remote_agent)
      : nixlBasicDesc(addr, len, dev_id), remoteAgent(remote_agent) {}
  nixlRemoteDesc(const nixlBasicDesc& desc, const std::string& remote_agent)
      : nixlBasicDesc(desc), remoteAgent(remote_agent) {}
  explicit nixlRemoteDesc(const nixl_blob_t& blob) {
    if (blob.size() >= sizeof(nixlBasicDesc)) {
      static_cast<nixlBasicDesc&>(*this) = nixlBasicDesc(blob.substr(0, sizeof(nixlBasicDesc)));
      remoteAgent = blob.substr(sizeof(nixlBasicDesc));
    }
  }
  nixl_blob_t serialize() const { return nixlBasicDesc::serialize() + remoteAgent; }
};

inline bool operator==(const nixlRemoteDesc& a, const nixlRemoteDesc& b) {
  return static_cast<const nixlBasicDesc&>(a) == static_cast<const nixlBasicDesc&>(b) &&
         a.remoteAgent == b.remoteAgent;
}

/// A strided run (NIXL 1.5): `count` blocks of `len` bytes each, block k at `addr + k*stride`.
/// Layout {addr, len, devId, stride, count}, 40 bytes. prepXferDlist indexes the blocks of a
/// list of them in row order, as if each block had been listed one by one.
struct nixlStrideDesc : public nixlBasicDesc {
  size_t stride = 0;  ///< byte distance between consecutive block starts (stride == len: dense)
  size_t count = 0;   ///< number of blocks in the run

  using nixlBasicDesc::nixlBasicDesc;
  nixlStrideDesc() = default;
  nixlStrideDesc(const uintptr_t& addr, const size_t& len, const uint64_t& dev_id,
                 const size_t& stride, const size_t& count)
      : nixlBasicDesc(addr, len, dev_id), stride(stride), count(count) {}
  friend bool operator==(const nixlStrideDesc& a, const nixlStrideDesc& b) {
    return static_cast<const nixlBasicDesc&>(a) == static_cast<const nixlBasicDesc&>(b) &&
           a.stride == b.stride && a.count == b.count;
  }
  friend bool operator!=(const nixlStrideDesc& a, const nixlStrideDesc& b) { return !(a == b); }
};
static_assert(sizeof(nixlStrideDesc) == 40, "nixlStrideDesc is {addr, len, devId, stride, count}");

/// A list of descriptors of one segment type. Not sorted: the order is the caller's.
template <class T>
class nixlDescList {
 protected:
  nixl_mem_t type;
  std::vector<T> descs;

 public:
  nixlDescList(const nixl_mem_t& type, const int& init_size = 0) : type(type) {
    if (init_size > 0) descs.resize(static_cast<size_t>(init_size));
  }
  /// Reads a list that serialize() wrote (an empty DRAM list when the data is not one).
  nixlDescList(nixlSerDes* deserializer);
  nixlDescList(const nixlDescList&) = default;
  nixlDescList& operator=(const nixlDescList&) = default;
  virtual ~nixlDescList() = default;

  nixl_mem_t getType() const { return type; }
  int descCount() const { return static_cast<int>(descs.size()); }
  bool isEmpty() const noexcept { return descs.empty(); }

  const T& operator[](size_t index) const { return descs[index]; }
  T& operator[](size_t index) { return descs[index]; }
  typename std::vector<T>::const_iterator begin() const { return descs.begin(); }
  typename std::vector<T>::const_iterator end() const { return descs.end(); }
  typename std::vector<T>::iterator begin() { return descs.begin(); }
  typename std::vector<T>::iterator end() { return descs.end(); }

  virtual void resize(const size_t& count) { descs.resize(count); }
  void reserve(size_t n) { descs.reserve(n); }
  void clear() { descs.clear(); }
  virtual void addDesc(const T& desc) { descs.push_back(desc); }
  template <class... Args>
  T& emplace(Args&&... args) {
    return descs.emplace_back(std::forward<Args>(args)...);
  }
  /// Throws std::out_of_range for an index outside the list.
  void remDesc(const int& index) {
    if (index < 0 || static_cast<size_t>(index) >= descs.size())
      throw std::out_of_range("nixlDescList::remDesc: index out of range");
    descs.erase(descs.begin() + index);
  }

  /// The same ranges without metadata.
  nixlDescList<nixlBasicDesc> trim() const {
    nixlDescList<nixlBasicDesc> out(type);
    out.reserve(descs.size());
    for (const auto& d : descs) out.addDesc(static_cast<const nixlBasicDesc&>(d));
    return out;
  }
  /// Index of the first descriptor equal to `query` as a range, else NIXL_ERR_NOT_FOUND.
  virtual int getIndex(const nixlBasicDesc& query) const {
    for (size_t i = 0; i < descs.size(); ++i)
      if (static_cast<const nixlBasicDesc&>(descs[i]) == query) return static_cast<int>(i);
    return NIXL_ERR_NOT_FOUND;
  }

  /// Appends the list to `serializer` (utils/serdes/serdes.h).
  nixl_status_t serialize(nixlSerDes* serializer) const;

  std::string to_string(bool compact = false) const {
    std::ostringstream os;
    os << "DescList of mem type " << nixlEnumStrings::memTypeStr(type) << (compact ? " " : "\n");
    for (const auto& d : descs) {
      os << (compact ? "" : "    ") << "Desc (" << d.addr << ", " << d.len << ") from devID "
         << d.devId << (compact ? "; " : "\n");
    }
    return os.str();
  }
  void print() const { std::cout << to_string(); }

  template <class Y>
  friend bool operator==(const nixlDescList<Y>& a, const nixlDescList<Y>& b);
};

/// Same type, count and ranges (metadata and agent names are not compared).
template <class Y>
bool operator==(const nixlDescList<Y>& a, const nixlDescList<Y>& b) {
  if (a.type != b.type || a.descs.size() != b.descs.size()) return false;
  for (size_t i = 0; i < a.descs.size(); ++i) {
    if constexpr (std::is_same_v<Y, nixlStrideDesc>) {
      if (a.descs[i] != b.descs[i]) return false;  // the run's shape too
    } else if (static_cast<const nixlBasicDesc&>(a.descs[i]) !=
               static_cast<const nixlBasicDesc&>(b.descs[i])) {
      return false;
    }
  }
  return true;
}

// serialize() and the deserializing constructor are compiled in the library for these three.
extern template class nixlDescList<nixlBasicDesc>;
extern template class nixlDescList<nixlBlobDesc>;
extern template class nixlDescList<nixlRemoteDesc>;
extern template class nixlDescList<nixlStrideDesc>;

using nixl_xfer_dlist_t = nixlDescList<nixlBasicDesc>;
using nixl_local_dlist_t = nixlDescList<nixlBasicDesc>;
using nixl_reg_dlist_t = nixlDescList<nixlBlobDesc>;
using nixl_remote_dlist_t = nixlDescList<nixlRemoteDesc>;
using nixl_stride_dlist_t = nixlDescList<nixlStrideDesc>;

#endif
