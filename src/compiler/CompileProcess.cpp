//===- CompileProcess.cpp - compiling a traced step in a child process -*- C++ -*-===//
//
// See CompileProcess.h. The three files of one compile live in a fresh
// temporary directory that is removed whatever happens; the child is started
// with posix_spawn (safe in a threaded process: nothing runs between fork and
// exec) and reaped with wait4; it writes its own peak resident size beside
// the executable (ownPeakResidentBytes).
//
//===----------------------------------------------------------------------===//

#include "compiler/CompileProcess.h"
#include "compiler/Context.h"
#include "compiler/Diagnostics.h"
#include "runtime/disk_cache.hpp"

#include "nova/cache.hpp"
#include "nova/error.hpp"
#include "nova/explain.hpp"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace fs = std::filesystem;
using namespace mlir;

namespace {

/// The parent's compilerBuild(), for the child to compare with its own:
/// the parent keys what the child compiles.
constexpr const char *kBuildVariable = "NOVA_COMPILER_BUILD";

/// A private temporary directory, removed with everything in it.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "nova-compile-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw ::nova::CompileError("nova: cannot create a temporary directory for the compiler process in " +
                                 fs::temp_directory_path().string() + ": " + std::strerror(errno));
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
};

/// This process's peak resident size since its exec (VmHWM), or that of a
/// child it waited for (ptxas), whichever is larger; 0 if unknown. The
/// parent cannot take it from wait4: a child's ru_maxrss there includes
/// the parent's own peak (Linux adds the old address space's high-water
/// mark at exec, and posix_spawn's child runs in the parent's until then:
/// a program holding 1 GiB saw a compile of 0.1 GiB reported as 1.1).
/// The children's figure may include this process's size when it started
/// them, which is below its own peak: the larger of the two is exact.
uint64_t ownPeakResidentBytes() {
  uint64_t peak = 0;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      peak = std::strtoull(line.c_str() + 6, nullptr, 10) * 1024; // "VmHWM:   123456 kB"
  struct rusage children {};
  if (::getrusage(RUSAGE_CHILDREN, &children) == 0)
    peak = std::max(peak, static_cast<uint64_t>(children.ru_maxrss) * 1024); // KiB on Linux
  return peak;
}

std::string readText(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// The tool beside the shared object this code is in, or in ../libexec.
std::optional<std::string> findTool() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void *>(&findTool), &info) || !info.dli_fname)
    return std::nullopt;
  fs::path dir = fs::path(info.dli_fname).parent_path();
  for (const fs::path &candidate : {dir / "nova-compile", dir / ".." / "libexec" / "nova-compile"})
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
  return std::nullopt;
}

} // namespace

std::optional<std::string> mlir::nova::compilerProcessTool() {
  const char *mode = std::getenv("NOVA_COMPILE");
  std::string m = mode ? mode : "";
  if (m == "inline")
    return std::nullopt;
  if (!m.empty() && m != "process")
    throw ::nova::Error("nova: NOVA_COMPILE must be \"process\" (the default: compile in a nova-compile "
                        "child process) or \"inline\" (in this process), not \"" + m + "\"");
  if (const char *tool = std::getenv("NOVA_COMPILE_TOOL"); tool && *tool)
    return std::string(tool); // another build's or installation's tool
  static const std::optional<std::string> tool = [] {
    std::optional<std::string> found = findTool();
    if (!found)
      ::nova::detail::warn("the nova-compile tool is neither beside libnova.so nor in ../libexec: steps are "
                           "compiled in this process, which keeps the compiler's memory resident "
                           "(NOVA_COMPILE=inline says so and silences this)");
    return found;
  }();
  return tool;
}

