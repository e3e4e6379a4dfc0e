// nixlSerDes and the serialization of descriptor lists through it.

#include "utils/serdes/serdes.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "nixl_descriptors.h"

namespace {
constexpr const char header[] = "nixlSerDes|";
constexpr size_t header_len = sizeof(header) - 1;
constexpr size_t len_bytes = sizeof(uint64_t);
}  // namespace

nixlSerDes::nixlSerDes() : workingStr(header, header_len), des_offset(header_len) {}

std::string nixlSerDes::_bytesToString(const void* buf, ssize_t size) {
  if (buf == nullptr || size <= 0) return {};
  return std::string(static_cast<const char*>(buf), static_cast<size_t>(size));
}

void nixlSerDes::_stringToBytes(void* fill_buf, const std::string& s, ssize_t size) {
  if (fill_buf == nullptr || size <= 0) return;
  std::memcpy(fill_buf, s.data(), std::min(static_cast<size_t>(size), s.size()));
}

nixl_status_t nixlSerDes::addStr(const std::string& tag, const std::string& str) {
  return addBuf(tag, str.data(), static_cast<ssize_t>(str.size()));
}

nixl_status_t nixlSerDes::addBuf(const std::string& tag, const void* buf, ssize_t len) {
  if (len < 0 || (buf == nullptr && len > 0)) return NIXL_ERR_INVALID_PARAM;
  const uint64_t n = static_cast<uint64_t>(len);
  workingStr.append(tag);
  workingStr.append(reinterpret_cast<const char*>(&n), len_bytes);
  if (len > 0) workingStr.append(static_cast<const char*>(buf), static_cast<size_t>(len));
  workingStr.push_back('|');
  return NIXL_SUCCESS;
}

bool nixlSerDes::peek(const std::string& tag, size_t& value_at, size_t& len) const {
  const size_t size = workingStr.size();
  size_t at = des_offset;
  if (at > size || size - at < tag.size() + len_bytes) return false;
  if (workingStr.compare(at, tag.size(), tag) != 0) return false;
  at += tag.size();
  uint64_t n = 0;
  std::memcpy(&n, workingStr.data() + at, len_bytes);
  at += len_bytes;
  // The value and its closing '|' must lie inside the data.
  if (n > size - at || size - at - n < 1 || workingStr[at + n] != '|') return false;
  value_at = at;
  len = static_cast<size_t>(n);
  return true;
}

std::string nixlSerDes::getStr(const std::string& tag) {
  size_t at = 0, n = 0;
  if (!peek(tag, at, n)) return {};
  des_offset = at + n + 1;
  return workingStr.substr(at, n);
}

ssize_t nixlSerDes::getBufLen(const std::string& tag) const {
  size_t at = 0, n = 0;
  if (!peek(tag, at, n) || n > static_cast<size_t>(std::numeric_limits<ssize_t>::max())) return -1;
  return static_cast<ssize_t>(n);
}

nixl_status_t nixlSerDes::getBuf(const std::string& tag, void* buf, ssize_t len) {
  size_t at = 0, n = 0;
  if (len < 0 || !peek(tag, at, n) || n != static_cast<size_t>(len)) return NIXL_ERR_MISMATCH;
  if (n > 0) {
    if (buf == nullptr) return NIXL_ERR_INVALID_PARAM;
    std::memcpy(buf, workingStr.data() + at, n);
  }
  des_offset = at + n + 1;
  return NIXL_SUCCESS;
}

std::string nixlSerDes::exportStr() const {
  return workingStr;
}

nixl_status_t nixlSerDes::importStr(const std::string& sdbuf) {
  if (sdbuf.compare(0, header_len, header) != 0) return NIXL_ERR_MISMATCH;
  workingStr = sdbuf;
  des_offset = header_len;
  return NIXL_SUCCESS;
}

// Descriptor lists: "nixlDList" -> kind, "t" -> nixl_mem_t (4 bytes), "n" -> count (8 bytes),
// then a basic (strided) list's descriptors as one entry of count x 24 (40) raw bytes, or, for the
// other kinds, one entry per descriptor holding its serialize() bytes.

namespace {
template <class T>
const char* list_kind() {
  if constexpr (std::is_same_v<T, nixlBasicDesc>)
    return "nixlBDList";
  else if constexpr (std::is_same_v<T, nixlBlobDesc>)
    return "nixlSDList";
  else if constexpr (std::is_same_v<T, nixlStrideDesc>)
    return "nixlStrideDList";
  else
    return "nixlRDList";
}
/// Lists serialized as one blob of fixed-size descriptors.
template <class T>
constexpr bool pod_list = std::is_same_v<T, nixlBasicDesc> || std::is_same_v<T, nixlStrideDesc>;
}  // namespace

template <class T>
nixlDescList<T>::nixlDescList(nixlSerDes* deserializer) : type(DRAM_SEG) {
  if (deserializer == nullptr || deserializer->getStr("nixlDList") != list_kind<T>()) return;
  nixl_mem_t t = DRAM_SEG;
  uint64_t n = 0;
  if (deserializer->getBuf("t", &t, sizeof(t)) != NIXL_SUCCESS ||
      deserializer->getBuf("n", &n, sizeof(n)) != NIXL_SUCCESS)
    return;
  if constexpr (pod_list<T>) {
    const ssize_t bytes = deserializer->getBufLen("");
    if (bytes < 0 || n > static_cast<uint64_t>(bytes) / sizeof(T) ||
        static_cast<uint64_t>(bytes) != n * sizeof(T))
      return;
    std::vector<T> v(static_cast<size_t>(n));
    if (deserializer->getBuf("", v.data(), bytes) != NIXL_SUCCESS) return;
    descs = std::move(v);
  } else {
    std::vector<T> v;
    for (uint64_t i = 0; i < n; ++i) {
      const ssize_t len = deserializer->getBufLen("");
      if (len < static_cast<ssize_t>(sizeof(nixlBasicDesc))) return;  // also: the data ended
      v.emplace_back(T(deserializer->getStr("")));
    }
    descs = std::move(v);
  }
  type = t;
}

template <class T>
nixl_status_t nixlDescList<T>::serialize(nixlSerDes* serializer) const {
  if (serializer == nullptr) return NIXL_ERR_INVALID_PARAM;
  const uint64_t n = descs.size();
  nixl_status_t s = serializer->addStr("nixlDList", list_kind<T>());
  if (s == NIXL_SUCCESS) s = serializer->addBuf("t", &type, sizeof(type));
  if (s == NIXL_SUCCESS) s = serializer->addBuf("n", &n, sizeof(n));
  if (s != NIXL_SUCCESS) return s;
  if constexpr (pod_list<T>) {
    return serializer->addBuf("", descs.data(), static_cast<ssize_t>(n * sizeof(T)));
  } else {
    for (const auto& d : descs)
      if ((s = serializer->addStr("", d.serialize())) != NIXL_SUCCESS) return s;
    return NIXL_SUCCESS;
  }
}

template class nixlDescList<nixlBasicDesc>;
template class nixlDescList<nixlBlobDesc>;
template class nixlDescList<nixlRemoteDesc>;
template class nixlDescList<nixlStrideDesc>;
