module {
  func.func @row_max_kernel(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xf32> {tt.divisibility = 16 : i32}, %arg2: i32, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32) {
    %c16 = arith.constant 16 : index
    %c128 = arith.constant 128 : index
    %c16_i32 = arith.constant 16 : i32
    %cst = arith.constant 0xFF800000 : f32
    %0 = arith.muli %arg8, %c16_i32 : i32
    %1 = arith.index_cast %0 : i32 to index
    %2 = arith.index_cast %arg4 : i32 to index
    %3 = arith.muli %1, %2 : index
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%3], sizes: [16, 128], strides: [%2, 1] : memref<*xf32> to memref<16x128xf32, strided<[?, 1], offset: ?>>
    %alloc = memref.alloc() : memref<16x128xf32>
    %4 = arith.index_cast %arg2 : i32 to index
    %5 = arith.addi %1, %c16 : index
    %6 = arith.minsi %5, %4 : index
    %7 = arith.maxsi %6, %1 : index
    %8 = arith.subi %7, %1 : index
    %9 = arith.index_cast %arg3 : i32 to index
    %10 = arith.minsi %9, %c128 : index
    %11 = arith.cmpi slt, %8, %c16 : index
    %12 = arith.cmpi slt, %10, %c128 : index
    scf.if %13 {
      linalg.fill ins(%cst : f32) outs(%alloc : memref<16x128xf32>)
    }
    %subview = memref.subview %reinterpret_cast[0, 0] [%8, %10] [1, 1] : memref<16x128xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1], offset: ?>>
    %subview_0 = memref.subview %alloc[0, 0] [%8, %10] [1, 1] : memref<16x128xf32> to memref<?x?xf32, strided<[128, 1]>>
    memref.copy %subview, %subview_0 : memref<?x?xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[128, 1]>>
    %alloc_1 = memref.alloc() : memref<16xf32>
    linalg.fill ins(%cst : f32) outs(%alloc_1 : memref<16xf32>)
    linalg.reduce ins(%alloc : memref<16x128xf32>) outs(%alloc_1 : memref<16xf32>) dimensions = [1{
        %14 = arith.maximumf %in, %init : f32
        linalg.yield %14 : f32
      }
    %reinterpret_cast_2 = memref.reinterpret_cast %arg1 to offset: [%1], sizes: [16], strides: [1] : memref<*xf32> to memref<16xf32, strided<[1], offset: ?>>
    %subview_3 = memref.subview %alloc_1[0] [%8] [1] : memref<16xf32> to memref<?xf32, strided<[1]>>
    %subview_4 = memref.subview %reinterpret_cast_2[0] [%8] [1] : memref<16xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %subview_3, %subview_4 : memref<?xf32, strided<[1]>> to memref<?xf32, strided<[1], offset: ?>>
    memref.dealloc %alloc : memref<16x128xf32>
    memref.dealloc %alloc_1 : memref<16xf32>
    return
  }
}
