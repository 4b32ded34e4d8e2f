"""The emitter moved to `triton_iree.lowering` (one module per concern). This name remains only
until the tests that import it move too."""
from .lowering import CpuTiling, EmitOptions, Emitter, cpu_options, emit_module, lower, verify  # noqa: F401
