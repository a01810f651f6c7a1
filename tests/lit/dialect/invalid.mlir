// RUN: nova-opt %s -split-input-file -verify-diagnostics

func.func @add_shape_mismatch(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+2 {{'nova.add' op failed to infer returned types}}
  // expected-error @+1 {{'nova.add' op operands must have the same shape and element type (broadcast explicitly), got 4x3xf32 and 4x2xf32}}
  %0 = "nova.add"(%a, %b) : (tensor<4x3xf32>, tensor<4x2xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @add_dtype_mismatch(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+2 {{'nova.mul' op failed to infer returned types}}
  // expected-error @+1 {{'nova.mul' op operands must have the same shape and element type (broadcast explicitly), got 4xf32 and 4xf64}}
  %0 = "nova.mul"(%a, %b) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_k_mismatch(%a: tensor<4x8xf32>, %b: tensor<7x3xf32>) {
  // expected-error @+1 {{'nova.matmul' op contraction dimension mismatch: 8 vs 7 (lhs 4x8xf32, rhs 7x3xf32)}}
  %0 = nova.matmul %a, %b : tensor<4x8xf32>, tensor<7x3xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x3xf32>) {
  // expected-error @+1 {{'nova.matmul' op operands must have the same rank >= 2 (lhs 8xf32, rhs 8x3xf32)}}
  %0 = nova.matmul %a, %b : tensor<8xf32>, tensor<8x3xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x3xf32>) {
  // expected-error @+1 {{'nova.matmul' op batch dims differ (lhs 2x4x8xf32, rhs 3x8x3xf32)}}
  %0 = nova.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x3xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<4x8xf32>, %b: tensor<8x3xf32>) {
  // expected-error @+2 {{'nova.matmul' op failed to infer returned types}}
  // expected-error @+1 {{'nova.matmul' op inferred type(s) 'tensor<4x3xf32>' are incompatible with return type(s) of operation 'tensor<4x4xf32>'}}
  %0 = "nova.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @broadcast_bad(%a: tensor<3xf32>) {
  // expected-error @+1 {{'nova.broadcast' op cannot broadcast 3xf32 to 4x2xf32}}
  %0 = nova.broadcast %a : tensor<3xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @reshape_bad(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'nova.reshape' op cannot reshape 3x4xf32 (12 elements) to 5x2xf32 (10 elements)}}
  %0 = nova.reshape %a : tensor<3x4xf32> -> tensor<5x2xf32>
  return
}

// -----

func.func @transpose_bad(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'nova.transpose' op permutation is not a permutation of the 2 dims of 3x4xf32}}
  %0 = nova.transpose %a {permutation = array<i64: 0, 0>} : tensor<3x4xf32>
  return
}

// -----

func.func @reduce_axis(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'nova.reduce_sum' op axis 2 is out of range for rank 2}}
  %0 = nova.reduce_sum %a {axes = array<i64: 2>} : tensor<3x4xf32>
  return
}

// -----

func.func @reduce_unsorted(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'nova.reduce_max' op axes must be sorted and unique}}
  %0 = nova.reduce_max %a {axes = array<i64: 1, 0>} : tensor<3x4xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<3x4xf32>) {
  // expected-error @+1 {{'nova.softmax' op axis 5 is out of range for 3x4xf32}}
  %0 = nova.softmax %a {axis = 5 : i64} : tensor<3x4xf32>
  return
}

// -----

func.func @int_exp(%a: tensor<3xi32>) {
  // expected-error @+1 {{'nova.exp' op operand #0 must be ranked tensor of 32-bit float or 64-bit float values}}
  %0 = "nova.exp"(%a) : (tensor<3xi32>) -> tensor<3xi32>
  return
}

// -----

func.func @gradient_of_vector(%a: tensor<3xf32>) {
  // expected-error @+1 {{'nova.gradient' op the loss must be a scalar (rank-0) tensor, got 3xf32}}
  %0 = nova.gradient %a wrt %a : tensor<3xf32>, tensor<3xf32>
  return
}

// -----

func.func @gradient_wrt_int(%l: tensor<f32>, %y: tensor<3xi32>) {
  // expected-error @+1 {{'nova.gradient' op cannot differentiate with respect to the integer tensor 3xi32}}
  %0 = nova.gradient %l wrt %y : tensor<f32>, tensor<3xi32>
  return
}

// -----

func.func @one_hot_shape(%y: tensor<3xi32>) {
  // expected-error @+1 {{'nova.one_hot' op result 4x5xf32 must be the labels' shape 3xi32 plus a class dim}}
  %0 = nova.one_hot %y : tensor<3xi32> -> tensor<4x5xf32>
  return
}

// -----

