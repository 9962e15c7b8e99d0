// src/runtime.cpp — kiln::runtime: the CPU side of kiln's runtime, compiled once.
#include "kiln/impl/src.hpp"
