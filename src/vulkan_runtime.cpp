// src/vulkan_runtime.cpp — kiln::vulkan_runtime: the Vulkan side of kiln's runtime, compiled once.
#include "kiln/vulkan/impl/src.hpp"
