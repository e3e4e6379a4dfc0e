// nixlAgent: prepared lists, transfer requests and notifications (agent.hpp), and the binding of
// those methods. Requests and prepared lists cross into Python as handles (the addresses of the
// facade's objects, which it owns until they are released or the agent goes).

#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "agent.hpp"
#include "convert.hpp"

namespace nixl::python {
namespace {

xfer_options xopts(backend_options&& b, const std::string& notif, bool skip) {
  xfer_options o;
  o.backends = std::move(b.backends);
  if (!notif.empty()) o.notif = notif;  // NIXL: an empty message means "no notification"
  o.skip_merge = skip;
  return o;
}

}  // namespace

// Prepared lists

template <class List>
std::uintptr_t py_agent::prep_any(std::string agent, const List& l,
                                  const std::vector<std::uintptr_t>& bs) {
  if (agent == "NIXL_INIT_AGENT") agent.clear();
  auto o = options(bs);
  auto p = std::make_shared<runtime::prepared>(rt_);
  {
    py::gil_scoped_release rel;
    p->list = get().prepare_list(agent, l, o);
  }
  return reinterpret_cast<std::uintptr_t>(rt_.lists.keep(std::move(p)));
}

std::uintptr_t py_agent::prep_dlist(std::string agent, const xfer_dlist& l,
                                    const std::vector<std::uintptr_t>& bs) {
  return prep_any(std::move(agent), l, bs);
}

std::uintptr_t py_agent::prep_dlist(std::string agent, const strided_dlist& l,
                                    const std::vector<std::uintptr_t>& bs) {
  return prep_any(std::move(agent), l, bs);
}

std::shared_ptr<runtime::prepared> py_agent::dlist(std::uintptr_t h) const {
  return rt_.list_at(reinterpret_cast<const void*>(h));
}

void py_agent::release_dlist(std::uintptr_t h) {
  (void)dlist(h);
  rt_.lists.drop(reinterpret_cast<const void*>(h));
}

// Requests

std::uintptr_t py_agent::keep(request_t&& r) {
  auto p = std::make_shared<runtime::request>(rt_);
  p->req = std::move(r);
  return reinterpret_cast<std::uintptr_t>(rt_.requests.keep(std::move(p)));
}

std::uintptr_t py_agent::make_req(xfer_op op, std::uintptr_t lh, py::object li, std::uintptr_t rh,
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
    req = get().make_request(op, l->list, lv, r->list, rv, o);
  }
  return keep(std::move(req));
}

std::uintptr_t py_agent::create_req(xfer_op op, const xfer_dlist& l, const xfer_dlist& r,
                                    const std::string& remote, const std::string& notif,
                                    const std::vector<std::uintptr_t>& bs) {
  auto o = xopts(options(bs), notif, false);
  request_t req;
  {
    py::gil_scoped_release rel;
    req = get().create_request(op, l, r, remote, o);
  }
  return keep(std::move(req));
}

std::shared_ptr<runtime::request> py_agent::req(std::uintptr_t h) const {
  return rt_.request_at(reinterpret_cast<const void*>(h));
}

