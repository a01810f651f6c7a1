// memory.hpp - a budget for the memory a compiled step plans.
//
// A compiled step keeps its temporaries in one arena, planned before it
// runs (NOVA_EXPLAIN=1 or nova::set_explain(true) prints the plan). With a
// budget, the compiler rematerializes more until the arena fits: first the
// cheap values (elementwise, GELU, LayerNorm: always on unless
// NOVA_REMAT=0), then forward computations, matmuls and attention
// included, as activation checkpointing does: all of those kept across 16
// ops or more, then only those kept longest that the budget needs. If no
// plan fits, the compile fails with a nova::CompileError naming the budget
// and the smallest plan found.
//
// The budget is part of every step's cache key: a change takes effect at
// the next call of each step, which compiles again.
#pragma once

#include <cstdint>

namespace nova {

/// For every step compiled from now on: the most arena bytes its plan may
/// take; 0 means no budget.
void set_memory_budget(std::uint64_t bytes);

/// set_memory_budget's last value, else $NOVA_MEMORY_BUDGET (bytes, or
/// with a K, M or G suffix: KiB, MiB, GiB), else 0.
std::uint64_t memory_budget();

} // namespace nova
