// nixlAgentConfig and nixlXferTelemetry (agent.hpp's py_config and py_telemetry).

#include <pybind11/chrono.h>

#include "agent.hpp"

namespace nixl::python {

void bind_config(py::module_& m) {
  py::class_<py_config>(m, "nixlAgentConfig")
      .def(py::init<>())
      .def(py::init([](bool prog, bool listen, int port, nixl::thread_sync sync,
                       unsigned /*num_workers: ignored, as in NIXL*/, std::uint64_t pthr,
                       std::uint64_t lthr, bool telem) {
             py_config c;
             c.useProgThread = prog;
             c.useListenThread = listen;
             c.listenPort = port;
             c.syncMode = sync;
             c.pthrDelay = pthr;
             c.lthrDelay = lthr;
             c.captureTelemetry = telem;
             return c;
           }),
           py::arg("use_prog_thread"), py::arg("use_listen_thread") = false,
           py::arg("port") = default_comm_port, py::arg("sync_mode") = nixl::thread_sync::none,
           py::arg("num_workers") = 1u, py::arg("pthr_delay_us") = std::uint64_t{0},
           py::arg("lthr_delay_us") = std::uint64_t{100000}, py::arg("capture_telemetry") = false)
      .def_readwrite("useProgThread", &py_config::useProgThread)
      .def_readwrite("useListenThread", &py_config::useListenThread)
      .def_readwrite("listenPort", &py_config::listenPort)
      .def_readwrite("syncMode", &py_config::syncMode)
      .def_readwrite("captureTelemetry", &py_config::captureTelemetry)
      .def_readwrite("pthrDelay", &py_config::pthrDelay)
      .def_readwrite("lthrDelay", &py_config::lthrDelay)
      .def_readwrite("etcdWatchTimeout", &py_config::etcdWatchTimeout)
      .def_readwrite("xferStallTimeout", &py_config::xferStallTimeout)
      .def_readwrite("listenAddress", &py_config::listenAddress)
      .def_readwrite("metadataSecret", &py_config::metadataSecret);

  py::class_<py_telemetry>(m, "nixlXferTelemetry")
      .def_readonly("startTime", &py_telemetry::startTime)
      .def_readonly("postDuration", &py_telemetry::postDuration)
      .def_readonly("xferDuration", &py_telemetry::xferDuration)
      .def_readonly("totalBytes", &py_telemetry::totalBytes)
      .def_readonly("descCount", &py_telemetry::descCount);
}

}  // namespace nixl::python
