// RUN: nova-opt %s -nova-bucket-all-reduce -split-input-file -verify-diagnostics

// Only whole buffers are summed.
module {
  func.func @part() {
    %a = memref.alloc() : memref<4x16xf32>
    nova.launch @kernels::@k1(%a) : memref<4x16xf32>
    %row = memref.subview %a[1, 0] [1, 16] [1, 1] : memref<4x16xf32> to memref<16xf32, strided<[1], offset: 16>>
    // expected-error @+1 {{nova-bucket-all-reduce: the gradient 'memref<16xf32, strided<[1], offset: 16>>' is a part of the buffer 'memref<4x16xf32>'}}
    nova.all_reduce outs(%row : memref<16xf32, strided<[1], offset: 16>>)
    return
  }
  module @kernels {
    func.func @k1(%wg: index, %a: memref<4x16xf32>) { return }
  }
}