func.func @slice_out_of_bounds(%x: tensor<3x4xf32>) {
  // expected-error @+1 {{'nova.slice' op the box (offsets, sizes) does not fit in 3x4xf32}}
  %0 = nova.slice %x {offsets = array<i64: 2, 0>, sizes = array<i64: 2, 4>} : tensor<3x4xf32>
  return
}

// -----

func.func @gather_table_rank(%t: tensor<7xf32>, %i: tensor<2xi32>) {
  // expected-error @+1 {{'nova.gather' op the table must be [rows, width], got 7xf32}}
  %0 = nova.gather %t[%i] : tensor<7xf32>, tensor<2xi32>
  return
}

// -----

func.func @scatter_shape(%i: tensor<2xi32>, %u: tensor<3x4xf32>) {
  // expected-error @+1 {{'nova.scatter_add' op updates 3x4xf32 must be the indices' shape 2xi32 plus the width of the result 7x4xf32}}
  %0 = nova.scatter_add %i, %u : tensor<2xi32>, tensor<3x4xf32> -> tensor<7x4xf32>
  return
}

// -----

func.func @dropout_rate(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+2 {{'nova.dropout' op failed to infer returned types}}
  // expected-error @+1 {{'nova.dropout' op rate must be in [0, 1)}}
  %0 = "nova.dropout"(%x, %s) {rate = 1.0 : f64} : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{#nova.lowering_config: unknown kind 'fast' (expected matmul, amx_matmul, bf16_matmul, attention, rows, loops, serial, mma_sync_matmul, wgmma_matmul, simt_matmul or gpu_threads)}}
func.func private @k() attributes {c = #nova.lowering_config<fast, workgroups = 1, tile = [], register_tile = []>}

// -----

// expected-error @+1 {{#nova.lowering_config: workgroups must be at least 1, not 0}}
func.func private @k() attributes {c = #nova.lowering_config<loops, workgroups = 0, tile = [0], register_tile = []>}

// -----

// expected-error @+1 {{#nova.lowering_config: matmul needs register_tile = [rows, columns]}}
func.func private @k() attributes {c = #nova.lowering_config<matmul, workgroups = 1, tile = [6, 32], register_tile = []>}

// -----

// expected-error @+1 {{#nova.lowering_config: bf16_matmul needs register_tile = [8, 32] and cache_tile = [kc], kc a multiple of 32}}
func.func private @k() attributes {c = #nova.lowering_config<bf16_matmul, workgroups = 1, tile = [64, 64], cache_tile = [64], register_tile = [32, 32]>}

// -----

// expected-error @+1 {{#nova.lowering_config: a serial kernel runs as one workgroup}}
func.func private @k() attributes {c = #nova.lowering_config<serial, workgroups = 4, tile = [], register_tile = []>}

// -----

func.func @launch(%a: memref<4xf32>) {
  // expected-error @+1 {{'nova.launch' op names kernel @kernels::@missing, which does not exist}}
  nova.launch @kernels::@missing(%a) : memref<4xf32>
  return
}
module @kernels {
}

// -----

func.func @launch(%a: memref<4xf32>) {
  // expected-error @+1 {{'nova.launch' op buffers do not match the parameters of kernel @kernels::@k}}
  nova.launch @kernels::@k(%a) : memref<4xf32>
  return
}
module @kernels {
  func.func @k(%wg: index, %x: memref<8xf32>) {
    return
  }
}

// -----

func.func @launch(%a: memref<4xf32>) {
  // expected-error @+1 {{'nova.launch' op kernel @kernels::@k must take the workgroup number (index) first}}
  nova.launch @kernels::@k(%a) : memref<4xf32>
  return
}
module @kernels {
  func.func @k(%x: memref<4xf32>) {
    return
  }
}

// -----

func.func @attention_qkv(%x: tensor<2x8x10xf32>) -> tensor<2x8x3xf32> {
  // expected-error @+2 {{'nova.causal_attention' op failed to infer returned types}}
  // expected-error @+1 {{'nova.causal_attention' op qkv must be [B, T, 3d], got 2x8x10xf32}}
  %0 = nova.causal_attention %x {heads = 1 : i64, scale = 1.0 : f64} : tensor<2x8x10xf32> -> tensor<2x8x3xf32>
  return %0 : tensor<2x8x3xf32>
}

// -----

func.func @attention_heads(%x: tensor<2x8x12xf32>) -> tensor<2x8x4xf32> {
  // expected-error @+2 {{'nova.causal_attention' op failed to infer returned types}}
  // expected-error @+1 {{'nova.causal_attention' op d = 4 (qkv 2x8x12xf32) is not a multiple of 3 heads}}
  %0 = nova.causal_attention %x {heads = 3 : i64, scale = 1.0 : f64} : tensor<2x8x12xf32> -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// -----

func.func @attention_grad(%x: tensor<2x8x12xf32>, %g: tensor<2x8x12xf32>) -> tensor<2x8x12xf32> {
  // expected-error @+1 {{'nova.causal_attention_grad' op grad 2x8x12xf32 must be the attention's result 2x8x4xf32 for qkv 2x8x12xf32}}
  %0 = nova.causal_attention_grad %x, %g {heads = 2 : i64, scale = 1.0 : f64} : tensor<2x8x12xf32>, tensor<2x8x12xf32>
  return %0 : tensor<2x8x12xf32>
}

// -----

func.func @attention_kernel_inputs(%x: memref<2x8x12xf32>, %o: memref<2x8x4xf32>) {
  // expected-error @+1 {{'nova.attention_kernel' op takes 2 inputs (qkv, grad), got 1}}
  nova.attention_kernel ins(%x : memref<2x8x12xf32>) outs(%o : memref<2x8x4xf32>) {heads = 2 : i64, scale = 1.0 : f64, backward}
  return
}

// -----

func.func @attention_kernel_init(%x: memref<2x8x12xf32>, %o: memref<2x8x12xf32>) {
  // expected-error @+1 {{'nova.attention_kernel' op init 2x8x12xf32 must have the shape of the attention's result [B, T, d]}}
  nova.attention_kernel ins(%x : memref<2x8x12xf32>) outs(%o : memref<2x8x12xf32>) {heads = 2 : i64, scale = 1.0 : f64}
  return
}

// -----

// An attribute of another type than declared (an array, not array<i64>)
// is an error, not read as one.
func.func @reduce_axes_type(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'nova.reduce_sum' op attribute 'axes' failed to satisfy constraint: i64 dense array attribute}}
  %0 = nova.reduce_sum %a {axes = [1]} : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_no_axis(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{'nova.softmax' op requires attribute 'axis'}}
  %0 = nova.softmax %a : tensor<4x8xf32>
  return
}

// -----

func.func @cross_entropy_labels(%x: tensor<4x5xf32>, %y: tensor<5xi32>) {
  // expected-error @+2 {{'nova.cross_entropy' op failed to infer returned types}}
  // expected-error @+1 {{'nova.cross_entropy' op labels 5xi32 must have the logits' shape 4x5xf32 without the class dim}}
  %0 = "nova.cross_entropy"(%x, %y) : (tensor<4x5xf32>, tensor<5xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_grad_shape(%x: tensor<4x5xf32>, %y: tensor<4xi32>, %g: tensor<4x5xf32>) {
  // expected-error @+2 {{'nova.cross_entropy_grad' op failed to infer returned types}}
  // expected-error @+1 {{'nova.cross_entropy_grad' op grad 4x5xf32 must have the labels' shape and the logits' element type (logits 4x5xf32, labels 4xi32)}}
  %0 = "nova.cross_entropy_grad"(%x, %y, %g) : (tensor<4x5xf32>, tensor<4xi32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @cross_entropy_kernel_inputs(%x: memref<4x5xf32>, %y: memref<4xi32>, %o: memref<4x5xf32>) {
  // expected-error @+1 {{'nova.cross_entropy_kernel' op takes 3 or 4 inputs (logits, labels, grad[, stats]), got 2}}
  nova.cross_entropy_kernel ins(%x, %y : memref<4x5xf32>, memref<4xi32>) outs(%o : memref<4x5xf32>) {backward}
  return
}

// -----

func.func @cross_entropy_kernel_init(%x: memref<4x5xf32>, %y: memref<4xi32>, %o: memref<4x5xf32>) {
  // expected-error @+1 {{'nova.cross_entropy_kernel' op init 4x5xf32 must be shaped like the labels 4xi32}}
  nova.cross_entropy_kernel ins(%x, %y : memref<4x5xf32>, memref<4xi32>) outs(%o : memref<4x5xf32>)
  return
}

// -----

func.func @cross_entropy_kernel_stats(%x: memref<4x5xf32>, %y: memref<4xi32>, %o: memref<4xf32>, %s: memref<4xf32>) {
  // expected-error @+1 {{'nova.cross_entropy_kernel' op stats 4xf32 must be [..., 2] of the rows' type for rows 4x5xf32}}
  nova.cross_entropy_kernel ins(%x, %y : memref<4x5xf32>, memref<4xi32>) outs(%o, %s : memref<4xf32>, memref<4xf32>)
  return
}

// -----

func.func @cross_entropy_kernel_backward_inits(%x: memref<4x5xf32>, %y: memref<4xi32>, %g: memref<4xf32>, %o: memref<4x5xf32>, %s: memref<4x2xf32>) {
  // expected-error @+1 {{'nova.cross_entropy_kernel' op takes 1 init (the gradient), got 2}}
  nova.cross_entropy_kernel ins(%x, %y, %g : memref<4x5xf32>, memref<4xi32>, memref<4xf32>) outs(%o, %s : memref<4x5xf32>, memref<4x2xf32>) {backward}
  return
}
