# cmake/kilnPkgConfig.cmake — kiln.pc (and kiln-vulkan.pc when KILN_VULKAN is ON) for
# builds without CMake, installed to <libdir>/pkgconfig. They state what the CMake targets
# kiln::kiln and kiln::vulkan carry on this system: -pthread for the CPU scheduler's
# threads, and for Vulkan the loader, shaderc and (where shaderc_combined is not self-
# contained, as on Debian 12) glslang and SPIRV-Tools in a rescanned link group.
# The prefix is derived from the .pc file's own location, so an install tree can move.

set(_kiln_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH _kiln_pc_up "/${_kiln_pc_dir}" "/")
string(REGEX REPLACE "/$" "" _kiln_pc_up "${_kiln_pc_up}")
set(KILN_PC_PREFIX "\${pcfiledir}/${_kiln_pc_up}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(KILN_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(KILN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(KILN_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(KILN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

# kiln's CPU scheduler runs on std::thread: the compiler's thread flag, as Threads::Threads
set(KILN_PC_CFLAGS " -pthread")
set(KILN_PC_LIBS " -pthread")

# kiln_pc_link_flag(<out-var> <library path or name>): -L<dir> -l<name> for a library file,
# the name as -l<name> otherwise; -L for the compiler's own search path is left out.
function(kiln_pc_link_flag out lib)
  if(IS_ABSOLUTE "${lib}")
    get_filename_component(_dir "${lib}" DIRECTORY)
    get_filename_component(_name "${lib}" NAME)
    string(REGEX REPLACE "^lib" "" _name "${_name}")
    string(REGEX REPLACE "\\.(a|so)(\\.[0-9.]*)?$" "" _name "${_name}")
    set(_flag "-l${_name}")
    if(NOT _dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
      set(_flag "-L${_dir} ${_flag}")
    endif()
  else()
    set(_flag "-l${lib}")
  endif()
  set(${out} "${_flag}" PARENT_SCOPE)
endfunction()

configure_file(${CMAKE_CURRENT_LIST_DIR}/kiln.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/kiln.pc DESTINATION ${_kiln_pc_dir})
# kiln-runtime.pc (and kiln-vulkan-runtime.pc): the same with the runtime compiled once
if(NOT KILN_HEADER_ONLY)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/kiln-runtime.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/kiln-runtime.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/kiln-runtime.pc DESTINATION ${_kiln_pc_dir})
endif()

if(KILN_VULKAN)
  set(KILN_PC_VULKAN_CFLAGS "")
  foreach(_inc IN LISTS Vulkan_INCLUDE_DIRS)
    if(NOT _inc IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      string(APPEND KILN_PC_VULKAN_CFLAGS " -I${_inc}")
    endif()
  endforeach()
  kiln_pc_link_flag(_vk "${Vulkan_LIBRARY}")
  kiln_pc_link_flag(_shaderc "${Vulkan_shaderc_combined_LIBRARY}")
  if(KILN_SHADERC_COMBINED_SELF_CONTAINED)
    set(KILN_PC_VULKAN_LIBS " ${_shaderc}")
  else()
    # the archives depend on each other in a cycle: one group, rescanned by the linker
    set(KILN_PC_VULKAN_LIBS " -Wl,--start-group ${_shaderc}")
    foreach(_lib IN LISTS _kiln_glslang_libs)
      kiln_pc_link_flag(_f "${_lib}")
      string(APPEND KILN_PC_VULKAN_LIBS " ${_f}")
    endforeach()
    string(APPEND KILN_PC_VULKAN_LIBS " -Wl,--end-group")
  endif()
  # shaderc is C++: its archives need the C++ runtime, which g++ links anyway
  string(APPEND KILN_PC_VULKAN_LIBS " ${_vk} -pthread")
  configure_file(${CMAKE_CURRENT_LIST_DIR}/kiln-vulkan.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/kiln-vulkan.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/kiln-vulkan.pc DESTINATION ${_kiln_pc_dir})
  if(NOT KILN_HEADER_ONLY)
    configure_file(${CMAKE_CURRENT_LIST_DIR}/kiln-vulkan-runtime.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/kiln-vulkan-runtime.pc @ONLY)
    install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/kiln-vulkan-runtime.pc DESTINATION ${_kiln_pc_dir})
  endif()
endif()
