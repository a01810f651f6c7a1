//===- MatmulKernelParts.cpp - what the tensor-core matmul kernels share -===//

#include "compiler/target/cuda/MatmulKernelParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::nova;

Value IndexMath::c(int64_t v) { return b.create<arith::ConstantIndexOp>(v); }
Value IndexMath::add(Value x, int64_t v) { return v == 0 ? x : add(x, c(v)); }
Value IndexMath::add(Value x, Value y) { return b.create<arith::AddIOp>(x, y); }
Value IndexMath::mul(Value x, int64_t v) { return v == 1 ? x : b.create<arith::MulIOp>(x, c(v)).getResult(); }
Value IndexMath::mul(Value x, Value y) { return b.create<arith::MulIOp>(x, y); }
Value IndexMath::div(Value x, int64_t v) {
  if (v == 1)
    return x;
  if (llvm::isPowerOf2_64(v))
    return b.create<arith::ShRUIOp>(x, c(llvm::Log2_64(v)));
  return b.create<arith::DivUIOp>(x, c(v));
}
Value IndexMath::rem(Value x, int64_t v) {
  if (llvm::isPowerOf2_64(v))
    return b.create<arith::AndIOp>(x, c(v - 1));
  return b.create<arith::RemUIOp>(x, c(v));
}
Value IndexMath::shr(Value x, int64_t v) { return v == 0 ? x : b.create<arith::ShRUIOp>(x, c(v)).getResult(); }
Value IndexMath::shl(Value x, int64_t v) { return v == 0 ? x : b.create<arith::ShLIOp>(x, c(v)).getResult(); }
Value IndexMath::andi(Value x, int64_t v) { return b.create<arith::AndIOp>(x, c(v)); }
Value IndexMath::xori(Value x, Value y) { return b.create<arith::XOrIOp>(x, y); }
Value IndexMath::ult(Value x, int64_t v) { return b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, x, c(v)); }

Value mlir::nova::swizzleChunk(IndexMath &k, Value row, Value chunk, Swizzle s) {
  return k.xori(chunk, k.shl(k.andi(k.shr(row, s.rs), s.rm), s.cs));
}

mlir::nova::Swizzle mlir::nova::ldmatrixSwizzle(int64_t chunks) {
  int64_t rowsPerLine = std::max<int64_t>(1, 8 / chunks);
  return {llvm::Log2_64(rowsPerLine), chunks - 1, 0};
}

Value mlir::nova::mmaSyncBf16(ImplicitLocOpBuilder &b, Value a, Value bFragment, Value acc) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  // Registers as i32, one row at a time (a 2-D vector.bitcast is not lowered).
  auto registers = [&](Value v, int64_t rows, SmallVector<Value> &regs) {
    for (int64_t j = 0; j < rows; ++j) {
      Value row = b.create<vector::ExtractOp>(v, ArrayRef<int64_t>{j});
      Value cast = b.create<vector::BitCastOp>(VectorType::get({1}, i32), row);
      regs.push_back(b.create<vector::ExtractOp>(cast, ArrayRef<int64_t>{0}));
    }
  };
  SmallVector<Value> args;
  registers(a, 4, args);
  registers(bFragment, 2, args);
  for (int64_t i = 0; i < 4; ++i)
    args.push_back(b.create<vector::ExtractOp>(acc, ArrayRef<int64_t>{i >> 1, i & 1}));
  auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  Value d = b.create<LLVM::CallIntrinsicOp>(structType, "llvm.nvvm.mma.m16n8k16.row.col.bf16", args).getResult(0);
  Value out = acc;
  for (int64_t i = 0; i < 4; ++i) {
    Value e = b.create<LLVM::ExtractValueOp>(d, ArrayRef<int64_t>{i});
    out = b.create<vector::InsertOp>(e, out, ArrayRef<int64_t>{i >> 1, i & 1});
  }
  return out;
}

Value mlir::nova::packBf16x2(ImplicitLocOpBuilder &b, Value lo, Value hi) {
  // cvt.rn.bf16x2.f32 d, a, b puts a in d's upper half: hi first.
  auto type = VectorType::get({2}, b.getBF16Type());
  return b.create<LLVM::CallIntrinsicOp>(type, "llvm.nvvm.ff2bf16x2.rn", ValueRange{hi, lo}).getResult(0);
}

