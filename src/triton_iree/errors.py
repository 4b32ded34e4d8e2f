"""One error hierarchy for the whole pipeline.

Every error names the kernel and, where one is known, the kernel's source location, so that
a user can go straight to the line that needs changing.
"""
from __future__ import annotations


# The Triton language construct behind each TTIR op, for messages in the user's terms.
PYTHON_NAMES = {
    "tt.scan": "tl.associative_scan / tl.cumsum / tl.cumprod", "tt.reduce": "tl.reduce (tl.sum, tl.max, ...)",
    "tt.atomic_rmw": "tl.atomic_add / tl.atomic_max / ...", "tt.atomic_cas": "tl.atomic_cas",
    "tt.histogram": "tl.histogram", "tt.gather": "tl.gather", "tt.map_elementwise": "tl.map_elementwise",
    "tt.join": "tl.join", "tt.split": "tl.split", "tt.cat": "tl.cat", "tt.unsplat": "tl.item",
    "tt.dot": "tl.dot", "tt.dot_scaled": "tl.dot_scaled", "tt.fp_to_fp": "tensor.to (fp8)",
    "tt.print": "tl.device_print", "tt.assert": "tl.device_assert", "tt.call": "a @triton.jit function call",
    "tt.elementwise_inline_asm": "tl.inline_asm_elementwise", "tt.extern_elementwise": "tl.extra.libdevice",
    "tt.int_to_ptr": "tensor.to (int to pointer)", "tt.ptr_to_int": "tensor.to (pointer to int)",
    "tt.bitcast": "tensor.to(bitcast=True)", "tt.make_tensor_descriptor": "tl.make_tensor_descriptor",
    "tt.descriptor_load": "tensor descriptor load", "tt.descriptor_store": "tensor descriptor store",
    "tt.make_tensor_ptr": "tl.make_block_ptr", "tt.advance": "tl.advance", "tt.trans": "tl.trans / tl.permute",
    "tt.reshape": "tl.reshape", "tt.broadcast": "tl.broadcast_to", "tt.expand_dims": "tl.expand_dims",
    "tt.clampf": "tl.clamp", "tt.precise_sqrt": "tl.sqrt_rn", "tt.precise_divf": "tl.div_rn",
    "tt.mulhiui": "tl.umulhi", "scf.for": "a for loop", "scf.while": "a while loop",
    "cf.cond_br": "an early return",
    "math.absf": "tl.abs", "arith.remf": "% on floats", "arith.maxnumf": "tl.maximum",
    "arith.minnumf": "tl.minimum",
}
# The construct behind each op of the tile program (tile.py), by class name.
TILE_OP_NAMES = {
    "If": "an if", "For": "a for loop", "While": "a while loop", "Load": "tl.load", "Store": "tl.store",
    "Atomic": "an atomic (tl.atomic_add, ...)", "Dot": "tl.dot", "Reduce": "tl.reduce (tl.sum, tl.max, ...)",
    "Scan": "tl.associative_scan (tl.cumsum, ...)", "Gather": "tl.gather", "Histogram": "tl.histogram",
    "MapElementwise": "tl.map_elementwise", "Join": "tl.join", "Split": "tl.split", "Cat": "tl.cat",
    "Trans": "tl.trans / tl.permute", "Reshape": "tl.reshape", "Broadcast": "tl.broadcast_to",
    "ExpandDims": "tl.expand_dims", "Splat": "a tensor of a scalar (tl.full, broadcasting)",
    "MakeRange": "tl.arange", "ProgramId": "tl.program_id", "NumPrograms": "tl.num_programs",
    "Unsplat": "tl.item", "Assert": "tl.device_assert",
}


def tile_op_name(op) -> str:
    """The Triton construct a tile-program op comes from: 'tl.load', or for an arith / math op
    'tl.exp (math.exp)'."""
    opname = getattr(op, "opname", None)
    if opname is not None:
        return python_name(opname)
    return TILE_OP_NAMES.get(op.name, op.name)


def python_name(ttir_op: str) -> str:
    """The construct a TTIR op comes from, with the op: 'tl.gather (tt.gather)'."""
    name = PYTHON_NAMES.get(ttir_op)
    if name is None and ttir_op.startswith("math."):
        name = f"tl.{ttir_op[5:]}"   # tl's math functions are named after their ops
    return f"{name} ({ttir_op})" if name else ttir_op


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


def invalid_module(what: str, text: str, error: Exception, kernel: str) -> CompileError:
    """The error for a module of triton-iree's that MLIR's verifier rejected (a bug of ours): it
    carries the module's text (`module_text`), which the caller dumps."""
    err = CompileError(f"triton-iree made an invalid {what} (a bug; please report it with the module from "
                       f"TRITON_IREE_DUMP_DIR): {error}", kernel=kernel)
    err.module_text = text
    return err


class ResourceLimitError(CompileError):
    """The kernel's tiles need more of a target's resource than it has (the stack of one program
    on the CPU, workgroup memory on a GPU): `needed` and `limit` in bytes. Smaller block sizes
    make smaller tiles."""

    def __init__(self, message: str, *, needed: int, limit: int, kernel: str | None = None,
                 loc: str | None = None):
        self.needed, self.limit = needed, limit
        super().__init__(message, kernel=kernel, loc=loc)


class LaunchError(TritonIreeError):
    """A launch failed: bad arguments, or the IREE runtime reported an error."""


class InputError(TritonIreeError):
    """Malformed input IR given to `prepare` / `compile`, or a kernel whose index arithmetic is invalid."""


class DeviceError(TritonIreeError):
    """Checked mode (bounds checks, or Triton's debug switch for asserts) found an out-of-bounds
    access or a failed `tl.device_assert` in a program of a launch.

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
