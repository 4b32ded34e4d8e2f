#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @matmul_kernel(%arg0: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg1: memref<*xbf16> {tt.divisibility = 16 : i32}, %arg2: memref<*xf32> {tt.divisibility = 16 : i32}, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32, %arg11: i32, %arg12: i32, %arg13: i32, %arg14: i32) {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %c0_i32 = arith.constant 0 : i32
    %c32_i32 = arith.constant 32 : i32
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0.000000e+00 : bf16
    %0 = tensor.empty() : tensor<32x32xf32>
    %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<32x32xf32>) -> tensor<32x32xf32>
    %2 = arith.muli %arg12, %c32_i32 : i32
    %3 = arith.muli %arg13, %c32_i32 : i32
    %4 = arith.index_cast %2 : i32 to index
    %5 = arith.index_cast %3 : i32 to index
    %6 = arith.index_cast %arg6 : i32 to index
    %7 = arith.index_cast %arg7 : i32 to index
    %8 = arith.muli %4, %6 : index
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%8], sizes: [32, 32], strides: [%6, 1] : memref<*xbf16> to memref<32x32xbf16, strided<[?, 1], offset: ?>>
    %reinterpret_cast_1 = memref.reinterpret_cast %arg1 to offset: [%5], sizes: [32, 32], strides: [%7, 1] : memref<*xbf16> to memref<32x32xbf16, strided<[?, 1], offset: ?>>
    %9 = arith.index_cast %arg3 : i32 to index
    %10 = arith.subi %9, %4 : index
    %11 = arith.minsi %10, %c32 : index
    %12 = arith.maxsi %11, %c0 : index
    %13 = arith.index_cast %arg4 : i32 to index
    %14 = arith.subi %13, %5 : index
    %15 = arith.minsi %14, %c32 : index
    %16 = arith.maxsi %15, %c0 : index
    %17 = arith.index_cast %arg5 : i32 to index
    %18 = arith.muli %7, %c32 : index
    %19:5 = scf.for %arg15 = %c0_i32 to %arg5 step %c32_i32 iter_args(%arg16 = %1, %arg17 = %reinterpret_cast, %arg18 = %reinterpret_cast_1, %arg19 = %8, %arg20 = %5) -> (tensor<32x32xf32>, memref<32x32xbf16, strided<[?, 1], offset: ?>>, memref<32x32xbf16, strided<[?, 1], offset: ?>>, index, index)  : i32 {
      %20 = arith.index_cast %arg15 : i32 to index
      %21 = arith.subi %17, %20 : index
      %22 = arith.minsi %21, %c32 : index
      %23 = arith.maxsi %22, %c0 : index
      %alloc = memref.alloc() : memref<32x32xbf16>
      %24 = arith.cmpi slt, %12, %c32 : index
      %25 = arith.cmpi slt, %23, %c32 : index
      %26 = arith.ori %24, %25 : i1
      scf.if %26 {
        linalg.fill ins(%cst_0 : bf16) outs(%alloc : memref<32x32xbf16>)
      }
      %subview = memref.subview %arg17[0, 0] [%12, %23] [1, 1] : memref<32x32xbf16, strided<[?, 1], offset: ?>> to memref<?x?xbf16, strided<[?, 1], offset: ?>>
      %subview_2 = memref.subview %alloc[0, 0] [%12, %23] [1, 1] : memref<32x32xbf16> to memref<?x?xbf16, strided<[32, 1]>>
      memref.copy %subview, %subview_2 : memref<?x?xbf16, strided<[?, 1], offset: ?>> to memref<?x?xbf16, strided<[32, 1]>>
      %27 = bufferization.to_tensor %alloc restrict writable : memref<32x32xbf16> to tensor<32x32xbf16>
      %alloc_3 = memref.alloc() : memref<32x32xbf16>
      %28 = arith.cmpi slt, %16, %c32 : index
      %29 = arith.ori %25, %28 : i1
      scf.if %29 {
        linalg.fill ins(%cst_0 : bf16) outs(%alloc_3 : memref<32x32xbf16>)
      }
      %subview_4 = memref.subview %arg18[0, 0] [%23, %16] [1, 1] : memref<32x32xbf16, strided<[?, 1], offset: ?>> to memref<?x?xbf16, strided<[?, 1], offset: ?>>
      %subview_5 = memref.subview %alloc_3[0, 0] [%23, %16] [1, 1] : memref<32x32xbf16> to memref<?x?xbf16, strided<[32, 1]>>
      memref.copy %subview_4, %subview_5 : memref<?x?xbf16, strided<[?, 1], offset: ?>> to memref<?x?xbf16, strided<[32, 1]>>
      %30 = bufferization.to_tensor %alloc_3 restrict writable : memref<32x32xbf16> to tensor<32x32xbf16>
      %31 = linalg.matmul ins(%27, %30 : tensor<32x32xbf16>, tensor<32x32xbf16>) outs(%1 : tensor<32x32xf32>) -> tensor<32x32xf32>
      %32 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg16, %31 : tensor<32x32xf32>, tensor<32x32xf32>) outs(%arg16 : tensor<32x32xf32>) {
      ^bb0(%in: f32, %in_6: f32, %out: f32):
        %35 = arith.addf %in, %in_6 : f32
        linalg.yield %35 : f32
      } -> tensor<32x32xf32>
      %33 = arith.addi %arg19, %c32 : index
      %reinterpret_cast_7 = memref.reinterpret_cast %arg0 to offset: [%33], sizes: [32, 32], strides: [%6, 1] : memref<*xbf16> to memref<32x32xbf16, strided<[?, 1], offset: ?>>
      %34 = arith.addi %arg20, %18 : index
      %reinterpret_cast_8 = memref.reinterpret_cast %arg1 to offset: [%34], sizes: [32, 32], strides: [%7, 1] : memref<*xbf16> to memref<32x32xbf16, strided<[?, 1], offset: ?>>
      scf.yield %32, %reinterpret_cast_7, %reinterpret_cast_8, %33, %34 : tensor<32x32xf32>, memref<32x32xbf16, strided<[?, 1], offset: ?>>, memref<32x32xbf16, strided<[?, 1], offset: ?>>, index, index
    }
    %36 = arith.index_cast %arg8 : i32 to index
    %37 = arith.muli %4, %36 : index
    %38 = arith.addi %37, %5 : index
    %reinterpret_cast_9 = memref.reinterpret_cast %arg2 to offset: [%38], sizes: [32, 32], strides: [%36, 1] : memref<*xf32> to memref<32x32xf32, strided<[?, 1], offset: ?>>
    %extracted_slice = tensor.extract_slice %19#0[0, 0] [%12, %16] [1, 1] : tensor<32x32xf32> to tensor<?x?xf32>
    %subview_10 = memref.subview %reinterpret_cast_9[0, 0] [%12, %16] [1, 1] : memref<32x32xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1], offset: ?>>
    bufferization.materialize_in_destination %extracted_slice in writable %subview_10 : (tensor<?x?xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>) -> ()
    return
  }
}
