// One file above 600 lines for now: it will be split by concern (agent, lists, handles,
// exceptions, module) once the concurrent work on the Python module has landed.
// nixl._bindings: NIXL's Python binding surface over one nixl::agent of every enabled backend.
//
// Handles cross into Python as integers (the address of an object this module owns), as in
// NIXL. Every call that returns a NIXL status raises the matching nixl*Error for a negative
// one; IN_PROG and SUCCESS are returned. Data-path calls release the GIL.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nixl/nixl.hpp>  // the core and every linked component (NIXL_HAS_<NAME>)

namespace py = pybind11;

namespace nixl::python {

// The agent type: every backend this build links, in a fixed order (UCX, POSIX, CUDA).
using agent_t = nixl::agent_over<nixl::enabled_backends>;
using prepared_t = typename agent_t::prepared;
using request_t = typename agent_t::xfer_request;

// Exceptions

/// One Python exception class per negative status, index = -status.
PyObject* g_exc[13] = {};

PyObject* exception_for(status s) {
  const int i = -static_cast<int>(s);
  if (i >= 1 && i <= 12 && g_exc[i] != nullptr) return g_exc[i];
  return g_exc[8] != nullptr ? g_exc[8] : PyExc_RuntimeError;  // unknown
}

[[noreturn]] void throw_status(status s, std::string_view call) {
  throw nixl::error(s, fmt::format("{}: {}", call, to_string(s)));
}

/// Returns `s` when it is not an error, throws otherwise.
status check(status s, std::string_view call) {
  if (static_cast<int>(s) < 0) throw_status(s, call);
  return s;
}

// Descriptor lists

/// NIXL's nixlRemoteDesc list: (addr, len, dev, agent name).
struct remote_dlist {
  struct entry {
    desc d;
    std::string agent;
    friend bool operator==(const entry&, const entry&) = default;
  };
  mem_kind kind = mem_kind::dram;
  std::vector<entry> descs;
  friend bool operator==(const remote_dlist&, const remote_dlist&) = default;
};

std::uint64_t to_u64(py::handle o, const char* what) {
  // Anything with __index__ (int, numpy integers), as pybind's integer casts accept.
  auto idx = py::reinterpret_steal<py::object>(PyNumber_Index(o.ptr()));
  if (!idx) {
    PyErr_Clear();
    throw py::type_error(
        fmt::format("descriptor {} must be an int, not {}", what,
                    std::string(py::str(py::type::handle_of(o).attr("__name__")))));
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(idx.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(fmt::format("descriptor {} must be a non-negative 64-bit value", what));
  }
  return static_cast<std::uint64_t>(v);
}

std::string to_bytes_string(py::handle o, const char* what) {
  if (PyBytes_Check(o.ptr())) return std::string(py::bytes(py::reinterpret_borrow<py::bytes>(o)));
  if (PyUnicode_Check(o.ptr())) return py::cast<std::string>(o);
  throw py::type_error(fmt::format("{} must be str or bytes", what));
}

py::tuple checked_tuple(py::handle item, std::size_t i, std::size_t arity, const char* shape) {
  if (!PyTuple_Check(item.ptr()))
    throw py::type_error(
        fmt::format("descriptor {} must be a tuple {}, not {}", i, shape,
                    std::string(py::str(py::type::handle_of(item).attr("__name__")))));
  auto t = py::reinterpret_borrow<py::tuple>(item);
  if (t.size() != arity)
    throw py::value_error(fmt::format("descriptor {} has {} elements; expected a {}-tuple {}", i,
                                      t.size(), arity, shape));
  return t;
}

desc desc_from_tuple(const py::tuple& t) {
  return desc{static_cast<std::uintptr_t>(to_u64(t[0], "address")),
              static_cast<std::size_t>(to_u64(t[1], "length")), to_u64(t[2], "device id")};
}

/// Reads an Nx3 integer ndarray (uint64 or int64, C-contiguous) into descriptors.
std::vector<desc> descs_from_array(const py::array& a) {
  if (a.ndim() != 2 || a.shape(1) != 3)
    throw py::value_error("descriptor array must have shape (N, 3): (addr, len, dev) rows");
  const auto kind = a.dtype().kind();
  if (a.itemsize() != 8 || (kind != 'u' && kind != 'i'))
    throw py::type_error("descriptor array must hold uint64 or int64 values");
  if (!(a.flags() & py::array::c_style))
    throw py::value_error("descriptor array must be C-contiguous (use numpy.ascontiguousarray)");
  std::vector<desc> out(static_cast<std::size_t>(a.shape(0)));
  if (!out.empty()) std::memcpy(out.data(), a.data(), out.size() * sizeof(desc));
  return out;
}

py::tuple to_tuple(const desc& d) {
  return py::make_tuple(static_cast<std::uint64_t>(d.addr), static_cast<std::uint64_t>(d.len),
                        d.dev);
}

std::size_t checked_index(long long i, std::size_t n) {
  if (i < 0) i += static_cast<long long>(n);
  if (i < 0 || static_cast<std::size_t>(i) >= n)
    throw py::index_error(fmt::format("descriptor index out of range (list holds {})", n));
  return static_cast<std::size_t>(i);
}

std::string_view as_view(const std::string& s) {
  return s;
}

py::bytes encode_any(py::handle o) {
  if (py::isinstance<xfer_dlist>(o)) return py::bytes(encode(o.cast<const xfer_dlist&>()));
  if (py::isinstance<reg_dlist>(o)) return py::bytes(encode(o.cast<const reg_dlist&>()));
  throw py::type_error(
      "get_serialized_descs: pass a nixlXferDList or nixlRegDList (remote lists have no wire "
      "form)");
}

py::object decode_any(const std::string& b) {
  // Header: "NXMD", u16 version, u8 type (2: transfer list, 3: registration list), u8 flags.
  if (b.size() < 8 || b.compare(0, 4, "NXMD") != 0)
    throw nixl::error(status::mismatch,
                      "deserialize_descs: not a serialized nixl descriptor list (bad magic); pass "
                      "bytes from get_serialized_descs");
  const auto type = static_cast<std::uint8_t>(b[6]);
  if (type == static_cast<std::uint8_t>(blob_type::xfer_list))
    return py::cast(decode_xfer_list(as_view(b)));
  if (type == static_cast<std::uint8_t>(blob_type::reg_list))
    return py::cast(decode_reg_list(as_view(b)));
  throw nixl::error(status::mismatch,
                    fmt::format("deserialize_descs: blob type {} is not a descriptor list (agent "
                                "metadata goes to add_remote_agent)",
                                static_cast<int>(type)));
}

// Agent config and telemetry

/// NIXL's default_comm_port: the metadata listener's port.
inline constexpr int default_comm_port = 8888;

struct py_config {
  bool useProgThread = false;
  bool useListenThread = false;
  int listenPort = default_comm_port;
  thread_sync syncMode = thread_sync::none;
  bool captureTelemetry = false;
  std::uint64_t pthrDelay = 0;
  std::uint64_t lthrDelay = 100000;  ///< accepted for NIXL's API; the listener does not poll
  std::uint64_t etcdWatchTimeout = 5000000;
  std::string listenAddress;   ///< empty: NIXL_LISTEN_ADDRESS, else 127.0.0.1
  std::string metadataSecret;  ///< empty: NIXL_METADATA_SECRET, else none
};

struct py_telemetry {
  std::int64_t startTime = 0;
  std::int64_t postDuration = 0;
  std::int64_t xferDuration = 0;
  std::uint64_t totalBytes = 0;
  std::uint64_t descCount = 0;
};

enum class cost_method : std::int32_t { analytical_backend = 0 };

/// NIXL's nixl_mem_t, nixl_xfer_op_t and nixl_status_t are plain C enums, so their Python
/// values compare equal to ints (`NIXL_SUCCESS == 0`); ours are enum classes, which pybind11
/// compares strictly. This gives them the plain-enum comparison (hashing is by value already).
template <class E>
void compare_with_ints(py::enum_<E>& e) {
  e.attr("__eq__") = py::cpp_function(
      [](const py::object& a, const py::object& b) { return !b.is_none() && py::int_(a).equal(b); },
      py::name("__eq__"), py::is_method(e), py::arg("other"));
  e.attr("__ne__") = py::cpp_function(
      [](const py::object& a, const py::object& b) { return b.is_none() || !py::int_(a).equal(b); },
      py::name("__ne__"), py::is_method(e), py::arg("other"));
}

/// A backend handle list, or one handle (NIXL's genNotif takes a single one).
std::vector<std::uintptr_t> handle_list(const py::object& o) {
  if (PyLong_Check(o.ptr())) return {o.cast<std::uintptr_t>()};
  try {
    return o.cast<std::vector<std::uintptr_t>>();
  } catch (const py::cast_error&) {
    throw py::type_error("backends must be a list of backend handles (or one handle)");
  }
}

// The agent

class py_agent {
 public:
  py_agent(const std::string& name, const py_config& c) {
    if (name.empty()) throw std::invalid_argument("nixlAgent: the agent name is empty");
    if (c.listenPort < 0 || c.listenPort > 65535)
      throw nixl::error(
          status::invalid_param,
          fmt::format("nixlAgentConfig: listenPort {} is not a TCP port", c.listenPort));
    agent_config cfg;
    cfg.enable_prog_thread = c.useProgThread;
    cfg.sync = c.syncMode;
    cfg.capture_telemetry = c.captureTelemetry;
    cfg.progress_delay = std::chrono::microseconds(c.pthrDelay);
    agent_ = std::make_unique<agent_t>(name, std::move(cfg));
#if defined(NIXL_HAS_METADATA)
    metadata::config mc;
    mc.listen = c.useListenThread;
    mc.listen_port = static_cast<std::uint16_t>(c.listenPort);
    mc.listen_address = c.listenAddress;
    mc.metadata_secret = c.metadataSecret;
    mc.etcd_watch_timeout = std::chrono::microseconds(c.etcdWatchTimeout);
    exchange_ = std::make_unique<metadata::exchange>(*agent_, std::move(mc));
#else
    if (c.useListenThread)
      throw nixl::error(status::not_supported,
                        "nixlAgent: useListenThread needs the metadata exchange; build with "
                        "NIXL_WITH_METADATA=ON");
#endif
  }
  ~py_agent() {
    // Requests and prepared lists must go before the agent they point into, and the exchange
    // (whose threads call the agent) before the agent.
    reqs_.clear();
    dlists_.clear();
#if defined(NIXL_HAS_METADATA)
    exchange_.reset();
#endif
    agent_.reset();
  }
  py_agent(const py_agent&) = delete;
  py_agent& operator=(const py_agent&) = delete;

  agent_t& get() {
    return *agent_;
  }

  // -- backends --
  std::vector<std::string> avail_plugins() const {
    std::vector<std::string> out;
    for (auto n : agent_t::available_backends()) out.emplace_back(n);
    return out;
  }

  static py::tuple params_tuple(const std::pair<params, std::vector<mem_kind>>& p) {
    py::dict d;
    for (const auto& [k, v] : p.first) d[py::str(k)] = py::str(v);
    py::list mems;
    for (auto k : p.second) mems.append(py::str(std::string(nixl_name(k))));
    return py::make_tuple(d, mems);
  }

  py::tuple plugin_params(const std::string& name) const {
    return params_tuple(agent_t::plugin_params(name));
  }

  std::uintptr_t create_backend(const std::string& name,
                                const std::map<std::string, std::string>& p) {
    params prm(p.begin(), p.end());
    {
      py::gil_scoped_release rel;
      agent_->create_backend(name, prm);
    }
    auto h = std::make_unique<std::string>(name);
    const auto id = reinterpret_cast<std::uintptr_t>(h.get());
    backends_.emplace(id, std::move(h));
    return id;
  }

  const std::string& backend_name(std::uintptr_t h) const {
    auto it = backends_.find(h);
    if (it == backends_.end())
      throw nixl::error(status::invalid_param,
                        fmt::format("backend handle {:#x} is not a backend of this agent; use the "
                                    "handle createBackend returned",
                                    h));
    return *it->second;
  }
  std::uintptr_t backend_handle(std::string_view name) const {
    for (const auto& [id, n] : backends_)
      if (*n == name) return id;
    return 0;
  }

  py::tuple backend_params(std::uintptr_t h) const {
    return params_tuple(agent_->backend_params(backend_name(h)));
  }

  backend_options options(const std::vector<std::uintptr_t>& hs) const {
    backend_options o;
    for (auto h : hs) o.backends.push_back(backend_name(h));
    return o;
  }

  // -- memory --
  status register_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs) {
    auto o = options(bs);
    py::gil_scoped_release rel;
    agent_->register_memory(l, o);
    return status::success;
  }
  status deregister_mem(const reg_dlist& l, const std::vector<std::uintptr_t>& bs) {
    auto o = options(bs);
    py::gil_scoped_release rel;
    agent_->deregister_memory(l, o);
    return status::success;
  }
  py::list query_mem(const reg_dlist& l, std::uintptr_t b) {
    auto o = options({b});
    std::vector<std::optional<params>> r;
    {
      py::gil_scoped_release rel;
      r = agent_->query_memory(l, o);
    }
    py::list out;
    for (const auto& e : r) {
      if (!e) {
        out.append(py::none());
        continue;
      }
      py::dict d;
      for (const auto& [k, v] : *e) d[py::str(k)] = py::str(v);
      out.append(d);
    }
    return out;
  }

  // -- prepared lists and requests --
  std::uintptr_t prep_dlist(std::string agent, const xfer_dlist& l,
                            const std::vector<std::uintptr_t>& bs) {
    if (agent == "NIXL_INIT_AGENT") agent.clear();
    auto o = options(bs);
    auto p = std::make_shared<prepared_t>();
    {
      py::gil_scoped_release rel;
      *p = agent_->prepare_list(agent, l, o);
    }
    const auto id = reinterpret_cast<std::uintptr_t>(p.get());
    dlists_.emplace(id, std::move(p));
    return id;
  }
  std::shared_ptr<prepared_t> dlist(std::uintptr_t h) const {
    auto it = dlists_.find(h);
    if (it == dlists_.end())
      throw nixl::error(status::invalid_param,
                        fmt::format("prepared list handle {:#x} is unknown or released", h));
    return it->second;
  }
  void release_dlist(std::uintptr_t h) {
    (void)dlist(h);
    dlists_.erase(h);
  }

  static std::vector<int> indices(py::handle o, const char* which) {
    if (py::isinstance<py::array>(o)) {
      auto a = py::reinterpret_borrow<py::array>(o);
      const auto k = a.dtype().kind();
      if (a.ndim() != 1 || (k != 'i' && k != 'u'))
        throw py::type_error(fmt::format("{} indices must be a 1-D integer array", which));
      auto ai = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
      std::vector<int> out(static_cast<std::size_t>(ai.size()));
      const auto* d = ai.data();
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (d[i] < 0 || d[i] > std::numeric_limits<int>::max())
          throw nixl::error(
              status::invalid_param,
              fmt::format("{} index {} at position {} is out of range", which, d[i], i));
        out[i] = static_cast<int>(d[i]);
      }
      return out;
    }
    try {
      return o.cast<std::vector<int>>();
    } catch (const py::cast_error&) {
      throw py::type_error(
          fmt::format("{} indices must be a list of ints or a 1-D int array", which));
    }
  }