std::pair<Value, Value> mlir::nova::splitTf32(OpBuilder &b, Location loc, Value x, bool truncate) {
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  Value halfUnit = truncate ? Value() : b.create<arith::ConstantIntOp>(loc, 0x1000, i32);
  Value keep = b.create<arith::ConstantIntOp>(loc, int32_t(0xffffe000u), i32);
  auto round = [&](Value v) -> Value {
    Value bits = b.create<arith::BitcastOp>(loc, i32, v);
    if (!truncate)
      bits = b.create<arith::AddIOp>(loc, bits, halfUnit);
    return b.create<arith::BitcastOp>(loc, f32, b.create<arith::AndIOp>(loc, bits, keep));
  };
  // big must be an exact tf32 value (x - big is then exact, and the MMA
  // takes big as is); small's low 13 bits are left to the MMA, which drops
  // them (wgmma, by the ISA; the emulator for both) or rounds them.
  Value big = round(x);
  return {big, b.create<arith::SubFOp>(loc, x, big)};
}

std::pair<Value, Value> mlir::nova::splitTf32Fragment(ImplicitLocOpBuilder &b, Value fragment, bool truncate) {
  auto type = cast<VectorType>(fragment.getType());
  Value big = fragment, small = fragment;
  for (int64_t i = 0; i < type.getDimSize(0); ++i) {
    Value x = b.create<vector::ExtractOp>(fragment, ArrayRef<int64_t>{i, 0});
    auto [hi, lo] = splitTf32(b, b.getLoc(), x, truncate);
    big = b.create<vector::InsertOp>(hi, big, ArrayRef<int64_t>{i, 0});
    small = b.create<vector::InsertOp>(lo, small, ArrayRef<int64_t>{i, 0});
  }
  return {big, small};
}

Type mlir::nova::operandElementType(GpuOperand operand, MLIRContext *ctx) {
  switch (operand) {
  case GpuOperand::f16:
    return Float16Type::get(ctx);
  case GpuOperand::bf16:
    return BFloat16Type::get(ctx);
  case GpuOperand::f64:
    return Float64Type::get(ctx);
  default:
    return Float32Type::get(ctx);
  }
}

MmaEpilogue mlir::nova::bf16ResultEpilogue(MLIRContext *ctx, Region &storage) {
  ctx->loadDialect<arith::ArithDialect, scf::SCFDialect>();
  auto *body = new Block();
  storage.push_back(body);
  Location l = UnknownLoc::get(ctx);
  Type f32 = Float32Type::get(ctx), bf16 = BFloat16Type::get(ctx);
  body->addArgument(f32, l); // the product
  body->addArgument(bf16, l); // C's element (a linalg body's out), not read
  OpBuilder b(ctx); // (a Region without a parent op has no context of its own)
  b.setInsertionPointToEnd(body);
  Value rounded = b.create<arith::TruncFOp>(l, bf16, body->getArgument(0));
  // The kernels read what the terminator yields, whichever op it is.
  b.create<scf::YieldOp>(l, ValueRange{rounded});
  MmaEpilogue epilogue;
  epilogue.body = body;
  epilogue.inputs = {EpilogueInput{}};
  epilogue.result = bf16;
  return epilogue;
}

SmallVector<Value> MatmulResultStore::at(Value row, Value col) const {
  SmallVector<Value> idx;
  if (batch)
    idx.push_back(batch);
  idx.push_back(row);
  idx.push_back(col);
  return idx;
}

/// The fixed epilogue: activation(scale x v + bias) + residual.
Value MatmulResultStore::fixedEpilogue(ImplicitLocOpBuilder &b, Value v, Value row, Value col, Value biasAtCol) const {
  Type type = v.getType();
  const bool pair = isa<VectorType>(type);
  auto constant = [&](double x) -> Value {
    if (auto vt = dyn_cast<VectorType>(type))
      return b.create<arith::ConstantOp>(vt, DenseElementsAttr::get(vt, b.getF32FloatAttr(float(x))));
    return b.create<arith::ConstantOp>(b.getF32FloatAttr(float(x)));
  };
  auto load = [&](Value memref, ValueRange idx) -> Value {
    if (pair)
      return b.create<vector::LoadOp>(cast<VectorType>(type), memref, idx);
    return b.create<memref::LoadOp>(memref, idx);
  };
  if (epilogue.scale != 1.0)
    v = b.create<arith::MulFOp>(v, constant(epilogue.scale));
  if (epilogue.bias)
    v = b.create<arith::AddFOp>(v, biasAtCol ? biasAtCol : load(bias, ValueRange{col}));
  switch (epilogue.activation) {
  case MmaEpilogue::Activation::none:
    break;
  case MmaEpilogue::Activation::relu:
    v = b.create<arith::MaximumFOp>(v, constant(0.0));
    break;
  case MmaEpilogue::Activation::gelu_tanh: {
    // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as PyTorch's approximate="tanh".
    Value x3 = b.create<arith::MulFOp>(b.create<arith::MulFOp>(v, v), v);
    Value inner = b.create<arith::AddFOp>(v, b.create<arith::MulFOp>(x3, constant(0.044715)));
    Value th = b.create<math::TanhOp>(b.create<arith::MulFOp>(inner, constant(0.7978845608028654)));
    Value half = b.create<arith::MulFOp>(v, constant(0.5));
    v = b.create<arith::MulFOp>(half, b.create<arith::AddFOp>(th, constant(1.0)));
    break;
  }
  }
  if (epilogue.residual)
    v = b.create<arith::AddFOp>(v, load(residual, at(row, col)));
  return v;
}

