"""torch.compile with Inductor's Triton CPU backend (`cpu_backend = "triton"`) runs its kernels
through triton-iree: Inductor finds the backend under the name "cpu", and the results match
eager mode."""
import warnings

import pytest
import torch

torch_inductor = pytest.importorskip("torch._inductor.config")


@pytest.fixture
def inductor(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    patch = torch_inductor.patch(cpu_backend="triton", compile_threads=1)
    patch.__enter__()
    torch._dynamo.reset()
    torch.manual_seed(0)

    def compiled(model, *args):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = torch.compile(model)(*args)
        backend_warnings = [str(w.message) for w in caught if "backend" in str(w.message).lower()]
        assert not backend_warnings, backend_warnings
        return out

    yield compiled
    torch._dynamo.reset()
    patch.__exit__(None, None, None)


def test_mlp_with_gelu(inductor):
    model = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.GELU(), torch.nn.Linear(96, 40)).eval()
    x = torch.randn(37, 48)
    with torch.no_grad():
        torch.testing.assert_close(inductor(model, x), model(x), rtol=1e-4, atol=1e-5)


def test_layer_norm_then_softmax(inductor):
    norm = torch.nn.LayerNorm(200).eval()

    def f(x):
        return torch.softmax(norm(x) * 3.0, dim=-1)

    x = torch.randn(33, 200)
    with torch.no_grad():
        torch.testing.assert_close(inductor(f, x), f(x), rtol=1e-4, atol=1e-6)


def test_cumsum(inductor):
    def f(x):
        return torch.cumsum(x, dim=1) * 0.5

    x = torch.randn(19, 300)
    torch.testing.assert_close(inductor(f, x), f(x), rtol=1e-4, atol=1e-4)


def test_embedding_lookup(inductor):
    emb = torch.nn.Embedding(1000, 64).eval()

    def f(idx):
        return emb(idx).sum(dim=1)

    idx = torch.randint(0, 1000, (29, 7))
    with torch.no_grad():
        torch.testing.assert_close(inductor(f, idx), f(idx), rtol=1e-5, atol=1e-5)


def test_layer_norm_saving_mean_and_rstd(inductor, monkeypatch):
    """With grad, Inductor's kernel stores the output, mean and rstd, several rows per program
    (iree-compile did not finish it: `test_row_stores`)."""
    monkeypatch.setenv("TRITON_IREE_COMPILE_TIMEOUT", "120")
    norm = torch.nn.LayerNorm(128)
    x = torch.randn(37, 128, requires_grad=True)
    torch.testing.assert_close(inductor(norm, x), norm(x), rtol=1e-5, atol=1e-5)


def test_kernels_run_without_bounds_checks(inductor, monkeypatch):
    """Inductor compiles with Triton's debug switch (for its indexing asserts); that keeps the
    asserts but does not check bounds: a pointwise kernel launches without checked mode."""
    from triton_iree import checks
    from triton_iree.backend.compiler import IreeBackend
    options, launches = [], []
    parse, launch = IreeBackend.parse_options, checks.launch

    def parse_options(self, opts):
        options.append(parse(self, opts))
        return options[-1]

    def record(kernel, plans, values, grid, kernel_checks, shared=None):
        launches.append(kernel_checks)
        return launch(kernel, plans, values, grid, kernel_checks, shared)

    monkeypatch.setattr(IreeBackend, "parse_options", parse_options)
    monkeypatch.setattr(checks, "launch", record)
    x = torch.randn(37, 301)[:, 1:300:2]
    torch.testing.assert_close(inductor(lambda x: torch.relu(x) * 2 + 1, x), torch.relu(x) * 2 + 1)
    assert any(o.debug for o in options) and not any(o.check_bounds for o in options)
    assert launches and all(c is None for c in launches)
