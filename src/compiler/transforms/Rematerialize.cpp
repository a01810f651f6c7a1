//===- Rematerialize.cpp - the nova-rematerialize pass -----------*- C++ -*-===//
//
// The backward of a step reads forward values long after the forward made
// them (a GELU's output for its weight gradient, a LayerNorm's output for
// the projection after it), so each is a whole activation alive from the
// forward through most of the backward, and together they are the step's
// peak. A value made by cheap ops (elementwise, GELU, LayerNorm, and the
// reshapes, transposes and broadcasts between them), or by a fused causal
// attention (its qkv input is kept for its gradient anyway), is instead
// recomputed right before its late uses, when that extends no other value's life:
// every value the recomputation reads is used at or after that point anyway
// (a GELU's input, kept for the GELU's own gradient; a LayerNorm's input,
// kept for the LayerNorm gradient; parameters). Then the original lives only
// until its early uses, and the copy only around its late ones: the live
// set at every point is the same or smaller, for the price of running the
// ops again.
//
// The rule, per value of a cheap op: among its uses in block order, the
// largest gap between consecutive uses; if it spans at least `min-gap` ops,
// the op is cloned before the use after the gap (marked
// `nova.rematerialized`), with the cheap ops before it whose values are not
// live there (at most 4 ops in all; any other op ends the search and the
// value is kept), and the uses from there on read the clone. Runs on the nova dialect after autodiff and CSE (which would merge
// the clone back). The module's `nova.remat` sets the level: 0
// (NOVA_REMAT=0) leaves it alone; 1 recomputes attention as the pass's
// `attention` option says (the target's Target::recomputesAttention) unless
// `nova.remat_attention` says otherwise (NOVA_REMAT=cheap: false,
// NOVA_REMAT=1: true); 2, which the compiler asks for when a
// memory budget is not met, also recomputes matmuls, attention, softmaxes,
// slices and reductions (chains of up to 12 ops), as activation
// checkpointing does. A value a maximum's gradient compares with that
// maximum is never recomputed (comparedWithItsMax). At level 2 the
// module's `nova.remat_max_cost` bounds what a value may cost to recompute:
// the products run again per byte it no longer keeps (recomputing a GPT
// block's h or qkv costs one product, 2k flops per output element, 256
// flops a byte at k = 512; its residual stream costs the MLP's two or the
// whole block), so that a budget is met by the cheapest recomputations
// (CompileDriver.cpp searches the bound). Clones of one value made for
// several late uses are merged (mergeRecomputations).
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <functional>
#include <limits>

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAREMATERIALIZE
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// Ops cheap to run again: elementwise, GELU, LayerNorm, and the layout ops
/// between them and their consumers (a reshape or transpose into a
/// matmul's operand, a broadcast of a bias).
bool isCheap(Operation *op) {
  return op->getNumResults() == 1 &&
         isa<nova::NegOp, nova::ExpOp, nova::LogOp, nova::TanhOp, nova::SqrtOp, nova::RsqrtOp,
             nova::ReluOp, nova::ErfOp, nova::GeluOp, nova::AddOp, nova::SubOp, nova::MulOp,
             nova::DivOp, nova::MaxOp, nova::LayerNormOp, nova::ReshapeOp, nova::TransposeOp,
             nova::BroadcastOp>(op);
}

/// Level 2 (a memory budget asks for it): any forward computation of one
/// result without side effects, matmuls and attention included, as
/// activation checkpointing recomputes a block's forward.
bool isRecomputable(Operation *op, int64_t level, bool attention) {
  if (isCheap(op))
    return true;
  // A fused causal attention from its qkv, which its gradient keeps anyway
  // (it recomputes the probabilities from it): one attention forward more
  // per block, instead of its output kept through the backward for the
  // output projection's weight gradient (the medium GPT: 32 MiB at the
  // peak for about 4% of the step's time; NOVA_REMAT=cheap keeps them).
  if (attention && isa<nova::CausalAttentionOp>(op))
    return true;
  return level >= 2 && op->getNumResults() == 1 && op->getNumRegions() == 0 &&
         isa<nova::MatmulOp, nova::CausalAttentionOp, nova::SoftmaxOp, nova::LogSoftmaxOp,
             nova::SliceOp, nova::ReduceSumOp, nova::ReduceMeanOp, nova::ReduceMaxOp>(op);
}

