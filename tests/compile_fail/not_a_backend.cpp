#include <nixl/agent.hpp>

struct not_a_backend {};

int main() {
  nixl::agent<not_a_backend> a("a");
}