  static xfer_options xopts(backend_options&& b, const std::string& notif, bool skip) {
    xfer_options o;
    o.backends = std::move(b.backends);
    if (!notif.empty()) o.notif = notif;  // NIXL: an empty message means "no notification"
    o.skip_merge = skip;
    return o;
  }

  std::uintptr_t keep(request_t&& r) {
    auto p = std::make_shared<request_t>(std::move(r));
    const auto id = reinterpret_cast<std::uintptr_t>(p.get());
    reqs_.emplace(id, std::move(p));
    return id;
  }

  std::uintptr_t make_req(xfer_op op, std::uintptr_t lh, py::object li, std::uintptr_t rh,
                          py::object ri, const std::string& notif,
                          const std::vector<std::uintptr_t>& bs, bool skip) {
    auto l = dlist(lh);
    auto r = dlist(rh);
    auto lv = indices(li, "local");
    auto rv = indices(ri, "remote");
    auto o = xopts(options(bs), notif, skip);
    request_t req;
    {
      py::gil_scoped_release rel;
      req = agent_->make_request(op, *l, lv, *r, rv, o);
    }
    return keep(std::move(req));
  }

  std::uintptr_t create_req(xfer_op op, const xfer_dlist& l, const xfer_dlist& r,
                            const std::string& remote, const std::string& notif,
                            const std::vector<std::uintptr_t>& bs) {
    auto o = xopts(options(bs), notif, false);
    request_t req;
    {
      py::gil_scoped_release rel;
      req = agent_->create_request(op, l, r, remote, o);
    }
    return keep(std::move(req));
  }

