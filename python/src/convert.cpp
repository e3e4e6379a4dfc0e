// Python objects -> descriptors, indices and handles (convert.hpp).

#include "convert.hpp"

#include <cstring>
#include <limits>

namespace nixl::python {

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

index_vector indices(py::handle o, const char* which) {
  auto check = [&](long long v, std::size_t i) {
    if (v < 0 || v > std::numeric_limits<int>::max())
      throw nixl::error(status::invalid_param,
                        fmt::format("{} index {} at position {} is out of range", which, v, i));
    return static_cast<int>(v);
  };
  if (py::isinstance<py::array>(o)) {
    auto a = py::reinterpret_borrow<py::array>(o);
    const auto k = a.dtype().kind();
    if (a.ndim() != 1 || (k != 'i' && k != 'u'))
      throw py::type_error(fmt::format("{} indices must be a 1-D integer array", which));
    auto ai = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    index_vector out(static_cast<std::size_t>(ai.size()));
    const auto* d = ai.data();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = check(d[i], i);
    return out;
  }
  // a list or tuple of ints, read in place (no Python object per element)
  if (PyList_Check(o.ptr()) || PyTuple_Check(o.ptr())) {
    const bool list = PyList_Check(o.ptr());
    const auto n =
        static_cast<std::size_t>(list ? PyList_GET_SIZE(o.ptr()) : PyTuple_GET_SIZE(o.ptr()));
    index_vector out(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto j = static_cast<Py_ssize_t>(i);
      PyObject* e = list ? PyList_GET_ITEM(o.ptr(), j) : PyTuple_GET_ITEM(o.ptr(), j);
      py::object num;  // an int-like element (numpy's integers): its int
      if (!PyLong_Check(e)) {
        if (PyFloat_Check(e) || PyIndex_Check(e) == 0)
          throw py::type_error(
              fmt::format("{} indices must be a list of ints or a 1-D int array", which));
        num = py::reinterpret_steal<py::object>(PyNumber_Index(e));
        if (!num) throw py::error_already_set();
        e = num.ptr();
      }
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(e, &overflow);
      if (overflow != 0 || (v == -1 && PyErr_Occurred() != nullptr)) {
        PyErr_Clear();
        throw nixl::error(status::invalid_param,
                          fmt::format("{} index at position {} is out of range", which, i));
      }
      out[i] = check(v, i);
    }
    return out;
  }
  try {
    const auto v = o.cast<std::vector<long long>>();
    index_vector out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = check(v[i], i);
    return out;
  } catch (const py::cast_error&) {
    throw py::type_error(
        fmt::format("{} indices must be a list of ints or a 1-D int array", which));
  }
}

std::vector<std::uintptr_t> handle_list(const py::object& o) {
  if (PyLong_Check(o.ptr())) return {o.cast<std::uintptr_t>()};
  try {
    return o.cast<std::vector<std::uintptr_t>>();
  } catch (const py::cast_error&) {
    throw py::type_error("backends must be a list of backend handles (or one handle)");
  }
}

}  // namespace nixl::python
