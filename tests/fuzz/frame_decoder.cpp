// Fuzzes the peer-to-peer frame decoder: whatever the bytes and however they are split into
// reads, decoding never crashes, never returns more than was sent, never buffers more than one
// frame plus one read, and yields the same frames as decoding the stream in one piece.
#include <nixl/metadata/frame.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace {
constexpr std::size_t max_frame = 4096;

struct outcome {
  std::vector<nixl::metadata::frame> frames;
  bool failed = false;
};

outcome decode(std::string_view in, std::size_t step) {
  nixl::metadata::frame_decoder d(max_frame);
  outcome o;
  std::size_t consumed = 0;
  while (consumed < in.size() && !o.failed) {
    auto chunk = in.substr(consumed, step);
    consumed += chunk.size();
    d.append(chunk);
    if (d.buffered() > max_frame + nixl::metadata::frame_header_size + step) std::abort();
    nixl::metadata::frame f;
    for (;;) {
      auto r = d.next(f);
      if (r == nixl::metadata::frame_decoder::result::need_more) break;
      if (r == nixl::metadata::frame_decoder::result::error) {
        if (d.error_message().empty() || d.buffered() != 0) std::abort();
        o.failed = true;
        break;
      }
      if (f.payload.size() > max_frame) std::abort();
      o.frames.push_back(std::move(f));
    }
  }
  return o;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte chooses how the rest is cut into reads.
  std::size_t step = 1 + data[0] % 64;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto whole = decode(in, in.size() + 1);
  auto split = decode(in, step);
  if (whole.failed != split.failed || whole.frames.size() != split.frames.size()) std::abort();
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < whole.frames.size(); ++i) {
    if (whole.frames[i].type != split.frames[i].type ||
        whole.frames[i].payload != split.frames[i].payload)
      std::abort();
    // Re-encoding a decoded frame gives back the bytes it came from.
    auto again = nixl::metadata::encode_frame(whole.frames[i].type, whole.frames[i].payload);
    if (in.substr(bytes, again.size()) != again) std::abort();
    bytes += again.size();
  }
  if (bytes > in.size()) std::abort();
  return 0;
}
