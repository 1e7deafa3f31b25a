# Installation of libplena (included by CMakeLists.txt after every module):
#   bin/plena
#   lib/libplena.a, lib/libplena.so (versioned soname)
#   include/plena/<module>/<header> (PLENA_PUBLIC_HEADERS) and include/plena/plena.h
#   lib/pkgconfig/plena.pc
#   lib/cmake/plena/ (find_package(plena CONFIG): plena::plena, plena::plena_static)
# and the CTests that install into a scratch prefix and use it.
include(CMakePackageConfigHelpers)

# The public headers, relative to src/: the API of libplena and everything
# those headers include (the .def tables). This list is the one place that
# says what is public. A public header includes other public headers only, in
# relative form ("../common/err.h"), so it works in the tree (-Isrc) and
# installed alike, and mentions no jansson type (CTest public_headers). Not
# public: headers that expose json_t (common/json.h, profile/profile_json.h,
# trace/*.h, replay/*.h, campaign/*.h), internal and test headers.
set(PLENA_PUBLIC_HEADERS
  common/err.h common/status.def common/alloc.h common/fileio.h common/version.h
  num/num.h num/formats.def
  isa/isa.h isa/encoding.h isa/isa.def isa/forms.def isa/costs.def isa/columns.def
  isa/stages.h isa/stages.def isa/program.h isa/asm.h isa/disasm.h
  settings/settings.h
  model/model.h model/models.def
  emu/emu.h emu/traps.def
  timing/timing.h
  profile/profile.h
  timeline/timeline.h
  run/run.h run/gates.h
  gen/builder.h gen/moe.h gen/build.h gen/build_files.def
  ref/ref.h
  verify/verify.h
  report/report.h)

# include/plena/plena.h includes every public header.
set(PLENA_UMBRELLA_INCLUDES "")
foreach(h IN LISTS PLENA_PUBLIC_HEADERS)
  if(h MATCHES "\\.h$")
    string(APPEND PLENA_UMBRELLA_INCLUDES "#include \"${h}\"\n")
  endif()
  get_filename_component(dir ${h} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/src/${h}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/plena/${dir})
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/plena.h.in ${PROJECT_BINARY_DIR}/generated/plena.h @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/generated/plena.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/plena)

# What the static library needs at link time, from the modules' LIBS
# (cmake/plena.cmake collects them): pkg-config modules -> Requires.private and
# a quiet pkg_check_modules; `m` -> -lm; other imported targets -> the files
# they link and the package lookup below.
get_property(plena_libs GLOBAL PROPERTY PLENA_LIBRARY_LIBS)
set(PLENA_PC_REQUIRES_PRIVATE "")
set(PLENA_PC_LIBS_PRIVATE "")
set(PLENA_CONFIG_DEPS "")
foreach(item IN LISTS plena_libs)
  string(MAKE_C_IDENTIFIER "${item}" id)
  get_property(pkg GLOBAL PROPERTY PLENA_LIBRARY_PKG_${id})
  get_property(links GLOBAL PROPERTY PLENA_LIBRARY_LINKS_${id})
  if(item MATCHES "^PkgConfig::(.+)$")
    list(APPEND PLENA_PC_REQUIRES_PRIVATE ${pkg})
    string(APPEND PLENA_CONFIG_DEPS "find_package(PkgConfig QUIET)\n"
      "if(PKG_CONFIG_FOUND AND NOT TARGET ${item})\n"
      "  pkg_check_modules(${CMAKE_MATCH_1} QUIET IMPORTED_TARGET ${pkg})\n"
      "endif()\n")
  elseif(item STREQUAL "m")
    list(APPEND PLENA_PC_LIBS_PRIVATE -lm)
  elseif(item STREQUAL "MPI::MPI_C")
    list(APPEND PLENA_PC_LIBS_PRIVATE ${links})
    string(APPEND PLENA_CONFIG_DEPS "if(NOT TARGET MPI::MPI_C)\n"
      "  find_package(MPI QUIET COMPONENTS C)\n"
      "endif()\n")
  elseif(item STREQUAL "Threads::Threads")
    list(APPEND PLENA_PC_LIBS_PRIVATE -pthread)
    string(APPEND PLENA_CONFIG_DEPS "if(NOT TARGET Threads::Threads)\n"
      "  find_package(Threads QUIET)\n"
      "endif()\n")
  else()
    message(FATAL_ERROR "plena_install.cmake: libplena links ${item}; "
                        "add how plena.pc and plenaConfig.cmake find it")
  endif()
endforeach()
list(JOIN PLENA_PC_REQUIRES_PRIVATE ", " PLENA_PC_REQUIRES_PRIVATE)
list(JOIN PLENA_PC_LIBS_PRIVATE " " PLENA_PC_LIBS_PRIVATE)

# plena.pc locates the prefix from its own directory, so it stays right for
# `cmake --install --prefix DIR` and for a moved prefix.
file(RELATIVE_PATH PLENA_PC_PREFIX_FROM_PCDIR
     /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" PLENA_PC_PREFIX_FROM_PCDIR "${PLENA_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/plena.pc.in ${PROJECT_BINARY_DIR}/generated/plena.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/generated/plena.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS plena_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS plena plena_shared EXPORT plenaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
set(PLENA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/plena)
install(EXPORT plenaTargets NAMESPACE plena:: DESTINATION ${PLENA_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/plenaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/generated/plenaConfig.cmake INSTALL_DESTINATION ${PLENA_CMAKE_DIR})
# 0.x: a new minor version may break the API, as the soname says.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(plena_compat SameMinorVersion)
else()
  set(plena_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/generated/plenaConfigVersion.cmake
  COMPATIBILITY ${plena_compat})
install(FILES ${PROJECT_BINARY_DIR}/generated/plenaConfig.cmake
              ${PROJECT_BINARY_DIR}/generated/plenaConfigVersion.cmake
        DESTINATION ${PLENA_CMAKE_DIR})

# CTests: install_tree installs into a scratch prefix (fixture); then
# public_headers checks every installed header (no jansson type, compiles on
# its own from the prefix) and install_consumers builds and runs the two
# out-of-tree consumers of tests/install/ against it. The consumers are
# uninstrumented, so they do not run in the sanitizer build (no_sanitize).
if(PLENA_BUILD_TESTS)
  set(prefix ${PROJECT_BINARY_DIR}/install-test/prefix)
  set(script ${PROJECT_SOURCE_DIR}/cmake/test_install.cmake)
  set(args -DBINARY_DIR=${PROJECT_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
      -DPREFIX=${prefix} -DWORK=${PROJECT_BINARY_DIR}/install-test
      -DCC=${CMAKE_C_COMPILER} -DGENERATOR=${CMAKE_GENERATOR}
      -DPKG_CONFIG=${PKG_CONFIG_EXECUTABLE})
  add_test(NAME install_tree COMMAND ${CMAKE_COMMAND} -DSTEP=install ${args} -P ${script})
  add_test(NAME public_headers COMMAND ${CMAKE_COMMAND} -DSTEP=headers ${args} -P ${script})
  add_test(NAME install_consumers COMMAND ${CMAKE_COMMAND} -DSTEP=consumers ${args} -P ${script})
  set_tests_properties(install_tree PROPERTIES FIXTURES_SETUP plena_prefix TIMEOUT 60)
  set_tests_properties(public_headers PROPERTIES FIXTURES_REQUIRED plena_prefix TIMEOUT 60)
  set_tests_properties(install_consumers PROPERTIES FIXTURES_REQUIRED plena_prefix TIMEOUT 120
                       LABELS no_sanitize)
endif()
