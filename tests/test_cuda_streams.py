"""CUDA launches ordered with torch's stream on the GPU (`targets.cuda_streams`).

The module's part needs no GPU: every CUDA module gets an ordered twin of its function, whose
work IREE runs as the spin, the kernel's dispatches and the signal, in that order, in place, and
whose PTX assembles. The launch's part runs where torch and IREE both see a CUDA GPU."""
import re
import subprocess
from pathlib import Path

import pytest
import torch

from helpers import item_builds
from triton_iree import aot
from triton_iree.errors import LaunchError
from triton_iree.kernels import add_kernel, layer_norm_fwd_kernel, matmul_kernel, softmax_kernel
from triton_iree.targets import cuda_streams

ADD = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n_elements=i32"
LAYER_NORM = "X=*fp32,Y=*fp32,W=*fp32,B=*fp32,Mean=*fp32,Rstd=*fp32,stride=i32,N=i32,eps=fp32"
MATMUL = ("a_ptr=*fp16:16,b_ptr=*fp16:16,c_ptr=*fp32:16,M=i32,N=i32,K=i32,stride_am=i32,stride_ak=i32,"
          "stride_bk=i32,stride_bn=i32,stride_cm=i32,stride_cn=i32")
# (kernel, signature, constexprs, native): one dispatch; native mode; three outputs; a tensor-core
# program, whose full and masked tiles are two dispatches.
MODULES = {
    "add": (add_kernel, ADD, {"BLOCK_SIZE": 1024}, False),
    "add-native": (add_kernel, ADD, {"BLOCK_SIZE": 1024}, True),
    "layer-norm": (layer_norm_fwd_kernel, LAYER_NORM, {"BLOCK_SIZE": 1024}, False),
    "matmul-fp16": (matmul_kernel, MATMUL, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, False),
}


def _module(case: str) -> tuple[str, str]:
    fn, sig, constexprs, native = MODULES[case]
    k = aot.compile_kernel(fn, sig, constexprs, target="cuda", vmfb=False, native=native,
                           **({"arch": "sm_90"} if native else {}))
    return k.name, k.module


@pytest.mark.parametrize("case", MODULES)
def test_every_cuda_module_gets_an_ordered_twin(case):
    name, module = _module(case)
    text = cuda_streams.ordered_functions(module)
    twin = re.search(r'func\.func @"%s\$ordered"\((.*?)\) -> \((.*?)\)' % name, text)
    assert twin is not None
    params, results = twin.groups()
    # The kernel's arguments, then the flags (written in place, the last result) and the sequence number.
    outputs = results.count("tensor") - 1
    assert params.startswith("%a0: tensor<?x") and params.endswith(
        f"%flags: tensor<2xi64> {{iree.abi.output = {outputs} : index}}, %seq: i64")
    assert results.endswith("tensor<2xi64>")
    assert cuda_streams.ordered_functions(text) == text


def _stream_ir(tmp_path: Path, text: str) -> str:
    from iree.compiler.tools.binaries import find_tool
    src = tmp_path / "m.mlir"
    src.write_text(text)
    out = tmp_path / "m.stream.mlir"
    subprocess.run([find_tool("iree-compile"), str(src), "--iree-hal-target-backends=cuda",
                    "--iree-cuda-target=sm_80", "--iree-execution-model=async-external", "--compile-to=stream",
                    "-o", str(out)], check=True, capture_output=True, timeout=300)
    return out.read_text()


