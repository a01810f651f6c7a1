//===- Diagnostics.h - MLIR diagnostics as text for nova errors --*- C++ -*-===//
//
// While alive, collects every diagnostic the context emits (with notes) as
// text, so the exception the user sees carries the compiler's own words.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_DIAGNOSTICS_H
#define NOVA_COMPILER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <string>

namespace mlir::nova {

struct DiagnosticCollector {
  explicit DiagnosticCollector(MLIRContext *ctx)
      : handler(ctx, [this](Diagnostic &d) {
          if (!text.empty())
            text += "\n";
          text += d.str();
          for (Diagnostic &note : d.getNotes())
            text += "\n  note: " + note.str();
          return success();
        }) {}
  std::string text;
  ScopedDiagnosticHandler handler;
};

} // namespace mlir::nova

#endif // NOVA_COMPILER_DIAGNOSTICS_H
