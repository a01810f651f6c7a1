//===- GpuAttentionMma.cpp - causal attention on bf16 tensor cores -------===//
//
// Lane maps (notes/ptx-semantics.md), with lane l, g = l / 4, t = l % 4,
// as in MmaMatmulKernel.cpp:
//   A fragment  ldmatrix.x4 with lane l at (row l % 16, 16-byte chunk l / 16
//               of the k step): registers a0..a3 = (row g, k 2t..2t+1),
//               (g + 8, 2t..), (g, 8 + 2t..), (g + 8, 8 + 2t..) (§4).
//   B fragment  stored n x k (K's rows: B[k][n] = K[n][k]): ldmatrix.x4
//               with lane l at (n row 8 (l / 16) + l % 8, k chunk (l / 8) %
//               2): registers {0, 1} are n-block 2p, {2, 3} 2p + 1;
//               stored k x n (V's rows): ldmatrix.x4.trans with lane l at
//               (k row l % 16, n chunk 2p + l / 16) (§4).
//   C fragment  lane l holds rows g, g + 8 and columns 2t, 2t + 1 (§1, §2):
//               the accumulators of n-blocks 2j and 2j + 1 are, element by
//               element, the A fragment of k step j ((g, 2t..), (g + 8,
//               2t..), (g, 8 + 2t..), (g + 8, 8 + 2t..)).
// tf32 (m16n8k8, f32 tiles):
//   A fragment  ldmatrix.x4 (.b16) as above, 16-byte chunks of 4 f32: lane
//               l gets word l % 4 of row l / 4 of each 8 x 4 block: a0..a3
//               = (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) (§1, §4).
//   B fragment  stored n x k: the same ldmatrix.x4 as bf16's, registers
//               {0, 1} n-block 2p (b0 = (k t, n g), b1 = (k t + 4, n g)),
//               {2, 3} 2p + 1; stored k x n: scalar loads (no 32-bit
//               .trans), rows 2t and 2t + 1 of the k step for b0 and b1.
//   C -> A      an n-block's accumulator (g, 2t), (g + 8, 2t), (g, 2t + 1),
//               (g + 8, 2t + 1) is the A fragment of its k step with k slot
//               t holding column 2t and slot t + 4 column 2t + 1, which the
//               B rows 2t, 2t + 1 above follow.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/GpuAttentionMma.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/target/cuda/MatmulKernelParts.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::nova;

namespace {

bool wholeBuffer(Value v, Type element) {
  auto type = dyn_cast<MemRefType>(v.getType());
  return type && type.hasStaticShape() && type.getLayout().isIdentity() && type.getRank() == 3 &&
         type.getElementType() == element;
}

/// A shared tile's row, in elements: bf16 rows of hd (swizzled), f32 rows
/// of hd + 4 (padded; AttentionMma).
int64_t attentionTileStride(int64_t hd, AttentionMmaOperands operands) {
  return operands == AttentionMmaOperands::bf16 ? hd : hd + 4;
}
int64_t attentionTileBytes(int64_t hd, AttentionMmaOperands operands) {
  return AttentionMmaPlan::kTileRows * attentionTileStride(hd, operands) *
         (operands == AttentionMmaOperands::bf16 ? 2 : 4);
}
/// Whether a kernel keeps its own rows in shared tiles: f32 operands
/// always, bf16 ones for heads of 128 columns (their fragments would take
/// 32 registers a lane an operand beside the accumulators: ptxas 13.0
/// spilled 104 bytes in the sm_90a forward, 80 to 100 in the backward)
/// unless `bf16RowsInRegisters` (where the tiles do not fit: sm_86).
bool attentionOwnRowsShared(AttentionKernelOp op, AttentionMmaOperands operands, bool bf16RowsInRegisters) {
  return operands != AttentionMmaOperands::bf16 || (op.headDim() > 64 && !bf16RowsInRegisters);
}
/// The tiles of a kernel's own rows: one for each of their operands (q;
/// the backward's two) where they are shared (attentionOwnRowsShared).
int64_t attentionOwnTiles(AttentionKernelOp op, const AttentionMmaPlan &plan) {
  return plan.ownRowsShared ? (op.getBackward() ? 2 : 1) : 0;
}

/// Whether `src`, an input of a kernel with bf16 operands, is bf16
/// itself: its tiles are then copied as they are (cp.async), not rounded.
bool copiedAsIs(Value src, AttentionMmaOperands operands) {
  return operands == AttentionMmaOperands::bf16 && cast<ShapedType>(src.getType()).getElementType().isBF16();
}

/// The inputs whose rows a kernel visits in tiles (overTiles' a and b):
/// qkv twice (k and v), or for the key rows qkv (q) and the gradient (dO).
std::pair<Value, Value> attentionVisitedSources(AttentionKernelOp op) {
  Value qkv = op.getInputs()[0];
  return {qkv, attentionBackwardPart(op) == AttentionBackwardPart::keys ? op.getInputs()[1] : qkv};
}

/// bf16 operands: the f32 floats of the staging buffer the visited rows'
/// next tiles of f32 inputs are copied ahead into (AttentionMma::prefetch:
/// a slot a visited f32 source, bf16 ones copied into the tiles as they
/// are), and with the key rows the next query rows' statistics (one a
/// thread).
int64_t attentionStagingFloats(AttentionKernelOp op, AttentionMmaOperands operands) {
  if (operands != AttentionMmaOperands::bf16)
    return 0;
  auto [a, b] = attentionVisitedSources(op);
  const int64_t slots = int64_t(!copiedAsIs(a, operands)) + int64_t(!copiedAsIs(b, operands));
  const bool keys = attentionBackwardPart(op) == AttentionBackwardPart::keys;
  return slots * AttentionMmaPlan::kTileRows * op.headDim() + (keys ? AttentionMmaPlan::kThreads : 0);
}

/// An operand fragment of one MMA: bf16 or tf32 (`big`), and 3xtf32's
/// small half (null otherwise).
struct Frag {
  Value big, small;
};

/// The pieces of the tensor-core attention kernels: a warp's 16 rows
/// against a shared tile of kTileRows rows of a head's hd columns, in f32
/// accumulators (vector<2x2xf32>, an m16n8 tile each). bf16 tiles have
/// rows of hd elements, their 16-byte chunks XOR-swizzled; f32 tiles rows
/// of hd + 4 (padded: hd + 4 is 4 modulo 8 words, so that the 8 rows of an
/// ldmatrix phase start in 8 distinct 16-byte bank groups and the scalar
/// loads of rows 2t, 2t + 1 and columns g hit 32 distinct banks).
struct AttentionMma {
  ImplicitLocOpBuilder &b;
  IndexMath k;
  int64_t T, d, hd;
  Value batch, column0, thread, lane, warp;
  AttentionMmaOperands operands;
  /// bf16 operands: k steps of 16; else f32 ones (tf32 MMAs), of 8.
  bool sixteen;
  int64_t stride, kStep;
  Swizzle swizzle;
  Type shared, bf16, f32;
  AttentionMmaFaults faults;
  static constexpr int64_t kTile = AttentionMmaPlan::kTileRows;
  /// 3xtf32's split truncates big (splitTf32): 2 instructions an element
  /// where rounding takes 3, and every B element is split by each of the 4
  /// warps.
  static constexpr bool kTruncatedSplit = true;

  AttentionMma(ImplicitLocOpBuilder &b, AttentionKernelOp op, AttentionMmaOperands operands, Value thread,
               Value batch, Value column0)
      : b(b), k(b), T(op.seq()), d(op.model()), hd(op.headDim()), batch(batch), column0(column0), thread(thread),
        operands(operands), sixteen(operands == AttentionMmaOperands::bf16),
        stride(attentionTileStride(op.headDim(), operands)), kStep(sixteen ? 16 : 8),
        swizzle(ldmatrixSwizzle(op.headDim() / 8)), bf16(b.getBF16Type()), f32(b.getF32Type()) {
    shared = sixteen ? bf16 : f32;
    lane = k.rem(thread, 32);
    warp = k.div(thread, 32);
  }

