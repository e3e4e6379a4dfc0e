# cmake -DROOT=<repo> -P check_upward.cmake
# Fails when a header or source includes a file in a folder above its own: the folder of the
# included file is a proper ancestor of the includer's (detail/x.hpp including ../y.hpp or
# <nixl/y.hpp>; backends/ucx/include/nixl/backends/ucx/detail/x.hpp including ucx/config.hpp).
# Files include their own folder, a folder below it, a sibling, or another tree (a backend
# includes the core): the arrows point down or sideways, never back up.
#
# An include resolves as the compiler would: "x" first beside the includer, then <x> and "x" in
# the project's include folders; what resolves nowhere (the standard library, fmt, UCX) is not
# the project's and is skipped.

cmake_minimum_required(VERSION 3.20)

set(scanned include metadata runtime python/src compat)
file(GLOB backend_includes LIST_DIRECTORIES true RELATIVE ${ROOT} ${ROOT}/backends/*/include)
list(APPEND scanned ${backend_includes})

file(GLOB roots LIST_DIRECTORIES true ${ROOT}/include ${ROOT}/backends/*/include
     ${ROOT}/metadata/include ${ROOT}/runtime/include ${ROOT}/compat/include
     ${ROOT}/compat/capi/include ${ROOT}/umbrella/include ${ROOT}/telemetry/include)

# Includes that stay upward on purpose, "includer|included" (paths from the root), each with
# its reason. Keep this list empty where you can: move the vocabulary a lower folder needs to
# that folder (or below it) and leave a forwarding header at the old public name, as
# include/nixl/status.hpp does for include/nixl/detail/status.hpp.
set(allowed
    # NIXL's own header layout, which the compat headers reproduce for drop-in use: its
    # serializer includes the types header at the top of the include folder.
    "compat/include/utils/serdes/serdes.h|compat/include/nixl_types.h"
    # and its device header, installed as include/gpu/ucx/nixl_device.cuh, includes the types
    # header (nixl_status_t, nixlMemViewH) the same way.
    "compat/include/gpu/ucx/nixl_device.cuh|compat/include/nixl_types.h")

set(exts .h .hpp .cuh .inl .ipp .c .cc .cpp .cu)
set(files "")
foreach(d ${scanned})
  if(IS_DIRECTORY ${ROOT}/${d})
    foreach(e ${exts})
      file(GLOB_RECURSE found ${ROOT}/${d}/*${e})
      list(APPEND files ${found})
    endforeach()
  endif()
endforeach()
list(REMOVE_DUPLICATES files)
list(SORT files)
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "check_upward: nothing to scan under ${ROOT}")
endif()

set(bad "")
set(used "")
set(edges 0)
foreach(f ${files})
  get_filename_component(dir ${f} DIRECTORY)
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
  if(NOT lines)
    continue()
  endif()
  # file(STRINGS ... REGEX) drops the other lines: number the hits from a second read.
  file(STRINGS ${f} all)
  set(n 0)
  foreach(line IN LISTS all)
    math(EXPR n "${n} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"]+)[>\"]")
      continue()
    endif()
    set(quote "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    set(candidates "")
    if(quote STREQUAL "\"")
      list(APPEND candidates ${dir}/${name})
    endif()
    foreach(r ${roots})
      list(APPEND candidates ${r}/${name})
    endforeach()
    set(target "")
    foreach(c ${candidates})
      if(EXISTS ${c} AND NOT IS_DIRECTORY ${c})
        get_filename_component(target ${c} ABSOLUTE)
        break()
      endif()
    endforeach()
    if(NOT target)
      continue()
    endif()
    math(EXPR edges "${edges} + 1")
    get_filename_component(tdir ${target} DIRECTORY)
    string(LENGTH "${tdir}/" tlen)
    string(LENGTH "${dir}" dlen)
    if(dlen LESS_EQUAL tlen)
      continue()
    endif()
    string(SUBSTRING "${dir}" 0 ${tlen} head)
    if(NOT head STREQUAL "${tdir}/")
      continue()
    endif()
    file(RELATIVE_PATH rf ${ROOT} ${f})
    file(RELATIVE_PATH rt ${ROOT} ${target})
    if("${rf}|${rt}" IN_LIST allowed)
      list(APPEND used "${rf}|${rt}")
      continue()
    endif()
    string(APPEND bad "\n  ${rf}:${n}: includes ${rt}, in a folder above its own")
  endforeach()
endforeach()

# An allowed include that is gone (fixed, or its file renamed) leaves the list too.
foreach(a ${allowed})
  if(NOT a IN_LIST used)
    string(REPLACE "|" " -> " a "${a}")
    string(APPEND bad "\n  ${a}: allowed in check_upward.cmake but no longer there: drop its line")
  endif()
endforeach()

if(bad)
  message(FATAL_ERROR
          "a file includes one in a folder above its own; move what the lower folder needs into "
          "it (or below it) and keep a forwarding header at the public name:${bad}")
endif()
message(STATUS "check_upward: ${count} files, ${edges} includes of the project's files, none upward")
