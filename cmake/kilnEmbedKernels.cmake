# cmake/kilnEmbedKernels.cmake — kiln_embed_kernels(): a project's own GLSL compute
# shaders as string_views in a generated header, the way kiln embeds kernels/*.comp.
#
#   kiln_embed_kernels(<target> HEADER <name.hpp> NAMESPACE <ns> KERNELS <a.comp> ...)
#
# Generates <binary dir>/kiln_embedded/<name.hpp> at build time (rerun when a kernel
# changes), adds it to <target>, and puts its folder on <target>'s include path. Each
# kernel becomes `inline constexpr std::string_view <file stem>` in <ns>, listed in
# `<ns>::all`. Dispatch one through kiln::vulkan's context like a fixed kernel.
# A cache entry: the function runs in its callers' directory scopes.
if(NOT KILN_EMBED_KERNELS_SCRIPT OR NOT EXISTS "${KILN_EMBED_KERNELS_SCRIPT}")
  set(KILN_EMBED_KERNELS_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/embed_kernels.py" CACHE INTERNAL "kiln's embedding script")
endif()

function(kiln_embed_kernels target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "HEADER;NAMESPACE" "KERNELS")
  if(NOT ARG_HEADER OR NOT ARG_NAMESPACE OR NOT ARG_KERNELS)
    message(FATAL_ERROR "kiln_embed_kernels(${target}): HEADER, NAMESPACE and KERNELS are required")
  endif()
  if(NOT TARGET Python3::Interpreter)
    find_package(Python3 REQUIRED COMPONENTS Interpreter)  # only projects that embed need it
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/kiln_embedded)
  set(out ${dir}/${ARG_HEADER})
  set(kernels)
  foreach(k IN LISTS ARG_KERNELS)
    get_filename_component(abs ${k} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND kernels ${abs})
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND Python3::Interpreter ${KILN_EMBED_KERNELS_SCRIPT} --files ${kernels} --namespace ${ARG_NAMESPACE}
            --output ${out}
    DEPENDS ${kernels} ${KILN_EMBED_KERNELS_SCRIPT}
    COMMENT "kiln: embedding ${ARG_HEADER}"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
  target_include_directories(${target} PRIVATE ${dir})
endfunction()