  Value accZero() {
    auto type = VectorType::get({2, 2}, f32);
    return b.create<arith::ConstantOp>(type, DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
  }
  Value tile(Value dyn, int64_t index) {
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    auto type = MemRefType::get({kTile, stride}, shared, MemRefLayoutAttrInterface(), wg);
    return b.create<memref::ViewOp>(type, dyn, k.c(index * attentionTileBytes(hd, operands)), ValueRange{});
  }
  /// Column (in elements) of 16-byte chunk `chunk` of tile row `row`:
  /// swizzled (bf16) or not (f32).
  Value swizzled(Value row, Value chunk) {
    return sixteen ? k.mul(swizzleChunk(k, row, chunk, swizzle), 8) : k.shl(chunk, 2);
  }
  /// ... where ldmatrix reads it.
  Value readAt(Value row, Value chunk) {
    return faults.unswizzledReads ? k.mul(chunk, 16 / (sixteen ? 2 : 4)) : swizzled(row, chunk);
  }

  /// Whether `src` is copied into bf16 tiles as it is (copiedAsIs).
  bool asIs(Value src) const { return copiedAsIs(src, operands); }

  /// Rows [r0, r0 + kTile) of part `part` of `src` ([B, T, parts x d])
  /// into `tile`, rows past the sequence clamped to its last (read, never
  /// used unmasked), consecutive threads consecutive columns: f32 into
  /// bf16 tiles 4 columns at a time by a 16-byte load, rounded, and an
  /// 8-byte shared store (half of a swizzled chunk); f32 into f32 tiles
  /// by a 16-byte cp.async of 4, bf16 into bf16 tiles by one of 8 (a
  /// swizzled chunk), neither through registers (landStaged waits for
  /// them). Copies: where `live` is false, nothing (zero-fill).
  void stage(Value tile, Value src, int64_t part, Value r0, Value live = Value()) {
    if (!sixteen) {
      copyUnits(tile, [&](int64_t, Value r, Value quad) { return SmallVector<Value, 2>{r, k.shl(quad, 2)}; }, src,
                part, r0, live, 4);
      return;
    }
    if (asIs(src)) {
      copyUnits(tile, [&](int64_t, Value r, Value chunk) { return SmallVector<Value, 2>{r, swizzled(r, chunk)}; },
                src, part, r0, live, 8);
      return;
    }
    Value column;
    forEachUnit(4, [&](int64_t, Value r, Value quad) {
      storeBf16(tile, r, quad,
                b.create<vector::LoadOp>(VectorType::get({4}, f32), src, unitSource(part, r0, r, quad, 4)), column);
    });
  }

  /// A cp.async's source size: `elements`, or none (zero-fill) where
  /// `live` is false; null (all of them) without `live`.
  Value copiedElements(Value live, int64_t elements) {
    return live ? b.create<arith::SelectOp>(live, k.c(elements), k.c(0)).getResult() : Value();
  }
  /// cp.async (16 bytes, past L1) of this thread's units of `elements`
  /// (4 f32 or 8 bf16) of rows [r0, r0 + kTile) of part `part` of `src`
  /// into `dst` at `at(i, r, unit)`; where `live` is false nothing
  /// (zero-fill from the clamped rows' addresses).
  void copyUnits(Value dst, function_ref<SmallVector<Value, 2>(int64_t, Value, Value)> at, Value src, int64_t part,
                 Value r0, Value live, int64_t elements) {
    Value size = copiedElements(live, elements);
    forEachUnit(elements, [&](int64_t i, Value r, Value unit) {
      pending.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst,
                                                           at(i, r, unit), src, unitSource(part, r0, r, unit, elements),
                                                           b.getIndexAttr(elements), size,
                                                           /*bypassL1=*/b.getUnitAttr()));
    });
  }

  /// fn(i, r, unit) for this thread's units of `elements` columns (16
  /// bytes: a quad of f32, a chunk of 8 bf16) of a tile, i < kTile x hd /
  /// elements / threads: the i-th is unit e = thread + i x threads of the
  /// tile, its row r = e / (hd / elements) and columns elements x unit ..,
  /// unit = e mod (hd / elements) (consecutive threads consecutive units).
  /// A thread's units are whole rows apart (threads is a multiple of hd /
  /// elements): r is the first's row plus a constant, unit the same, so
  /// that their addresses differ by constants (immediate offsets, not
  /// registers held across the loops).
  /// f32 tiles of heads of 16 (rows of 80 bytes: 16 floats and the pad)
  /// are the exception: there a quarter-warp's 16-byte copies would be two
  /// adjacent rows, whose bytes overlap a bank group (2-way conflicts,
  /// GpuRequestCost.h), so a warp's 8 rows go r, r + 4 to each quarter
  /// (320 bytes apart: the two halves of the banks).
  void forEachUnit(int64_t elements, function_ref<void(int64_t, Value, Value)> fn) {
    const int64_t units = hd / elements, perThread = kTile * units / AttentionMmaPlan::kThreads;
    static_assert(AttentionMmaPlan::kThreads % 32 == 0);
    Value row = k.div(thread, units), unit = k.rem(thread, units);
    if (!sixteen && hd == 16 && elements == 4)
      row = k.add(k.add(k.mul(k.div(thread, 32), 8), k.rem(k.div(thread, 8), 4)),
                  k.mul(k.rem(k.div(thread, 4), 2), 4));
    for (int64_t i = 0; i < perThread; ++i)
      fn(i, i ? k.add(row, i * (AttentionMmaPlan::kThreads / units)) : row, unit);
  }
  /// Where this thread's i-th quad lies in staging slot `slot` (in floats).
  Value stagedAt(int64_t slot, int64_t i) {
    return k.add(k.shl(thread, 2), i * AttentionMmaPlan::kThreads * 4 + slot * kTile * hd);
  }
  /// Where a tile's unit of `elements` columns comes from: part `part` of
  /// [B, T, parts x d], row r0 + r clamped to the sequence's last.
  SmallVector<Value, 3> unitSource(int64_t part, Value r0, Value r, Value unit, int64_t elements) {
    Value row = b.create<arith::MinUIOp>(k.add(r0, r), k.c(T - 1));
    return {batch, row, k.add(k.add(column0, part * d), k.shl(unit, llvm::Log2_64(uint64_t(elements))))};
  }
  /// A quad (vector<4xf32>) of forEachUnit(4) rounded into a bf16 tile, half
  /// of a swizzled chunk. `column` caches the quad's column where the
  /// swizzle repeats within a thread's rows' step (every head but 128's).
  void storeBf16(Value tile, Value r, Value quad, Value v, Value &column) {
    const int64_t step = AttentionMmaPlan::kThreads / (hd / 4);
    const bool repeats = step % ((swizzle.rm + 1) << swizzle.rs) == 0;
    Value at = repeats && column ? column : k.add(swizzled(r, k.shr(quad, 1)), k.shl(k.andi(quad, 1), 2));
    column = at;
    b.create<vector::StoreOp>(b.create<arith::TruncFOp>(VectorType::get({4}, bf16), v), tile, ValueRange{r, at});
  }

  /// bf16 operands: the staging buffer (attentionStagingFloats), slot s of
  /// a tile's f32 rows at s x kTile x hd, as a tile's quads lie ([r][4
  /// quad]), so that each thread copies (cp.async, 16 bytes) and later reads
  /// back only its own quads: no barrier orders them, and the copies of the
  /// next tiles run while the present ones are computed on.
  Value staging;
  /// Copies the quads of rows [r0, r0 + kTile) of part `part` of `src` into
  /// staging slot `slot`; where `live` is false nothing (zero-fill from the
  /// clamped rows' addresses: the tiles past the last).
  void prefetch(int64_t slot, Value src, int64_t part, Value r0, Value live) {
    copyUnits(staging, [&](int64_t i, Value, Value) { return SmallVector<Value, 2>{stagedAt(slot, i)}; }, src, part,
              r0, live, 4);
  }
  /// This thread's quads of staging slot `slot` rounded into `tile`.
  void convertStaged(int64_t slot, Value tile) {
    Value column;
    forEachUnit(4, [&](int64_t i, Value r, Value quad) {
      storeBf16(tile, r, quad,
                b.create<vector::LoadOp>(VectorType::get({4}, f32), staging, ValueRange{stagedAt(slot, i)}), column);
    });
  }
  /// Commits the copies issued since the last commit as one group.
  Value commitStaged() {
    Value group = b.create<nvgpu::DeviceAsyncCreateGroupOp>(nvgpu::DeviceAsyncTokenType::get(b.getContext()),
                                                            pending);
    pending.clear();
    return group;
  }

  /// The cp.async copies stage issued since the last landStaged.
  SmallVector<Value> pending;
  /// Waits until this thread's staged copies have landed (f32 tiles: a
  /// cp.async group, waited for at once; bf16 tiles are stored already);
  /// the barrier after it makes everyone's visible.
  void landStaged() {
    if (pending.empty())
      return;
    Value group = commitStaged();
    if (!faults.noWaitAfterStaging)
      b.create<nvgpu::DeviceAsyncWaitOp>(group, b.getI32IntegerAttr(0));
  }

  /// ldmatrix.x4 of `tile` with this lane at (row, 16-byte chunk).
  Value ldmatrix(Value tile, Value row, Value chunk, bool transpose) {
    auto type = VectorType::get({4, sixteen ? 2 : 1}, shared);
    return b.create<nvgpu::LdMatrixOp>(type, tile, ValueRange{row, readAt(row, chunk)}, transpose,
                                       /*numTiles=*/4);
  }
  /// `v` (a fragment of f32 elements) as an operand: 3xtf32 splits it.
  Frag operand(Value v) {
    if (operands != AttentionMmaOperands::tf32x3)
      return {v, Value()};
    auto [big, small] = splitTf32Fragment(b, v, kTruncatedSplit);
    return {big, small};
  }
  /// acc += a x b, one MMA (3xtf32: small x big, big x small, big x big).
  void mma(Value &acc, const Frag &a, const Frag &bf) {
    auto one = [&](Value x, Value y) {
      acc = sixteen ? mmaSyncBf16(b, x, y, acc)
                    : b.create<nvgpu::MmaSyncOp>(x, y, acc, ArrayRef<int64_t>{16, 8, 8}, /*tf32Enabled=*/true)
                          .getResult();
    };
    if (a.small) {
      one(a.small, bf.big);
      one(a.big, bf.small);
    }
    one(a.big, bf.big);
  }

