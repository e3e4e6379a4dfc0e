#ifndef NIXL_SRC_UTILS_SERDES_SERDES_H
#define NIXL_SRC_UTILS_SERDES_SERDES_H
/// NIXL's serializer (utils/serdes/serdes.h): an order-dependent, tag-checked byte stream,
///   "nixlSerDes|" { TAG, 8-byte length, VALUE, "|" }...
/// written with addStr/addBuf and read back in the same order with getStr/getBuf. Numbers and
/// descriptors are raw host bytes, as in NIXL. Reading checks every tag, length and bound:
/// imported bytes may come from anywhere.

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "nixl_types.h"

class nixlSerDes {
 public:
  nixlSerDes();

  /// The bytes of `buf` as a string, and back.
  static std::string _bytesToString(const void* buf, ssize_t size);
  static void _stringToBytes(void* fill_buf, const std::string& s, ssize_t size);

  /// Appends an entry.
  nixl_status_t addStr(const std::string& tag, const std::string& str);
  /// Reads the next entry, which must carry `tag`; "" when it does not or the data ends.
  std::string getStr(const std::string& tag);

  /// Appends `len` bytes (NIXL_ERR_INVALID_PARAM for a negative length or a NULL buffer).
  nixl_status_t addBuf(const std::string& tag, const void* buf, ssize_t len);
  /// Length of the next entry if it carries `tag`, else -1 (nothing is consumed).
  ssize_t getBufLen(const std::string& tag) const;
  /// Reads the next entry into `buf`; it must carry `tag` and be exactly `len` bytes
  /// (NIXL_ERR_MISMATCH otherwise, and nothing is consumed).
  nixl_status_t getBuf(const std::string& tag, void* buf, ssize_t len);

  /// Everything written (or imported).
  std::string exportStr() const;
  /// Starts reading `sdbuf`; NIXL_ERR_MISMATCH unless it begins with "nixlSerDes|".
  nixl_status_t importStr(const std::string& sdbuf);

 private:
  /// Where the value of the next entry starts and how long it is, if it carries `tag`.
  bool peek(const std::string& tag, size_t& value_at, size_t& len) const;

  std::string workingStr;
  size_t des_offset;
};

#endif
