"""The kernel corpus, importable as `kernels` from examples/ (the tests and benchmarks put this
directory on sys.path). The kernels live in the package, `triton_iree.kernels`, so that
`triton-iree bench` can run them from an installed copy; every name is re-exported here."""
from triton_iree import kernels as _corpus

globals().update({k: v for k, v in vars(_corpus).items() if not k.startswith("__")})
