//===- Interpreter.cpp - nova ops evaluated in float64 -----------*- C++ -*-===//
//
// Straightforward loops over multi-indices, written for clarity, not speed:
// this is the definition the compiled code is checked against.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "compiler/Context.h"
#include "compiler/dialect/NovaDialect.h"
#include "nova/detail/philox.hpp"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/TypeUtilities.h"

#include "nova/distributed.hpp"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::nova;

namespace {

int64_t count(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// Calls f(multi-index) for every index of `shape`, row-major.
template <typename F> void forEachIndex(ArrayRef<int64_t> shape, F &&f) {
  int64_t n = count(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(ArrayRef<int64_t>(idx));
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

int64_t linear(ArrayRef<int64_t> idx, ArrayRef<int64_t> strides) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i)
    off += idx[i] * strides[i];
  return off;
}

NDArray withShape(Type type) {
  auto t = cast<RankedTensorType>(type);
  NDArray a;
  a.shape.assign(t.getShape().begin(), t.getShape().end());
  a.data.assign(count(a.shape), 0.0);
  return a;
}

template <typename F> NDArray mapUnary(const NDArray &x, F &&f) {
  NDArray r = x;
  for (double &v : r.data)
    v = f(v);
  return r;
}

template <typename F>
NDArray mapBinary(const NDArray &a, const NDArray &b, F &&f) {
  NDArray r = a;
  for (size_t i = 0; i < r.data.size(); ++i)
    r.data[i] = f(a.data[i], b.data[i]);
  return r;
}

double geluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double geluErf(double x) { return 0.5 * x * (1.0 + std::erf(x * M_SQRT1_2)); }

/// A draw uniform in [-1, 1]: Philox's (seed, stream, index)th.
double symmetricDraw(std::uint64_t seed, uint32_t stream, uint64_t index) {
  return 2.0 * ::nova::detail::philox_uniform(seed, stream, index) - 1.0;
}

/// A sum accumulated term by term, in order, with the size of the rounding
/// a float accumulator would add: off by sum_k delta_k S_k, each partial
/// sum S_k rounded by its own |delta_k| <= u, about u sqrt(sum_k S_k^2)
/// (the random-rounding model; Higham and Mary, 2019). For n terms of one
/// sign that is u sqrt(n / 3) times the sum, where rounding the result
/// once, or each term once, says u: a mean over 40656 values of about 1
/// is off by 116 times what they say (graph_fuzz seed 1070029 at max dim
/// 256: a LayerNorm gradient over one such row, whose elements all shift
/// by its means' rounding, summed: 4.143e-4 off in f32 where the noise of
/// rounded results moved it 5.439e-7).
///
/// Coherent: the partial sums' roundings all of one sign, u sum_k |S_k|
/// (u n / 2 times a sum of n terms of one sign), as when the terms are
/// the same value over and over and so round alike: RoundingNoise's
/// perOp draws take this size for reductions, products and scatter-adds,
/// its draws per element the random one (SumRounding keeps the random one).
/// (Graph seed 99 at max dim 256: a sum of 39600 terms, about 20000 of
/// them one constant and the rest 0, 1.019e-4 off in f32, 6.856e-6 at
/// most under 16 draws of the random size; in f64 3.44e-13, 3100 times
/// f64's roundoff, where sqrt(n / 3) is 115.)
///
/// The spreads are kept only where asked for (`tracked`): the exact
/// reference, every test's oracle, adds its terms and nothing else.
enum class Spread { random, coherent };
struct RunningSum {
  bool tracked = false;
  double value = 0, squares = 0, magnitudes = 0;
  void add(double term) {
    value += term;
    if (tracked) {
      squares += value * value;
      magnitudes += std::abs(value);
    }
  }
  double spread(Spread kind) const { return kind == Spread::random ? std::sqrt(squares) : magnitudes; }
};

/// RoundingNoise on the sums inside a composite op (a LayerNorm's mean,
/// variance and gradient sums, a softmax's or cross-entropy's sum of
/// exponentials): each moved by up to relative times its spread, drawn per
/// row and sum (one draw per sum for all rows if perOp) from another
/// stream than the op's results'. Null: the exact sum. The random spread
/// under perOp too: with the coherent one, graph seed 1070029 (a LayerNorm
/// over one row of 40656, below) moved by 1.064 of its size, its bound
/// passed 0.25 and it was skipped instead of checked.
struct SumRounding {
  double relative = 0;
  std::uint64_t seed = 0;
  uint32_t position = 0;
  bool perOp = false;
  static constexpr std::uint64_t kSalt = 0x9e3779b97f4a7c15ull;
  double operator()(const RunningSum &s, uint64_t row, uint32_t which) const {
    const uint64_t index = perOp ? uint64_t(which) : (row << 3 | which);
    return s.value + relative * s.spread(Spread::random) * symmetricDraw(seed ^ kSalt, position, index);
  }
};

double rounded(const SumRounding *rounding, const RunningSum &s, uint64_t row, uint32_t which) {
  return rounding ? (*rounding)(s, row, which) : s.value;
}

/// a b as `op` says; with `spreads`, each result's RunningSum spread there.
NDArray matmul(MatmulOp op, const NDArray &a, const NDArray &b, NDArray *spreads = nullptr,
               Spread kind = Spread::random) {
  NDArray r = withShape(op.getType());
  if (spreads)
    *spreads = r;
  size_t rank = r.shape.size();
  bool ta = op.getTransposeA(), tb = op.getTransposeB();
  // Leading dimensions are batches, the same in a, b and the result; each
  // product sums over p in order (the reference's one summation order).
  const int64_t m = r.shape[rank - 2], n = r.shape[rank - 1];
  const int64_t aRows = a.shape[rank - 2], aCols = a.shape[rank - 1];
  const int64_t bRows = b.shape[rank - 2], bCols = b.shape[rank - 1];
  const int64_t k = ta ? aRows : aCols;
  const int64_t ai = ta ? 1 : aCols, ap = ta ? aCols : 1; // a's strides along i and p
  const int64_t bp = tb ? 1 : bCols, bj = tb ? bCols : 1; // b's along p and j
  const int64_t batches = m * n == 0 ? 0 : count(r.shape) / (m * n);
  for (int64_t batch = 0; batch < batches; ++batch) {
    const double *x = a.data.data() + batch * aRows * aCols, *y = b.data.data() + batch * bRows * bCols;
    double *out = r.data.data() + batch * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        RunningSum acc{spreads != nullptr};
        for (int64_t p = 0; p < k; ++p)
          acc.add(x[i * ai + p * ap] * y[p * bp + j * bj]);
        out[i * n + j] = acc.value;
        if (spreads)
          spreads->data[batch * m * n + i * n + j] = acc.spread(kind);
      }
  }
  return r;
}

NDArray broadcast(BroadcastOp op, const NDArray &x) {
  NDArray r = withShape(op.getType());
  size_t offset = r.shape.size() - x.shape.size();
  auto xs = stridesOf(x.shape);
  int64_t k = 0;
  forEachIndex(r.shape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t i = 0; i < x.shape.size(); ++i)
      off += (x.shape[i] == 1 ? 0 : idx[i + offset]) * xs[i];
    r.data[k++] = x.data[off];
  });
  return r;
}

