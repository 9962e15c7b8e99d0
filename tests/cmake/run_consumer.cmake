# cmake -P driver for the packaging checks: configure, build and run one consumer project
# from scratch against kiln's install tree, its build tree or its source tree.
#
# Variables (-D):
#   KILN_SOURCE_DIR   kiln's source tree
#   CONSUMER_DIR      the consumer project's source
#   WORK_DIR          scratch folder (emptied first)
#   MODE              find_package (find kiln in the install tree PREFIX),
#                     build_tree (find kiln's exported build tree KILN_BUILD_DIR) or
#                     add_subdirectory (the consumer adds KILN_SOURCE_DIR)
#   PREFIX            find_package: the install tree (made by install_tree.cmake)
#   KILN_BUILD_DIR    build_tree: a kiln build folder (KILN_INSTALL=ON), kiln's libraries built
#   GENERATOR, GENERATOR_PLATFORM, GENERATOR_TOOLSET, MAKE_PROGRAM, CXX_COMPILER,
#   TOOLCHAIN_FILE, BUILD_TYPE, EXE_SUFFIX: the outer build's settings, handed on
cmake_minimum_required(VERSION 3.24)

foreach(v KILN_SOURCE_DIR CONSUMER_DIR WORK_DIR MODE GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()

set(gen_args -G "${GENERATOR}")
if(GENERATOR_PLATFORM)
  list(APPEND gen_args -A "${GENERATOR_PLATFORM}")
endif()
if(GENERATOR_TOOLSET)
  list(APPEND gen_args -T "${GENERATOR_TOOLSET}")
endif()
set(common_args ${gen_args} "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
if(MAKE_PROGRAM)
  list(APPEND common_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(TOOLCHAIN_FILE)
  list(APPEND common_args "-DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN_FILE}")
endif()

# step(<what> <command...>): run a command, echo it, stop with its output on failure.
function(step what)
  message(STATUS "${what}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(consumer_args)

if(MODE STREQUAL "find_package")
  if(NOT PREFIX OR NOT EXISTS "${PREFIX}/include/kiln/kiln.hpp")
    message(FATAL_ERROR "run_consumer.cmake: -DPREFIX=... must be kiln's install tree (the cmake.install check makes it)")
  endif()
  foreach(f include/kiln/kiln.hpp include/kiln/eigen.hpp)
    if(NOT EXISTS "${PREFIX}/${f}")
      message(FATAL_ERROR "the install tree lacks ${f}")
    endif()
  endforeach()
  file(GLOB_RECURSE config_files "${PREFIX}/*/kilnConfig.cmake")
  if(NOT config_files)
    message(FATAL_ERROR "the install tree has no kilnConfig.cmake")
  endif()
  # only the install prefix may provide kiln: no package registry, no build tree
  list(APPEND consumer_args "-DCMAKE_PREFIX_PATH=${PREFIX}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
       -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
elseif(MODE STREQUAL "build_tree")
  # the build under test: its exported targets name its own kiln::runtime, already built
  if(NOT KILN_BUILD_DIR OR NOT EXISTS "${KILN_BUILD_DIR}/kilnConfig.cmake")
    message(FATAL_ERROR "run_consumer.cmake: -DKILN_BUILD_DIR=... must be a kiln build folder with KILN_INSTALL=ON")
  endif()
  list(APPEND consumer_args "-Dkiln_DIR=${KILN_BUILD_DIR}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
       -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
elseif(MODE STREQUAL "add_subdirectory")
  list(APPEND consumer_args "-DKILN_SOURCE_DIR=${KILN_SOURCE_DIR}")
else()
  message(FATAL_ERROR "run_consumer.cmake: MODE must be find_package, build_tree or add_subdirectory, not '${MODE}'")
endif()

step("configure consumer" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer-build" ${common_args}
     ${consumer_args})
step("build consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/consumer-build" --config "${BUILD_TYPE}" -j2)

# single-config generators put the program in the build folder, multi-config ones in <config>/
set(exe "${WORK_DIR}/consumer-build/consumer${EXE_SUFFIX}")
if(NOT EXISTS "${exe}")
  set(exe "${WORK_DIR}/consumer-build/${BUILD_TYPE}/consumer${EXE_SUFFIX}")
endif()
step("run consumer" "${exe}")
message(STATUS "${step_output}")
