// nixlXferDList, nixlRegDList and nixlRemoteDList (NIXL's descriptor lists), and the
// serialization of lists with the library codec.

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "convert.hpp"
#include "module.hpp"

namespace nixl::python {
namespace {

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

}  // namespace

void bind_lists(py::module_& m) {
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
}

}  // namespace nixl::python