  std::shared_ptr<request_t> req(std::uintptr_t h) const {
    auto it = reqs_.find(h);
    if (it == reqs_.end())
      throw nixl::error(status::invalid_param,
                        fmt::format("transfer handle {:#x} is unknown or released", h));
    return it->second;
  }

  status post(std::uintptr_t h, const std::string& notif) {
    auto r = req(h);
    status s;
    {
      py::gil_scoped_release rel;
      s = notif.empty() ? r->post() : r->post(notif_arg{notif});
    }
    return check(s, "postXferReq");
  }
  status xfer_status(std::uintptr_t h) {
    auto r = req(h);
    status s;
    {
      py::gil_scoped_release rel;
      s = r->status();
    }
    return check(s, "getXferStatus");
  }
  void release_req(std::uintptr_t h) {
    auto r = req(h);
    status s;
    {
      py::gil_scoped_release rel;
      s = r->release();
    }
    if (s == status::repost_active)
      throw nixl::error(s,
                        "releaseXferReq: the backend could not cancel the transfer in flight; "
                        "wait for it to finish and release again");
    reqs_.erase(h);
  }
  py_telemetry telemetry(std::uintptr_t h) {
    auto r = req(h);
    xfer_telemetry t{};
    check(r->telemetry(t), "getXferTelemetry");
    py_telemetry out;
    out.startTime =
        std::chrono::duration_cast<std::chrono::microseconds>(t.start.time_since_epoch()).count();
    out.postDuration = t.post_duration.count();
    out.xferDuration = t.xfer_duration.count();
    out.totalBytes = t.total_bytes;
    out.descCount = t.desc_count;
    return out;
  }
  std::uintptr_t query_backend(std::uintptr_t h) {
    auto r = req(h);
    const auto id = backend_handle(r->backend_name());
    if (id == 0) throw_status(status::not_found, "queryXferBackend");
    return id;
  }
  py::tuple estimate(std::uintptr_t h) {
    auto r = req(h);
    auto e = agent_->estimate_cost(*r);
    if (!e)
      throw nixl::error(
          status::not_supported,
          fmt::format("estimateXferCost: backend {} gives no cost estimate", r->backend_name()));
    return py::make_tuple(static_cast<std::int64_t>(e->count()), std::int64_t{0},
                          cost_method::analytical_backend);
  }

