# Run by the tests tensorops_add_link_check adds (tests/CMakeLists.txt):
#   cmake -DTARGET=<lib> -DCLOSURE=<file> -DFORBID=<regex> -P check_link_closure.cmake
# CLOSURE lists, one a line, every library <lib> brings onto a link line, as
# CMake resolved them at configure time. Fails if one matches FORBID (matched
# against the name in lower case).
file(STRINGS "${CLOSURE}" libs)
set(forbidden)
foreach(lib IN LISTS libs)
  string(TOLOWER "${lib}" lower)
  if(lower MATCHES "${FORBID}")
    list(APPEND forbidden "${lib}")
  endif()
endforeach()
list(JOIN libs " " all)
if(forbidden)
  list(JOIN forbidden " " names)
  message(FATAL_ERROR "${TARGET} must not link /${FORBID}/, but its closure has: ${names}\n"
                      "Whole closure: ${all}")
endif()
message(STATUS "${TARGET} links: ${all}")