  /// A warp's own 16 rows as the A operand of its products: bf16 in
  /// registers (a fragment a k step, loaded once), f32 in their own shared
  /// tile (an ldmatrix a k step and use: its tf32 halves would take 64
  /// registers a head of 64 columns).
  struct Rows {
    SmallVector<Value> frags;
    Value tile, row0;
  };
  /// The A fragment of k step kk (16 bf16 or 8 f32 columns) of tile rows
  /// [m0, m0 + 16): lane l at (row l % 16, chunk l / 16 of the step); for
  /// 32-bit data a .b16 ldmatrix gives lane l word l % 4 of row l / 4 of
  /// each 8 x 4 block, the tf32 A fragment (MmaMatmulKernel.cpp).
  Value rowFragment(Value tile, Value m0, int64_t kk) {
    return ldmatrix(tile, k.add(m0, k.rem(lane, 16)), k.add(k.div(lane, 16), 2 * kk), /*transpose=*/false);
  }
  Frag rowsFragment(const Rows &rows, int64_t kk) {
    if (!rows.tile)
      return {rows.frags[size_t(kk)], Value()};
    Value frag = rowFragment(rows.tile, rows.row0, kk);
    return sixteen ? Frag{frag, Value()} : operand(frag);
  }

  /// The two B fragments (vector<2x2xbf16> or vector<2x1xf32>) in an ldmatrix.x4's result.
  std::pair<Value, Value> halves(Value v) {
    const int64_t regs = cast<VectorType>(v.getType()).getDimSize(1);
    auto slice = [&](int64_t at) -> Value {
      return b.create<vector::ExtractStridedSliceOp>(v, ArrayRef<int64_t>{at, 0}, ArrayRef<int64_t>{2, regs},
                                                     ArrayRef<int64_t>{1, 1});
    };
    return {slice(0), slice(2)};
  }

  /// rows (16 x hd) x tile rows [n0, n0 + n)^T: 16 x n, n / 8
  /// accumulators. The tile's rows are B's columns: ldmatrix without
  /// .trans, lane l at (n row 8 (l / 16) + l % 8, chunk (l / 8) % 2 of the
  /// k step): registers {0, 1} n-block 2p, {2, 3} 2p + 1, for bf16 and f32
  /// alike.
  SmallVector<Value> timesTransposed(const Rows &rows, Value tile, Value n0 = Value(), int64_t n = kTile) {
    SmallVector<Value> acc(size_t(n / 8), accZero());
    Value l8 = k.rem(lane, 8), lq = k.div(lane, 8);
    for (int64_t kk = 0; kk < hd / kStep; ++kk) {
      Frag a = rowsFragment(rows, kk);
      for (int64_t p = 0; p < n / 16; ++p) {
        Value r = k.add(k.add(l8, k.mul(k.shr(lq, 1), 8)), p * 16);
        if (n0)
          r = k.add(r, n0);
        auto [lo, hi] = halves(ldmatrix(tile, r, k.add(k.andi(lq, 1), 2 * kk), /*transpose=*/false));
        mma(acc[size_t(2 * p)], a, operand(lo));
        mma(acc[size_t(2 * p + 1)], a, operand(hi));
      }
    }
    return acc;
  }

