module {
  func.func @partial_fill_kernel(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xf32> {tt.divisibility = 16 : i32}, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32) {
    %c0 = arith.constant 0 : index
    %c61 = arith.constant 61 : index
    %c64_i32 = arith.constant 64 : i32
    %cst = arith.constant 1.000000e+00 : f32
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [0], sizes: [1], strides: [1] : memref<*xf32> to memref<1xf32, strided<[1]>>
    %0 = affine.load %reinterpret_cast[0] : memref<1xf32, strided<[1]>>
    %alloc = memref.alloc() : memref<64xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<64xf32>)
    %1 = arith.index_cast %arg2 : i32 to index
    %2 = arith.minsi %1, %c61 : index
    %3 = arith.maxsi %2, %c0 : index
    %subview = memref.subview %alloc[3] [%3] [1] : memref<64xf32> to memref<?xf32, strided<[1], offset: 3>>
    linalg.fill ins(%0 : f32) outs(%subview : memref<?xf32, strided<[1], offset: 3>>)
    %4 = arith.muli %arg6, %c64_i32 : i32
    %5 = arith.index_cast %4 : i32 to index
    %reinterpret_cast_0 = memref.reinterpret_cast %arg1 to offset: [%5], sizes: [64], strides: [1] : memref<*xf32> to memref<64xf32, strided<[1], offset: ?>>
    memref.copy %alloc, %reinterpret_cast_0 : memref<64xf32> to memref<64xf32, strided<[1], offset: ?>>
    %6 = arith.addf %0, %0 : f32
    affine.store %6, %reinterpret_cast_0[%c0 + 63] : memref<64xf32, strided<[1], offset: ?>>
    return
  }
}