NDArray transpose(TransposeOp op, const NDArray &x) {
  NDArray r = withShape(op.getType());
  ArrayRef<int64_t> perm = op.getPermutation();
  auto xs = stridesOf(x.shape);
  int64_t k = 0;
  forEachIndex(r.shape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t i = 0; i < perm.size(); ++i)
      off += idx[i] * xs[perm[i]];
    r.data[k++] = x.data[off];
  });
  return r;
}

enum class ReduceKind { sum, mean, max };

/// With `spreads` (a sum or mean), each result's RunningSum spread there,
/// its terms taken in x's row-major order.
NDArray reduce(Operation *op, ArrayRef<int64_t> axes, ReduceKind kind,
               const NDArray &x, NDArray *spreads = nullptr, Spread spreadKind = Spread::random) {
  NDArray r = withShape(op->getResult(0).getType());
  std::vector<RunningSum> partial(spreads ? r.data.size() : 0, RunningSum{true});
  double init = kind == ReduceKind::max ? -std::numeric_limits<double>::infinity() : 0.0;
  std::fill(r.data.begin(), r.data.end(), init);
  bool keep = r.shape.size() == x.shape.size();
  auto rs = stridesOf(r.shape);
  int64_t n = 1;
  for (int64_t a : axes)
    n *= x.shape[a];
  int64_t k = 0;
  forEachIndex(x.shape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0, d = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
      bool reduced = llvm::is_contained(axes, static_cast<int64_t>(i));
      if (!reduced)
        off += idx[i] * rs[d++];
      else if (keep)
        ++d;
    }
    double v = x.data[k++];
    double &acc = r.data[off];
    acc = kind == ReduceKind::max ? (std::isnan(v) || v > acc ? v : acc) : acc + v;
    if (spreads)
      partial[off].add(v);
  });
  if (kind == ReduceKind::mean)
    for (double &v : r.data)
      v /= static_cast<double>(n);
  if (spreads) {
    *spreads = r;
    for (size_t i = 0; i < partial.size(); ++i)
      spreads->data[i] = partial[i].spread(spreadKind) / (kind == ReduceKind::mean ? static_cast<double>(n) : 1.0);
  }
  return r;
}