  /// acc (16 x hd, hd / 8 accumulators) += p (16 x n, A fragments,
  /// asRowFragments) x tile rows [k0, k0 + n). bf16: the tile's rows are
  /// the k steps' (ldmatrix.trans); f32 (no 32-bit transposing ldmatrix):
  /// scalar loads of rows 8j + 2t and 8j + 2t + 1, column g, the k order
  /// asRowFragments gives its A fragments.
  void accumulateTimes(ArrayRef<Frag> p, Value tile, SmallVector<Value> &acc, Value k0 = Value()) {
    if (sixteen) {
      Value l16 = k.rem(lane, 16), lhi = k.div(lane, 16);
      if (k0)
        l16 = k.add(l16, k0);
      for (int64_t kk = 0; kk < int64_t(p.size()); ++kk)
        for (int64_t q = 0; q < hd / 16; ++q) {
          auto [lo, hi] = halves(ldmatrix(tile, k.add(l16, kk * 16), k.add(lhi, 2 * q), /*transpose=*/true));
          mma(acc[size_t(2 * q)], p[size_t(kk)], operand(lo));
          mma(acc[size_t(2 * q + 1)], p[size_t(kk)], operand(hi));
        }
      return;
    }
    auto type = VectorType::get({2, 1}, f32);
    Value g = k.shr(lane, 2), t = k.andi(lane, 3);
    // Row 8j + 2t + i (faults.unpermutedRows: 8j + t + 4i).
    const bool natural = faults.unpermutedRows;
    Value first = natural ? t : k.shl(t, 1);
    if (k0)
      first = k.add(first, k0);
    for (int64_t kk = 0; kk < int64_t(p.size()); ++kk) {
      Value r = k.add(first, 8 * kk);
      for (int64_t q = 0; q < hd / 8; ++q) {
        Value col = k.add(g, 8 * q);
        Value frag = b.create<arith::ConstantOp>(type, DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
        for (int64_t i = 0; i < 2; ++i)
          frag = b.create<vector::InsertOp>(
              b.create<memref::LoadOp>(tile, ValueRange{k.add(r, natural ? 4 * i : i), col}), frag,
              ArrayRef<int64_t>{i, 0});
        mma(acc[size_t(q)], p[size_t(kk)], operand(frag));
      }
    }
  }

  /// values[j][h][e] (f32: n-block j, row g + 8h, column 2t + e) as the A
  /// fragments of the k steps over its columns. bf16: rounded, 2 n-blocks
  /// a k step of 16, element by element (an m16n8 accumulator pair is the
  /// m16n8k16 A fragment's layout). f32: an n-block a k step of 8, taken
  /// in the order k slot t = column 2t, slot t + 4 = column 2t + 1 (a sum
  /// over k does not care, and accumulateTimes reads B's rows in the same
  /// order): a0..a3 = (g, 2t), (g + 8, 2t), (g, 2t + 1), (g + 8, 2t + 1),
  /// this lane's own elements, no shuffle.
  SmallVector<Frag> asRowFragments(ArrayRef<std::array<std::array<Value, 2>, 2>> values) {
    SmallVector<Frag> frags;
    if (!sixteen) {
      auto type = VectorType::get({4, 1}, f32);
      for (const auto &v : values) {
        Value frag = b.create<arith::ConstantOp>(type, DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
        for (int64_t reg = 0; reg < 4; ++reg)
          frag = b.create<vector::InsertOp>(v[size_t(reg & 1)][size_t(reg >> 1)], frag, ArrayRef<int64_t>{reg, 0});
        frags.push_back(operand(frag));
      }
      return frags;
    }
    auto type = VectorType::get({4, 2}, bf16);
    for (size_t j = 0; j + 1 < values.size(); j += 2) {
      Value frag = b.create<arith::ConstantOp>(type, DenseElementsAttr::get(type, b.getFloatAttr(bf16, 0.0)));
      for (int64_t reg = 0; reg < 4; ++reg) {
        const auto &row = values[j + size_t(reg >> 1)][size_t(reg & 1)];
        frag = b.create<vector::InsertOp>(packBf16x2(b, row[0], row[1]), frag, ArrayRef<int64_t>{reg});
      }
      frags.push_back({frag, Value()});
    }
    return frags;
  }

  /// `scale` x `acc`'s elements (rows row[h], columns col0 + 8j + 2t +
  /// e): values[j][h][e] (null `scale`: the elements as they are); with
  /// `allowed`, -inf where allowed(row, column) is false (only the tiles a
  /// mask cuts take one: a compare and a select an element).
  using Values = SmallVector<std::array<std::array<Value, 2>, 2>>;
  using Mask = function_ref<Value(Value, Value)>;
  Values scores(ArrayRef<Value> acc, Value scale, const Value (&row)[2], Value col0,
                function_ref<Value(Value, Value)> allowed) {
    Value t = k.andi(lane, 3);
    Value minusInf = b.create<arith::ConstantOp>(b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
    Values v(acc.size());
    for (size_t j = 0; j < acc.size(); ++j)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t e = 0; e < 2; ++e) {
          Value &x = v[j][size_t(h)][size_t(e)];
          x = scale ? b.create<arith::MulFOp>(element(acc[j], h, e), scale).getResult() : element(acc[j], h, e);
          if (allowed)
            x = b.create<arith::SelectOp>(allowed(row[h], k.add(k.add(col0, k.shl(t, 1)), 8 * int64_t(j) + e)), x,
                                          minusInf);
        }
    return v;
  }
  /// acc's elements times factor[h] (row h's).
  Value scaleRows(Value acc, const Value (&factor)[2]) {
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t e = 0; e < 2; ++e)
        acc = b.create<vector::InsertOp>(b.create<arith::MulFOp>(element(acc, h, e), factor[h]), acc,
                                         ArrayRef<int64_t>{h, e});
    return acc;
  }
  /// Stores `acc` (hd / 8 accumulators of rows row[h]) into part `part` of
  /// `out` ([B, T, parts x d], f32 or bf16), each divided by divisor[h]
  /// when given, rows past the sequence not: a lane's two adjacent columns
  /// one 8-byte store (f32) or one rounding of both and a 4-byte store
  /// (bf16, cvt.rn.bf16x2.f32).
  void storeRows(ArrayRef<Value> acc, Value out, int64_t part, const Value (&row)[2], const Value *divisor) {
    const bool rounded = cast<MemRefType>(out.getType()).getElementType().isBF16();
    Value t = k.andi(lane, 3);
    for (int64_t h = 0; h < 2; ++h) {
      auto inside = b.create<scf::IfOp>(k.ult(row[h], T), /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&inside.getThenRegion().front());
      for (size_t n = 0; n < acc.size(); ++n) {
        Value pair[2];
        for (int64_t e = 0; e < 2; ++e) {
          pair[e] = this->element(acc[n], h, e);
          if (divisor)
            pair[e] = b.create<arith::DivFOp>(pair[e], divisor[h]);
        }
        Value col = k.add(k.add(k.add(column0, part * d), k.shl(t, 1)), 8 * int64_t(n));
        Value v = rounded ? packBf16x2(b, pair[0], pair[1]) : vectorOf(b, b.getLoc(), pair);
        b.create<vector::StoreOp>(v, out, ValueRange{batch, row[h], col});
      }
    }
  }
  /// Row h's running max after `p` (its scores, in log2 units; `old` the
  /// max before them), the same in the row's 4 lanes, and the rescale
  /// 2^(old - new) of what was summed before. With `scale` (> 0), `p` is
  /// the scores unscaled: their max is taken first and scaled once (the
  /// same value: rounding is monotonic), so that each score's scaling
  /// joins its exponent's subtraction in one FMA (`exponent`) instead of
  /// a multiply of its own.
  std::pair<Value, Value> runningMax(const Values &p, int64_t h, Value old, Value scale = {}) {
    Value rowMax = scale ? f(-std::numeric_limits<float>::infinity()) : old;
    for (auto &tile : p)
      for (Value x : tile[size_t(h)])
        rowMax = max(rowMax, x);
    Value now = scale ? max(old, mul(quadMax(rowMax), scale)) : quadMax(rowMax);
    return {now, exp2(sub(old, now))};
  }
  /// 2^(scale x - max), or 2^(x - max) for a null `scale` (x already
  /// scaled): `scale` x - max contracts into one fma.
  Value exponent(Value x, Value scale, Value max) { return exp2(sub(scale ? mul(x, scale) : x, max)); }
  Value f(double x) { return b.create<arith::ConstantOp>(b.getF32FloatAttr(float(x))); }
  Value add(Value x, Value y) { return b.create<arith::AddFOp>(x, y); }
  Value sub(Value x, Value y) { return b.create<arith::SubFOp>(x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulFOp>(x, y); }
  Value max(Value x, Value y) { return b.create<arith::MaximumFOp>(x, y); }
  /// The running max's start: the lowest finite value, not -inf, so that a
  /// row whose first scores are all masked rescales by exp(0) = 1, not NaN.
  Value lowest() { return f(std::numeric_limits<float>::lowest()); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) { return b.create<arith::CmpIOp>(p, x, y); }

  Value element(Value acc, int64_t h, int64_t e) { return b.create<vector::ExtractOp>(acc, ArrayRef<int64_t>{h, e}); }
  /// By the SFU (sfuExp2). The medium bf16 GPT's forward loop (heads of
  /// 64, a lane's tile of 32 scores; PTX, ptxas not counted) is then 632
  /// instructions: 64 mma.sync, 32 ldmatrix, 34 ex2 and, a score, a max,
  /// an FMA and an add, a bf16x2 conversion a pair, besides O's rescale and
  /// the staging (662 with each score's own multiply before its max, before
  /// runningMax's scale): counted, not measured.
  Value exp2(Value x) { return sfuExp2(b, b.getLoc(), x); }
  /// A row's log-sum-exp in log2 units from its running max (log2 units)
  /// and its sum of 2^(s - max): the forward's and the query rows' alike,
  /// so that the one the backward reads is the one it would compute.
  Value logSumExp2(Value max, Value total) { return add(max, mul(b.create<math::LogOp>(total), f(M_LOG2E))); }
  /// Over a row's 4 lanes (every lane gets it).
  Value quadMax(Value x) {
    return warpAllReduce(b, b.getLoc(), x, [&](Value u, Value v) { return b.create<arith::MaximumFOp>(u, v); }, 4);
  }
  Value quadSum(Value x) {
    return warpAllReduce(b, b.getLoc(), x, [&](Value u, Value v) { return b.create<arith::AddFOp>(u, v); }, 4);
  }
};

} // namespace

const char *mlir::nova::attentionMmaOperandsName(AttentionMmaOperands operands) {
  switch (operands) {
  case AttentionMmaOperands::bf16:
    return "bf16";
  case AttentionMmaOperands::tf32:
    return "tf32";
  case AttentionMmaOperands::tf32x3:
    return "tf32x3";
  }
  return "";
}

const char *mlir::nova::attentionMmaHow(AttentionMmaOperands operands) {
  switch (operands) {
  case AttentionMmaOperands::bf16:
    return "on the bf16 tensor cores (mma.sync m16n8k16, f32 sums, as the step's bf16 matmul precision allows)";
  case AttentionMmaOperands::tf32:
    return "on the tf32 tensor cores (mma.sync m16n8k8, f32 sums, as the step's tf32 matmul precision allows)";
  case AttentionMmaOperands::tf32x3:
    return "on the tensor cores as 3xtf32 (mma.sync m16n8k8, each f32 operand split into big and small tf32 "
           "halves, three MMAs a product, f32 sums: about f32's accuracy)";
  }
  return "";
}

std::string mlir::nova::attentionMmaTileNotes(const AttentionMmaPlan &plan) {
  std::string notes;
  if (plan.subRows < AttentionMmaPlan::kTileRows)
    notes += llvm::formatv(" (taken {0} rows at a time: the backward's heads of 128)", plan.subRows).str();
  if (plan.ownRowsInRegistersToFit)
    notes += " (its own rows in registers: tiles of them would not fit)";
  return notes;
}

void mlir::nova::markAttentionMma(Operation *kernel, const AttentionMmaPlan &plan) {
  MLIRContext *ctx = kernel->getContext();
  kernel->setAttr(kGpuAttentionMmaAttr, StringAttr::get(ctx, attentionMmaOperandsName(plan.operands)));
  kernel->setAttr(kGpuAttentionTileStagesAttr, IntegerAttr::get(IntegerType::get(ctx, 64), plan.tileStages));
  if (plan.ownRowsInRegistersToFit)
    kernel->setAttr(kGpuAttentionOwnRowsInRegistersAttr, UnitAttr::get(ctx));
}

std::optional<AttentionMmaPlan> mlir::nova::markedAttentionMma(Operation *kernel, AttentionKernelOp op) {
  auto name = kernel->getAttrOfType<StringAttr>(kGpuAttentionMmaAttr);
  auto stages = kernel->getAttrOfType<IntegerAttr>(kGpuAttentionTileStagesAttr);
  if (!name || !stages)
    return std::nullopt;
  for (auto operands : {AttentionMmaOperands::bf16, AttentionMmaOperands::tf32, AttentionMmaOperands::tf32x3})
    if (name.getValue() == attentionMmaOperandsName(operands))
      return attentionMmaShape(op, operands, stages.getInt(), kernel->hasAttr(kGpuAttentionOwnRowsInRegistersAttr));
  return std::nullopt;
}

bool mlir::nova::attentionHeadsTakeMma(AttentionKernelOp op) {
  const int64_t hd = op.headDim();
  return hd >= 16 && hd <= 128 && llvm::isPowerOf2_64(uint64_t(hd));
}

AttentionMmaPlan mlir::nova::attentionMmaShape(AttentionKernelOp op, AttentionMmaOperands operands,
                                               int64_t tileStages, bool bf16RowsInRegisters) {
  AttentionMmaPlan plan;
  plan.operands = operands;
  plan.rowBlocks = (op.seq() + AttentionMmaPlan::kRows - 1) / AttentionMmaPlan::kRows;
  plan.blocks = op.batch() * op.getHeads() * plan.rowBlocks;
  // The tiles; key rows also the visited query rows' statistics, f32.
  plan.tileStages = tileStages;
  plan.ownRowsShared = attentionOwnRowsShared(op, operands, bf16RowsInRegisters);
  plan.ownRowsInRegistersToFit = !plan.ownRowsShared && attentionOwnRowsShared(op, operands, false);
  if (op.getBackward() && op.headDim() > 64)
    plan.subRows = AttentionMmaPlan::kTileRows / 2;
  plan.sharedBytes =
      (attentionOwnTiles(op, plan) + 2 * tileStages) * attentionTileBytes(op.headDim(), operands);
  if (attentionBackwardPart(op) == AttentionBackwardPart::keys)
    plan.sharedBytes += tileStages * AttentionMmaPlan::kTileRows * 2 * 4;
  plan.sharedBytes += attentionStagingFloats(op, operands) * 4;
  return plan;
}

std::optional<AttentionMmaPlan> mlir::nova::planAttentionMma(AttentionKernelOp op, const ::nova::TargetDesc &target,
                                                             AttentionMmaOperands operands, std::string &whyNot) {
  whyNot.clear();
  auto no = [&](std::string why) -> std::optional<AttentionMmaPlan> {
    whyNot = "attention not on the tensor cores: " + why;
    return std::nullopt;
  };
  const bool sixteen = operands == AttentionMmaOperands::bf16;
  if (!target.has(sixteen ? "mma.sync.bf16" : "mma.sync.tf32"))
    return no(sixteen ? "the GPU has no bf16 mma.sync" : "the GPU has no tf32 mma.sync");
  if (op.getBackward() && !attentionBackwardPart(op))
    return no("a backward not split into query and key rows");
  if (!attentionHeadsTakeMma(op))
    return no(llvm::formatv("heads of {0} columns (16, 32, 64 or 128 take it)", op.headDim()).str());
  Type f32 = Float32Type::get(op.getContext());
  Value out = op.getInit();
  auto outType = cast<MemRefType>(out.getType());
  // qkv f32, or bf16 where the products take bf16 (GpuBf16Operands.cpp);
  // the gradient f32.
  auto inputOk = [&](auto in) {
    return wholeBuffer(in.value(), f32) || (in.index() == 0 && copiedAsIs(in.value(), operands) &&
                                            wholeBuffer(in.value(), BFloat16Type::get(op.getContext())));
  };
  if (!llvm::all_of(llvm::enumerate(op.getInputs()), inputOk) || !wholeBuffer(out, outType.getElementType()) ||
      !(outType.getElementType().isF32() || outType.getElementType().isBF16()))
    return no(sixteen ? "its qkv is not a whole f32 or bf16 buffer, its gradient not a whole f32 one, or its "
                        "result not a whole f32 or bf16 one"
                      : "its input is not a whole f32 buffer, or its result not a whole f32 or bf16 one");
  // Two buffers of the visited rows' tiles where they fit, else one; bf16
  // own rows in shared tiles where either fits, else in registers.
  const int64_t limit = std::max(target.smem_per_block, target.smem_per_block_optin);
  AttentionMmaPlan plan;
  for (bool inRegisters : {false, true}) {
    // (Only bf16 rows of heads of 128 have registers to move to.)
    if (inRegisters && attentionOwnRowsShared(op, operands, true) == attentionOwnRowsShared(op, operands, false))
      break;
    for (int64_t stages : {2, 1}) {
      plan = attentionMmaShape(op, operands, stages, inRegisters);
      if (plan.sharedBytes <= limit)
        return plan;
    }
  }
  return no(llvm::formatv("its tiles would take {0} bytes of shared memory", plan.sharedBytes).str());
}

namespace {

/// What the three kernels share: the block's (batch, head), its first row
/// (query rows: the blocks of the last rows, with the most keys, first;
/// key rows: the first rows first), the shared tiles, this lane's two rows
/// (g and g + 8 of its warp's 16).
struct AttentionBlock {
  AttentionMma m;
  Value pair, first, dyn, warpRow0;
  /// The own rows' tiles staged so far, of ownTileCount (attentionOwnTiles).
  int64_t ownTiles = 0, ownTileCount;
  /// Shared memory: [own rows' tiles] [visited rows' tiles A, B] x
  /// tileStages [key rows' statistics tile] x tileStages [staging (bf16)].
  int64_t tileStages, tileBytes, visited0, statsAt0 = -1;
  /// Rows of a visited tile taken at once (AttentionMmaPlan::subRows).
  int64_t sub;
  /// Key rows: the visited query rows' log-sum-exp and D, staged with the
  /// tiles from `stats` (attentionStatsType): a thread a value.
  Value stats;
  Value row[2];
  /// The op's scale, and it times log2(e): scores in log2 units, so that
  /// every exponential is a 2^x (AttentionMma::exp2).
  Value scale, scale2;
  /// scale2 where it is positive (null otherwise): the passes that keep a
  /// running max take it over the unscaled scores and scale the max
  /// (AttentionMma::runningMax), one multiply a score fewer.
  Value maxThenScale;

