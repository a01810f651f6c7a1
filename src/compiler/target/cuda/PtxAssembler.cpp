//===- PtxAssembler.cpp - PTX -> cubin with ptxas ------------------------===//

#include "compiler/target/cuda/PtxAssembler.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::nova;

std::optional<std::string> mlir::nova::findPtxas() {
  if (const char *env = std::getenv("NOVA_PTXAS"); env && *env) {
    llvm::StringRef v(env);
    if (v == "off" || v == "0")
      return std::nullopt;
    return v.str();
  }
  if (llvm::ErrorOr<std::string> onPath = llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  llvm::SmallVector<std::string, 2> homes;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    homes.push_back(home);
  homes.push_back("/usr/local/cuda");
  for (const std::string &home : homes) {
    llvm::SmallString<128> path(home);
    llvm::sys::path::append(path, "bin", "ptxas");
    if (llvm::sys::fs::can_execute(path))
      return std::string(path);
  }
  return std::nullopt;
}

namespace {

/// The kernels' resource usage and ptxas's performance notes, parsed from
/// ptxas -v's log into `cubin`.
void parsePtxasLog(llvm::StringRef log, Cubin &cubin) {
  // ptxas info    : Function properties for nova_k3
  //     0 bytes stack frame, 820 bytes spill stores, 896 bytes spill loads
  // ptxas info    : Used 255 registers, used 1 barriers, ...
  std::vector<PtxasKernelInfo> &kernels = cubin.kernels;
  auto numberBefore = [](llvm::StringRef line, llvm::StringRef what) {
    size_t at = line.find(what);
    if (at == llvm::StringRef::npos)
      return 0;
    llvm::StringRef head = line.take_front(at).rtrim();
    llvm::StringRef digits = head.substr(head.find_last_of(' ') + 1);
    int n = 0;
    return digits.getAsInteger(10, n) ? 0 : n;
  };
  llvm::SmallVector<llvm::StringRef> lines;
  log.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (line.contains("Potential Performance Loss")) {
      cubin.performanceNotes.push_back(line.trim().str());
      continue;
    }
    constexpr llvm::StringLiteral kProperties = "Function properties for ";
    if (size_t at = line.find(kProperties); at != llvm::StringRef::npos) {
      kernels.push_back({line.substr(at + kProperties.size()).trim().str()});
      continue;
    }
    if (kernels.empty())
      continue;
    if (line.contains("spill stores")) {
      kernels.back().spillStoreBytes = numberBefore(line, " bytes spill stores");
      kernels.back().spillLoadBytes = numberBefore(line, " bytes spill loads");
    } else if (line.contains("Used ") && line.contains(" registers")) {
      kernels.back().registers = numberBefore(line, " registers");
    }
  }
}

} // namespace

FailureOr<Cubin> mlir::nova::assemblePtx(llvm::StringRef ptxas, llvm::StringRef ptx,
                                         llvm::StringRef chip, std::string &error) {
  llvm::SmallString<128> input, output, log;
  for (auto [path, suffix] : {std::pair{&input, "ptx"}, {&output, "cubin"}, {&log, "log"}})
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile("nova-ptxas", suffix, *path)) {
      error = "cannot create a temporary file for ptxas: " + ec.message();
      return failure();
    }
  llvm::FileRemover removeInput(input), removeOutput(output), removeLog(log);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(input, ec);
    if (ec) {
      error = "cannot write " + input.str().str() + ": " + ec.message();
      return failure();
    }
    os << ptx;
  }
  std::string arch = ("-arch=" + chip).str();
  std::optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(""),
                                                llvm::StringRef(log)};
  std::string launchError;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> logText = std::unique_ptr<llvm::MemoryBuffer>();
  auto run = [&](bool split) {
    llvm::SmallVector<llvm::StringRef> args = {ptxas, "-v", "-O3", arch, input, "-o", output};
    // The kernels compiled on every CPU, where ptxas has the option (13.0
    // does; its help says the code changes little if at all).
    if (split)
      args.append({"--split-compile", "0"});
    launchError.clear();
    int rc = llvm::sys::ExecuteAndWait(ptxas, args, /*Env=*/std::nullopt, redirects,
                                       /*SecondsToWait=*/0, /*MemoryLimit=*/0, &launchError);
    logText = llvm::MemoryBuffer::getFile(log);
    return rc;
  };
  int rc = run(/*split=*/true);
  // An older ptxas that does not know the option: without it.
  if (rc != 0 && launchError.empty() && logText && (*logText)->getBuffer().contains("split-compile"))
    rc = run(/*split=*/false);
  llvm::StringRef text = logText ? (*logText)->getBuffer() : llvm::StringRef();
  if (rc != 0) {
    if (!launchError.empty()) {
      error = ptxas.str() + " did not run: " + launchError;
      return failure();
    }
    // Its errors, not the informational lines -v adds.
    std::string errors;
    int kept = 0;
    llvm::SmallVector<llvm::StringRef> lines;
    text.split(lines, '\n', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef line : lines)
      if (!line.contains("info    :") && !line.starts_with("    ") && kept++ < 20)
        errors += line.str() + "\n";
    error = ptxas.str() + " " + arch + " exited with " + std::to_string(rc) + ":\n" + errors;
    return failure();
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> binary = llvm::MemoryBuffer::getFile(output);
  if (!binary || (*binary)->getBufferSize() < 4 || !(*binary)->getBuffer().starts_with("\x7f" "ELF")) {
    error = ptxas.str() + " " + arch + " wrote no ELF object to " + output.str().str();
    return failure();
  }
  Cubin cubin;
  cubin.bytes.assign((*binary)->getBufferStart(), (*binary)->getBufferEnd());
  parsePtxasLog(text, cubin);
  return cubin;
}