/// softmax (logarithm = false) or log_softmax along `axis`, stably: each
/// row is shifted by its max before exp.
NDArray softmaxAlong(const NDArray &x, int64_t axis, bool logarithm, const SumRounding *rounding = nullptr) {
  NDArray r = x;
  int64_t len = x.shape[axis];
  auto xs = stridesOf(x.shape);
  std::vector<int64_t> outer(x.shape.begin(), x.shape.end());
  outer[axis] = 1;
  uint64_t row = 0;
  forEachIndex(outer, [&](ArrayRef<int64_t> idx) {
    int64_t base = linear(idx, xs), step = xs[axis];
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < len; ++i)
      m = std::max(m, x.data[base + i * step]);
    RunningSum sum{rounding != nullptr};
    for (int64_t i = 0; i < len; ++i)
      sum.add(std::exp(x.data[base + i * step] - m));
    const double s = rounded(rounding, sum, row++, 0);
    for (int64_t i = 0; i < len; ++i) {
      double shifted = x.data[base + i * step] - m;
      r.data[base + i * step] = logarithm ? shifted - std::log(s) : std::exp(shifted) / s;
    }
  });
  return r;
}

/// Per (batch, head) of qkv [B, T, 3d]: the masked, scaled score rows'
/// softmax P [T, T] (zero above the diagonal), from the definition.
struct AttentionHead {
  int64_t T, C, hd, qOff, kOff, vOff, base;
  const std::vector<double> &x;
  double q(int64_t i, int64_t c) const { return x[base + i * C + qOff + c]; }
  double k(int64_t j, int64_t c) const { return x[base + j * C + kOff + c]; }
  double v(int64_t j, int64_t c) const { return x[base + j * C + vOff + c]; }
  std::vector<double> probabilities(double scale) const {
    std::vector<double> p(T * T, 0.0);
    for (int64_t i = 0; i < T; ++i) {
      double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0.0;
        for (int64_t c = 0; c < hd; ++c)
          s += q(i, c) * k(j, c);
        p[i * T + j] = scale * s;
        m = std::max(m, p[i * T + j]);
      }
      for (int64_t j = 0; j <= i; ++j)
        sum += (p[i * T + j] = std::exp(p[i * T + j] - m));
      for (int64_t j = 0; j <= i; ++j)
        p[i * T + j] /= sum;
    }
    return p;
  }
};

/// RoundingNoise's productRelative inside attention, whose products are its
/// own: its operands (q, k, v, the gradient) and the probabilities and
/// score gradients it multiplies (`point` 0 to 3) each times 1 + r,
/// |r| <= productRelative, as tensor cores read them rounded.
struct OperandRounding {
  double relative = 0;
  std::uint64_t seed = 0;
  uint32_t position = 0;
  bool perOp = false;
  enum Point : uint32_t { qkv = 0, probabilities = 1, grad = 2, scoreGrad = 3 };
  double operator()(double x, Point point, size_t i) const {
    if (!std::isfinite(x))
      return x;
    // Drawn from ~seed: not the draws that move the op's results.
    const uint64_t index = perOp ? uint64_t(point) : (uint64_t(i) << 2 | point);
    return x * (1.0 + relative * symmetricDraw(~seed, position, index));
  }
  NDArray operator()(NDArray a, Point point) const {
    for (size_t i = 0; i < a.data.size(); ++i)
      a.data[i] = (*this)(a.data[i], point, i);
    return a;
  }
};

/// `a` rounded at `point` into `copy`, or `a` itself without a rounding
/// (no copy on the reference's own path).
const NDArray &roundedAt(const OperandRounding *rounding, const NDArray &a, OperandRounding::Point point,
                         NDArray &copy) {
  if (!rounding)
    return a;
  copy = (*rounding)(a, point);
  return copy;
}

template <typename F>
void forEachHead(const NDArray &qkv, int64_t heads, F &&f) {
  int64_t B = qkv.shape[0], T = qkv.shape[1], C = qkv.shape[2], d = C / 3, hd = d / heads;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      f(b, h, AttentionHead{T, C, hd, h * hd, d + h * hd, 2 * d + h * hd, b * T * C, qkv.data});
}

NDArray causalAttention(CausalAttentionOp op, const NDArray &input, const OperandRounding *rounding = nullptr) {
  NDArray r = withShape(op.getType()), rounded;
  const NDArray &qkv = roundedAt(rounding, input, OperandRounding::qkv, rounded);
  int64_t T = qkv.shape[1], d = qkv.shape[2] / 3;
  size_t head = 0;
  forEachHead(qkv, op.getHeads(), [&](int64_t b, int64_t h, const AttentionHead &a) {
    std::vector<double> p = a.probabilities(op.getScale().convertToDouble());
    if (rounding)
      for (size_t i = 0; i < p.size(); ++i)
        p[i] = (*rounding)(p[i], OperandRounding::probabilities, head * p.size() + i);
    ++head;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t c = 0; c < a.hd; ++c) {
        double o = 0.0;
        for (int64_t j = 0; j <= i; ++j)
          o += p[i * T + j] * a.v(j, c);
        r.data[(b * T + i) * d + h * a.hd + c] = o;
      }
  });
  return r;
}