  AttentionBlock(ImplicitLocOpBuilder &b, AttentionKernelOp op, const AttentionMmaPlan &plan, Value thread,
                 Value block, bool lastRowsFirst, const AttentionMmaFaults &faults, Value stats = {})
      : m(b, op, plan.operands, thread, Value(), Value()), stats(stats) {
    m.faults = faults;
    IndexMath &k = m.k;
    pair = k.div(block, plan.rowBlocks);
    Value rowBlock = k.rem(block, plan.rowBlocks);
    m.batch = k.div(pair, op.getHeads());
    m.column0 = k.mul(k.rem(pair, op.getHeads()), op.headDim());
    first = k.mul(lastRowsFirst ? b.create<arith::SubIOp>(k.c(plan.rowBlocks - 1), rowBlock).getResult() : rowBlock,
                  AttentionMmaPlan::kRows);
    auto wg = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    dyn = b.create<gpu::DynamicSharedMemoryOp>(
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wg));
    tileStages = plan.tileStages;
    sub = plan.subRows;
    tileBytes = attentionTileBytes(op.headDim(), plan.operands);
    ownTileCount = attentionOwnTiles(op, plan);
    visited0 = ownTileCount * tileBytes;
    int64_t end = visited0 + 2 * tileStages * tileBytes;
    if (attentionBackwardPart(op) == AttentionBackwardPart::keys) {
      statsAt0 = end;
      end += tileStages * kStatsBytes;
    }
    if (int64_t floats = attentionStagingFloats(op, plan.operands))
      m.staging = b.create<memref::ViewOp>(MemRefType::get({floats}, m.f32, MemRefLayoutAttrInterface(), wg), dyn,
                                           k.c(end), ValueRange{});
    warpRow0 = k.mul(m.warp, 16);
    Value g = k.shr(m.lane, 2);
    row[0] = k.add(k.add(first, warpRow0), g);
    row[1] = k.add(row[0], 8);
    scale = m.f(op.getScale().convertToDouble());
    scale2 = m.f(op.getScale().convertToDouble() * M_LOG2E);
    if (op.getScale().convertToDouble() > 0)
      maxThenScale = scale2;
  }

  /// fn(n0, carried) over the visited tile's parts of `sub` rows (n0 their
  /// first row in it), carrying `init` through them: the whole tile at
  /// once (n0 null), or a loop over its parts (unrolled here, the tf32
  /// backward's heads of 128 spilled 644 to 956 bytes a lane; as a loop,
  /// none or 4 bytes in a GPT's step, ptxas 13.0).
  SmallVector<Value> overParts(ValueRange init, function_ref<SmallVector<Value>(Value, ValueRange)> fn) {
    if (sub == AttentionMmaPlan::kTileRows)
      return fn(Value(), init);
    IndexMath &k = m.k;
    return SmallVector<Value>(
        buildFor(m.b, m.b.getLoc(), k.c(0), k.c(AttentionMmaPlan::kTileRows), k.c(sub), init, fn).getResults());
  }
  /// Row n0 of the visited tile from row r0 (r0 itself for the whole).
  Value at(Value r0, Value n0) { return n0 ? m.k.add(r0, n0) : r0; }

  /// Stores values[h] (the same in a row's 4 lanes) of this lane's rows
  /// within the sequence into `buffer` at [pair, row] (slot < 0) or
  /// [pair, row, slot], by the rows' first lanes; with `second`, values[h]
  /// and second[h] as one pair at [pair, row, 0] (slots 0 and 1: one
  /// 8-byte store, a warp's rows in whole sectors).
  void storeRowValues(Value buffer, const Value (&values)[2], int64_t slot, const Value (*second)[2] = nullptr) {
    IndexMath &k = m.k;
    Value firstLane = m.cmp(arith::CmpIPredicate::eq, k.andi(m.lane, 3), k.c(0));
    for (int64_t h = 0; h < 2; ++h) {
      auto guard = m.b.create<scf::IfOp>(m.b.create<arith::AndIOp>(firstLane, k.ult(row[h], m.T)),
                                         /*withElseRegion=*/false);
      OpBuilder::InsertionGuard ig(m.b);
      m.b.setInsertionPointToStart(&guard.getThenRegion().front());
      SmallVector<Value, 3> at{pair, row[h]};
      if (slot >= 0)
        at.push_back(k.c(slot));
      if (second)
        m.b.create<vector::StoreOp>(vectorOf(m.b, m.b.getLoc(), {values[h], (*second)[h]}), buffer, at);
      else
        m.b.create<memref::StoreOp>(values[h], buffer, at);
    }
  }

