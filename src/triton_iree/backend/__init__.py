"""The Triton backend plugin (entry point ``triton.backends: iree = triton_iree.backend``).

Triton imports ``compiler`` and ``driver`` from this package; each holds exactly one concrete
``BaseBackend`` / ``DriverBase`` subclass.
"""
