// explain.hpp - print what each compile decided (as NOVA_EXPLAIN=1 does).
//
// On: every step compiled from now on prints to stderr where its compile
// time went, its launches, its memory plan (the arena, the most bytes live
// at once and at which launch, the live set there by the kernel that made
// each buffer, every rematerialization decision, the largest buffers; under
// a budget, the recomputation chosen), each kernel's configuration and
// roofline bound, and the compiler process's peak resident size. Steps
// found in a cache print the line saying where they were loaded from.
// Printing does not change the code: it is not part of the cache key.
#pragma once

namespace nova {

/// For every compile from now on, overriding $NOVA_EXPLAIN.
void set_explain(bool on);

/// set_explain's last value, else whether $NOVA_EXPLAIN is set and not "0".
bool explain_enabled();

} // namespace nova
