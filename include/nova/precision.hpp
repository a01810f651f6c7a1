// precision.hpp - how compiled steps multiply float32 matrices, and how
// they keep what the backward reads.
//
// Like torch.set_float32_matmul_precision: fp32 (the default, "highest")
// multiplies at float32's accuracy: in float32 on a CPU, and on a GPU
// either by float32 FMAs or, where the compiler's model finds it faster
// (an A100's or H100's tensor cores, at 8 times their float32 rate), as
// 3xtf32: each operand split into two tf32 halves and three tensor-core
// products summed in float32 (relative errors under 3 x 2^-22 a product
// before the sum, within the float32 bounds the tests check; an infinite
// operand element gives NaN there, not +-inf); tf32 ("high") lets a GPU's tensor cores read the
// float32 operands as tf32 (10 mantissa bits, float32 sums: relative
// errors near 1e-3); bf16 ("medium") rounds both matmul operands to
// bfloat16 and accumulates in float32 (about 3 significant digits per
// product: relative errors near 1e-2 against float64, where fp32 gives
// 1e-6): on the CPU's AMX tiles when it has them (amx_bf16), else as
// AVX512-BF16 dot products (avx512_bf16 with 512-bit vectors: AMD Zen 4,
// Intel Cooper Lake; there the fused attention's products too), on a GPU's
// tensor cores from bf16 copies of the operands (twice tf32's peak rate
// by the data sheets, not measured here; on sm_90a wgmma whatever the
// operands' layout; causal attention's products too, Q K^T and P V and
// their gradients' products, with P and dS rounded to bfloat16, where the
// GPU has bf16 mma.sync and the head is 16, 32, 64 or 128 columns wide
// (the backward up to 64), as PyTorch's attention under bf16 autocast;
// with tf32, attention's products read tf32 operands there too, and with
// fp32 they run as 3xtf32, each operand split into two tf32 halves, three
// products each, at about float32's accuracy: errors near 1e-6).
// Everything else
// (elementwise ops, reductions, the optimizer, the parameters themselves)
// stays float32, and so do the values kept for the backward unless
// ActivationPrecision (below) says bf16. A CPU runs tf32 steps, and with neither AMX nor
// AVX512-BF16 bf16 steps, in float32.
//
// The precision is part of every step's cache key (in process and on disk):
// a change takes effect at the next call of each step, which compiles again.
#pragma once

#include <cstdint>
#include <string_view>

namespace nova {

enum class MatmulPrecision : std::uint8_t { fp32, bf16, tf32 };

/// For every step compiled from now on, in every thread.
void set_matmul_precision(MatmulPrecision precision);

/// The current setting: set_matmul_precision's last value, else
/// $NOVA_MATMUL_PRECISION (fp32, tf32 or bf16), else fp32.
MatmulPrecision matmul_precision();

std::string_view name_of(MatmulPrecision precision);

/// How a step keeps the values its backward reads, apart from how it
/// multiplies. fp32 (the default) keeps every value in float32. bf16 keeps
/// a forward matmul's output (with the bias and scaling fused after it)
/// that the backward reads and only elementwise ops read, rounded to
/// bfloat16 (round to nearest even), as PyTorch's autocast keeps a linear
/// layer's output: its readers, forward and backward, widen the rounded
/// value (in a GPT, the MLP's pre-activation h: the GELU forward and its
/// gradient read it rounded; half the bytes of the largest value kept
/// across the step). A value counts as kept for the backward when its last
/// reader comes 16 kernels (computing ops) or more after it. The residual
/// stream, LayerNorm's and attention's inputs, gradients, the parameters
/// and the optimizer stay float32. Errors near bfloat16's 2^-9 a value on
/// top of the matmuls' (with bf16 matmuls, where the products round their
/// operands anyway, the same order as theirs).
enum class ActivationPrecision : std::uint8_t { fp32, bf16 };

/// For every step compiled from now on, in every thread; part of every
/// step's cache key, like the matmul precision.
void set_activation_precision(ActivationPrecision precision);

/// set_activation_precision's last value, else $NOVA_ACTIVATION_PRECISION
/// (fp32 or bf16), else fp32.
ActivationPrecision activation_precision();

std::string_view name_of(ActivationPrecision precision);

} // namespace nova
