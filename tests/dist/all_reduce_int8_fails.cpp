// tests/dist/all_reduce_int8_fails.cpp — must not compile: all_reduce_sum sums f32, f16,
// bf16 and i32 only (ctest dist.compile_fail.all_reduce_int8 checks kiln's message).
#include <cstdint>

#include <kiln/dist/dist.hpp>
#include <kiln/kiln.hpp>

void reduce(kiln::dist::communicator& comm, const kiln::tensor<std::int8_t, kiln::cpu<>>& t) { comm.all_reduce_sum(t); }
