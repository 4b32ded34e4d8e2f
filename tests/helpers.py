"""Small helpers shared by the tests: TTIR of corpus kernels, and the pipeline up to the module."""
from triton_iree import analysis, emit, frontend, reader

import kernels as K

ADD_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", out_ptr="*fp32", n_elements="i32", BLOCK_SIZE="constexpr")
MATMUL_SIG = dict(a_ptr="*fp32", b_ptr="*fp32", c_ptr="*fp32", M="i32", N="i32", K="i32",
                  stride_am="i32", stride_ak="constexpr", stride_bk="i32", stride_bn="constexpr",
                  stride_cm="i32", stride_cn="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr",
                  BLOCK_K="constexpr")
MATMUL_CONSTS = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
GATHER_SIG = dict(x_ptr="*fp32", idx_ptr="*i32", out_ptr="*fp32", n="i32", BLOCK="constexpr")


def tile_program(fn, sig, consts):
    return reader.read_ttir(frontend.kernel_ttir(fn, sig, consts))


def add_program(block=1024):
    return tile_program(K.add_kernel, ADD_SIG, dict(BLOCK_SIZE=block))


def facts_and_module(kernel):
    facts = analysis.analyze(kernel)
    return facts, emit.emit_module(kernel, facts)