NDArray causalAttentionGrad(CausalAttentionGradOp op, const NDArray &input, const NDArray &gradient,
                            const OperandRounding *rounding = nullptr) {
  NDArray r = withShape(op.getType()), roundedQkv, roundedG;
  const NDArray &qkv = roundedAt(rounding, input, OperandRounding::qkv, roundedQkv);
  const NDArray &g = roundedAt(rounding, gradient, OperandRounding::grad, roundedG);
  int64_t T = qkv.shape[1], C = qkv.shape[2], d = C / 3;
  double scale = op.getScale().convertToDouble();
  size_t head = 0;
  forEachHead(qkv, op.getHeads(), [&](int64_t b, int64_t h, const AttentionHead &a) {
    std::vector<double> p = a.probabilities(scale), dS(T * T, 0.0);
    // P as the products dv = P^T g reads it (a rounded copy only under
    // noise); dS (below) as dq and dk's.
    std::vector<double> pRounded;
    if (rounding)
      for (size_t i = 0; i < p.size(); ++i)
        pRounded.push_back((*rounding)(p[i], OperandRounding::probabilities, head * p.size() + i));
    const std::vector<double> &pRead = rounding ? pRounded : p;
    auto grad = [&](int64_t i, int64_t c) { return g.data[(b * T + i) * d + h * a.hd + c]; };
    auto at = [&](int64_t i, int64_t off, int64_t c) -> double & {
      return r.data[(b * T + i) * C + off + c];
    };
    for (int64_t i = 0; i < T; ++i) {
      // dP = grad v^T; dS = P (dP - sum_j P dP)
      std::vector<double> dP(T, 0.0);
      double rowDot = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        for (int64_t c = 0; c < a.hd; ++c)
          dP[j] += grad(i, c) * a.v(j, c);
        rowDot += p[i * T + j] * dP[j];
      }
      for (int64_t j = 0; j <= i; ++j) {
        dS[i * T + j] = p[i * T + j] * (dP[j] - rowDot);
        if (rounding)
          dS[i * T + j] = (*rounding)(dS[i * T + j], OperandRounding::scoreGrad, head * dS.size() + i * T + j);
      }
    }
    ++head;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t c = 0; c < a.hd; ++c) {
        double dq = 0.0, dk = 0.0, dv = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          dq += dS[i * T + j] * a.k(j, c);  // row i of dS k
          dk += dS[j * T + i] * a.q(j, c);  // row i of dS^T q
          dv += pRead[j * T + i] * grad(j, c); // row i of P^T grad
        }
        at(i, a.qOff, c) = scale * dq;
        at(i, a.kOff, c) = scale * dk;
        at(i, a.vOff, c) = dv;
      }
  });
  return r;
}

/// Per row of x [..., d]: f(row index, row offset, mean, 1 / sqrt(var + eps)),
/// the mean's and variance's sums rounded by `rounding` (sums 0 and 1).
template <typename F> void forEachNormRow(const NDArray &x, double eps, const SumRounding *rounding, F &&f) {
  int64_t d = x.shape.back(), rows = count(x.shape) / std::max<int64_t>(1, d);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * d;
    RunningSum sum{rounding != nullptr}, squares{rounding != nullptr};
    for (int64_t c = 0; c < d; ++c)
      sum.add(row[c]);
    const double mean = rounded(rounding, sum, r, 0) / double(d);
    for (int64_t c = 0; c < d; ++c)
      squares.add((row[c] - mean) * (row[c] - mean));
    const double var = rounded(rounding, squares, r, 1) / double(d);
    f(r, r * d, mean, 1.0 / std::sqrt(var + eps));
  }
}

NDArray layerNorm(const NDArray &x, const NDArray &gamma, const NDArray &beta, double eps,
                  const SumRounding *rounding = nullptr) {
  NDArray r = x;
  int64_t d = x.shape.back();
  forEachNormRow(x, eps, rounding, [&](int64_t, int64_t base, double mean, double rstd) {
    for (int64_t c = 0; c < d; ++c)
      r.data[base + c] = (x.data[base + c] - mean) * rstd * gamma.data[c] + beta.data[c];
  });
  return r;
}