::nova::ExecutableDesc mlir::nova::compileInChildProcess(const std::string &tool, ModuleOp traced,
                                                         const StepSignature &signature,
                                                         const ::nova::TargetDesc &target,
                                                         const std::array<uint64_t, 2> &key,
                                                         uint64_t &peakBytes) {
  TempDir dir;
  fs::path request = dir.path / "request.nexe", module = dir.path / "step.mlirbc", out = dir.path / "step.nexe";
  ::nova::ExecutableDesc ask; // a description with no code: the signature and the target
  ask.compiler_version = ::nova::compiler_version();
  ask.key = key;
  ask.target = target;
  ask.inputs = signature.inputs;
  ask.outputs = signature.outputs;
  ask.aliases = signature.aliases;
  ::nova::write_executable_file(request.string(), ask);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(module.string(), ec);
    if (ec || failed(writeBytecodeToFile(traced, os)) || (os.close(), os.has_error()))
      throw ::nova::CompileError("nova: cannot write the traced step for the compiler process to " +
                                 module.string() + (ec ? ": " + ec.message() : std::string()));
  }

  std::vector<std::string> args = {tool, request.string(), module.string(), signature.name, out.string()};
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment, with NOVA_EXPLAIN as this process has it (nova::set_explain).
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    if (std::strncmp(*e, "NOVA_EXPLAIN=", 13) != 0 && std::strncmp(*e, "NOVA_COMPILER_BUILD=", 20) != 0)
      env.push_back(*e);
  env.push_back(::nova::explain_enabled() ? "NOVA_EXPLAIN=1" : "NOVA_EXPLAIN=0");
  env.push_back(std::string(kBuildVariable) + "=" + compilerBuild()); // the child checks it
  std::vector<char *> envp;
  for (std::string &e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = ::posix_spawn(&pid, tool.c_str(), nullptr, nullptr, argv.data(), envp.data()); rc != 0)
    throw ::nova::CompileError("nova: cannot start the compiler process " + tool + ": " + std::strerror(rc));
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  // ECHILD: the program reaps children itself (SIGCHLD ignored); the files say what happened.
  bool known = waited == pid;
  std::string what = "compiling " + signature.name + " in the compiler process " + tool;
  if (known && WIFSIGNALED(status))
    throw ::nova::CompileError("nova: " + what + ": it died of signal " + std::to_string(WTERMSIG(status)) +
                               " (" + strsignal(WTERMSIG(status)) +
                               "); NOVA_COMPILE=inline compiles in this process, to debug it");
  int code = known && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  fs::path error = out.string() + ".error";
  if (code == 2 || (code == -1 && fs::exists(error)))
    throw ::nova::CompileError(readText(error));
  if (code == 3)
    throw ::nova::Error(readText(error));
  if (code != 0 && !(code == -1 && fs::exists(out)))
    throw ::nova::CompileError("nova: " + what + ": it exited with status " + std::to_string(code) +
                               (fs::exists(error) ? ": " + readText(error) : std::string()));
  if (!fs::exists(out))
    throw ::nova::CompileError("nova: " + what + ": it exited without writing the executable " + out.string());
  ::nova::ExecutableDesc desc = ::nova::read_executable_file(out.string());
  if (desc.key != key)
    throw ::nova::CompileError("nova: " + what + ": it returned the executable of another step");
  // The child's own measure (ownPeakResidentBytes), not wait4's ru_maxrss.
  std::string peak = readText(out.string() + ".peak");
  peakBytes = std::strtoull(peak.c_str(), nullptr, 10);
  ::nova::detail::count_child_compile(peakBytes);
  return desc;
}

int mlir::nova::compilerProcessMain(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: nova-compile REQUEST.nexe STEP.mlirbc STEP-NAME OUT.nexe\n"
                         "  (started by libnova for each step it compiles; see NOVA_COMPILE)\n");
    return 64;
  }
  std::string errorPath = std::string(argv[4]) + ".error";
  auto report = [&](int code, const std::string &message) {
    std::ofstream(errorPath, std::ios::binary) << message;
    return code;
  };
  try {
    // Another build's code under this build's keys would be loaded by every
    // later run from the disk cache: refuse it (NOVA_COMPILE_TOOL).
    if (const char *parent = std::getenv(kBuildVariable); parent && compilerBuild() != parent)
      return report(2, std::string("nova: the compiler process ") + argv[0] + " is another build of Nova (" +
                           compilerBuild() + ") than the program's (" + parent +
                           "); NOVA_COMPILE_TOOL must name the nova-compile of the same build");
    ::nova::ExecutableDesc ask = ::nova::read_executable_file(argv[1]);
    MLIRContext &ctx = compilerContext();
    loadCompilerDialects(ctx);
    OwningOpRef<ModuleOp> module;
    {
      DiagnosticCollector diags(&ctx);
      module = parseSourceFile<ModuleOp>(argv[2], &ctx);
      if (!module)
        return report(3, std::string("nova: the compiler process cannot read the traced step ") + argv[2] +
                             (diags.text.empty() ? "" : ":\n" + diags.text));
    }
    StepSignature signature{argv[3], ask.inputs, ask.outputs, ask.aliases};
    ::nova::ExecutableDesc desc = compileToDescription(*module, signature, ask.target, pipelineOptionsFromEnv());
    desc.key = ask.key;
    ::nova::write_executable_file(argv[4], desc);
    std::ofstream(std::string(argv[4]) + ".peak") << ownPeakResidentBytes();
    return 0;
  } catch (const ::nova::CompileError &e) {
    return report(2, e.what());
  } catch (const std::exception &e) {
    return report(3, e.what());
  }
}
