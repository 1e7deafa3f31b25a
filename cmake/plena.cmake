# Helpers shared by every module's CMakeLists.txt.
#
# plena_module(NAME SOURCES a.c b.c DEPS other_module ...)
#   builds static library plena_NAME from src/NAME; DEPS are module names
#   (layering: a module may only depend on modules below it, see docs/design.md).
# plena_test(NAME SOURCES t.c DEPS module ... [TIMEOUT s] [LABELS l])
#   builds a cmocka test executable and registers it with CTest; the test runs
#   with the repository root as working directory and PLENA_SOURCE_DIR set.
function(plena_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS;LIBS" ${ARGN})
  add_library(plena_${name} STATIC ${M_SOURCES})
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
endfunction()

function(plena_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(test_${name} ${T_SOURCES})
  foreach(d IN LISTS T_DEPS)
    target_link_libraries(test_${name} PRIVATE plena_${d})
  endforeach()
  target_link_libraries(test_${name} PRIVATE PkgConfig::CMOCKA)
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
