#pragma once
// Python objects -> descriptors, indices and handles, with NIXL's accepted forms (ints or
// anything with __index__, str or bytes, tuples, numpy arrays) and errors that name the bad
// element.

#include <cstdint>
#include <string>
#include <vector>

#include <nixl/detail/recycled.hpp>

#include "module.hpp"

namespace nixl::python {

/// An int (or anything with __index__) as a non-negative 64-bit value; `what` names it in errors.
std::uint64_t to_u64(py::handle o, const char* what);

/// The bytes of a str (UTF-8) or bytes object.
std::string to_bytes_string(py::handle o, const char* what);

/// `item` (descriptor `i` of a list) as a tuple of `arity` elements shaped as `shape` says.
py::tuple checked_tuple(py::handle item, std::size_t i, std::size_t arity, const char* shape);

/// (addr, len, dev, ...) -> desc.
desc desc_from_tuple(const py::tuple& t);

/// Reads an Nx3 integer ndarray (uint64 or int64, C-contiguous) into descriptors.
std::vector<desc> descs_from_array(const py::array& a);

/// desc -> (addr, len, dev).
py::tuple to_tuple(const desc& d);

/// Python index `i` (negative from the end) into a list of `n`; IndexError when outside.
std::size_t checked_index(long long i, std::size_t n);

/// Descriptor indices (large lists reuse freed blocks: nixl/detail/recycled.hpp).
using index_vector = nixl::detail::recycled_vector<int>;
/// Descriptor indices from a list of ints or a 1-D integer array; `which` ("local", "remote")
/// names them in errors.
index_vector indices(py::handle o, const char* which);

/// A backend handle list, or one handle (NIXL's genNotif takes a single one).
std::vector<std::uintptr_t> handle_list(const py::object& o);

}  // namespace nixl::python