  // -- notifications --
  py::dict get_notifs(py::dict d, const std::vector<std::uintptr_t>& bs) {
    auto o = options(bs);
    notif_map m;
    {
      py::gil_scoped_release rel;
      agent_->notifications(m, o);
    }
    for (auto& [k, v] : m) {
      auto key = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(k.data(), static_cast<Py_ssize_t>(k.size()), "replace"));
      if (!key) throw py::error_already_set();
      py::list lst;
      if (d.contains(key)) {
        py::object cur = d[key];
        if (!py::isinstance<py::list>(cur))
          throw py::type_error("getNotifs: the dict's values must be lists");
        lst = cur.cast<py::list>();
      } else {
        d[key] = lst;
      }
      for (auto& msg : v) lst.append(py::bytes(msg));
    }
    return d;
  }
  void gen_notif(const std::string& remote, const std::string& msg,
                 const std::vector<std::uintptr_t>& bs) {
    auto o = options(bs);
    py::gil_scoped_release rel;
    agent_->notify(remote, msg, o);
  }

  // -- metadata --
  /// Calls `f(exchange, target)` without the GIL; not_supported in a build without it.
  template <class F>
  void with_exchange(std::string_view call, const std::string& ip, int port,
                     const std::string& label, F&& f) {
    if (port < 0 || port > 65535)
      throw nixl::error(status::invalid_param, fmt::format("port {} is not a TCP port", port));
#if defined(NIXL_HAS_METADATA)
    metadata::target t;
    t.ip = ip;
    t.port = static_cast<std::uint16_t>(port == 0 ? default_comm_port : port);
    t.label = label;
    py::gil_scoped_release rel;
    (void)f(*exchange_, t);
#else
    (void)ip, (void)label, (void)f;
    throw nixl::error(status::not_supported,
                      fmt::format("{}: this build has no metadata exchange; build with "
                                  "NIXL_WITH_METADATA=ON",
                                  call));
#endif
  }
  std::uint16_t listen_port() const noexcept {
#if defined(NIXL_HAS_METADATA)
    return exchange_->port();
#else
    return 0;
#endif
  }

  std::unique_ptr<agent_t> agent_;
#if defined(NIXL_HAS_METADATA)
  std::unique_ptr<metadata::exchange> exchange_;
#endif
  std::unordered_map<std::uintptr_t, std::unique_ptr<std::string>> backends_;
  std::unordered_map<std::uintptr_t, std::shared_ptr<prepared_t>> dlists_;
  std::unordered_map<std::uintptr_t, std::shared_ptr<request_t>> reqs_;
};

// List bindings shared by the xfer and reg lists

