// aot.hpp - steps compiled ahead of time, shipped as files, loaded without
// a compiler.
//
// A build-time program (an "AOT generator", linked with libnova) asks a step
// for its executable for the shapes it will run with, under the target it
// will run on, and saves it:
//
//   // NOVA_TARGET=x86-64-v4 ./make_steps out/mlp.nexe       (see cmake/NovaAot.cmake)
//   auto step = nova::jit(mlp);
//   nova::aot::save(*step.executable(x, w1, b1, w2, b2), argv[1]);
//
// The file is the executable description (executable_desc.hpp). A program
// that links only the runtime (libnova_runtime, no MLIR) loads and runs it
// with nova::aot::load(); `nova-run` does that from the command line. A
// training program that traces its steps finds them without compiling when
// they were saved into its cache directory with save_to_cache_dir() (the
// file is named by the step's key, as the disk cache names entries), so its
// first training step is as fast as the thousandth.
#pragma once

#include <memory>
#include <string>

#include "nova/executable.hpp"
#include "nova/executable_desc.hpp"

namespace nova::aot {

/// Writes the description `exe` was loaded from to `path` (atomically).
/// Throws nova::Error if `exe` has none (an interpreted step).
void save(const Executable& exe, const std::string& path);

/// Writes it as <dir>/<key>.nexe, where a process whose NOVA_CACHE_DIR is
/// `dir` finds it when it traces the same step for the same target.
/// Returns the file's path.
std::string save_to_cache_dir(const Executable& exe, const std::string& dir);

/// Reads, validates and loads an executable file. Throws nova::FormatError
/// for a malformed file, nova::Error if this machine cannot run it.
std::shared_ptr<Executable> load(const std::string& path);

} // namespace nova::aot
