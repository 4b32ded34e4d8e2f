module {
  func.func @block_sum_kernel(%arg0: memref<*xi32> {tt.divisibility = 16 : i32}, %arg1: memref<*xi32> {tt.divisibility = 16 : i32}, %arg2: memref<*xi32> {tt.divisibility = 16 : i32}, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32) {
    %c0 = arith.constant 0 : index
    %c256 = arith.constant 256 : index
    %c256_i32 = arith.constant 256 : i32
    %c0_i32 = arith.constant 0 : i32
    %0 = arith.muli %arg7, %c256_i32 : i32
    %1 = arith.index_cast %0 : i32 to index
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%1], sizes: [256], strides: [1] : memref<*xi32> to memref<256xi32, strided<[1], offset: ?>>
    %alloc = memref.alloc() : memref<256xi32>
    %2 = arith.addi %1, %c256 : index
    %3 = arith.index_cast %arg3 : i32 to index
    %4 = arith.minsi %2, %3 : index
    %5 = arith.maxsi %4, %1 : index
    %6 = arith.subi %5, %1 : index
    %7 = arith.cmpi slt, %6, %c256 : index
    scf.if %7 {
      linalg.fill ins(%c0_i32 : i32) outs(%alloc : memref<256xi32>)
    }
    %subview = memref.subview %reinterpret_cast[0] [%6] [1] : memref<256xi32, strided<[1], offset: ?>> to memref<?xi32, strided<[1], offset: ?>>
    %subview_0 = memref.subview %alloc[0] [%6] [1] : memref<256xi32> to memref<?xi32, strided<[1]>>
    memref.copy %subview, %subview_0 : memref<?xi32, strided<[1], offset: ?>> to memref<?xi32, strided<[1]>>
    %8 = bufferization.to_tensor %alloc restrict writable : memref<256xi32> to tensor<256xi32>
    %9 = bufferization.alloc_tensor() : tensor<i32>
    %inserted = tensor.insert %c0_i32 into %9[] : tensor<i32>
    %reduced = linalg.reduce ins(%8 : tensor<256xi32>) outs(%inserted : tensor<i32>) dimensions = [0]
      (%in: i32, %init: i32) {
        %14 = arith.addi %in, %init : i32
        linalg.yield %14 : i32
      }
    %extracted = tensor.extract %reduced[] : tensor<i32>
    %reinterpret_cast_1 = memref.reinterpret_cast %arg1 to offset: [0], sizes: [1], strides: [1] : memref<*xi32> to memref<1xi32, strided<[1]>>
    %10 = memref.load %reinterpret_cast_1[%c0] : memref<1xi32, strided<[1]>>
    %11 = arith.muli %extracted, %10 : i32
    %12 = arith.index_cast %arg7 : i32 to index
    %reinterpret_cast_2 = memref.reinterpret_cast %arg2 to offset: [%12], sizes: [1], strides: [1] : memref<*xi32> to memref<1xi32, strided<[1], offset: ?>>
    memref.store %11, %reinterpret_cast_2[%c0] : memref<1xi32, strided<[1], offset: ?>>
    return
  }
}
