"""The Triton backend plugin (entry point ``triton.backends: iree = triton_iree.backend``).

Triton imports ``compiler`` and ``driver`` from this package; each holds exactly one concrete
``BaseBackend`` / ``DriverBase`` subclass.
"""

# Importing triton first lets triton's backend discovery import this package's modules
# completely, even when user code imports triton_iree.backend.compiler before triton.
import triton  # noqa: E402,F401
