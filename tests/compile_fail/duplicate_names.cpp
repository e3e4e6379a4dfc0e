#include <nixl/agent.hpp>

#include "nixl_test/memcpy_backend.hpp"

struct same_name : nixl::test::memcpy_backend {
  using memcpy_backend::memcpy_backend;
};

int main() {
  nixl::agent<nixl::test::memcpy_backend, same_name> a("a");
}
