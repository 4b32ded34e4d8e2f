#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func @row_sum_loop_kernel(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xf32> {tt.divisibility = 16 : i32}, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32) {
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %c64 = arith.constant 64 : index
    %c0_i32 = arith.constant 0 : i32
    %c8_i32 = arith.constant 8 : i32
    %c64_i32 = arith.constant 64 : i32
    %cst = arith.constant 0.000000e+00 : f32
    %0 = arith.muli %arg8, %c8_i32 : i32
    %1 = arith.index_cast %0 : i32 to index
    %2 = arith.index_cast %arg4 : i32 to index
    %3 = arith.muli %1, %2 : index
    %4 = arith.index_cast %arg2 : i32 to index
    %5 = arith.addi %1, %c8 : index
    %6 = arith.minsi %5, %4 : index
    %7 = arith.maxsi %6, %1 : index
    %8 = arith.subi %7, %1 : index
    %9 = arith.index_cast %arg3 : i32 to index
    %alloc = memref.alloc() : memref<8x64xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<8x64xf32>)
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%3], sizes: [8, 64], strides: [%2, 1] : memref<*xf32> to memref<8x64xf32, strided<[?, 1], offset: ?>>
    %10:2 = scf.for %arg11 = %c0_i32 to %arg3 step %c64_i32 iter_args(%arg12 = %reinterpret_cast, %arg13 = %3) -> (memref<8x64xf32, strided<[?, 1], offset: ?>>, index)  : i32 {
      %alloc_0 = memref.alloc() : memref<8x64xf32>
      %11 = arith.index_cast %arg11 : i32 to index
      %12 = arith.subi %9, %11 : index
      %13 = arith.minsi %12, %c64 : index
      %14 = arith.maxsi %13, %c0 : index
      %15 = arith.cmpi slt, %8, %c8 : index
      %16 = arith.cmpi slt, %14, %c64 : index
      %17 = arith.ori %15, %16 : i1
      scf.if %17 {
        linalg.fill ins(%cst : f32) outs(%alloc_0 : memref<8x64xf32>)
      }
      %subview = memref.subview %arg12[0, 0] [%8, %14] [1, 1] : memref<8x64xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1], offset: ?>>
      %subview_1 = memref.subview %alloc_0[0, 0] [%8, %14] [1, 1] : memref<8x64xf32> to memref<?x?xf32, strided<[64, 1]>>
      memref.copy %subview, %subview_1 : memref<?x?xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[64, 1]>>
      linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc, %alloc_0 : memref<8x64xf32>, memref<8x64xf32>) outs(%alloc : memref<8x64xf32>) {
      ^bb0(%in: f32, %in_2: f32, %out: f32):
        %20 = arith.addf %in, %in_2 : f32
        linalg.yield %20 : f32
      }
      memref.dealloc %alloc_0 : memref<8x64xf32>
      %18 = arith.addi %arg13, %c64 : index
      %reinterpret_cast_3 = memref.reinterpret_cast %arg0 to offset: [%18], sizes: [8, 64], strides: [%2, 1] : memref<*xf32> to memref<8x64xf32, strided<[?, 1], offset: ?>>
      scf.yield %reinterpret_cast_3, %18 : memref<8x64xf32, strided<[?, 1], offset: ?>>, index
    }
    %alloc_4 = memref.alloc() : memref<8xf32>
    linalg.fill ins(%cst : f32) outs(%alloc_4 : memref<8xf32>)
    linalg.reduce ins(%alloc : memref<8x64xf32>) outs(%alloc_4 : memref<8xf32>) dimensions = [18446744073709551616]
      (%in: f32, %init: f32) {
        %19 = arith.addf %in, %init : f32
        linalg.yield %19 : f32
      }
    %reinterpret_cast_5 = memref.reinterpret_cast %arg1 to offset: [%1], sizes: [8], strides: [1] : memref<*xf32> to memref<8xf32, strided<[1], offset: ?>>
    %subview_6 = memref.subview %alloc_4[0] [%8] [1] : memref<8xf32> to memref<?xf32, strided<[1]>>
    %subview_7 = memref.subview %reinterpret_cast_5[0] [%8] [1] : memref<8xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %subview_6, %subview_7 : memref<?xf32, strided<[1]>> to memref<?xf32, strided<[1], offset: ?>>
    return
  }
}