@pytest.mark.parametrize("case", MODULES)
def test_spin_kernel_and_signal_run_in_order_in_place(case, tmp_path):
    """IREE runs the twin as one command buffer: the spin, then the kernel's dispatches, then the
    signal, each after the one before (no concurrent region), on the caller's buffers (no copy,
    no clone, no allocation)."""
    name, module = _module(case)
    ir = _stream_ir(tmp_path, cuda_streams.ordered_functions(module))
    start = ir.index(f"util.func public @{name}$ordered(")
    body = ir[start:ir.index("util.return", start)]
    dispatches = re.findall(r"stream\.cmd\.dispatch @([\w$.]+)::@(\w+)", body)
    assert len(dispatches) >= 3
    assert dispatches[0][0] == dispatches[-1][0] == "triton_iree_stream_order"
    assert dispatches[0][1].startswith("wait_") and dispatches[-1][1].startswith("signal_")
    assert all(d[0] != "triton_iree_stream_order" for d in dispatches[1:-1])
    assert body.count("stream.cmd.execute") == 1
    for forbidden in ("stream.cmd.concurrent", "stream.cmd.copy", "stream.async.clone", "stream.resource.alloc"):
        assert forbidden not in body, forbidden


def test_ptx_assembles(tmp_path):
    """The spin and signal kernels are valid PTX for the GPUs IREE's CUDA target covers."""
    ptxas = Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip("Triton's wheel brings no ptxas here")
    text = cuda_streams._PTX_HEADER + cuda_streams._entry("wait_3", 3, cuda_streams._WAIT_BODY) + \
        cuda_streams._entry("signal_2", 2, cuda_streams._SIGNAL_BODY)
    (tmp_path / "k.ptx").write_text(text)
    for arch in ("sm_80", "sm_90"):
        r = subprocess.run([str(ptxas), f"--gpu-name={arch}", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.o")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


# --- on a GPU ---------------------------------------------------------------------------------

def _iree_cuda():
    if not torch.cuda.is_available():
        return False
    try:
        from triton_iree import runtime
        runtime.get_device("cuda")
        return True
    except Exception:
        return False


gpu = pytest.mark.skipif(not _iree_cuda(), reason="needs a CUDA GPU that torch and IREE's cuda driver both see")


@pytest.fixture(scope="module")
def add():
    launcher = aot.Launcher(aot.compile_kernel(add_kernel, ADD, {"BLOCK_SIZE": 1024}, target="cuda").vmfb,
                            "add_kernel", ADD, "cuda")
    x = torch.ones(1024, device="cuda")
    launcher(x, x, x, 1024, grid=(1,))   # the first launch loads the kernels, waiting on the host
    assert launcher.kernel.main.loaded and torch.equal(x, torch.full_like(x, 2.0))
    # The first ordered launch on a stream makes its flags, synchronizing the stream once: done here,
    # so that the tests' launches on torch's stream return while the stream is still busy.
    launcher(x, x, x, 1024, grid=(1,))
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 4.0))
    return launcher


def _busy():
    torch.cuda._sleep(100_000_000)   # keeps torch's stream busy for tens of milliseconds