/// A value that a maximum's gradient compares with that maximum (the
/// reduce_max VJP's greater(broadcast(max(v)), v)): the comparison must read
/// the very values the reduction read. A copy computed in another kernel
/// may round differently (a multiply and add contracted in one and not in
/// the other), and an element an ulp below its own maximum loses its
/// gradient: an O(1) error (graph_fuzz's train steps found it).
bool comparedWithItsMax(Value v) {
  auto fromMax = [&](Value x) {
    while (Operation *op = x.getDefiningOp()) {
      if (auto max = dyn_cast<nova::ReduceMaxOp>(op))
        return max.getInput() == v;
      if (!isa<nova::BroadcastOp, nova::ReshapeOp>(op))
        return false;
      x = op->getOperand(0);
    }
    return false;
  };
  for (Operation *user : v.getUsers())
    if (auto greater = dyn_cast<nova::GreaterOp>(user))
      if (fromMax(greater.getLhs()) || fromMax(greater.getRhs()))
        return true;
  return false;
}

/// The flops of a product (2 m n k, batches included) or a causal
/// attention (its two products over the causal half: 2 T per output
/// element of [B, T, d]); 0 for the other ops, whose cost is their bytes,
/// not counted: what a recomputation costs is the products it runs again.
int64_t productFlops(Operation *op) {
  if (auto attention = dyn_cast<nova::CausalAttentionOp>(op)) {
    auto result = cast<ShapedType>(attention.getResult().getType());
    return 2 * result.getNumElements() * result.getDimSize(1);
  }
  auto matmul = dyn_cast<nova::MatmulOp>(op);
  if (!matmul)
    return 0;
  auto lhs = cast<ShapedType>(matmul.getLhs().getType());
  auto result = cast<ShapedType>(matmul.getResult().getType());
  int64_t k = lhs.getDimSize(lhs.getRank() - (matmul.getTransposeA() ? 2 : 1));
  return 2 * result.getNumElements() * k;
}

