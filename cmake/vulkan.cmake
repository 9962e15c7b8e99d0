# cmake/vulkan.cmake — the kiln::vulkan target (included when KILN_VULKAN is ON).
# Vulkan 1.3 headers and loader, shaderc for compiling the embedded GLSL at run time.
find_package(Vulkan 1.3 REQUIRED COMPONENTS shaderc_combined)

add_library(kiln_vulkan INTERFACE)
add_library(kiln::vulkan ALIAS kiln_vulkan)
target_link_libraries(kiln_vulkan INTERFACE kiln::kiln Vulkan::Vulkan Vulkan::shaderc_combined)

# Some distributions (Debian 12) ship a libshaderc_combined.a that lacks glslang and
# SPIRV-Tools; probe the link and add them from their own packages when needed.
include(CheckCXXSourceCompiles)
include(CMakePushCheckState)
cmake_push_check_state(RESET)
set(CMAKE_REQUIRED_LIBRARIES Vulkan::shaderc_combined)
check_cxx_source_compiles([[
#include <shaderc/shaderc.h>
int main() {
  shaderc_compiler_t c = shaderc_compiler_initialize();
  shaderc_compiler_release(c);
  return 0;
}]] KILN_SHADERC_COMBINED_SELF_CONTAINED)
cmake_pop_check_state()

# (Debian's glslang CMake package names a glslangValidator it does not install, so the
# archives are found one by one; they depend on each other, hence the rescanned group.)
if(NOT KILN_SHADERC_COMBINED_SELF_CONTAINED)
  set(_kiln_glslang_libs)
  foreach(_lib glslang MachineIndependent GenericCodeGen OSDependent OGLCompiler SPIRV SPIRV-Tools-opt SPIRV-Tools)
    find_library(KILN_${_lib}_LIBRARY NAMES ${_lib})
    if(NOT KILN_${_lib}_LIBRARY)
      message(FATAL_ERROR "kiln::vulkan: libshaderc_combined needs lib${_lib}, which was not found "
                          "(Debian: glslang-dev spirv-tools)")
    endif()
    list(APPEND _kiln_glslang_libs ${KILN_${_lib}_LIBRARY})
  endforeach()
  target_link_libraries(kiln_vulkan INTERFACE
    "$<LINK_GROUP:RESCAN,Vulkan::shaderc_combined,${_kiln_glslang_libs}>")
endif()

find_package(Threads REQUIRED)
target_link_libraries(kiln_vulkan INTERFACE Threads::Threads)

# kiln::vulkan_runtime: the Vulkan side of the runtime compiled once (src/vulkan_runtime.cpp).
add_library(kiln_vulkan_runtime STATIC ${PROJECT_SOURCE_DIR}/src/vulkan_runtime.cpp)
add_library(kiln::vulkan_runtime ALIAS kiln_vulkan_runtime)
set_target_properties(kiln_vulkan_runtime PROPERTIES EXPORT_NAME vulkan_runtime POSITION_INDEPENDENT_CODE ON)
target_link_libraries(kiln_vulkan_runtime PUBLIC kiln_runtime Vulkan::Vulkan Vulkan::shaderc_combined Threads::Threads)
if(NOT KILN_SHADERC_COMBINED_SELF_CONTAINED)
  target_link_libraries(kiln_vulkan_runtime PUBLIC
    "$<LINK_GROUP:RESCAN,Vulkan::shaderc_combined,${_kiln_glslang_libs}>")
endif()
if(NOT KILN_HEADER_ONLY)
  target_link_libraries(kiln_vulkan INTERFACE kiln_vulkan_runtime)
endif()

# kiln_embed_kernels() for projects' own shaders (and kiln's tests).
set(KILN_EMBED_KERNELS_SCRIPT ${PROJECT_SOURCE_DIR}/scripts/embed_kernels.py CACHE INTERNAL "kiln's embedding script")
include(${CMAKE_CURRENT_LIST_DIR}/kilnEmbedKernels.cmake)

if(KILN_INSTALL)
  # the build tree's kilnConfig.cmake (export()) finds them beside itself, like the installed one
  configure_file(${CMAKE_CURRENT_LIST_DIR}/kilnEmbedKernels.cmake ${PROJECT_BINARY_DIR}/kilnEmbedKernels.cmake COPYONLY)
  configure_file(${PROJECT_SOURCE_DIR}/scripts/embed_kernels.py ${PROJECT_BINARY_DIR}/embed_kernels.py COPYONLY)
  install(TARGETS kiln_vulkan EXPORT kilnTargets)
  if(NOT KILN_HEADER_ONLY)
    install(TARGETS kiln_vulkan_runtime EXPORT kilnTargets)
  endif()
  set_target_properties(kiln_vulkan PROPERTIES EXPORT_NAME vulkan)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/kilnEmbedKernels.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/embed_kernels.py DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
endif()
