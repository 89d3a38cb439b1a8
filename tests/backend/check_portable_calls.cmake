# The portable build's backend calls nothing that only Linux has: every
# symbol its library leaves to the system is looked up, and one of Linux's
# own (or io_uring's) fails the test, naming it. A Linux-only call outside
# backend/src/platform.cpp, or inside it on the portable side, shows here.
#   cmake -DNM=nm -DLIBRARY=libdemandflight_backend.a -P check_portable_calls.cmake
cmake_minimum_required(VERSION 3.25)
set(_linux_only syncfs sync_file_range fdatasync posix_fadvise fallocate
    fsetxattr fgetxattr setxattr getxattr lsetxattr lgetxattr removexattr
    fremovexattr listxattr flistxattr eventfd splice tee vmsplice copy_file_range
    renameat2 statx memfd_create pipe2 accept4 dup3 sendfile)
set(_linux_prefixes io_uring_ epoll_ inotify_ fanotify_)
execute_process(COMMAND ${NM} -u ${LIBRARY} OUTPUT_VARIABLE _out RESULT_VARIABLE _rc
                ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -u ${LIBRARY}: ${_err}")
endif()
string(REGEX MATCHALL "U [^\n]+" _undefined "${_out}")
list(TRANSFORM _undefined REPLACE "^U " "")
list(REMOVE_DUPLICATES _undefined)
list(LENGTH _undefined _count)
if(_count LESS 10)
  message(FATAL_ERROR "${LIBRARY}: only ${_count} undefined symbols: not the backend library?")
endif()
set(_found)
foreach(_symbol ${_undefined})
  string(REGEX REPLACE "@.*" "" _name "${_symbol}")
  if(_name IN_LIST _linux_only)
    list(APPEND _found ${_name})
  endif()
  foreach(_prefix ${_linux_prefixes})
    string(FIND "${_name}" "${_prefix}" _at)
    if(_at EQUAL 0)
      list(APPEND _found ${_name})
    endif()
  endforeach()
endforeach()
if(_found)
  list(REMOVE_DUPLICATES _found)
  string(REPLACE ";" ", " _text "${_found}")
  message(FATAL_ERROR "${LIBRARY} calls Linux-only functions in a portable build: ${_text}")
endif()
message(STATUS "${LIBRARY}: ${_count} system symbols, none Linux-only")