/// The epilogue (a step's op's body, or the fixed one), then stored: `v`
/// is both columns (vector<2xf32>) or the first alone (f32).
void MatmulResultStore::finish(IndexMath &k, Value v, Value row, Value col, ArrayRef<Value> columns,
                               Value biasAtCol) const {
  ImplicitLocOpBuilder &b = k.b;
  v = epilogue.body ? applyGpuEpilogue(b, *epilogue.body, epilogue.inputs, epilogueArgs, v, row, col, columns)
                    : fixedEpilogue(b, v, row, col, biasAtCol);
  if (isa<VectorType>(v.getType()))
    b.create<vector::StoreOp>(v, c, at(row, col));
  else
    b.create<memref::StoreOp>(v, c, at(row, col));
}

bool MatmulResultStore::sharesColumnLoads() const {
  if (edges)
    return false;
  if (!epilogue.body)
    return epilogue.bias;
  return llvm::any_of(epilogue.inputs,
                      [](const EpilogueInput &input) { return input.kind == EpilogueInput::Kind::column; });
}

void MatmulResultStore::storePairs(IndexMath &k, ArrayRef<Value> pairs, ArrayRef<Value> rows, Value col) const {
  if (!sharesColumnLoads()) {
    for (auto [pair, row] : llvm::zip_equal(pairs, rows))
      storePair(k, pair, row, col);
    return;
  }
  ImplicitLocOpBuilder &b = k.b;
  SmallVector<Value> columns;
  Value biasAtCol;
  if (epilogue.body)
    columns = loadGpuEpilogueColumns(b, epilogue.inputs, epilogueArgs, col, 2);
  else if (epilogue.bias)
    biasAtCol = b.create<vector::LoadOp>(VectorType::get({2}, b.getF32Type()), bias, ValueRange{col});
  for (auto [pair, row] : llvm::zip_equal(pairs, rows))
    finish(k, pair, row, col, columns, biasAtCol);
}

