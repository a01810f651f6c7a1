// nova-compile - the compiler process: compiles one traced step to an
// executable description. libnova starts it for every step it compiles
// (NOVA_COMPILE=process, the default), so that the compiler's memory never
// becomes the training process's; see src/compiler/CompileProcess.h.
//
//   nova-compile REQUEST.nexe STEP.mlirbc STEP-NAME OUT.nexe
#include "compiler/CompileProcess.h"

int main(int argc, char** argv) { return mlir::nova::compilerProcessMain(argc, argv); }