  /// This lane's part of the dot product of row `r` of `x` (f32) and `y`
  /// (f32 or bf16), both [B, T, d], over the head's columns: 4 at a time,
  /// every fourth run of 4 (a row's 4 lanes sum the parts). The row's 4
  /// lanes read 16 adjacent columns at once: whole 32-byte sectors
  /// (GpuRequestCost.h), where quarters of the row a lane took 4 sectors a
  /// load for 2 (f32), 1 (bf16).
  Value rowDot(Value x, Value y, Value r) {
    IndexMath &k = m.k;
    Type yElement = cast<MemRefType>(y.getType()).getElementType();
    auto f4 = VectorType::get({4}, m.f32);
    Value first = k.add(m.column0, k.mul(k.andi(m.lane, 3), 4)), sum = m.f(0);
    for (int64_t c = 0; c < m.hd; c += 16) {
      SmallVector<Value, 3> at{m.batch, r, k.add(first, c)};
      Value xv = m.b.create<vector::LoadOp>(f4, x, at);
      Value yv = m.b.create<vector::LoadOp>(VectorType::get({4}, yElement), y, at);
      if (yElement != m.f32)
        yv = m.b.create<arith::ExtFOp>(f4, yv);
      for (int64_t e = 0; e < 4; ++e)
        sum = m.b.create<math::FmaOp>(m.b.create<vector::ExtractOp>(xv, ArrayRef<int64_t>{e}),
                                      m.b.create<vector::ExtractOp>(yv, ArrayRef<int64_t>{e}), sum);
    }
    return sum;
  }

  /// The tiles of keys up to the block's last row (within the sequence).
  Value tilesToLastRow() {
    IndexMath &k = m.k;
    Value keys = m.b.create<arith::MinUIOp>(k.add(first, AttentionMmaPlan::kRows), k.c(m.T));
    return k.div(k.add(keys, AttentionMmaPlan::kTileRows - 1), AttentionMmaPlan::kTileRows);
  }

  /// The block's rows of part `part` of `src` as its warps' A operand: in
  /// a tile of their own (attentionOwnTiles), or bf16 fragments in
  /// registers (through the first visited tile).
  AttentionMma::Rows ownRows(Value src, int64_t part) {
    if (ownTiles < ownTileCount) {
      Value tile = m.tile(dyn, ownTiles++);
      m.stage(tile, src, part, first);
      m.landStaged();
      m.b.create<gpu::BarrierOp>();
      return {{}, tile, warpRow0};
    }
    Value tile = tilesAt(m.k.c(0)).a;
    m.stage(tile, src, part, first);
    m.landStaged();
    m.b.create<gpu::BarrierOp>();
    AttentionMma::Rows rows;
    for (int64_t kk = 0; kk < m.hd / 16; ++kk)
      rows.frags.push_back(m.rowFragment(tile, warpRow0, kk));
    m.b.create<gpu::BarrierOp>();
    return rows;
  }

  /// The key rows' statistics tile: [kTileRows][2] f32.
  static constexpr int64_t kStatsBytes = AttentionMmaPlan::kTileRows * 2 * 4;
  /// The visited rows' tiles of buffer `slot` (an index < tileStages).
  struct Tiles {
    Value a, b, stats;
  };
  Tiles tilesAt(Value slot) {
    IndexMath &k = m.k;
    auto view = [&](int64_t at, int64_t stride, MemRefType type) -> Value {
      return m.b.create<memref::ViewOp>(type, dyn, k.add(k.c(at), k.mul(slot, stride)), ValueRange{});
    };
    auto wg = gpu::AddressSpaceAttr::get(m.b.getContext(), gpu::AddressSpace::Workgroup);
    auto tileType = MemRefType::get({AttentionMmaPlan::kTileRows, m.stride}, m.shared, MemRefLayoutAttrInterface(), wg);
    Tiles t{view(visited0, 2 * tileBytes, tileType), view(visited0 + tileBytes, 2 * tileBytes, tileType), Value()};
    if (statsAt0 >= 0)
      t.stats = view(statsAt0, kStatsBytes,
                     MemRefType::get({AttentionMmaPlan::kTileRows, 2}, m.f32, MemRefLayoutAttrInterface(), wg));
    return t;
  }