/// Its two sums (of gamma g and gamma g xhat) rounded by `rounding` as
/// sums 2 and 3: an error in them shifts every element of the row alike,
/// which the row's sum (a bias's or gamma's gradient downstream) collects.
NDArray layerNormGrad(const NDArray &x, const NDArray &gamma, const NDArray &g, double eps,
                      const SumRounding *rounding = nullptr) {
  NDArray r = x;
  int64_t d = x.shape.back();
  forEachNormRow(x, eps, rounding, [&](int64_t row, int64_t base, double mean, double rstd) {
    RunningSum sums[2] = {{rounding != nullptr}, {rounding != nullptr}};
    for (int64_t c = 0; c < d; ++c) {
      double gc = g.data[base + c] * gamma.data[c];
      sums[0].add(gc);
      sums[1].add(gc * (x.data[base + c] - mean) * rstd);
    }
    const double sumG = rounded(rounding, sums[0], row, 2), sumGx = rounded(rounding, sums[1], row, 3);
    for (int64_t c = 0; c < d; ++c) {
      double gc = g.data[base + c] * gamma.data[c], xhat = (x.data[base + c] - mean) * rstd;
      r.data[base + c] = rstd * (gc - sumG / double(d) - xhat * sumGx / double(d));
    }
  });
  return r;
}

NDArray slice(SliceOp op, const NDArray &x) {
  NDArray r = withShape(op.getType());
  ArrayRef<int64_t> offsets = op.getOffsets();
  auto xs = stridesOf(x.shape);
  int64_t k = 0;
  forEachIndex(r.shape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      off += (idx[i] + offsets[i]) * xs[i];
    r.data[k++] = x.data[off];
  });
  return r;
}

NDArray pad(PadOp op, const NDArray &x) {
  NDArray r = withShape(op.getType());
  ArrayRef<int64_t> low = op.getLow();
  auto rs = stridesOf(r.shape);
  int64_t k = 0;
  forEachIndex(x.shape, [&](ArrayRef<int64_t> idx) {
    int64_t off = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      off += (idx[i] + low[i]) * rs[i];
    r.data[off] = x.data[k++];
  });
  return r;
}

/// Row `index` of a [rows, width] table, or nothing if out of range.
bool validRow(double index, int64_t rows) { return index >= 0 && index < static_cast<double>(rows); }

NDArray gather(GatherOp op, const NDArray &table, const NDArray &indices) {
  NDArray r = withShape(op.getType());
  int64_t rows = table.shape[0], width = table.shape[1];
  for (size_t n = 0; n < indices.data.size(); ++n) {
    if (!validRow(indices.data[n], rows))
      continue;
    auto row = static_cast<int64_t>(indices.data[n]);
    for (int64_t d = 0; d < width; ++d)
      r.data[n * width + d] = table.data[row * width + d];
  }
  return r;
}

/// With `spreads`, each result's RunningSum spread there, the updates
/// added in order.
NDArray scatterAdd(ScatterAddOp op, const NDArray &indices, const NDArray &updates, NDArray *spreads = nullptr,
                   Spread kind = Spread::random) {
  NDArray r = withShape(op.getType());
  int64_t rows = r.shape[0], width = r.shape[1];
  std::vector<RunningSum> partial(spreads ? r.data.size() : 0, RunningSum{true});
  for (size_t n = 0; n < indices.data.size(); ++n) {
    if (!validRow(indices.data[n], rows))
      continue;
    auto row = static_cast<int64_t>(indices.data[n]);
    for (int64_t d = 0; d < width; ++d) {
      r.data[row * width + d] += updates.data[n * width + d];
      if (spreads)
        partial[row * width + d].add(updates.data[n * width + d]);
    }
  }
  if (spreads) {
    *spreads = r;
    for (size_t i = 0; i < partial.size(); ++i)
      spreads->data[i] = partial[i].spread(kind);
  }
  return r;
}

NDArray oneHot(OneHotOp op, const NDArray &labels) {
  NDArray r = withShape(op.getType());
  int64_t classes = r.shape.back();
  for (size_t i = 0; i < labels.data.size(); ++i) {
    double label = labels.data[i];
    if (label >= 0 && label < static_cast<double>(classes))
      r.data[i * classes + static_cast<int64_t>(label)] = 1.0;
  }
  return r;
}