namespace {

/// Runs `f` (a call on the request) without the GIL; a status below zero raises as `call`'s.
template <class F>
status on_request(const std::shared_ptr<runtime::request>& r, std::string_view call, F&& f) {
  status s;
  {
    py::gil_scoped_release rel;
    s = f(r->req);
  }
  return check(s, call);
}

/// Seconds from Python as a wait's timeout: negative (None) waits without a deadline.
std::chrono::nanoseconds timeout_of(double seconds) {
  if (std::isnan(seconds)) throw std::invalid_argument("timeout must be a number of seconds");
  if (seconds < 0 || seconds > 1e9) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

}  // namespace

status py_agent::post(std::uintptr_t h, const std::string& notif) {
  return on_request(req(h), "postXferReq",
                    [&](auto& q) { return notif.empty() ? q.post() : q.post(notif_arg{notif}); });
}

status py_agent::xfer_status(std::uintptr_t h) {
  return on_request(req(h), "getXferStatus", [](auto& q) { return q.status(); });
}

status py_agent::peek_xfer(std::uintptr_t h) {
  return on_request(req(h), "peekXferReq", [](auto& q) { return q.peek(); });
}

status py_agent::wait_xfer(std::uintptr_t h, double timeout_s) {
  const auto t = timeout_of(timeout_s);
  return on_request(req(h), "waitXferReq", [t](auto& q) { return q.wait(t); });
}

void py_agent::release_req(std::uintptr_t h) {
  auto r = req(h);
  status s;
  {
    py::gil_scoped_release rel;
    s = rt_.release(*r);
  }
  if (s == status::repost_active)
    throw nixl::error(s,
                      "releaseXferReq: the backend could not cancel the transfer in flight; "
                      "wait for it to finish and release again");
}

py_telemetry py_agent::telemetry(std::uintptr_t h) {
  auto r = req(h);
  xfer_telemetry t{};
  check(r->req.telemetry(t), "getXferTelemetry");
  py_telemetry out;
  out.startTime =
      std::chrono::duration_cast<std::chrono::microseconds>(t.start.time_since_epoch()).count();
  out.postDuration = t.post_duration.count();
  out.xferDuration = t.xfer_duration.count();
  out.totalBytes = t.total_bytes;
  out.descCount = t.desc_count;
  return out;
}

std::uintptr_t py_agent::query_backend(std::uintptr_t h) {
  auto r = req(h);
  const auto id = backend_handle(r->req.backend_name());
  if (id == 0) throw_status(status::not_found, "queryXferBackend");
  return id;
}

py::tuple py_agent::estimate(std::uintptr_t h) {
  auto r = req(h);
  auto e = get().estimate_cost(r->req);
  if (!e)
    throw nixl::error(
        status::not_supported,
        fmt::format("estimateXferCost: backend {} gives no cost estimate", r->req.backend_name()));
  return py::make_tuple(static_cast<std::int64_t>(e->count()), std::int64_t{0},
                        cost_method::analytical_backend);
}

// Notifications

namespace {

/// Appends `m` to the dict `d` (name -> list of bytes), as NIXL's getNotifs does.
py::dict append_notifs(py::dict d, notif_map& m) {
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

/// `take(m)` with the GIL released, then what it took appended to `d`.
template <class Take>
py::dict collect_notifs(py::dict d, Take&& take) {
  notif_map m;
  {
    py::gil_scoped_release rel;
    take(m);
  }
  return append_notifs(std::move(d), m);
}

}  // namespace

py::dict py_agent::get_notifs(py::dict d, const std::vector<std::uintptr_t>& bs) {
  const auto o = options(bs);
  return collect_notifs(std::move(d), [&](notif_map& m) { get().notifications(m, o); });
}

py::dict py_agent::wait_notifs(py::dict d, const std::vector<std::uintptr_t>& bs,
                               double timeout_s) {
  const auto t = timeout_of(timeout_s);
  const auto o = options(bs);
  return collect_notifs(std::move(d), [&](notif_map& m) { get().wait_notifications(m, t, o); });
}

py::dict py_agent::get_aborts(py::dict d, const std::vector<std::uintptr_t>& bs) {
  const auto o = options(bs);
  return collect_notifs(std::move(d), [&](notif_map& m) { get().aborted_notifications(m, o); });
}

py::tuple py_agent::wait_notifs_or_aborts(const std::vector<std::uintptr_t>& bs, double timeout_s) {
  const auto t = timeout_of(timeout_s);
  auto o = options(bs);
  notif_map n, a;
  {
    py::gil_scoped_release rel;
    get().wait_notifications(n, a, t, o);
  }
  return py::make_tuple(append_notifs(py::dict(), n), append_notifs(py::dict(), a));
}

std::vector<std::string> py_agent::gone_agents(const std::vector<std::uintptr_t>& bs) {
  auto o = options(bs);
  py::gil_scoped_release rel;
  return get().gone_agents(o);
}

void py_agent::gen_notif(const std::string& remote, const std::string& msg,
                         const std::vector<std::uintptr_t>& bs) {
  auto o = options(bs);
  py::gil_scoped_release rel;
  get().notify(remote, msg, o);
}

namespace {

/// NIXL 1.5's strided rows: an Nx5 array (addr, len, dev, stride, count) of uint64 or int64,
/// C-contiguous, copied bytewise. Throws std::invalid_argument (Python ValueError) otherwise.
strided_dlist strided_from_array(mem_kind k, const py::array& a) {
  if (a.ndim() != 2 || a.shape(1) != 5)
    throw std::invalid_argument("descs must be a Nx5 numpy array");
  if (!a.dtype().is(py::dtype::of<std::uint64_t>()) && !a.dtype().is(py::dtype::of<std::int64_t>()))
    throw std::invalid_argument("descs must be a Nx5 numpy array of uint64 or int64");
  if ((a.flags() & py::array::c_style) == 0)
    throw std::invalid_argument("descs must be a Nx5 numpy array, C-contiguous");
  std::vector<stride_desc> rows(static_cast<std::size_t>(a.shape(0)));
  static_assert(sizeof(stride_desc) == 5 * sizeof(std::uint64_t));
  if (!rows.empty()) std::memcpy(rows.data(), a.data(), rows.size() * sizeof(stride_desc));
  return strided_dlist(k, std::move(rows));
}

}  // namespace

void bind_transfers(py::class_<py_agent>& c) {
  using bl = std::vector<std::uintptr_t>;
  const auto no_backends = bl{};
  using prep_expanded = std::uintptr_t (py_agent::*)(std::string, const xfer_dlist&, const bl&);
  c.def("prepXferDlist", static_cast<prep_expanded>(&py_agent::prep_dlist), py::arg("agent_name"),
        py::arg("descs"), py::arg("backend") = no_backends)
      .def(
          "prepXferDlist",
          [](py_agent& a, const xfer_dlist& l, const bl& bs) { return a.prep_dlist("", l, bs); },
          py::arg("descs"), py::arg("backend") = no_backends)
      .def(
          "prepXferDlist",
          [](py_agent& a, std::string agent, mem_kind k, const py::array& descs, const bl& bs) {
            return a.prep_dlist(std::move(agent), strided_from_array(k, descs), bs);
          },
          py::arg("agent_name"), py::arg("mem_type"), py::arg("descs").noconvert(),
          py::arg("backend") = no_backends)
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
      // Fast forms for nixl._api: the status as a plain int (no enum object to build/compare).
      .def(
          "_post",
          [](py_agent& a, std::uintptr_t h, const std::string& notif) {
            return static_cast<int>(a.post(h, notif));
          },
          py::arg("req"), py::arg("notif_msg") = std::string())
      // Waiting without polling (docs/waiting.md): the agent's event fd, and blocking waits that
      // release the GIL (timeout in seconds; negative: no deadline).
      .def("eventFd", [](py_agent& a) { return a.get().event_fd(); })
      .def("drainEvents", [](py_agent& a) { a.get().drain_events(); })
      .def(
          "waitXferReq",
          [](py_agent& a, std::uintptr_t h, double t) {
            return static_cast<int>(a.wait_xfer(h, t));
          },
          py::arg("req"), py::arg("timeout") = -1.0)
      .def(
          "peekXferReq",
          [](py_agent& a, std::uintptr_t h) { return static_cast<int>(a.peek_xfer(h)); },
          py::arg("req"))
      .def("waitNotifs", &py_agent::wait_notifs, py::arg("notif_map"),
           py::arg("backends") = no_backends, py::arg("timeout") = -1.0)
      // Abort notices (docs/error-model.md): nixl-cpp's own, beside NIXL's calls.
      .def("getAbortedNotifs", &py_agent::get_aborts, py::arg("notif_map"),
           py::arg("backends") = no_backends)
      .def("waitNotifsOrAborts", &py_agent::wait_notifs_or_aborts,
           py::arg("backends") = no_backends, py::arg("timeout") = -1.0)
      .def("getGoneAgents", &py_agent::gone_agents, py::arg("backends") = no_backends)
      .def(
          "_status",
          [](py_agent& a, std::uintptr_t h) { return static_cast<int>(a.xfer_status(h)); },
          py::arg("req"));
}

}  // namespace nixl::python
