#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0, 0)>
#map2 = affine_map<(d0, d1) -> (d1)>
module {
  func.func @softmax_argmax_kernel(%arg0: memref<*xf32> {tt.divisibility = 16 : i32}, %arg1: memref<*xf32> {tt.divisibility = 16 : i32}, %arg2: memref<*xi32> {tt.divisibility = 16 : i32}, %arg3: i32, %arg4: i32, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: i32, %arg10: i32, %arg11: i32, %arg12: i32) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c128 = arith.constant 128 : index
    %c4_i32 = arith.constant 4 : i32
    %c-1_i32 = arith.constant -1 : i32
    %cst = arith.constant 0xFF800000 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    %0 = arith.muli %arg10, %c4_i32 : i32
    %1 = arith.index_cast %0 : i32 to index
    %2 = arith.index_cast %arg5 : i32 to index
    %3 = arith.muli %1, %2 : index
    %reinterpret_cast = memref.reinterpret_cast %arg0 to offset: [%3], sizes: [4, 128], strides: [%2, 1] : memref<*xf32> to memref<4x128xf32, strided<[?, 1], offset: ?>>
    %4 = arith.index_cast %arg3 : i32 to index
    %5 = arith.subi %4, %1 : index
    %6 = arith.minsi %5, %c4 : index
    %7 = arith.maxsi %6, %c0 : index
    %8 = arith.index_cast %arg4 : i32 to index
    %9 = arith.minsi %8, %c128 : index
    %alloc = memref.alloc() : memref<4x128xf32>
    %10 = arith.cmpi slt, %7, %c4 : index
    %11 = arith.cmpi slt, %9, %c128 : index
    %12 = arith.ori %10, %11 : i1
    scf.if %12 {
      linalg.fill ins(%cst : f32) outs(%alloc : memref<4x128xf32>)
    }
    %subview = memref.subview %reinterpret_cast[0, 0] [%7, %9] [1, 1] : memref<4x128xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1], offset: ?>>
    %subview_1 = memref.subview %alloc[0, 0] [%7, %9] [1, 1] : memref<4x128xf32> to memref<?x?xf32, strided<[128, 1]>>
    memref.copy %subview, %subview_1 : memref<?x?xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[128, 1]>>
    %13 = bufferization.to_tensor %alloc restrict writable : memref<4x128xf32> to tensor<4x128xf32>
    %14 = tensor.empty() : tensor<128x4xf32>
    %transposed = linalg.transpose ins(%13 : tensor<4x128xf32>) outs(%14 : tensor<128x4xf32>) permutation = [1, 0]
    %15 = tensor.empty() : tensor<4xf32>
    %16 = linalg.fill ins(%cst : f32) outs(%15 : tensor<4xf32>) -> tensor<4xf32>
    %reduced = linalg.reduce ins(%transposed : tensor<128x4xf32>) outs(%16 : tensor<4xf32>) dimensions = [0]
      (%in: f32, %init: f32) {
        %40 = arith.maxnumf %in, %init : f32
        linalg.yield %40 : f32
      }
    %expanded = tensor.expand_shape %reduced [[0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
    %17 = tensor.empty() : tensor<4x128xf32>
    %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%13, %expanded : tensor<4x128xf32>, tensor<4x1xf32>) outs(%17 : tensor<4x128xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %40 = arith.subf %in, %in_2 : f32
      %41 = math.exp %40 : f32
      linalg.yield %41 : f32
    } -> tensor<4x128xf32>
    %19 = linalg.fill ins(%cst_0 : f32) outs(%15 : tensor<4xf32>) -> tensor<4xf32>
    %reduced_3 = linalg.reduce ins(%18 : tensor<4x128xf32>) outs(%19 : tensor<4xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %40 = arith.addf %in, %init : f32
        linalg.yield %40 : f32
      }
    %broadcasted = linalg.broadcast ins(%reduced_3 : tensor<4xf32>) outs(%17 : tensor<4x128xf32>) dimensions = [1]
    %20 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%18, %broadcasted : tensor<4x128xf32>, tensor<4x128xf32>) outs(%18 : tensor<4x128xf32>) {
      linalg.yield %41 : i32
      %40 = arith.divf %in, %in_2 : f32
      linalg.yield %40 : f32
    } -> tensor<4x128xf32>
    %21 = arith.index_cast %arg6 : i32 to index
    %22 = arith.muli %1, %21 : index
    %reinterpret_cast_4 = memref.reinterpret_cast %arg1 to offset: [%22], sizes: [4, 128], strides: [%21, 1] : memref<*xf32> to memref<4x128xf32, strided<[?, 1], offset: ?>>
    %extracted_slice = tensor.extract_slice %20[0, 0] [%7, %9] [1, 1] : tensor<4x128xf32> to tensor<?x?xf32>
    %subview_5 = memref.subview %reinterpret_cast_4[0, 0] [%7, %9] [1, 1] : memref<4x128xf32, strided<[?, 1], offset: ?>> to memref<?x?xf32, strided<[?, 1], offset: ?>>
    bufferization.materialize_in_destination %extracted_slice in writable %subview_5 : (tensor<?x?xf32>, memref<?x?xf32, strided<[?, 1], offset: ?>>) -> ()
    %23 = tensor.empty() : tensor<128xi32>
    %24 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%23 : tensor<128xi32>) {
    ^bb0(%out: i32):
      %40 = linalg.index 0 : index
      %41 = arith.index_cast %40 : index to i32
    ^bb0(%in: f32, %in_2: f32, %out: f32):
    } -> tensor<128xi32>
    %25 = tensor.empty() : tensor<4x128xi32>
    %26 = linalg.generic {indexing_maps = [#map2, #map], iterator_types = ["parallel", "parallel"]} ins(%24 : tensor<128xi32>) outs(%25 : tensor<4x128xi32>) {
    ^bb0(%in: i32, %out: i32):
      linalg.yield %in : i32
    } -> tensor<4x128xi32>
    %27 = tensor.empty() : tensor<4xi32>
    %28 = linalg.fill ins(%c-1_i32 : i32) outs(%27 : tensor<4xi32>) -> tensor<4xi32>
    %29 = linalg.fill ins(%cst : f32) outs(%15 : tensor<4xf32>) -> tensor<4xf32>
    %reduced_6:2 = linalg.reduce ins(%13, %26 : tensor<4x128xf32>, tensor<4x128xi32>) outs(%29, %28 : tensor<4xf32>, tensor<4xi32>) dimensions = [1]
      (%in: f32, %in_7: i32, %init: f32, %init_8: i32) {
        %40 = arith.cmpf ogt, %in, %init : f32
        %41 = arith.cmpf oeq, %in, %init : f32
        %42 = arith.cmpi slt, %in_7, %init_8 : i32
        %43 = arith.andi %41, %42 : i1
        %44 = arith.ori %40, %43 : i1
        %45 = arith.select %44, %in, %init : f32
        %4arith.select %44, %in_7, %init_8 : i32
        linalg.yield %45, %46 : f32, i32
      }
    %reinterpret_cast_9 = memref.reinterpret_cast %arg2 to offset: [%1], sizes: [4], strides: [1] : memref<*xi32> to memref<4xi32, strided<[1], offset: ?>>
    %extracted_slice_10 = tensor.extract_slice %reduced_6#1[0] [%7] [1] : tensor<4xi32> to tensor<?xi32>
    %subview_11 = memref.subview %reinterpret_cast_9[0] [%7] [1] : memref<4xi32, strided<[1], offset: ?>> to memref<?xi32, strided<[1], offset: ?>>
    bufferization.materialize_in_destination %extracted_slice_10 in writable %subview_11 : (tensor<?xi32>, memref<?xi32, strided<[1], offset: ?>>) -> ()
    return
  }
}
