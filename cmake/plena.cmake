# Helpers shared by every module's CMakeLists.txt.
#
# plena_module(NAME SOURCES a.c b.c DEPS other_module ... LIBS lib ...)
#   compiles src/NAME once, as the OBJECT library plena_NAME_obj (position
#   independent), and builds the static library plena_NAME from those objects;
#   DEPS are module names (layering: a module may only depend on modules below
#   it, see docs/design.md), LIBS external libraries (imported targets,
#   ${MATH_LIB}). Tests link plena_NAME. When NAME is listed in PLENA_MODULES,
#   the same objects and LIBS also go into the combined libplena (targets
#   `plena` and `plena_shared`, created by plena_library()); other modules
#   (gen_testing) stay test-only. Definitions and options a module file sets
#   on plena_NAME after this call reach the objects (they are forwarded).
# plena_test(NAME SOURCES t.c DEPS module ... [TIMEOUT s] [LABELS l])
#   builds a cmocka test executable and registers it with CTest; the test runs
#   with the repository root as working directory and PLENA_SOURCE_DIR set.
#   Does nothing when PLENA_BUILD_TESTS is OFF.

# The combined library, empty until the modules add their objects:
#   plena         libplena.a  (the CLI links it)
#   plena_shared  libplena.so (soname: see docs/design.md)
function(plena_library)
  add_library(plena STATIC)
  add_library(plena_shared SHARED)
  if(PROJECT_VERSION_MAJOR EQUAL 0)
    set(soversion ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  else()
    set(soversion ${PROJECT_VERSION_MAJOR})
  endif()
  set_target_properties(plena PROPERTIES OUTPUT_NAME plena EXPORT_NAME plena_static
    ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  set_target_properties(plena_shared PROPERTIES OUTPUT_NAME plena EXPORT_NAME plena
    VERSION ${PROJECT_VERSION} SOVERSION ${soversion}
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  # The sanitizer runtime of a clang ASan build is only linked into executables.
  if(NOT PLENA_SANITIZE)
    target_link_options(plena_shared PRIVATE -Wl,--no-undefined)
  endif()
  foreach(t plena plena_shared)
    target_include_directories(${t} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
                                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  endforeach()
endfunction()

# External library as the combined library links it: ${MATH_LIB} (an absolute
# path from find_library) becomes plain `m`, so the exported static target and
# plena.pc do not carry a build-machine path.
function(_plena_lib_item item out)
  if(item STREQUAL "${MATH_LIB}")
    set(${out} m PARENT_SCOPE)
  else()
    set(${out} ${item} PARENT_SCOPE)
  endif()
endfunction()

function(plena_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;LIBS" ${ARGN})
  set(obj plena_${name}_obj)
  add_library(${obj} OBJECT ${M_SOURCES})
  # -fno-semantic-interposition: PIC must not stop inlining and direct calls
  # within a translation unit (the emulator's hot paths); nobody interposes.
  set_target_properties(${obj} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${obj} PRIVATE -fno-semantic-interposition)
  add_library(plena_${name} STATIC $<TARGET_OBJECTS:${obj}>)
  target_include_directories(plena_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  foreach(d IN LISTS M_DEPS)
    target_link_libraries(plena_${name} PUBLIC plena_${d})
  endforeach()
  if(M_LIBS)
    target_link_libraries(plena_${name} PUBLIC ${M_LIBS})
  endif()
  # the module graph for the include_graph test (test-only variants skipped)
  if(NOT name MATCHES "_testing$")
    string(REPLACE ";" " " deps_text "${M_DEPS}")
    set_property(GLOBAL APPEND PROPERTY PLENA_MODULE_GRAPH "${name} ${deps_text}")
  endif()
  # The objects compile exactly as plena_NAME would: its definitions, options
  # and include directories, with everything DEPS and LIBS propagate, and what
  # the module file adds to plena_NAME after this call.
  target_compile_definitions(${obj} PRIVATE $<TARGET_PROPERTY:plena_${name},COMPILE_DEFINITIONS>)
  target_compile_options(${obj} PRIVATE $<TARGET_PROPERTY:plena_${name},COMPILE_OPTIONS>)
  target_include_directories(${obj} PRIVATE $<TARGET_PROPERTY:plena_${name},INCLUDE_DIRECTORIES>)

  if(name IN_LIST PLENA_MODULES)
    target_sources(plena PRIVATE $<TARGET_OBJECTS:${obj}>)
    target_sources(plena_shared PRIVATE $<TARGET_OBJECTS:${obj}>)
    foreach(l IN LISTS M_LIBS)
      _plena_lib_item("${l}" item)
      get_property(seen GLOBAL PROPERTY PLENA_LIBRARY_LIBS)
      if(item IN_LIST seen)
        continue()
      endif()
      # Called from the module's directory, so imported targets found there
      # (MPI::MPI_C) resolve. In the build tree `plena` also passes their
      # usage requirements on (the CLI includes internal, jansson-using
      # headers); installed, the static library only needs them at link time.
      target_link_libraries(plena PRIVATE ${item} INTERFACE $<BUILD_INTERFACE:${item}>)
      target_link_libraries(plena_shared PRIVATE ${item})
      set_property(GLOBAL APPEND PROPERTY PLENA_LIBRARY_LIBS ${item})
      # For plena.pc and plenaConfig.cmake (cmake/plena_install.cmake): what
      # an imported target links, read here where it is visible.
      string(MAKE_C_IDENTIFIER "${item}" id)
      if(item MATCHES "^PkgConfig::(.+)$")
        set_property(GLOBAL PROPERTY PLENA_LIBRARY_PKG_${id} ${${CMAKE_MATCH_1}_MODULE_NAME})
      elseif(TARGET ${item})
        get_target_property(ll ${item} INTERFACE_LINK_LIBRARIES)
        set_property(GLOBAL PROPERTY PLENA_LIBRARY_LINKS_${id} ${ll})
      endif()
    endforeach()
  endif()
endfunction()

function(plena_test name)
  if(NOT PLENA_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(test_${name} ${T_SOURCES})
  foreach(d IN LISTS T_DEPS)
    target_link_libraries(test_${name} PRIVATE plena_${d})
  endforeach()
  # every test file's main is plena_test_main (common/test_support.h)
  target_link_libraries(test_${name} PRIVATE plena_test_support PkgConfig::CMOCKA)
  target_compile_definitions(test_${name} PRIVATE PLENA_TESTING=1
    PLENA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PLENA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  add_test(NAME ${name} COMMAND test_${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "PLENA_SOURCE_DIR=${PROJECT_SOURCE_DIR};PLENA_BINARY_DIR=${PROJECT_BINARY_DIR};PLENA_BIN=$<TARGET_FILE:plena_cli>")
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
