// A tiny program built against an installed, added or fetched nixl.
#include <nixl/agent.hpp>
#include <nixl/metadata.hpp>

#include <cstdio>

int main() {
  nixl::xfer_dlist l(nixl::mem_kind::dram, {{1, 2, 3}});
  const bool ok = nixl::decode_xfer_list(nixl::encode(l)) == l;
  std::printf("consumer: codec round trip %s\n", ok ? "ok" : "FAILED");
#ifdef NIXL_HAS_POSIX
  std::printf("consumer: posix component linked\n");
#endif
  return ok ? 0 : 1;
}
