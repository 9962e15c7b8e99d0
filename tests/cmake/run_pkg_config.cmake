# cmake -P driver for the pkg-config check: in kiln's install tree (install_tree.cmake), build
# examples/hello.cpp (and, with KILN_VULKAN, pkg_config/vulkan_hello.cpp) with the plain
# compiler and `pkg-config --cflags --libs`, no CMake involved, and run them: header-only
# (kiln.pc, kiln-vulkan.pc) and with the runtime compiled once (kiln-runtime.pc, kiln-vulkan-runtime.pc).
#
# Variables (-D):
#   KILN_SOURCE_DIR   kiln's source tree
#   WORK_DIR          scratch folder (emptied first)
#   PREFIX            kiln's install tree
#   CXX_COMPILER      the compiler (g++), called directly
#   PKG_CONFIG        the pkg-config program
#   KILN_VULKAN       ON: the install tree has kiln-vulkan.pc too; build the Vulkan program
#   MODES             header-only and/or runtime (default: both)
cmake_minimum_required(VERSION 3.24)

foreach(v KILN_SOURCE_DIR WORK_DIR CXX_COMPILER PKG_CONFIG)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "run_pkg_config.cmake: -D${v}=... is required")
  endif()
endforeach()

# step(<what> <command...>): run a command, echo it, stop with its output on failure.
function(step what)
  message(STATUS "${what}: ${ARGN}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}${err}")
  endif()
  string(STRIP "${out}" out)
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

if(NOT PREFIX OR NOT EXISTS "${PREFIX}/include/kiln/kiln.hpp")
  message(FATAL_ERROR "run_pkg_config.cmake: -DPREFIX=... must be kiln's install tree (the cmake.install check makes it)")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${PREFIX}")

file(GLOB_RECURSE pc_files "${prefix}/*/kiln.pc")
if(NOT pc_files)
  message(FATAL_ERROR "the install tree has no kiln.pc")
endif()
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
# only the install prefix may provide kiln (the system's own .pc files still resolve xsimd)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")

# build_and_run(<name> <source> <package>): <compiler> -std=c++20 -O2 <source> -o <name>
# $(pkg-config --cflags --libs <package>), then ./<name>
function(build_and_run name source package)
  step("pkg-config ${package}" "${PKG_CONFIG}" --cflags --libs ${package})
  separate_arguments(flags UNIX_COMMAND "${step_output}")
  step("compile ${name}" "${CXX_COMPILER}" -std=c++20 -O2 "${source}" -o "${WORK_DIR}/${name}" ${flags})
  step("run ${name}" "${CMAKE_COMMAND}" -E env KILN_CACHE=off "${WORK_DIR}/${name}")
  message(STATUS "${step_output}")
endfunction()

# the compilation modes (kiln/detail/config.hpp): header-only (kiln.pc, kiln-vulkan.pc) and
# the runtime compiled once (kiln-runtime.pc, kiln-vulkan-runtime.pc); MODES picks them
if(NOT MODES)
  set(MODES header-only runtime)
endif()
foreach(mode ${MODES})
  if(mode STREQUAL "header-only")
    set(suffix "")
  elseif(mode STREQUAL "runtime")
    set(suffix "-runtime")
  else()
    message(FATAL_ERROR "run_pkg_config.cmake: MODES holds '${mode}', not header-only or runtime")
  endif()
  string(REPLACE "-" "_" tag "${suffix}")
  build_and_run(hello${tag} "${KILN_SOURCE_DIR}/examples/hello.cpp" kiln${suffix})
  if(KILN_VULKAN)
    if(NOT EXISTS "${pc_dir}/kiln-vulkan${suffix}.pc")
      message(FATAL_ERROR "KILN_VULKAN is ON but the install tree has no kiln-vulkan${suffix}.pc")
    endif()
    build_and_run(vulkan_hello${tag} "${CMAKE_CURRENT_LIST_DIR}/pkg_config/vulkan_hello.cpp" kiln-vulkan${suffix})
  endif()
endforeach()
