# The install CTests (cmake/plena_install.cmake), one STEP per test:
#   install    cmake --install BINARY_DIR into a fresh PREFIX (fixture setup)
#   headers    every file under PREFIX/include/plena: no jansson type; every
#              header compiles on its own with only PREFIX/include on the path
#   consumers  tests/install/pkgconfig (make, pkg-config) and tests/install/cmake
#              (find_package(plena CONFIG)) built against PREFIX and run
# Usage: cmake -DSTEP=... -DBINARY_DIR= -DSOURCE_DIR= -DPREFIX= -DWORK= -DCC=
#              -DGENERATOR= -DPKG_CONFIG= -P test_install.cmake
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run("cmake --install" ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${PREFIX})

elseif(STEP STREQUAL "headers")
  set(inc ${PREFIX}/include)
  if(NOT EXISTS ${inc}/plena/plena.h)
    message(FATAL_ERROR "no ${inc}/plena/plena.h: was install_tree run?")
  endif()
  file(GLOB_RECURSE files RELATIVE ${inc} ${inc}/plena/*)
  list(LENGTH files n)
  set(bad "")
  foreach(f IN LISTS files)
    file(STRINGS ${inc}/${f} hits REGEX "jansson|(^|[^A-Za-z0-9_])json_t([^A-Za-z0-9_]|$)")
    foreach(h IN LISTS hits)
      string(APPEND bad "  ${f}: ${h}\n")
    endforeach()
  endforeach()
  if(bad)
    message(FATAL_ERROR "installed headers mention jansson (not part of the public API):\n${bad}")
  endif()
  message(STATUS "${n} installed files, none mentions jansson")
  set(dir ${WORK}/headers)
  file(REMOVE_RECURSE ${dir})
  file(MAKE_DIRECTORY ${dir})
  foreach(f IN LISTS files)
    if(NOT f MATCHES "\\.h$")
      continue()
    endif()
    string(MAKE_C_IDENTIFIER ${f} id)
    # twice: the include guard must hold
    file(WRITE ${dir}/${id}.c "#include <${f}>\n#include <${f}>\n")
    run("${f} on its own" ${CC} -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only
        -I${inc} ${dir}/${id}.c)
  endforeach()

elseif(STEP STREQUAL "consumers")
  if(NOT EXISTS ${PREFIX}/include/plena/plena.h)
    message(FATAL_ERROR "no ${PREFIX}/include/plena/plena.h: was install_tree run?")
  endif()
  file(GLOB pcdir LIST_DIRECTORIES true ${PREFIX}/lib*/pkgconfig ${PREFIX}/lib/*/pkgconfig)
  find_program(MAKE NAMES make gmake REQUIRED)
  file(REMOVE_RECURSE ${WORK}/pkgconfig ${WORK}/cmake)
  file(MAKE_DIRECTORY ${WORK}/pkgconfig)
  set(ENV{PKG_CONFIG_PATH} "${pcdir}")
  run("pkg-config consumer (shared and static)" ${MAKE} --no-print-directory
      -f ${SOURCE_DIR}/tests/install/pkgconfig/Makefile OUT=${WORK}/pkgconfig CC=${CC}
      PKG_CONFIG=${PKG_CONFIG} check)
  message("${last_output}")
  run("cmake consumer: configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/cmake
      -B ${WORK}/cmake -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_C_COMPILER=${CC}
      -DCMAKE_BUILD_TYPE=Release)
  run("cmake consumer: build" ${CMAKE_COMMAND} --build ${WORK}/cmake)
  foreach(kind shared static)
    run("cmake consumer: consumer_${kind}" ${WORK}/cmake/consumer_${kind})
    message("${last_output}")
  endforeach()

else()
  message(FATAL_ERROR "test_install.cmake: unknown STEP '${STEP}'")
endif()
