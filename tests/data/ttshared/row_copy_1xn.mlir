module {
  func.func @row_copy_kernel(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xf32> {tt.divisibility = 16 : i32}, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    %cst = arith.constant 1.000000e+00 : f32
    %0 = arith.index_cast %arg8 : i32 to index
    %1 = arith.index_cast %arg4 : i32 to index
    %2 = arith.muli %0, %1 : index
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%2], sizes: [1, 64], strides: [%1, 1] : memref<*xf32> to memref<1x64xf32, strided<[?, 1], offset: ?>>
    %3 = arith.index_cast %arg2 : i32 to index
    %4 = arith.subi %3, %0 : index
    %5 = arith.minsi %4, %c1 : index
    %6 = arith.maxsi %5, %c0 : index
    %7 = arith.index_cast %arg3 : i32 to index
    %8 = arith.minsi %7, %c64 : index
    %alloc = memref.alloc() : memref<1x64xf32>
    %subview = memref.subview %reinterpret_cast[0, 0] [%6, %8] [1, 1] : memref<1x64xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1], offset: ?>>
    %subview_0 = memref.subview %alloc[0, 0] [%6, %8] [1, 1] : memref<1x64xf32> to memref<?x?xf32, strided<[64, 1]>>
    memref.copy %subview, %subview_0 : memref<?x?xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[64, 1]>>
    %9 = bufferization.to_tensor %alloc restrict writable : memref<1x64xf32> to tensor<1x64xf32>
    %10 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%9 : tensor<1x64xf32>) outs(%9 : tensor<1x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %11 = arith.addf %in, %cst : f32
      linalg.yield %11 : f32
    } -> tensor<1x64xf32>
    %reinterpret_cast_1 = memref.reinterpret_cast %arg1 to offset: [%2], sizes: [1, 64], strides: [%1, 1] : memref<*xf32> to memref<1x64xf32, strided<[?, 1], offset: ?>>
    %extracted_slice = tensor.extract_slice %10[0, 0] [%6, %8] [1, 1] : tensor<1x64xf32> to tensor<?x?xf32>
    %subview_2 = memref.subview %reinterpret_cast_1[0, 0] [%6, %8] [1, 1] : memref<1x64xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1], offset: ?>>
    bufferization.materialize_in_destination %extracted_slice in writable %subview_2 : (tensor<?x?xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>) -> ()
    return
  }
}