/// Softmax cross-entropy per row of `logits` [..., C] (crossEntropy's
/// loss), or with `grad` its gradient; a label outside [0, C) gives a zero
/// loss and gradient.
NDArray crossEntropy(Type resultType, const NDArray &logits, const NDArray &labels,
                     const NDArray *grad, const SumRounding *rounding = nullptr) {
  NDArray r = withShape(resultType);
  int64_t classes = logits.shape.back();
  for (size_t row = 0; row < labels.data.size(); ++row) {
    const double *x = logits.data.data() + row * classes;
    double label = labels.data[row];
    if (!(label >= 0 && label < static_cast<double>(classes)))
      continue;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      max = std::max(max, x[c]);
    RunningSum exponentials{rounding != nullptr};
    for (int64_t c = 0; c < classes; ++c)
      exponentials.add(std::exp(x[c] - max));
    const double sum = rounded(rounding, exponentials, row, 0);
    auto y = static_cast<int64_t>(label);
    if (!grad) {
      r.data[row] = std::log(sum) - (x[y] - max);
      continue;
    }
    double g = grad->data[row];
    for (int64_t c = 0; c < classes; ++c)
      r.data[row * classes + c] = (std::exp(x[c] - max) / sum - (c == y ? 1.0 : 0.0)) * g;
  }
  return r;
}

/// Whether `op`'s result is exact given its operands (data movement, a
/// choice between operands, a sign): RoundingNoise leaves it alone.
bool isExact(Operation *op) {
  return isa<BroadcastOp, ReshapeOp, TransposeOp, SliceOp, PadOp, GatherOp, OneHotOp, CausalMaskOp,
             ConstantOp, GreaterOp, MaxOp, ReduceMaxOp, ReluOp, NegOp>(op);
}

/// |x| element by element.
NDArray magnitudes(const NDArray &x) {
  return mapUnary(x, [](double v) { return std::abs(v); });
}