  /// For tiles [0, count) of kTileRows rows from `from` (count >= 1):
  /// both tiles staged (rows of part partA of a, part partB of bSrc; key
  /// rows also the rows' statistics), then `body(r0, tiles, carried,
  /// tileMask)`. `tileMask` is `mask` for the last tile (`maskLast`: the
  /// query rows' diagonal) or the first (the key rows'), and for the others
  /// where `maskAll`, else none: two loops, so that the tiles the mask
  /// cannot cut spend nothing on it.
  ///
  /// The next tiles' copies run while the present ones are computed on.
  /// bf16 tiles of f32 inputs: each thread's f32 quads go a tile ahead by
  /// cp.async into the staging buffer (AttentionMma::prefetch), which only
  /// that thread reads back, rounding them into the bf16 tiles. f32 tiles,
  /// and bf16 tiles of bf16 inputs: by cp.async straight into the tiles.
  /// With two buffers of tiles (tileStages 2) an iteration fills one while
  /// the other is read, one barrier a tile: tile i's copies landed, the
  /// barrier publishes them and ends every warp's reads of tile i - 1's
  /// buffer, which then takes tile i + 1 (rounded tiles: tile i is rounded
  /// into its buffer, read two iterations before, then the barrier). With
  /// one buffer (where two do not fit), a barrier after the tiles' reads
  /// too, and the straight copies issued after it, waited for at once.
  using TileBody = function_ref<SmallVector<Value>(Value, const Tiles &, ValueRange, AttentionMma::Mask)>;
  SmallVector<Value> overTiles(Value from, Value count, ValueRange init, Value a, int64_t partA, Value bSrc,
                               int64_t partB, AttentionMma::Mask mask, bool maskLast, bool maskAll, TileBody body) {
    IndexMath &k = m.k;
    ImplicitLocOpBuilder &b = m.b;
    auto tokenType = nvgpu::DeviceAsyncTokenType::get(b.getContext());
    const bool twoBuffers = tileStages == 2;
    // Key rows: the statistics of the tile's query rows, a value a thread.
    static_assert(AttentionMmaPlan::kThreads == 2 * AttentionMmaPlan::kTileRows);
    Value statsRow = k.shr(m.thread, 1), statsSlot = k.andi(m.thread, 1);
    auto statsAt = [&](Value r0) -> SmallVector<Value, 3> {
      return {pair, b.create<arith::MinUIOp>(k.add(r0, statsRow), k.c(m.T - 1)), statsSlot};
    };
    // The inputs whose tiles go through the staging buffer (f32 ones
    // rounded into bf16 tiles), each a slot of it (attentionStagingFloats),
    // and the statistics after them.
    const bool stagedA = m.sixteen && !m.asIs(a), stagedB = m.sixteen && !m.asIs(bSrc);
    const int64_t slotB = stagedA ? 1 : 0;
    const int64_t statsStaged = (int64_t(stagedA) + int64_t(stagedB)) * AttentionMmaPlan::kTileRows * m.hd;
    // Copies of the tiles from row r0 (none where `live` is false:
    // zero-fill), each commit one group: those into the staging buffer
    // (with the statistics), and those straight into `into`'s tiles.
    auto copyStaged = [&](Value r0, Value live) {
      if (stagedA)
        m.prefetch(0, a, partA, r0, live);
      if (stagedB)
        m.prefetch(slotB, bSrc, partB, r0, live);
      if (stats && m.sixteen)
        m.pending.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(tokenType, m.staging,
                                                               ValueRange{k.add(m.thread, statsStaged)}, stats,
                                                               statsAt(r0), b.getIndexAttr(1),
                                                               m.copiedElements(live, 1), UnitAttr()));
    };
    auto copyStraight = [&](Value r0, Value live, const Tiles &into) {
      if (!stagedA)
        m.stage(into.a, a, partA, r0, live);
      if (!stagedB)
        m.stage(into.b, bSrc, partB, r0, live);
      // The statistics: 4 bytes a thread, into the tiles' own (f32 tiles).
      if (into.stats && !m.sixteen)
        m.pending.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(tokenType, into.stats,
                                                               ValueRange{statsRow, statsSlot}, stats, statsAt(r0),
                                                               b.getIndexAttr(1), m.copiedElements(live, 1),
                                                               UnitAttr()));
    };
    // Whether any copies go into the staging buffer, or straight.
    const bool anyStaged = stagedA || stagedB || (stats && m.sixteen);
    const bool anyStraight = !stagedA || !stagedB || (stats && !m.sixteen);
    auto commit = [&]() -> Value { return m.pending.empty() ? Value() : m.commitStaged(); };
    auto copyAhead = [&](Value r0, Value live, const Tiles &into) {
      copyStaged(r0, live);
      copyStraight(r0, live, into);
      return commit();
    };
    auto wait = [&](Value group, int64_t pending) {
      if (!m.faults.noWaitAfterStaging)
        b.create<nvgpu::DeviceAsyncWaitOp>(group, b.getI32IntegerAttr(pending));
    };
    auto barrier = [&] {
      if (!m.faults.noBarrierAfterStaging)
        b.create<gpu::BarrierOp>();
    };
    // The buffer of the tile from row r0 (its index from `from`, modulo 2).
    // The fault of a missing barrier before restaging keeps one buffer.
    auto slotOf = [&](Value r0) -> Value {
      if (!twoBuffers || m.faults.noBarrierBeforeRestaging)
        return k.c(0);
      return k.andi(k.div(b.create<arith::SubIOp>(r0, from), AttentionMmaPlan::kTileRows), 1);
    };
    auto otherSlot = [&](Value slot) -> Value {
      return m.faults.noBarrierBeforeRestaging ? slot : b.create<arith::XOrIOp>(slot, k.c(1)).getResult();
    };
    Value end = k.add(from, k.mul(count, AttentionMmaPlan::kTileRows));
    // The first tiles' copies, ahead of the loop (with one buffer, only
    // those into the staging buffer).
    Value inFlight;
    if (twoBuffers)
      inFlight = copyAhead(from, Value(), tilesAt(k.c(0)));
    else if (anyStaged) {
      copyStaged(from, Value());
      inFlight = commit();
    }
    auto loop = [&](Value first, Value trips, ValueRange carried, bool masked) {
      return SmallVector<Value>(buildFor(b, b.getLoc(), k.c(0), trips, k.c(1), carried, [&](Value it, ValueRange c) {
        Value r0 = k.add(first, k.mul(it, AttentionMmaPlan::kTileRows));
        Value next = k.add(r0, AttentionMmaPlan::kTileRows);
        Value live = m.cmp(arith::CmpIPredicate::ult, next, end);
        Value slot = slotOf(r0);
        Tiles tiles = tilesAt(slot);
        if (anyStaged) {
          // Tile r0's quads (the previous iteration's group, or the
          // prologue's) land; this thread rounds them into the tiles, then
          // copies the next ones over them in the staging buffer. Inputs
          // copied as they are go straight into the tiles: with one
          // buffer tile r0's now (the barrier after the last products is
          // behind), with two the next tile's after the barrier.
          Value straight;
          if (!twoBuffers && anyStraight) {
            copyStraight(r0, Value(), tiles);
            straight = commit();
          }
          if (m.faults.prefetchBeforeConvert) {
            copyStaged(next, live);
            commit();
          }
          wait(inFlight ? inFlight : straight, m.faults.prefetchBeforeConvert ? 1 : 0);
          if (stagedA)
            m.convertStaged(0, tiles.a);
          if (stagedB)
            m.convertStaged(slotB, tiles.b);
          if (tiles.stats)
            b.create<memref::StoreOp>(b.create<memref::LoadOp>(m.staging, ValueRange{k.add(m.thread, statsStaged)}),
                                      tiles.stats, ValueRange{statsRow, statsSlot});
          if (!m.faults.prefetchBeforeConvert) {
            copyStaged(next, live);
            commit();
          }
          barrier();
          if (twoBuffers && anyStraight) {
            copyStraight(next, live, tilesAt(otherSlot(slot)));
            commit();
          }
        } else if (twoBuffers) {
          // Tile r0's copies land and are published; every warp is past
          // the previous tile's reads, whose buffer takes the next tile.
          wait(inFlight, 0);
          barrier();
          copyAhead(next, live, tilesAt(otherSlot(slot)));
        } else {
          Value group = copyAhead(r0, Value(), tiles);
          wait(group, 0);
          barrier();
        }
        SmallVector<Value> out = body(r0, tiles, c, masked ? mask : AttentionMma::Mask());
        // One buffer: every warp is done with it before it is restaged.
        if (!twoBuffers && !m.faults.noBarrierBeforeRestaging)
          b.create<gpu::BarrierOp>();
        return out;
      }).getResults());
    };
    Value others = b.create<arith::SubIOp>(count, k.c(1));
    SmallVector<Value> result;
    if (maskLast) {
      SmallVector<Value> before = loop(from, others, init, maskAll);
      result = loop(k.add(from, k.mul(others, AttentionMmaPlan::kTileRows)), k.c(1), before, true);
    } else {
      SmallVector<Value> firstTile = loop(from, k.c(1), init, true);
      result = loop(k.add(from, AttentionMmaPlan::kTileRows), others, firstTile, maskAll);
    }
    // The last iteration's copies (zero-fills past the last tile) are
    // waited for: none outlives the kernel, and every warp is done with
    // the tiles before a next pass stages over them.
    if (inFlight)
      b.create<nvgpu::DeviceAsyncWaitOp>(inFlight, b.getI32IntegerAttr(0));
    if (twoBuffers)
      b.create<gpu::BarrierOp>();
    return result;
  }
};

constexpr int64_t kTile = AttentionMmaPlan::kTileRows;

/// Forward: O = softmax(scale Q K^T, causal) V, online over the key tiles.
void buildForward(ImplicitLocOpBuilder &b, AttentionKernelOp op, const AttentionMmaPlan &plan, Value thread,
                  Value block, Value lse, const AttentionMmaFaults &faults) {
  AttentionBlock blk(b, op, plan, thread, block, /*lastRowsFirst=*/true, faults);
  AttentionMma &m = blk.m;
  IndexMath &k = m.k;
  Value qkv = op.getInputs()[0];
  AttentionMma::Rows q = blk.ownRows(qkv, 0);
  const int64_t outTiles = m.hd / 8;
  // Carried: m and l of rows g and g + 8 (l this lane's part), then O.
  SmallVector<Value> init{m.lowest(), m.lowest(), m.f(0), m.f(0)};
  init.append(size_t(outTiles), m.accZero());
  auto causal = [&](Value query, Value key) { return m.cmp(arith::CmpIPredicate::ule, key, query); };
  // Only the last tile (the diagonal) is cut by the mask: every row of the
  // block is at or past its first key, and the keys past the sequence are
  // past every row.
  SmallVector<Value> loop = blk.overTiles(k.c(0), blk.tilesToLastRow(), init, qkv, 1, qkv, 2, causal,
                                          /*maskLast=*/true, /*maskAll=*/false,
                                          [&](Value r0, const AttentionBlock::Tiles &tiles, ValueRange c, AttentionMma::Mask mask) {
    const Value raw = blk.maxThenScale; // (null: p scaled by scores)
    AttentionMma::Values p =
        m.scores(m.timesTransposed(q, tiles.a), raw ? Value() : blk.scale2, blk.row, r0, mask);
    Value max[2], sum[2], rescale[2];
    for (int64_t h = 0; h < 2; ++h) {
      std::tie(max[h], rescale[h]) = m.runningMax(p, h, c[size_t(h)], raw);
      Value partial = m.f(0);
      for (auto &tile : p)
        for (Value &x : tile[size_t(h)]) {
          x = m.exponent(x, raw, max[h]);
          partial = m.add(partial, x);
        }
      sum[h] = m.add(m.mul(c[size_t(2 + h)], rescale[h]), partial);
    }
    SmallVector<Value> o;
    for (int64_t n = 0; n < outTiles; ++n)
      o.push_back(m.scaleRows(c[size_t(4 + n)], rescale));
    m.accumulateTimes(m.asRowFragments(p), tiles.b, o);
    SmallVector<Value> next{max[0], max[1], sum[0], sum[1]};
    next.append(o);
    return next;
  });
  Value total[2] = {m.quadSum(loop[2]), m.quadSum(loop[3])};
  m.storeRows(ArrayRef<Value>(loop).drop_front(4), op.getInit(), 0, blk.row, total);
  // The rows' log-sum-exp for the backward, in log2 units (as the query
  // rows would compute it: the same max, sum and formula).
  if (lse) {
    Value lse2[2];
    for (int64_t h = 0; h < 2; ++h)
      lse2[h] = m.logSumExp2(loop[size_t(h)], total[h]);
    blk.storeRowValues(lse, lse2, -1);
  }
}