template <class List, class Cls>
void common_list_methods(Cls& c) {
  c.def("getType", [](const List& l) { return l.kind(); })
      .def("descCount", [](const List& l) { return l.size(); })
      .def("isEmpty", [](const List& l) { return l.empty(); })
      .def("clear", [](List& l) { l.clear(); })
      .def("remDesc",
           [](List& l, long long i) {
             if (i < 0 || static_cast<std::size_t>(i) >= l.size())
               throw nixl::error(
                   status::invalid_param,
                   fmt::format("remDesc: index {} out of range (list holds {})", i, l.size()));
             l.erase(static_cast<std::size_t>(i));
           })
      .def("__eq__", [](const List& a, const List& b) { return a == b; })
      .def("__ne__", [](const List& a, const List& b) { return !(a == b); })
      .def(py::pickle([](const List& l) { return py::make_tuple(py::bytes(encode(l))); },
                      [](const py::tuple& t) {
                        if (t.size() != 1 || !PyBytes_Check(t[0].ptr()))
                          throw nixl::error(status::mismatch,
                                            "descriptor list state must be the bytes of the "
                                            "library codec");
                        const std::string b = t[0].cast<std::string>();
                        if constexpr (std::is_same_v<List, xfer_dlist>)
                          return decode_xfer_list(as_view(b));
                        else
                          return decode_reg_list(as_view(b));
                      }));
}

}  // namespace nixl::python

using namespace nixl::python;
using nixl::desc;
using nixl::mem_kind;
using nixl::reg_desc;
using nixl::reg_dlist;
using nixl::status;
using nixl::xfer_dlist;
using nixl::xfer_op;