/// For an op that sums terms (a reduction's sum or mean, a product, a
/// scatter-add, attention's weighted sum of values), the sum of its terms'
/// magnitudes at each result element:
/// rounding inside the sum moves it by up to about that times the
/// roundoff, however much the terms cancel (what perturbing the result
/// alone would miss: a result near 0 moves by nothing). None for others.
template <typename Get>
std::optional<NDArray> termMagnitudes(Operation *op, Get &&get) {
  return llvm::TypeSwitch<Operation *, std::optional<NDArray>>(op)
      .Case([&](ReduceSumOp o) {
        return reduce(o, o.getAxes(), ReduceKind::sum, magnitudes(get(o.getInput())));
      })
      .Case([&](ReduceMeanOp o) {
        return reduce(o, o.getAxes(), ReduceKind::mean, magnitudes(get(o.getInput())));
      })
      .Case([&](MatmulOp o) {
        return matmul(o, magnitudes(get(o.getLhs())), magnitudes(get(o.getRhs())));
      })
      .Case([&](ScatterAddOp o) {
        return scatterAdd(o, get(o.getIndices()), magnitudes(get(o.getUpdates())));
      })
      .Case([&](CausalAttentionOp o) {
        // The probabilities times |v|: q [0, d), k [d, 2d), v [2d, 3d).
        NDArray qkv = get(o.getQkv());
        const size_t columns = qkv.shape.back(), vFrom = 2 * columns / 3;
        for (size_t i = 0; i < qkv.data.size(); ++i)
          if (i % columns >= vFrom)
            qkv.data[i] = std::abs(qkv.data[i]);
        return causalAttention(o, qkv);
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// For a reduction's sum or mean, a product or a scatter-add, the spread of
/// its running sum at each result element (RunningSum): what accumulating
/// its terms rounds, besides the terms' own roundings. None for others
/// (attention's sums are its own, their terms few: a head's row).
template <typename Get>
std::optional<NDArray> sumSpreads(Operation *op, Get &&get, Spread kind) {
  NDArray spreads;
  bool sums = llvm::TypeSwitch<Operation *, bool>(op)
                  .Case([&](ReduceSumOp o) {
                    return reduce(o, o.getAxes(), ReduceKind::sum, get(o.getInput()), &spreads, kind), true;
                  })
                  .Case([&](ReduceMeanOp o) {
                    return reduce(o, o.getAxes(), ReduceKind::mean, get(o.getInput()), &spreads, kind), true;
                  })
                  .Case([&](MatmulOp o) {
                    return matmul(o, get(o.getLhs()), get(o.getRhs()), &spreads, kind), true;
                  })
                  .Case([&](ScatterAddOp o) {
                    return scatterAdd(o, get(o.getIndices()), get(o.getUpdates()), &spreads, kind), true;
                  })
                  .Default([](Operation *) { return false; });
  if (!sums)
    return std::nullopt;
  return spreads;
}

/// RoundingNoise on `op`'s result `r` (the `position`th op of the body):
/// each element moved by up to `relative` times its terms' magnitudes
/// (termMagnitudes) and its running sum's spread (sumSpreads), or its own
/// magnitude; by one draw for all of them if `perOp`, the spread then the
/// coherent one (RunningSum). (The sums inside
/// composite ops are rounded where they are computed: SumRounding.)
template <typename Get>
void perturb(Operation *op, uint32_t position, const RoundingNoise &noise, NDArray &r, Get &&get) {
  if (noise.relative == 0 || isExact(op) || !isa<FloatType>(getElementTypeOrSelf(op->getResult(0))))
    return;
  std::optional<NDArray> terms = termMagnitudes(op, get),
                         spreads = sumSpreads(op, get, noise.perOp ? Spread::coherent : Spread::random);
  // A product's terms each carry both operands' roundings (attention
  // rounds its operands itself: OperandRounding). Rounding a matmul's
  // operands element by element too, not its terms' magnitudes, moved one
  // bf16 graph's products 8 times less than the GPU's rounding did (seed
  // 850031 of `graph_fuzz N SEED 20 f32 256` on an emulated H100: error
  // 5.407e-2, that noise 6.597e-3, this one 2.511e-2). Their sum
  // accumulates in float32 at any matmul precision: `relative`.
  double termRelative = noise.relative;
  if (isa<MatmulOp>(op))
    termRelative = std::max(termRelative, 2 * noise.productRelative);
  for (size_t i = 0; i < r.data.size(); ++i) {
    const double size = terms ? terms->data[i] * termRelative + (spreads ? spreads->data[i] * noise.relative : 0.0)
                              : std::abs(r.data[i]) * noise.relative;
    if (!std::isfinite(size)) // -inf stays -inf (a mask), not -inf + inf
      continue;
    r.data[i] += size * symmetricDraw(noise.seed, position, noise.perOp ? 0 : i);
  }
}

} // namespace

FailureOr<std::vector<NDArray>> mlir::nova::interpret(func::FuncOp func,
                                                      const std::vector<NDArray> &inputs,
                                                      const RoundingNoise &noise) {
  llvm::DenseMap<Value, NDArray> env;
  Block &body = func.front();
  if (inputs.size() != body.getNumArguments()) {
    func.emitError("interpreter: wrong number of inputs");
    return failure();
  }
  for (auto [arg, in] : llvm::zip(body.getArguments(), inputs))
    env[arg] = in;
  auto get = [&](Value v) -> const NDArray & { return env.find(v)->second; };

  uint32_t position = 0;
  for (Operation &op : body.without_terminator()) {
    const OperandRounding operandRounding{noise.productRelative, noise.seed, position, noise.perOp};
    const OperandRounding *rounding = noise.productRelative > 0 ? &operandRounding : nullptr;
    const SumRounding sumRounding{noise.relative, noise.seed, position, noise.perOp};
    const SumRounding *sums = noise.relative > 0 ? &sumRounding : nullptr;
    std::optional<NDArray> r =
        llvm::TypeSwitch<Operation *, std::optional<NDArray>>(&op)
            .Case([&](AddOp o) { return mapBinary(get(o.getLhs()), get(o.getRhs()), std::plus<>()); })
            .Case([&](SubOp o) { return mapBinary(get(o.getLhs()), get(o.getRhs()), std::minus<>()); })
            .Case([&](MulOp o) { return mapBinary(get(o.getLhs()), get(o.getRhs()), std::multiplies<>()); })
            .Case([&](DivOp o) { return mapBinary(get(o.getLhs()), get(o.getRhs()), std::divides<>()); })
            .Case([&](MaxOp o) {
              return mapBinary(get(o.getLhs()), get(o.getRhs()), [](double a, double b) {
                return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN()
                                                      : std::max(a, b);
              });
            })
            .Case([&](GreaterOp o) {
              return mapBinary(get(o.getLhs()), get(o.getRhs()),
                               [](double a, double b) { return a > b ? 1.0 : 0.0; });
            })
            .Case([&](ErfOp o) { return mapUnary(get(o.getInput()), [](double x) { return std::erf(x); }); })
            .Case([&](LogSoftmaxOp o) { return softmaxAlong(get(o.getInput()), o.getAxis(), true, sums); })
            .Case([&](OneHotOp o) { return oneHot(o, get(o.getLabels())); })
            .Case([&](CrossEntropyOp o) {
              return crossEntropy(o.getType(), get(o.getLogits()), get(o.getLabels()), nullptr, sums);
            })
            .Case([&](CrossEntropyGradOp o) {
              return crossEntropy(o.getType(), get(o.getLogits()), get(o.getLabels()), &get(o.getGrad()), sums);
            })
            .Case([&](SliceOp o) { return slice(o, get(o.getInput())); })
            .Case([&](PadOp o) { return pad(o, get(o.getInput())); })
            .Case([&](GatherOp o) { return gather(o, get(o.getTable()), get(o.getIndices())); })
            .Case([&](ScatterAddOp o) {
              return scatterAdd(o, get(o.getIndices()), get(o.getUpdates()));
            })
            .Case([&](LayerNormOp o) {
              return layerNorm(get(o.getInput()), get(o.getGamma()), get(o.getBeta()),
                               o.getEps().convertToDouble(), sums);
            })
            .Case([&](LayerNormGradOp o) {
              return layerNormGrad(get(o.getInput()), get(o.getGamma()), get(o.getGrad()),
                                   o.getEps().convertToDouble(), sums);
            })
            .Case([&](CausalAttentionOp o) { return causalAttention(o, get(o.getQkv()), rounding); })
            .Case([&](CausalAttentionGradOp o) {
              return causalAttentionGrad(o, get(o.getQkv()), get(o.getGrad()), rounding);
            })
            .Case([&](CausalMaskOp o) {
              NDArray a = withShape(o.getType());
              int64_t cols = a.shape[1];
              for (int64_t i = 0; i < a.shape[0]; ++i)
                for (int64_t j = i + 1; j < cols; ++j)
                  a.data[i * cols + j] = -std::numeric_limits<double>::infinity();
              return a;
            })
            .Case([&](DropoutOp o) {
              NDArray r = get(o.getInput());
              double rate = o.getRate().convertToDouble();
              auto seed = static_cast<std::uint64_t>(static_cast<std::int64_t>(get(o.getSeed()).data[0]));
              auto stream = static_cast<std::uint32_t>(o.getStream());
              for (size_t i = 0; i < r.data.size(); ++i)
                r.data[i] = ::nova::detail::philox_uniform(seed, stream, i) >= rate
                                ? r.data[i] / (1.0 - rate)
                                : 0.0;
              return r;
            })
            .Case([&](NegOp o) { return mapUnary(get(o.getInput()), [](double x) { return -x; }); })
            .Case([&](ExpOp o) { return mapUnary(get(o.getInput()), [](double x) { return std::exp(x); }); })
            .Case([&](LogOp o) { return mapUnary(get(o.getInput()), [](double x) { return std::log(x); }); })
            .Case([&](TanhOp o) { return mapUnary(get(o.getInput()), [](double x) { return std::tanh(x); }); })
            .Case([&](SqrtOp o) { return mapUnary(get(o.getInput()), [](double x) { return std::sqrt(x); }); })
            .Case([&](RsqrtOp o) { return mapUnary(get(o.getInput()), [](double x) { return 1.0 / std::sqrt(x); }); })
            .Case([&](ReluOp o) {
              return mapUnary(get(o.getInput()), [](double x) { return std::isnan(x) ? x : std::max(x, 0.0); });
            })
            .Case([&](GeluOp o) {
              bool approx = o.getApproximate();
              return mapUnary(get(o.getInput()), [approx](double x) { return approx ? geluTanh(x) : geluErf(x); });
            })
            .Case([&](MatmulOp o) { return matmul(o, get(o.getLhs()), get(o.getRhs())); })
            .Case([&](BroadcastOp o) { return broadcast(o, get(o.getInput())); })
            .Case([&](ReshapeOp o) {
              NDArray a = withShape(o.getType());
              a.data = get(o.getInput()).data;
              return a;
            })
            .Case([&](TransposeOp o) { return transpose(o, get(o.getInput())); })
            .Case([&](ReduceSumOp o) { return reduce(o, o.getAxes(), ReduceKind::sum, get(o.getInput())); })
            .Case([&](ReduceMeanOp o) { return reduce(o, o.getAxes(), ReduceKind::mean, get(o.getInput())); })
            .Case([&](ReduceMaxOp o) { return reduce(o, o.getAxes(), ReduceKind::max, get(o.getInput())); })
            .Case([&](SoftmaxOp o) { return softmaxAlong(get(o.getInput()), o.getAxis(), false, sums); })
            .Case([&](AllReduceOp o) {
              // In float64 over the calling thread's group, as the compiled
              // step sums in its own precision.
              NDArray a = get(o.getInit());
              std::shared_ptr<::nova::dist::Communicator> comm = ::nova::dist::communicator();
              if (!comm)
                throw ::nova::DistError("nova: the step sums gradients across data-parallel ranks, but the "
                                        "calling thread has no communicator (nova::dist::set_communicator)");
              comm->wait(comm->start_all_reduce_sum(a.data.data(), a.data.size(), ::nova::DType::f64));
              return a;
            })
            .Case([&](ConstantOp o) {
              NDArray a = withShape(o.getType());
              std::fill(a.data.begin(), a.data.end(), o.getValue().convertToDouble());
              return a;
            })
            .Default([](Operation *) { return std::nullopt; });
    if (!r) {
      op.emitError("interpreter: no reference semantics for this op");
      return failure();
    }
    perturb(&op, position++, noise, *r, get);
    env[op.getResult(0)] = std::move(*r);
  }
  std::vector<NDArray> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(get(v));
  return results;
}