void MatmulResultStore::storePair(IndexMath &k, Value pair, Value row, Value col) const {
  if (!edges)
    return finish(k, pair, row, col);
  ImplicitLocOpBuilder &b = k.b;
  // Both columns, the first alone, or nothing.
  Value inRow = k.ult(row, m);
  Value both = b.create<arith::AndIOp>(inRow, k.ult(k.add(col, 1), n));
  auto ifBoth = b.create<scf::IfOp>(both, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifBoth.getThenRegion().front());
  finish(k, pair, row, col);
  b.setInsertionPointToStart(&ifBoth.getElseRegion().front());
  Value first = b.create<arith::AndIOp>(inRow, k.ult(col, n));
  auto ifFirst = b.create<scf::IfOp>(first, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
  finish(k, b.create<vector::ExtractOp>(pair, ArrayRef<int64_t>{0}), row, col);
}

SmallVector<Value> MatmulKernelFrame::operandAt(Value row, Value col) const {
  if (split)
    return {row, col};
  return out.at(row, col);
}

std::pair<Value, Value> MatmulKernelFrame::slabRange(IndexMath &k, int64_t slabs, int64_t splitK) const {
  if (!split)
    return {k.c(0), k.c(slabs)};
  const int64_t per = (slabs + splitK - 1) / splitK;
  Value first = k.mul(split, per);
  Value left = k.b.create<arith::SubIOp>(k.c(slabs), first);
  return {first, k.b.create<arith::MaxSIOp>(k.c(0), k.b.create<arith::MinSIOp>(left, k.c(per)))};
}

MatmulKernelFrame mlir::nova::beginMatmulKernel(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module, StringRef name,
                                                const GpuMatmulProblem &p, Type aType, Type bType, int64_t blockM,
                                                int64_t blockN, int64_t threads, const MmaEpilogue &epilogue,
                                                bool linearGrid, int64_t splitK, int64_t persistentBlocks) {
  if (Operation *end = module.getBody()->getTerminator())
    b.setInsertionPoint(end); // gpu.module_end
  else
    b.setInsertionPointToEnd(module.getBody());
  Type f32 = b.getF32Type();
  // The grid's third index: the batch, or the part of K (split-K has no batch).
  const bool split = splitK > 1;
  const bool batched = p.batch > 1 || split;
  const int64_t layers = split ? splitK : p.batch;
  SmallVector<int64_t> cShape;
  if (batched)
    cShape.push_back(layers);
  cShape.append({p.m, p.n});
  auto cType = MemRefType::get(cShape, epilogue.body && epilogue.result ? epilogue.result : f32);
  SmallVector<Type> argTypes{aType, bType, cType};
  if (epilogue.bias)
    argTypes.push_back(MemRefType::get({p.n}, f32));
  if (epilogue.residual)
    argTypes.push_back(MemRefType::get(cShape, f32));
  for (const EpilogueInput &input : epilogue.inputs)
    if (input.kind != EpilogueInput::Kind::product)
      argTypes.push_back(epilogueArgumentType(input, p.m, p.n));
  MatmulKernelFrame frame;
  auto func = frame.func = b.create<gpu::GPUFuncOp>(name, b.getFunctionType(argTypes, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  // Column pairs (2t, 2t + 1) of the result start on 8-byte boundaries when
  // its rows have an even length: PtxEmitter may then move them as one
  // 8-byte access (st.global.v2.f32) instead of two.
  if (p.n % 2 == 0)
    func->setAttr(kAlignedVectorsAttr, b.getUnitAttr());
  const int64_t tilesN = (p.n + blockN - 1) / blockN, tilesM = (p.m + blockM - 1) / blockM;
  const bool persistent = persistentBlocks > 0;
  if (persistent)
    func.setKnownGridSizeAttr(b.getDenseI32ArrayAttr({int32_t(persistentBlocks), 1, 1}));
  else if (linearGrid)
    func.setKnownGridSizeAttr(b.getDenseI32ArrayAttr({int32_t(tilesN * tilesM * layers), 1, 1}));
  else
    func.setKnownGridSizeAttr(b.getDenseI32ArrayAttr({int32_t(tilesN), int32_t(tilesM), int32_t(layers)}));
  b.setInsertionPointToStart(&func.getBody().front());

  IndexMath k(b);
  frame.thread = b.create<gpu::ThreadIdOp>(gpu::Dimension::x);
  frame.tilesN = tilesN;
  frame.tilesM = tilesM;
  frame.layers = batched ? layers : 1;
  frame.blockM = blockM;
  frame.blockN = blockN;
  frame.splitK = splitK;
  MatmulResultStore &out = frame.out;
  out.c = func.getArgument(2);
  out.bias = epilogue.bias ? func.getArgument(3) : Value();
  out.residual = epilogue.residual ? func.getArgument(epilogue.bias ? 4 : 3) : Value();
  for (BlockArgument arg : func.getArguments().drop_front(3 + unsigned(epilogue.bias) + unsigned(epilogue.residual)))
    out.epilogueArgs.push_back(arg);
  out.m = p.m;
  out.n = p.n;
  out.edges = p.m % blockM || p.n % blockN;
  out.epilogue = epilogue;
  if (persistent)
    return frame;
  if (linearGrid)
    return frame.atTile(k, b.create<gpu::BlockIdOp>(gpu::Dimension::x));
  Value bx = b.create<gpu::BlockIdOp>(gpu::Dimension::x), by = b.create<gpu::BlockIdOp>(gpu::Dimension::y);
  Value bz = batched ? b.create<gpu::BlockIdOp>(gpu::Dimension::z).getResult() : Value();
  frame.row0 = k.mul(by, blockM);
  frame.col0 = k.mul(bx, blockN);
  out.batch = bz;
  frame.split = split ? bz : Value();
  return frame;
}

MatmulKernelFrame MatmulKernelFrame::atTile(IndexMath &k, Value tile) const {
  MatmulKernelFrame f = *this;
  const bool batched = layers > 1;
  Value bx = k.rem(tile, tilesN), rest = k.div(tile, tilesN);
  Value by = batched ? k.rem(rest, tilesM) : rest;
  Value bz = batched ? k.div(rest, tilesM) : Value();
  f.row0 = k.mul(by, blockM);
  f.col0 = k.mul(bx, blockN);
  f.out.batch = bz;
  f.split = splitK > 1 ? bz : Value();
  return f;
}
