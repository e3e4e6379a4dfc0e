#include <nixl/agent.hpp>

#include "nixl_test/memcpy_backend.hpp"

int main() {
  nixl::agent<nixl::test::memcpy_backend> a("a");
  a.create_backend<nixl::test::file_backend>();
}
