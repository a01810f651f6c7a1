//===- NovaAttrs.cpp - #nova.lowering_config ---------------------*- C++ -*-===//
//
// The attribute's syntax and its verifier. Syntax:
//   #nova.lowering_config<loops, workgroups = 8, tile = [0, 256], register_tile = []>
// Lists may be empty (a 0-d op has no loops), so the format is written here
// rather than generated.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::nova;

#define GET_ATTRDEF_CLASSES
#include "compiler/dialect/NovaAttrs.cpp.inc"

void NovaDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "compiler/dialect/NovaAttrs.cpp.inc"
      >();
}

namespace {

ParseResult parseIntList(AsmParser &parser, StringRef name, SmallVectorImpl<int64_t> &out) {
  if (parser.parseKeyword(name) || parser.parseEqual())
    return failure();
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() {
    int64_t v;
    if (parser.parseInteger(v))
      return failure();
    out.push_back(v);
    return success();
  });
}

void printIntList(AsmPrinter &printer, StringRef name, ArrayRef<int64_t> values) {
  printer << name << " = [";
  llvm::interleaveComma(values, printer);
  printer << "]";
}

} // namespace

Attribute LoweringConfigAttr::parse(AsmParser &parser, Type) {
  std::string kind;
  int64_t workgroups = 0;
  SmallVector<int64_t> tile, cacheTile, registerTile;
  if (parser.parseLess() || parser.parseKeywordOrString(&kind) || parser.parseComma() ||
      parser.parseKeyword("workgroups") || parser.parseEqual() || parser.parseInteger(workgroups) ||
      parser.parseComma() || parseIntList(parser, "tile", tile) || parser.parseComma())
    return {};
  if (succeeded(parser.parseOptionalKeyword("cache_tile"))) {
    if (parser.parseEqual() ||
        parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() {
          int64_t v;
          if (parser.parseInteger(v))
            return failure();
          cacheTile.push_back(v);
          return success();
        }) ||
        parser.parseComma())
      return {};
  }
  if (parseIntList(parser, "register_tile", registerTile) || parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, parser.getContext(),
                    kind, workgroups, tile, cacheTile, registerTile);
}

void LoweringConfigAttr::print(AsmPrinter &printer) const {
  printer << "<" << getKind() << ", workgroups = " << getWorkgroups() << ", ";
  printIntList(printer, "tile", getTile());
  printer << ", ";
  if (!getCacheTile().empty()) {
    printIntList(printer, "cache_tile", getCacheTile());
    printer << ", ";
  }
  printIntList(printer, "register_tile", getRegisterTile());
  printer << ">";
}

LogicalResult LoweringConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                         StringRef kind, int64_t workgroups,
                                         ArrayRef<int64_t> tile, ArrayRef<int64_t> cacheTile,
                                         ArrayRef<int64_t> registerTile) {
  const bool gpuMatmul = kind == "mma_sync_matmul" || kind == "wgmma_matmul" || kind == "simt_matmul";
  if (kind != "matmul" && kind != "amx_matmul" && kind != "bf16_matmul" && kind != "loops" && kind != "serial" &&
      kind != "attention" && kind != "rows" && kind != "gpu_threads" && !gpuMatmul)
    return emitError() << "#nova.lowering_config: unknown kind '" << kind
                       << "' (expected matmul, amx_matmul, bf16_matmul, attention, rows, loops, serial, "
                          "mma_sync_matmul, wgmma_matmul, simt_matmul or gpu_threads)";
  if (gpuMatmul && (cacheTile.size() != 3 || registerTile.size() != 2 || tile.size() < 2))
    return emitError() << "#nova.lowering_config: " << kind
                       << " needs tile = [batch..., block rows, block columns], cache_tile = [k slab, "
                          "stages, split-K] and register_tile = [warp rows, warp columns]";
  if (workgroups < 1)
    return emitError() << "#nova.lowering_config: workgroups must be at least 1, not " << workgroups;
  if (llvm::any_of(tile, [](int64_t t) { return t < 0; }))
    return emitError() << "#nova.lowering_config: tile sizes must not be negative";
  if ((kind == "matmul" || kind == "amx_matmul" || kind == "bf16_matmul" || kind == "attention" || kind == "rows") &&
      registerTile.size() != 2)
    return emitError() << "#nova.lowering_config: " << kind
                       << " needs register_tile = [rows, columns]";
  if (llvm::any_of(cacheTile, [](int64_t t) { return t < 1; }) ||
      llvm::any_of(registerTile, [](int64_t t) { return t < 1; }))
    return emitError() << "#nova.lowering_config: cache and register tiles must be positive";
  if (kind == "amx_matmul" && (registerTile.size() != 2 || registerTile[0] != 32 ||
                               registerTile[1] != 32 || cacheTile.size() != 1 ||
                               cacheTile[0] % 32 != 0))
    return emitError() << "#nova.lowering_config: amx_matmul needs register_tile = [32, 32] and "
                          "cache_tile = [kc], kc a multiple of 32";
  if (kind == "bf16_matmul" && (registerTile.size() != 2 || registerTile[0] != 8 ||
                                registerTile[1] != 32 || cacheTile.size() != 1 ||
                                cacheTile[0] % 32 != 0))
    return emitError() << "#nova.lowering_config: bf16_matmul needs register_tile = [8, 32] and "
                          "cache_tile = [kc], kc a multiple of 32";
  if (kind == "gpu_threads" && (tile.size() != 1 || tile[0] < 1 || tile[0] > 1024))
    return emitError() << "#nova.lowering_config: gpu_threads needs tile = [threads per block], 1 to 1024";
  if (kind == "serial" && workgroups != 1)
    return emitError() << "#nova.lowering_config: a serial kernel runs as one workgroup";
  return success();
}
