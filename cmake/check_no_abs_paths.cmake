# Source check, CTest no_abs_paths (docs/architecture.md "Module graph"; the upstream
# harnesses hard-coded theirs): no hard-coded workspace, home or
# build paths in library or CLI sources; every path is an option or relative to
# --out. OS interfaces (/proc, /dev/null, /tmp as the TMPDIR fallback) are allowed.
# Usage: cmake -DSRC_DIR=<repo>/src -P check_no_abs_paths.cmake
file(GLOB_RECURSE sources "${SRC_DIR}/*.c" "${SRC_DIR}/*.h")
set(bad "")
foreach(f IN LISTS sources)
  get_filename_component(name "${f}" NAME)
  if(name MATCHES "^test_")
    continue()
  endif()
  file(STRINGS "${f}" lines REGEX "\"/(work|home|root|usr|opt|mnt|srv|var|etc)/")
  foreach(l IN LISTS lines)
    string(APPEND bad "${f}: ${l}\n")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "absolute path literals in sources:\n${bad}")
endif()
