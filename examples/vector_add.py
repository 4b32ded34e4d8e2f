"""Vector add, as in Triton's first tutorial: plain @triton.jit, kernel[grid](...), torch tensors.

With triton-iree installed and no GPU present, Triton's active driver is IREE's llvm-cpu.
"""
import torch
import triton

from kernels import add_kernel


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    output = torch.empty_like(x)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


if __name__ == "__main__":
    torch.manual_seed(0)
    size = 98432
    x = torch.rand(size)
    y = torch.rand(size)
    output_torch = x + y
    output_triton = add(x, y)
    err = torch.max(torch.abs(output_torch - output_triton)).item()
    print(f"vector_add: n={size}, max error vs torch = {err}")
    raise SystemExit(0 if err == 0.0 else 1)
