#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @scale_transpose_kernel(%arg0: memref<*xf16> {tt.divisibility = 16 : i32}, %arg1: memref<*xf16> {tt.divisibility = 16 : i32}, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32, %arg11: i32) {
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    %c32_i32 = arith.constant 32 : i32
    %c64_i32 = arith.constant 64 : i32
    %cst = arith.constant 0xFC00 : f16
    %cst_0 = arith.constant 2.000000e+00 : f16
    %cst_1 = arith.constant 1.000000e+00 : f16
    %0 = arith.muli %arg9, %c32_i32 : i32
    %1 = arith.muli %arg10, %c64_i32 : i32
    %2 = arith.index_cast %0 : i32 to index
    %3 = arith.index_cast %1 : i32 to index
    %4 = arith.index_cast %arg4 : i32 to index
    %5 = arith.muli %2, %4 : index
    %6 = arith.addi %5, %3 : index
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%6], sizes: [32, 64], strides: [%4, 1] : memref<*xf16> to memref<32x64xf16, strided<[?, 1], offset: ?>>
    %alloc = memref.alloc() : memref<32x64xf16>
    %7 = arith.index_cast %arg2 : i32 to index
    %8 = arith.addi %2, %c32 : index
    %9 = arith.minsi %8, %7 : index
    %10 = arith.maxsi %9, %2 : index
    %11 = arith.subi %10, %2 : index
    %12 = arith.index_cast %arg3 : i32 to index
    %13 = arith.addi %3, %c64 : index
    %14 = arith.minsi %13, %12 : index
    %15 = arith.maxsi %14, %3 : index
    %16 = arith.subi %15, %3 : index
    %17 = arith.cmpi slt, %11, %c32 : index
    %18 = arith.cmpi slt, %16, %c64 : index
    %19 = arith.ori %17, %18 : i1
    scf.if %19 {
      linalg.fill ins(%cst : f16) outs(%alloc : memref<32x64xf16>)
    }
    %subview = memref.subview %reinterpret_cast[0, 0] [%11, %16] [1, 1] : memref<32x64xf16, strided<[?, 1], offset: ?>> to memref<?x?xf16, strided<[?, 1], offset: ?>>
    %subview_2 = memref.subview %alloc[0, 0] [%11, %16] [1, 1] : memref<32x64xf16> to memref<?x?xf16, strided<[64, 1]>>
    memref.copy %subview, %subview_2 : memref<?x?xf16, strided<[?, 1], offset: ?>> to memref<?x?xf16, strided<[64, 1]>>
    %20 = bufferization.to_tensor %alloc restrict writable : memref<32x64xf16> to tensor<32x64xf16>
    %21 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%20 : tensor<32x64xf16>) outs(%20 : tensor<32x64xf16>) {
    ^bb0(%in: f16, %out: f16):
      %30 = arith.mulf %in, %cst_0 : f16
      %31 = arith.addf %30, %cst_1 : f16
      linalg.yield %31 : f16
    } -> tensor<32x64xf16>
    %22 = arith.index_cast %arg5 : i32 to index
    %23 = arith.muli %3, %22 : index
    %24 = arith.addi %23, %2 : index
    %reinterpret_cast_3 = memref.reinterpret_cast %arg1 to offset: [%24], sizes: [32, 64], strides: [1, %22] : memref<*xf16> to memref<32x64xf16, strided<[1, ?], offset: ?>>
    %extracted_slice = tensor.extract_slice %21[0, 0] [%11, %16] [1, 1] : tensor<32x64xf16> to tensor<?x?xf16>
    %subview_4 = memref.subview %reinterpret_cast_3[0, 0] [%11, %16] [1, 1] : memref<32x64xf16, strided<[1, ?], offset: ?>> to memref<?x?xf16, strided<[1, ?], offset: ?>>
    bufferization.materialize_in_destination %extracted_slice in writable %subview_4 : (tensor<?x?xf16>, memref<?x?xf16, strided<[1, ?], offset: ?>>) -> ()
    return
  }
}
