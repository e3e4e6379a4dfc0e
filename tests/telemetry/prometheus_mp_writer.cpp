// A writer process of the prometheus_mp tests: one agent (name argv[1]) with telemetry on, driven
// over stdin/stdout as nixl_test/peer_process.hpp does: "MD 0 0" once the agent exists, then one
// reply a line to "EV <event id> <value>" (records it: "OK") and "PORT" (the port this process
// serves, 0 when another one does); QUIT or the end of stdin ends it.

#include <nixl/agent.hpp>
#include <nixl/telemetry/prometheus.hpp>

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "nixl_test/memcpy_backend.hpp"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  nixl::agent<nixl::test::memcpy_backend> a(argv[1], {.capture_telemetry = true});
  std::cout << "MD 0 0" << std::endl;
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "QUIT") break;
    if (cmd == "EV") {
      std::uint32_t id = 0;
      std::uint64_t v = 0;
      in >> id >> v;
      a.record_telemetry(static_cast<nixl::telemetry_event>(id), v);
      std::cout << "OK" << std::endl;
    } else if (cmd == "PORT") {
      std::cout << nixl::prometheus::mp::bound_port() << std::endl;
    } else {
      std::cout << "?" << std::endl;
    }
  }
  return 0;
}