int64_t bytesOf(Value v) {
  auto type = cast<ShapedType>(v.getType());
  return type.getNumElements() * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

/// What one recomputation saves (the value's bytes), the products it runs
/// again (flops), and a line saying it.
struct Decision {
  int64_t bytes;
  int64_t flops;
  std::string what;
};
Decision describeDecision(Operation *def, const SetVector<Operation *> &chain, Operation *user, int64_t gap,
                          int64_t flops);

/// What the pass recomputes: the cheap chains (level 1's, attention among
/// them as the target says) of values kept across `cheapGap` ops or more;
/// at level 2 also the costly ones (products, attention, softmaxes, ...)
/// of values kept across `costlyGap` ops or more (the budget search raises
/// it to recompute fewer: the cheap ones stay as they are) whose products
/// cost at most `maxCost` flops a byte (-1: no bound).
struct Policy {
  int64_t level;
  bool attention;
  int64_t cheapGap;
  int64_t costlyGap;
  int64_t maxCost;
};

void rematerialize(Block &block, const Policy &policy, std::vector<Decision> &decisions) {
  const int64_t minGap = policy.cheapGap;
  DenseMap<Operation *, int64_t> position;
  int64_t next = 0;
  for (Operation &op : block)
    position[&op] = next++;
  auto at = [&](OpOperand &use) { return position.lookup(block.findAncestorOpInBlock(*use.getOwner())); };
  auto lastUse = [&](Value v) {
    if (isa<BlockArgument>(v))
      return std::numeric_limits<int64_t>::max(); // arguments live through the step
    int64_t last = -1;
    for (OpOperand &use : v.getUses())
      last = std::max(last, at(use));
    return last;
  };
  // Where each op was cloned (positions): a product cloned again within
  // min-gap ops of an earlier clone is merged with it (mergeRecomputations)
  // and costs nothing more. An estimate: these positions are the block's
  // before any clone, the merge counts the clones in between too, so a
  // product counted free here may still run twice (docs/notes.md).
  DenseMap<Operation *, SmallVector<int64_t, 2>> clonedAt;
  auto costOf = [&](const SetVector<Operation *> &chain, int64_t late) {
    int64_t flops = 0;
    for (Operation *op : chain) {
      auto it = clonedAt.find(op);
      if (it == clonedAt.end() ||
          llvm::none_of(it->second, [&](int64_t p) { return std::abs(p - late) < minGap; }))
        flops += productFlops(op);
    }
    return flops;
  };
  SmallVector<Operation *> candidates;
  for (Operation &op : block)
    if (isRecomputable(&op, policy.level, policy.attention || policy.level >= 2))
      candidates.push_back(&op);
  for (Operation *def : candidates) {
    Value v = def->getResult(0);
    if (comparedWithItsMax(v))
      continue;
    SmallVector<std::pair<int64_t, OpOperand *>> uses;
    for (OpOperand &use : v.getUses())
      uses.emplace_back(at(use), &use);
    llvm::sort(uses, [](const auto &a, const auto &b) { return a.first < b.first; });
    size_t split = 0;
    int64_t gap = 0;
    for (size_t i = 0; i + 1 < uses.size(); ++i)
      if (uses[i + 1].first - uses[i].first > gap) {
        gap = uses[i + 1].first - uses[i].first;
        split = i + 1;
      }
    if (gap < minGap)
      continue;
    int64_t late = uses[split].first;
    // What to run again, operands first: `def`, and each producer of an
    // operand that is not live at `late` anyway (it would be kept alive)
    // that `level` recomputes. The most ops recomputed for one value: a
    // GELU and the reshape after it; at level 2, a block's MLP or
    // attention from its input.
    SetVector<Operation *> chain;
    auto chainAt = [&](int64_t level) {
      const bool attention = policy.attention || level >= 2;
      const int maxChain = level >= 2 ? 12 : 4;
      std::function<bool(Operation *, int)> collect = [&](Operation *op, int depth) {
        if (depth > maxChain)
          return false;
        for (Value o : op->getOperands()) {
          if (lastUse(o) >= late)
            continue;
          Operation *producer = o.getDefiningOp();
          if (!producer || producer->getBlock() != &block || !isRecomputable(producer, level, attention) ||
              !collect(producer, depth + 1))
            return false;
        }
        chain.insert(op);
        return true;
      };
      chain.clear();
      return isRecomputable(def, level, attention) && collect(def, 1);
    };
    int64_t flops = 0;
    if (!chainAt(1)) {
      if (policy.level < 2 || gap < policy.costlyGap || !chainAt(2))
        continue;
      flops = costOf(chain, late);
      if (policy.maxCost >= 0 && flops > policy.maxCost * bytesOf(v))
        continue;
    }
    Operation *user = block.findAncestorOpInBlock(*uses[split].second->getOwner());
    OpBuilder b(user);
    IRMapping map;
    for (Operation *op : chain) {
      Operation *copy = b.clone(*op, map);
      copy->setAttr(nova::kRematerializedAttr, b.getUnitAttr());
      position[copy] = late;
      clonedAt[op].push_back(late);
    }
    Value again = map.lookup(v);
    for (size_t i = split; i < uses.size(); ++i)
      uses[i].second->set(again);
    decisions.push_back(describeDecision(def, chain, user, gap, flops));
  }
}

/// One value recomputed for several late uses is cloned once per use, each
/// with its own chain: at level 2 a block's MLP pre-activation h before the
/// GELU's gradient and again, inside the GELU's chain, before W2's weight
/// gradient a few ops earlier; qkv before the attention recomputed for the
/// output projection's gradient and again before the attention's gradient.
/// Each such clone is a matmul run again (the medium GPT under a budget ran
/// its qkv product 25 times for 8 blocks). A clone
/// equal to an earlier one (the same op on the same operands, which the
/// earlier merges have made the same) within `window` ops of it is dropped
/// and its uses read the earlier: the value is recomputed once and lives
/// across the few ops between its uses, never across a gap the pass would
/// have split.
void mergeRecomputations(Block &block, int64_t window) {
  SmallVector<std::pair<int64_t, Operation *>> clones; // position, clone; in block order
  int64_t next = 0;
  for (Operation &op : llvm::make_early_inc_range(block)) {
    int64_t here = next++;
    if (!op.hasAttr(nova::kRematerializedAttr))
      continue;
    Operation *same = nullptr;
    for (auto it = clones.rbegin(); it != clones.rend() && here - it->first < window && !same; ++it)
      if (OperationEquivalence::isEquivalentTo(it->second, &op, OperationEquivalence::IgnoreLocations))
        same = it->second;
    if (!same) {
      clones.emplace_back(here, &op);
      continue;
    }
    op.replaceAllUsesWith(same);
    op.erase();
  }
}

/// For NOVA_EXPLAIN: what was recomputed, how big, where, and across how
/// many ops it is no longer kept.
Decision describeDecision(Operation *def, const SetVector<Operation *> &chain, Operation *user, int64_t gap,
                          int64_t flops) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto type = cast<ShapedType>(def->getResult(0).getType());
  int64_t bytes = bytesOf(def->getResult(0));
  os << def->getName().getStringRef() << " ";
  llvm::interleave(type.getShape(), os, "x");
  os << " " << type.getElementType();
  std::string scope = mlir::nova::scopeOf(def);
  if (!scope.empty())
    os << " [" << scope << "]";
  os << ": not kept across " << gap << " ops, recomputed before " << user->getName().getStringRef();
  if (chain.size() > 1) {
    os << " with " << chain.size() - 1 << " producer" << (chain.size() > 2 ? "s" : "") << " (";
    llvm::interleave(llvm::make_range(chain.begin(), std::prev(chain.end())), os,
                     [&](Operation *op) { os << op->getName().getStringRef(); }, ", ");
    os << ")";
  }
  if (flops > 0)
    os << ", products " << llvm::format("%.3g", flops / 1e9) << " GFLOP run again (" << flops / bytes
       << " flops a byte)";
  return {bytes, flops, text};
}

