"""One error hierarchy for the whole pipeline.

Every error names the kernel and, where one is known, the kernel's source location, so that
a user can go straight to the line that needs changing.
"""
from __future__ import annotations


class TritonIreeError(Exception):
    """Base class of every error triton-iree raises on purpose."""

    def __init__(self, message: str, *, kernel: str | None = None, loc: str | None = None):
        self.message = message
        self.kernel = kernel
        self.loc = loc
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.kernel:
            where.append(f"kernel '{self.kernel}'")
        if self.loc:
            where.append(f"at {self.loc}")
        return f"{self.message} ({', '.join(where)})" if where else self.message

class UnsupportedError(TritonIreeError):
    """The kernel uses an op or a form that triton-iree cannot lower correctly (yet)."""


class CompileError(TritonIreeError):
    """iree-compile rejected the module triton-iree produced; carries the command and diagnostics."""


class LaunchError(TritonIreeError):
    """A launch failed: bad arguments, or the IREE runtime reported an error."""


class InputError(TritonIreeError):
    """Malformed input IR given to `prepare` / `compile`."""


class DeviceError(TritonIreeError):
    """Checked mode (Triton's debug switch) found an out-of-bounds access or a failed
    `tl.device_assert` in a program of a launch.

    `program_id` is (x, y, z); for an access, `access` is 'load', 'store' or 'atomic', `param` the
    argument's name and `offset` the failing element's offset from the argument's pointer;
    for an assertion, `access`, `param` and `offset` are None and `assert_message` is its message.
    """

    def __init__(self, message: str, *, kernel: str, loc: str, program_id: tuple[int, int, int],
                 access: str | None = None, param: str | None = None, offset: int | None = None,
                 assert_message: str | None = None):
        self.program_id, self.access, self.param, self.offset = program_id, access, param, offset
        self.assert_message = assert_message
        super().__init__(message, kernel=kernel, loc=loc)
