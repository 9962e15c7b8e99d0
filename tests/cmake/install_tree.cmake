# cmake -P driver for cmake.install: install a kiln build folder into a fresh prefix with
# `cmake --install`, as a user's `cmake --install build --prefix ...` does. The packaging
# checks (find_package, pkg_config) consume that prefix.
#
# Variables (-D):
#   BUILD_DIR   the kiln build folder (configured with KILN_INSTALL=ON, built)
#   PREFIX      the install prefix (emptied first)
#   BUILD_TYPE  the configuration to install (multi-config generators)
cmake_minimum_required(VERSION 3.24)

foreach(v BUILD_DIR PREFIX)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "install_tree.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${PREFIX}")
set(config_args)
if(BUILD_TYPE)
  set(config_args --config "${BUILD_TYPE}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" ${config_args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${rc}):\n${out}")
endif()
file(GLOB_RECURSE config_files "${PREFIX}/*/kilnConfig.cmake")
if(NOT config_files)
  message(FATAL_ERROR "the install tree ${PREFIX} has no kilnConfig.cmake")
endif()
message(STATUS "kiln installed into ${PREFIX}")