struct NovaRematerialize : mlir::nova::impl::NovaRematerializeBase<NovaRematerialize> {
  using NovaRematerializeBase::NovaRematerializeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t level = 1;
    if (auto attr = module->getAttrOfType<IntegerAttr>(nova::kRematAttr))
      level = attr.getInt();
    if (level <= 0)
      return;
    Policy policy{level, this->attention, minGap, minGap, /*maxCost=*/-1};
    if (auto attr = module->getAttrOfType<IntegerAttr>(nova::kRematMinGapAttr))
      policy.costlyGap = std::max<int64_t>(1, attr.getInt());
    if (auto attr = module->getAttrOfType<BoolAttr>(nova::kRematAttentionAttr))
      policy.attention = attr.getValue();
    if (auto attr = module->getAttrOfType<IntegerAttr>(nova::kRematMaxCostAttr))
      policy.maxCost = attr.getInt();
    std::vector<Decision> decisions;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && func.getBody().hasOneBlock()) {
        rematerialize(func.front(), policy, decisions);
        mergeRecomputations(func.front(), policy.cheapGap);
      }
    // The decisions, largest first, for NOVA_EXPLAIN (CompileDriver.cpp)
    // and for readers of the IR (the clones are marked nova.rematerialized).
    std::stable_sort(decisions.begin(), decisions.end(),
                     [](const Decision &a, const Decision &b) { return a.bytes > b.bytes; });
    Builder b(module.getContext());
    SmallVector<Attribute> entries;
    for (const Decision &d : decisions)
      entries.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("bytes", b.getI64IntegerAttr(d.bytes)), b.getNamedAttr("flops", b.getI64IntegerAttr(d.flops)),
           b.getNamedAttr("what", b.getStringAttr(d.what))}));
    module->setAttr(nova::kRematDecisionsAttr, b.getArrayAttr(entries));
  }
};

} // namespace