@gpu
def test_launch_returns_before_its_kernel_ran_and_torch_sees_its_result(add):
    n = 1_000_003
    x, y, out = torch.rand(n, device="cuda"), torch.rand(n, device="cuda"), torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    _busy()
    x.add_(1.0)                       # queued behind the sleep: the launch must see it
    add(x, y, out, n, grid=((n + 1023) // 1024,))
    assert not torch.cuda.current_stream().query()   # returned while torch's stream is still busy
    got = out.clone()                 # queued on torch's stream after the launch: sees its result
    torch.testing.assert_close(got, x + y, rtol=0, atol=0)


@gpu
def test_back_to_back_launches_see_each_other(add):
    n = 4097
    x, acc = torch.rand(n, device="cuda"), torch.zeros(n, device="cuda")
    _busy()
    for _ in range(50):
        add(acc, x, acc, n, grid=((n + 1023) // 1024,))
    want = torch.zeros(n, device="cuda")
    for _ in range(50):
        want += x
    torch.testing.assert_close(acc, want, rtol=0, atol=0)


@gpu
def test_torch_writes_after_a_launch_wait_for_its_reads(add):
    n = 1 << 20
    x, y, out = torch.rand(n, device="cuda"), torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
    want = x + y
    _busy()
    add(x, y, out, n, grid=(n // 1024,))
    x.zero_()                         # must not run before the kernel read x
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@gpu
def test_launches_on_other_streams_follow_their_own_stream(add):
    n = 70_001
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    outs = []
    for s in (s1, s2, s1):
        with torch.cuda.stream(s):
            x, y, out = torch.rand(n, device="cuda"), torch.rand(n, device="cuda"), torch.zeros(n, device="cuda")
            _busy()
            add(x, y, out, n, grid=((n + 1023) // 1024,))
            outs.append((out.clone(), x + y))   # on stream s, after the launch
    torch.cuda.synchronize()
    for got, want in outs:
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@gpu
def test_a_repeated_launch_reuses_its_items_and_reads_the_tensors_it_is_given(add, monkeypatch):
    n = 5003
    grid = ((n + 1023) // 1024,)
    x, y, out = torch.rand(n, device="cuda"), torch.rand(n, device="cuda"), torch.zeros(n, device="cuda")
    add(x, y, out, n, grid=grid)
    built = item_builds(monkeypatch)
    for i in range(3):
        x.fill_(float(i))
        out.zero_()
        add(x, y, out, n, grid=grid)
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert built == []
    out.zero_()
    add(x, y, out, n - 1, grid=grid)                # another scalar: new items
    assert built == [1] and torch.equal(out[:-1], (x + y)[:-1]) and out[-1] == 0
    out.zero_()
    add(x[1:], y[1:], out[1:], n - 1, grid=grid)    # other offsets in the same storages
    assert built == [1, 1] and torch.equal(out[1:], (x + y)[1:]) and out[0] == 0
    with pytest.raises(LaunchError, match="is on cpu"):   # refused on the full path, as before
        add(x.cpu(), y, out, n, grid=grid)


@gpu
def test_new_tensors_in_the_freed_memory_of_old_ones_see_their_own_data(add):
    # Likely the same addresses each time (torch's caching allocator): the kept items are views
    # of the memory, and each launch reads and writes the tensors it is given.
    n = 3001
    for i in range(20):
        x, y, out = (torch.full((n,), float(i), device="cuda"), torch.ones(n, device="cuda"),
                     torch.zeros(n, device="cuda"))
        add(x, y, out, n, grid=((n + 1023) // 1024,))
        assert torch.equal(out, torch.full((n,), i + 1.0, device="cuda")), i
        del x, y, out


@gpu
def test_jit_launches_are_ordered_too():
    import triton
    import triton_iree
    triton_iree.activate(target="cuda")
    try:
        rows, cols = 37, 781
        x = torch.randn(rows, cols, device="cuda")
        out = torch.empty_like(x)
        _busy()
        x.mul_(2.0)
        softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), rows, cols, BLOCK_SIZE=1024)
        torch.testing.assert_close(out, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
    finally:
        triton.runtime.driver.reset_active()


@gpu
@pytest.mark.parametrize("native", [False, True])
def test_kernels_needing_a_synchronizing_load_do_not_hang(native):
    # CUDA loads a kernel at its first launch, which for these tensor-core kernels (128 x 128
    # tiles, dynamic shared memory) waits for the device to be idle: an ordered first launch hung.
    m, n, k = 1000, 777, 333
    fn, sig, constexprs, _ = MODULES["matmul-fp16"]
    arch = {"arch": "sm_%d%d" % torch.cuda.get_device_capability()} if native else {}
    launcher = aot.Launcher(aot.compile_kernel(fn, sig, constexprs, target="cuda", num_warps=8, native=native,
                                               **arch).vmfb, "matmul_kernel", sig, "cuda")
    a, b = torch.randn(m, k, device="cuda", dtype=torch.float16), torch.randn(k, n, device="cuda", dtype=torch.float16)
    want = a.float() @ b.float()
    for _ in range(3):   # the first, then ordered launches
        c = torch.zeros(m, n, device="cuda")
        _busy()
        launcher(a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), grid=((m + 127) // 128, (n + 127) // 128))
        torch.testing.assert_close(c.clone(), want, rtol=1e-2, atol=1e-2 * k ** 0.5)