/// Backward, query rows: each row's log-sum-exp and D = sum_j P_ij dP_ij
/// online over the key tiles, then dq = sum_j dS_ij k_j over them again
/// (dS_ij = scale P_ij (dP_ij - D_i), dP = dO V^T); the statistics into
/// `stats` [pair, row, 2].
void buildQueryRows(ImplicitLocOpBuilder &b, AttentionKernelOp op, const AttentionMmaPlan &plan, Value thread,
                    Value block, const AttentionMmaBuffers &buffers, const AttentionMmaFaults &faults) {
  AttentionBlock blk(b, op, plan, thread, block, /*lastRowsFirst=*/true, faults);
  AttentionMma &m = blk.m;
  IndexMath &k = m.k;
  Value qkv = op.getInputs()[0], grad = op.getInputs()[1];
  AttentionMma::Rows q = blk.ownRows(qkv, 0), dO = blk.ownRows(grad, 0);
  Value tiles = blk.tilesToLastRow();
  auto causal = [&](Value query, Value key) { return m.cmp(arith::CmpIPredicate::ule, key, query); };
  // The statistics: D, and the log-sum-exp in log2 units (as the
  // workspace holds it, attentionStatsType).
  Value lse2[2], D[2];
  if (buffers.forwardOut) {
    // From the forward: its log-sum-exp, and D = dO . O.
    for (int64_t h = 0; h < 2; ++h) {
      Value row = b.create<arith::MinUIOp>(blk.row[h], k.c(m.T - 1));
      lse2[h] = b.create<memref::LoadOp>(buffers.lse, ValueRange{blk.pair, row});
      D[h] = m.quadSum(blk.rowDot(grad, buffers.forwardOut, row));
    }
  } else {
    // Carried: m, l and D (l and D this lane's parts) of rows g and g + 8.
    SmallVector<Value> init{m.lowest(), m.lowest(), m.f(0), m.f(0), m.f(0), m.f(0)};
    SmallVector<Value> pass = blk.overTiles(k.c(0), tiles, init, qkv, 1, qkv, 2, causal, /*maskLast=*/true,
                                            /*maskAll=*/false, [&](Value r0, const AttentionBlock::Tiles &tiles, ValueRange c, AttentionMma::Mask mask) {
      return blk.overParts(c, [&](Value n0, ValueRange part) {
        SmallVector<Value> next(part.begin(), part.end());
        const Value raw = blk.maxThenScale; // (null: p scaled by scores)
        AttentionMma::Values p = m.scores(m.timesTransposed(q, tiles.a, n0, blk.sub), raw ? Value() : blk.scale2,
                                          blk.row, blk.at(r0, n0), mask);
        SmallVector<Value> dP = m.timesTransposed(dO, tiles.b, n0, blk.sub);
        for (int64_t h = 0; h < 2; ++h) {
          auto [max, rescale] = m.runningMax(p, h, next[size_t(h)], raw);
          Value sum = m.f(0), dot = m.f(0);
          for (size_t j = 0; j < p.size(); ++j)
            for (int64_t e = 0; e < 2; ++e) {
              Value x = m.exponent(p[j][size_t(h)][size_t(e)], raw, max);
              sum = m.add(sum, x);
              dot = m.add(dot, m.mul(x, m.element(dP[j], h, e)));
            }
          next[size_t(h)] = max;
          next[size_t(2 + h)] = m.add(m.mul(next[size_t(2 + h)], rescale), sum);
          next[size_t(4 + h)] = m.add(m.mul(next[size_t(4 + h)], rescale), dot);
        }
        return next;
      });
    });
    for (int64_t h = 0; h < 2; ++h) {
      Value total = m.quadSum(pass[size_t(2 + h)]);
      D[h] = b.create<arith::DivFOp>(m.quadSum(pass[size_t(4 + h)]), total);
      lse2[h] = m.logSumExp2(pass[size_t(h)], total);
    }
  }
  SmallVector<Value> dqInit(size_t(m.hd / 8), m.accZero());
  SmallVector<Value> dq = blk.overTiles(k.c(0), tiles, dqInit, qkv, 1, qkv, 2, causal, /*maskLast=*/true,
                                        /*maskAll=*/false, [&](Value r0, const AttentionBlock::Tiles &tiles, ValueRange c, AttentionMma::Mask mask) {
    return blk.overParts(c, [&](Value n0, ValueRange part) {
      SmallVector<Value> acc(part.begin(), part.end());
      AttentionMma::Values dS =
          m.scores(m.timesTransposed(q, tiles.a, n0, blk.sub), blk.scale2, blk.row, blk.at(r0, n0), mask);
      SmallVector<Value> dP = m.timesTransposed(dO, tiles.b, n0, blk.sub);
      for (size_t j = 0; j < dS.size(); ++j)
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t e = 0; e < 2; ++e) {
            Value &x = dS[j][size_t(h)][size_t(e)];
            Value p = m.exp2(m.sub(x, lse2[h]));
            x = m.mul(blk.scale, m.mul(p, m.sub(m.element(dP[j], h, e), D[h])));
          }
      m.accumulateTimes(m.asRowFragments(dS), tiles.a, acc, n0);
      return acc;
    });
  });
  m.storeRows(dq, op.getInit(), 0, blk.row, nullptr);
  blk.storeRowValues(buffers.stats, lse2, 0, &D);
}

/// Backward, key rows: dk_j = sum_{i >= j} dS_ij q_i and dv_j = sum_{i >=
/// j} P_ij dO_i over the query tiles from the block's first row, P^T and
/// dS^T taken as key rows x query columns (K Q^T, V dO^T) with the query
/// rows' statistics from `stats`.
void buildKeyRows(ImplicitLocOpBuilder &b, AttentionKernelOp op, const AttentionMmaPlan &plan, Value thread,
                  Value block, Value stats, const AttentionMmaFaults &faults) {
  AttentionBlock blk(b, op, plan, thread, block, /*lastRowsFirst=*/false, faults, stats);
  AttentionMma &m = blk.m;
  IndexMath &k = m.k;
  Value qkv = op.getInputs()[0], grad = op.getInputs()[1];
  AttentionMma::Rows kf = blk.ownRows(qkv, 1), vf = blk.ownRows(qkv, 2);
  const int64_t outTiles = m.hd / 8;
  SmallVector<Value> init(size_t(2 * outTiles), m.accZero());
  // Query column i of key row j: i >= j, within the sequence (the tiles'
  // rows past it are copies of its last).
  auto causal = [&](Value key, Value query) {
    return b.create<arith::AndIOp>(m.cmp(arith::CmpIPredicate::uge, query, key), k.ult(query, m.T));
  };
  Value count = k.div(k.add(b.create<arith::SubIOp>(k.c(m.T), blk.first), kTile - 1), kTile);
  Value t = k.andi(m.lane, 3);
  // The first tile (the diagonal) is cut by the mask, the others only
  // where the sequence ends inside a tile.
  SmallVector<Value> loop = blk.overTiles(blk.first, count, init, qkv, 0, grad, 0, causal, /*maskLast=*/false,
                                          /*maskAll=*/m.T % kTile != 0,
                                          [&](Value r0, const AttentionBlock::Tiles &tiles, ValueRange c, AttentionMma::Mask mask) {
    return blk.overParts(c, [&](Value n0, ValueRange part) {
      SmallVector<Value> dk(part.begin(), part.begin() + outTiles), dv(part.begin() + outTiles, part.end());
      AttentionMma::Values p =
          m.scores(m.timesTransposed(kf, tiles.a, n0, blk.sub), blk.scale2, blk.row, blk.at(r0, n0), mask);
      SmallVector<Value> dP = m.timesTransposed(vf, tiles.b, n0, blk.sub);
      AttentionMma::Values dS = p;
      for (size_t j = 0; j < p.size(); ++j)
        for (int64_t e = 0; e < 2; ++e) {
          // Query r0 + n0 + 8j + 2t + e's statistics, from the tile staged
          // with q's.
          Value at = k.add(blk.at(k.shl(t, 1), n0), 8 * int64_t(j) + e);
          Value lse2 = b.create<memref::LoadOp>(tiles.stats, ValueRange{at, k.c(0)});
          Value D = b.create<memref::LoadOp>(tiles.stats, ValueRange{at, k.c(1)});
          for (int64_t h = 0; h < 2; ++h) {
            Value &x = p[j][size_t(h)][size_t(e)];
            x = m.exp2(m.sub(x, lse2));
            dS[j][size_t(h)][size_t(e)] = m.mul(blk.scale, m.mul(x, m.sub(m.element(dP[j], h, e), D)));
          }
        }
      m.accumulateTimes(m.asRowFragments(dS), tiles.a, dk, n0);
      m.accumulateTimes(m.asRowFragments(p), tiles.b, dv, n0);
      dk.append(dv);
      return dk;
    });
  });
  m.storeRows(ArrayRef<Value>(loop).take_front(outTiles), op.getInit(), 1, blk.row, nullptr);
  m.storeRows(ArrayRef<Value>(loop).drop_front(outTiles), op.getInit(), 2, blk.row, nullptr);
}

} // namespace

void mlir::nova::buildAttentionMma(OpBuilder &ob, AttentionKernelOp op, const AttentionMmaPlan &plan, Value thread,
                                   Value block, const AttentionMmaBuffers &buffers,
                                   const AttentionMmaFaults &faults) {
  ImplicitLocOpBuilder b(op.getLoc(), ob);
  if (!op.getBackward())
    return buildForward(b, op, plan, thread, block, buffers.lse, faults);
  if (*attentionBackwardPart(op) == AttentionBackwardPart::queries)
    return buildQueryRows(b, op, plan, thread, block, buffers, faults);
  buildKeyRows(b, op, plan, thread, block, buffers.stats, faults);
}