PYBIND11_MODULE(_bindings, m) {
  m.doc() = "NIXL-compatible bindings of the nixl C++ library";

  // Constants and enums
  m.attr("NIXL_INIT_AGENT") = "";
  m.attr("DEFAULT_COMM_PORT") = default_comm_port;
  m.attr("HAVE_UCX_GPU_DEVICE_API") = false;
  {
    py::list bl;
    for (auto n : agent_t::available_backends()) bl.append(py::str(std::string(n)));
    m.attr("_BUILT_BACKENDS") = bl;
  }

  py::enum_<nixl::thread_sync>(m, "nixl_thread_sync_t")
      .value("NIXL_THREAD_SYNC_NONE", nixl::thread_sync::none)
      .value("NIXL_THREAD_SYNC_STRICT", nixl::thread_sync::strict)
      .value("NIXL_THREAD_SYNC_RW", nixl::thread_sync::rw)
      .value("NIXL_THREAD_SYNC_DEFAULT", nixl::thread_sync::none)
      .export_values();

  py::enum_<mem_kind> mem_enum(m, "nixl_mem_t");
  mem_enum.value("DRAM_SEG", mem_kind::dram)
      .value("VRAM_SEG", mem_kind::vram)
      .value("BLK_SEG", mem_kind::block)
      .value("OBJ_SEG", mem_kind::object)
      .value("FILE_SEG", mem_kind::file)
      .export_values();
  compare_with_ints(mem_enum);

  py::enum_<xfer_op> op_enum(m, "nixl_xfer_op_t");
  op_enum.value("NIXL_READ", xfer_op::read).value("NIXL_WRITE", xfer_op::write).export_values();
  compare_with_ints(op_enum);

  py::enum_<cost_method>(m, "nixl_cost_t")
      .value("NIXL_COST_ANALYTICAL_BACKEND", cost_method::analytical_backend)
      .export_values();

  py::enum_<status> status_enum(m, "nixl_status_t");
  status_enum.value("NIXL_IN_PROG", status::in_progress)
      .value("NIXL_SUCCESS", status::success)
      .value("NIXL_ERR_NOT_POSTED", status::not_posted)
      .value("NIXL_ERR_INVALID_PARAM", status::invalid_param)
      .value("NIXL_ERR_BACKEND", status::backend)
      .value("NIXL_ERR_NOT_FOUND", status::not_found)
      .value("NIXL_ERR_MISMATCH", status::mismatch)
      .value("NIXL_ERR_NOT_ALLOWED", status::not_allowed)
      .value("NIXL_ERR_REPOST_ACTIVE", status::repost_active)
      .value("NIXL_ERR_UNKNOWN", status::unknown)
      .value("NIXL_ERR_NOT_SUPPORTED", status::not_supported)
      .value("NIXL_ERR_REMOTE_DISCONNECT", status::remote_disconnect)
      .value("NIXL_ERR_CANCELED", status::canceled)
      .value("NIXL_ERR_NO_TELEMETRY", status::no_telemetry)
      .export_values();
  compare_with_ints(status_enum);

  // Exceptions (RuntimeError subclasses, one per error status)
  const std::pair<const char*, int> excs[] = {
      {"nixlNotPostedError", 1},         {"nixlInvalidParamError", 2}, {"nixlBackendError", 3},
      {"nixlNotFoundError", 4},          {"nixlMismatchError", 5},     {"nixlNotAllowedError", 6},
      {"nixlRepostActiveError", 7},      {"nixlUnknownError", 8},      {"nixlNotSupportedError", 9},
      {"nixlRemoteDisconnectError", 10}, {"nixlCancelledError", 11},   {"nixlNoTelemetryError", 12},
  };
  for (const auto& [name, idx] : excs) {
    const std::string full = std::string("nixl._bindings.") + name;
    PyObject* e = PyErr_NewException(full.c_str(), PyExc_RuntimeError, nullptr);
    if (e == nullptr) throw py::error_already_set();
    g_exc[idx] = e;  // one reference kept for the life of the process
    m.attr(name) = py::reinterpret_borrow<py::object>(e);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nixl::error& e) {
      PyErr_SetString(exception_for(e.status_code()), e.what());
    }
  });

  // Descriptor lists
  py::class_<xfer_dlist> xl(m, "nixlXferDList");
  xl.def(py::init([](mem_kind k, long long init_size) {
           if (init_size < 0) throw py::value_error("init_size must not be negative");
           xfer_dlist l(k);
           l.resize(static_cast<std::size_t>(init_size));
           return l;
         }),
         py::arg("type"), py::arg("init_size") = 0)
      .def(py::init(
               [](mem_kind k, const py::array& a) { return xfer_dlist(k, descs_from_array(a)); }),
           py::arg("type"), py::arg("descs").noconvert())
      .def(py::init([](mem_kind k, const py::list& items) {
             xfer_dlist l(k);
             l.reserve(items.size());
             for (std::size_t i = 0; i < items.size(); ++i)
               l.push_back(desc_from_tuple(checked_tuple(items[i], i, 3, "(addr, len, dev)")));
             return l;
           }),
           py::arg("type"), py::arg("descs").noconvert())
      .def("__getitem__",
           [](const xfer_dlist& l, long long i) { return to_tuple(l[checked_index(i, l.size())]); })
      .def("__setitem__",
           [](xfer_dlist& l, long long i, const py::tuple& t) {
             l[checked_index(i, l.size())] =
                 desc_from_tuple(checked_tuple(t, 0, 3, "(addr, len, dev)"));
           })
      .def("addDesc",
           [](xfer_dlist& l, const py::tuple& t) {
             l.push_back(desc_from_tuple(checked_tuple(t, 0, 3, "(addr, len, dev)")));
           })
      .def("append",
           [](xfer_dlist& l, const py::tuple& t) {
             l.push_back(desc_from_tuple(checked_tuple(t, 0, 3, "(addr, len, dev)")));
           })
      .def("index",
           [](const xfer_dlist& l, const py::tuple& t) {
             auto i = l.index_of(desc_from_tuple(checked_tuple(t, 0, 3, "(addr, len, dev)")));
             if (!i) throw nixl::error(status::not_found, "index: descriptor not in the list");
             return *i;
           })
      .def("trim", [](const xfer_dlist& l) { return l; })
      .def("print",
           [](const xfer_dlist& l) {
             py::print(fmt::format("DescList of mem type {} (count {})", nixl::nixl_name(l.kind()),
                                   l.size()));
             for (const auto& d : l)
               py::print(fmt::format("  addr {:#x} len {} devID {}", d.addr, d.len, d.dev));
           })
      .def("__repr__", [](const xfer_dlist& l) {
        return fmt::format("<nixlXferDList {} count={}>", nixl::nixl_name(l.kind()), l.size());
      });
  common_list_methods<xfer_dlist>(xl);

  auto reg_from = [](const py::tuple& t) {
    reg_desc d;
    static_cast<desc&>(d) = desc_from_tuple(t);
    d.meta = to_bytes_string(t[3], "descriptor metaInfo");
    return d;
  };
  py::class_<reg_dlist> rl(m, "nixlRegDList");
  rl.def(py::init([](mem_kind k, long long init_size) {
           if (init_size < 0) throw py::value_error("init_size must not be negative");
           reg_dlist l(k);
           l.resize(static_cast<std::size_t>(init_size));
           return l;
         }),
         py::arg("type"), py::arg("init_size") = 0)
      .def(py::init([](mem_kind k, const py::array& a) {
             reg_dlist l(k);
             for (const auto& d : descs_from_array(a)) l.push_back(reg_desc{d, {}});
             return l;
           }),
           py::arg("type"), py::arg("descs").noconvert())
      .def(py::init([reg_from](mem_kind k, const py::list& items) {
             reg_dlist l(k);
             l.reserve(items.size());
             for (std::size_t i = 0; i < items.size(); ++i)
               l.push_back(reg_from(checked_tuple(items[i], i, 4, "(addr, len, dev, metaInfo)")));
             return l;
           }),
           py::arg("type"), py::arg("descs").noconvert())
      .def("__getitem__",
           [](const reg_dlist& l, long long i) {
             const auto& d = l[checked_index(i, l.size())];
             return py::make_tuple(static_cast<std::uint64_t>(d.addr),
                                   static_cast<std::uint64_t>(d.len), d.dev, py::bytes(d.meta));
           })
      .def("__setitem__",
           [reg_from](reg_dlist& l, long long i, const py::tuple& t) {
             l[checked_index(i, l.size())] =
                 reg_from(checked_tuple(t, 0, 4, "(addr, len, dev, metaInfo)"));
           })
      .def("addDesc",
           [reg_from](reg_dlist& l, const py::tuple& t) {
             l.push_back(reg_from(checked_tuple(t, 0, 4, "(addr, len, dev, metaInfo)")));
           })
      .def("append",
           [reg_from](reg_dlist& l, const py::tuple& t) {
             l.push_back(reg_from(checked_tuple(t, 0, 4, "(addr, len, dev, metaInfo)")));
           })
      .def("index",
           [reg_from](const reg_dlist& l, const py::tuple& t) {
             auto i = l.index_of(reg_from(checked_tuple(t, 0, 4, "(addr, len, dev, metaInfo)")));
             if (!i) throw nixl::error(status::not_found, "index: descriptor not in the list");
             return *i;
           })
      .def("trim", [](const reg_dlist& l) { return l.trim(); })
      .def("print",
           [](const reg_dlist& l) {
             py::print(fmt::format("DescList of mem type {} (count {})", nixl::nixl_name(l.kind()),
                                   l.size()));
             for (const auto& d : l)
               py::print(fmt::format("  addr {:#x} len {} devID {} metaInfo {}", d.addr, d.len,
                                     d.dev, d.meta));
           })
      .def("__repr__", [](const reg_dlist& l) {
        return fmt::format("<nixlRegDList {} count={}>", nixl::nixl_name(l.kind()), l.size());
      });
  common_list_methods<reg_dlist>(rl);

  auto remote_from = [](const py::tuple& t) {
    return remote_dlist::entry{desc_from_tuple(t), to_bytes_string(t[3], "remote agent name")};
  };
  py::class_<remote_dlist>(m, "nixlRemoteDList")
      .def(py::init([](mem_kind k, long long init_size) {
             if (init_size < 0) throw py::value_error("init_size must not be negative");
             remote_dlist l;
             l.kind = k;
             l.descs.resize(static_cast<std::size_t>(init_size));
             return l;
           }),
           py::arg("type"), py::arg("init_size") = 0)
      .def(py::init([remote_from](mem_kind k, const py::list& items) {
             remote_dlist l;
             l.kind = k;
             for (std::size_t i = 0; i < items.size(); ++i)
               l.descs.push_back(
                   remote_from(checked_tuple(items[i], i, 4, "(addr, len, dev, agent_name)")));
             return l;
           }),
           py::arg("type"), py::arg("descs").noconvert())
      .def("getType", [](const remote_dlist& l) { return l.kind; })
      .def("descCount", [](const remote_dlist& l) { return l.descs.size(); })
      .def("isEmpty", [](const remote_dlist& l) { return l.descs.empty(); })
      .def("clear", [](remote_dlist& l) { l.descs.clear(); })
      .def("__getitem__",
           [](const remote_dlist& l, long long i) {
             const auto& e = l.descs[checked_index(i, l.descs.size())];
             return py::make_tuple(static_cast<std::uint64_t>(e.d.addr),
                                   static_cast<std::uint64_t>(e.d.len), e.d.dev, py::str(e.agent));
           })
      .def("__setitem__",
           [remote_from](remote_dlist& l, long long i, const py::tuple& t) {
             l.descs[checked_index(i, l.descs.size())] =
                 remote_from(checked_tuple(t, 0, 4, "(addr, len, dev, agent_name)"));
           })
      .def("addDesc",
           [remote_from](remote_dlist& l, const py::tuple& t) {
             l.descs.push_back(remote_from(checked_tuple(t, 0, 4, "(addr, len, dev, agent_name)")));
           })
      .def("append",
           [remote_from](remote_dlist& l, const py::tuple& t) {
             l.descs.push_back(remote_from(checked_tuple(t, 0, 4, "(addr, len, dev, agent_name)")));
           })
      .def("remDesc",
           [](remote_dlist& l, long long i) {
             if (i < 0 || static_cast<std::size_t>(i) >= l.descs.size())
               throw nixl::error(status::invalid_param, "remDesc: index out of range");
             l.descs.erase(l.descs.begin() + i);
           })
      .def("__eq__", [](const remote_dlist& a, const remote_dlist& b) { return a == b; });

  m.def("_serialize_descs", &encode_any, py::arg("descs"),
        "Encodes a descriptor list with the library codec.");
  m.def(
      "_deserialize_descs", [](const py::bytes& b) { return decode_any(std::string(b)); },
      py::arg("serdes"),
      "Decodes bytes from _serialize_descs; raises nixlMismatchError on malformed input.");

  // Config and telemetry
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
      .def_readwrite("listenAddress", &py_config::listenAddress)
      .def_readwrite("metadataSecret", &py_config::metadataSecret);

  py::class_<py_telemetry>(m, "nixlXferTelemetry")
      .def_readonly("startTime", &py_telemetry::startTime)
      .def_readonly("postDuration", &py_telemetry::postDuration)
      .def_readonly("xferDuration", &py_telemetry::xferDuration)
      .def_readonly("totalBytes", &py_telemetry::totalBytes)
      .def_readonly("descCount", &py_telemetry::descCount);

  // The agent
  using bl = std::vector<std::uintptr_t>;
  const auto no_backends = bl{};
  py::class_<py_agent>(m, "nixlAgent")
      .def(py::init<const std::string&, const py_config&>(), py::arg("name"), py::arg("config"))
      .def("getAvailPlugins", &py_agent::avail_plugins)
      .def("getPluginParams", &py_agent::plugin_params, py::arg("type"))
      .def("getBackendParams", &py_agent::backend_params, py::arg("backend"))
      .def("createBackend", &py_agent::create_backend, py::arg("type"),
           py::arg("initParams") = std::map<std::string, std::string>{})
      .def("registerMem", &py_agent::register_mem, py::arg("descs"),
           py::arg("backends") = no_backends)
      .def("deregisterMem", &py_agent::deregister_mem, py::arg("descs"),
           py::arg("backends") = no_backends)
      .def("queryMem", &py_agent::query_mem, py::arg("descs"), py::arg("backend"))
      .def(
          "makeConnection",
          [](py_agent& a, const std::string& remote, const bl& bs) {
            auto o = a.options(bs);
            py::gil_scoped_release rel;
            a.get().make_connection(remote, o);
          },
          py::arg("remote_agent"), py::arg("backends") = no_backends)
      .def("prepXferDlist", &py_agent::prep_dlist, py::arg("agent_name"), py::arg("descs"),
           py::arg("backend") = no_backends)
      .def(
          "prepXferDlist",
          [](py_agent& a, const xfer_dlist& l, const bl& bs) { return a.prep_dlist("", l, bs); },
          py::arg("descs"), py::arg("backend") = no_backends)
      .def("makeXferReq", &py_agent::make_req, py::arg("operation"), py::arg("local_side"),
           py::arg("local_indices"), py::arg("remote_side"), py::arg("remote_indices"),
           py::arg("notif_msg") = std::string(), py::arg("backend") = no_backends,
           py::arg("skip_desc_merge") = false)
      .def("createXferReq", &py_agent::create_req, py::arg("operation"), py::arg("local_descs"),
           py::arg("remote_descs"), py::arg("remote_agent"), py::arg("notif_msg") = std::string(),
           py::arg("backend") = no_backends)
      .def("estimateXferCost", &py_agent::estimate, py::arg("req"))
      .def("postXferReq", &py_agent::post, py::arg("req"), py::arg("notif_msg") = std::string())
      .def("getXferStatus", &py_agent::xfer_status, py::arg("req"))
      .def("getXferTelemetry", &py_agent::telemetry, py::arg("req"))
      .def("queryXferBackend", &py_agent::query_backend, py::arg("req"))
      .def("releaseXferReq", &py_agent::release_req, py::arg("req"))
      .def("releasedDlistH", &py_agent::release_dlist, py::arg("handle"))
      .def("getNotifs", &py_agent::get_notifs, py::arg("notif_map"),
           py::arg("backends") = no_backends)
      .def(
          "genNotif",
          [](py_agent& a, const std::string& remote, const std::string& msg, const py::object& bs) {
            a.gen_notif(remote, msg, handle_list(bs));
          },
          py::arg("remote_agent"), py::arg("msg"), py::arg("backends") = py::list())
      .def("getLocalMD",
           [](py_agent& a) {
             std::string s;
             {
               py::gil_scoped_release rel;
               s = a.get().local_metadata();
             }
             return py::bytes(s);
           })
      .def(
          "getLocalPartialMD",
          [](py_agent& a, const reg_dlist& l, bool inc, const bl& bs) {
            auto o = a.options(bs);
            std::string s;
            {
              py::gil_scoped_release rel;
              s = a.get().local_partial_metadata(l, inc, o);
            }
            return py::bytes(s);
          },
          py::arg("descs"), py::arg("inc_conn_info") = false, py::arg("backends") = no_backends)
      .def(
          "loadRemoteMD",
          [](py_agent& a, const std::string& md) {
            std::string name;
            {
              py::gil_scoped_release rel;
              name = a.get().load_remote_metadata(std::string_view(md));
            }
            return py::bytes(name);
          },
          py::arg("remote_metadata"))
      .def(
          "invalidateRemoteMD",
          [](py_agent& a, const std::string& remote) {
            py::gil_scoped_release rel;
            a.get().invalidate_remote_metadata(remote);
          },
          py::arg("remote_agent"))
      .def(
          "sendLocalMD",
          [](py_agent& a, const std::string& ip, int port) {
            a.with_exchange("sendLocalMD", ip, port, "",
                            [](auto& x, const auto& t) { return x.send_local_metadata(t); });
          },
          py::arg("ip_addr") = std::string(), py::arg("port") = 0)
      .def(
          "sendLocalPartialMD",
          [](py_agent& a, const reg_dlist& l, bool inc, const bl& bs, const std::string& ip,
             int port, const std::string& label) {
            auto o = a.options(bs);
            a.with_exchange("sendLocalPartialMD", ip, port, label, [&](auto& x, const auto& t) {
              return x.send_partial_metadata(l, inc, t, o);
            });
          },
          py::arg("descs"), py::arg("inc_conn_info") = false, py::arg("backends") = no_backends,
          py::arg("ip_addr") = std::string(), py::arg("port") = 0, py::arg("label") = std::string())
      .def(
          "fetchRemoteMD",
          [](py_agent& a, const std::string& remote, const std::string& ip, int port,
             const std::string& label) {
            a.with_exchange("fetchRemoteMD", ip, port, label, [&](auto& x, const auto& t) {
              return x.fetch_remote_metadata(remote, t);
            });
          },
          py::arg("remote_name"), py::arg("ip_addr") = std::string(), py::arg("port") = 0,
          py::arg("label") = std::string())
      .def(
          "invalidateLocalMD",
          [](py_agent& a, const std::string& ip, int port) {
            a.with_exchange("invalidateLocalMD", ip, port, "",
                            [](auto& x, const auto& t) { return x.invalidate_local_metadata(t); });
          },
          py::arg("ip_addr") = std::string(), py::arg("port") = 0)
      .def(
          "checkRemoteMD",
          [](py_agent& a, const std::string& remote, const xfer_dlist& l) {
            bool ok;
            {
              py::gil_scoped_release rel;
              ok = a.get().check_remote_metadata(remote, l);
            }
            return ok ? status::success : status::not_found;
          },
          py::arg("remote_name"), py::arg("descs"))
      .def(
          "prepMemView",
          [](py_agent&, const py::object&, const bl&) -> std::uintptr_t {
            throw nixl::error(status::not_supported,
                              "prepMemView: the GPU device API is not part of this build");
          },
          py::arg("descs"), py::arg("backends") = no_backends)
      .def(
          "releaseMemView",
          [](py_agent&, std::uintptr_t) {
            throw nixl::error(status::not_supported,
                              "releaseMemView: the GPU device API is not part of this build");
          },
          py::arg("mem_view"))
      // Fast forms for nixl._api: the status as a plain int (no enum object to build/compare).
      .def(
          "_post",
          [](py_agent& a, std::uintptr_t h, const std::string& notif) {
            return static_cast<int>(a.post(h, notif));
          },
          py::arg("req"), py::arg("notif_msg") = std::string())
      .def(
          "_status",
          [](py_agent& a, std::uintptr_t h) { return static_cast<int>(a.xfer_status(h)); },
          py::arg("req"))
      // Not in NIXL: the port the metadata listener bound (useful with listenPort 0).
      .def("getListenPort", [](py_agent& a) { return a.listen_port(); })
      .def("getName", [](py_agent& a) { return a.get().name(); })
      .def("progress", [](py_agent& a) {
        py::gil_scoped_release rel;
        a.get().progress();
      });
}
