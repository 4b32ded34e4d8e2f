"""Asynchronous GPU launches (`streams`): CUDA modules are compiled in IREE's asynchronous model
(checked here without a GPU); on a CUDA GPU, a launch returns while torch's stream is still busy
and stays in that stream's order both ways, without a synchronize in between."""
import iree.runtime as rt
import pytest
import torch

from triton_iree import aot, streams
from triton_iree.kernels import add_kernel, inplace_rmw_kernel

ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n_elements=i32"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


_INSTANCE = rt.VmInstance()   # outlives the modules loaded into it
_MODULES = []                 # outlive their functions


def _function(vmfb: bytes, name: str):
    _MODULES.append(rt.VmModule.copy_buffer(_INSTANCE, vmfb))
    return _MODULES[-1].lookup_function(name)


@pytest.mark.parametrize("native", [False, True], ids=["codegen", "native"])
def test_cuda_modules_are_asynchronous(native):
    k = aot.compile_kernel(add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024}, target="cuda", native=native)
    assert streams.is_async(_function(k.vmfb, "add_kernel"))


def test_cpu_modules_stay_synchronous():
    k = aot.compile_kernel(add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    assert not streams.is_async(_function(k.vmfb, "add_kernel"))


@pytest.fixture(scope="module", params=[False, True], ids=["codegen", "native"])
def cuda_add(request):
    k = aot.compile_kernel(add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024}, target="cuda", native=request.param,
                           arch=None if not request.param else
                           "sm_%d%d" % torch.cuda.get_device_capability())
    return aot.Launcher(k.vmfb, "add_kernel", ADD_SIG, "cuda")


@needs_cuda
def test_launch_returns_early_and_keeps_torchs_stream_order(cuda_add):
    n = (1 << 20) + 3
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n + 64,), -7.0, device="cuda")
    expected = ((x + 1) + y) * 2
    torch.cuda.synchronize()
    torch.cuda._sleep(1 << 30)            # keeps torch's stream busy for a while (~0.5 s)
    x.add_(1)                             # queued behind the sleep: the kernel must see it
    cuda_add(x, y, out, n, grid=((n + 1023) // 1024,))
    busy = not torch.cuda.current_stream().query()
    z = out[:n] * 2                       # queued after the launch: must see its results
    torch.cuda.synchronize()
    assert busy, "the launch waited for torch's stream instead of queueing behind it"
    torch.testing.assert_close(z, expected, rtol=0, atol=0)
    assert bool((out[n:] == -7.0).all()), "the kernel wrote past n"


@needs_cuda
def test_back_to_back_launches_run_in_order():
    sig = "x_ptr=*fp32,n=i32"
    k = aot.compile_kernel(inplace_rmw_kernel, sig, {"BLOCK": 256}, target="cuda")
    launch = aot.Launcher(k.vmfb, "inplace_rmw_kernel", sig, "cuda")
    n = 1000
    x = torch.zeros(n, device="cuda")
    for _ in range(100):
        launch(x, n, grid=((n + 255) // 256,))   # x = 2x + 1
        x.mul_(0.5)                              # a torch op between each pair of launches
    torch.testing.assert_close(x, torch.full((n,), 50.0, device="cuda"), rtol=0, atol=0)
