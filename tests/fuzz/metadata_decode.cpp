// Fuzzes the decoders of agent metadata and descriptor lists: any input either decodes to
// something that re-encodes to the same bytes, or throws nixl::error(mismatch).
#include <nixl/metadata.hpp>

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto check = [&](auto decode) {
    try {
      auto v = decode(in);
      if (nixl::encode(v) != in) std::abort();  // canonical: decode(encode) is the identity
    } catch (const nixl::error& e) {
      if (e.status_code() != nixl::status::mismatch) std::abort();
    }
  };
  check([](std::string_view b) { return nixl::decode_metadata(b); });
  check([](std::string_view b) { return nixl::decode_xfer_list(b); });
  check([](std::string_view b) { return nixl::decode_reg_list(b); });
  return 0;
}
