"""Launches on CUDA ordered with torch's stream on the GPU, without the host waiting.

IREE's CUDA driver runs a module's work on a stream of its own and offers no way to order it with
another stream: it neither takes an external stream nor imports or exports CUDA events as
semaphore timepoints (IREE 3.13: "timepoint import/export is not yet implemented"). So the two
streams meet through two 64-bit flags in device memory, one pair per torch stream:

- `ordered_functions` gives every public function `@k` of a CUDA module a twin `@k$ordered`
  (`abi.ordered_name`) that takes, after k's arguments, the flags (a `tensor<2xi64>`, written in
  place) and the launch's sequence number `seq` (i64). It runs three dispatches in stream order:
  a one-thread kernel that spins until `flags[0] >= seq`, k's own work, and a one-thread kernel
  that writes `flags[1] = seq` after a system-wide fence. The spin ties every buffer of k, and the
  signal every buffer k returns, so IREE orders all of k's dispatches between them (in place: IREE
  inserts no copies for this, its stream IR shows).
- The module is compiled with IREE's asynchronous execution model (`--iree-execution-model=
  async-external`): its functions take a wait and a signal fence and return once the work is
  queued.
- `StreamOrder.launch` queues, on torch's current stream, `flags[0] = seq` (after everything
  torch queued before the launch) and, once IREE took the launch, a wait until `flags[1] >= seq`
  (before anything torch queues after it): CUDA's stream memory operations
  (`cuStreamWriteValue64`, `cuStreamWaitValue64`).

The caller's thread never waits for the GPU, torch's work before a launch is finished before its
kernel starts, and torch's work after it starts only once the kernel has finished, as with
Triton's own launches on torch's stream.

The flags' values only grow: the comparisons are of signed 64-bit differences, as CUDA's
`CU_STREAM_WAIT_VALUE_GEQ` makes them.
"""
from __future__ import annotations

import ctypes

from ..abi import ordered_name
from ..errors import CompileError, LaunchError

# The spin kernel's PTX: bindings first (each a .u64 pointer: the flags, then every buffer the
# ordered function ties), then the sequence number as two 32-bit push constants, as IREE's CUDA
# runtime passes them. `nanosleep` (sm_70 and later) keeps the spinning thread off the memory system.
_PTX_HEADER = ".version 7.0\n.target sm_70\n.address_size 64\n"
_WAIT_BODY = """\
$L_spin:
\tld.volatile.global.u64 %rd3, [%rd1];
\tsub.s64 %rd4, %rd3, %rd2;
\tsetp.ge.s64 %p1, %rd4, 0;
\t@%p1 bra.uni $L_done;
\tnanosleep.u32 256;
\tbra.uni $L_spin;
$L_done:
\tfence.acq_rel.sys;"""
_SIGNAL_BODY = """\
\tfence.sc.sys;
\tst.volatile.global.u64 [%rd1+8], %rd2;"""


def _entry(name: str, bindings: int, body: str) -> str:
    params = ",\n\t".join([f".param .u64 {name}_b{i}" for i in range(bindings)]
                          + [f".param .u32 {name}_lo", f".param .u32 {name}_hi"])
    return (f".visible .entry {name}(\n\t{params}\n)\n{{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<3>;\n"
            f"\t.reg .b64 %rd<5>;\n\tld.param.u64 %rd1, [{name}_b0];\n\tcvta.to.global.u64 %rd1, %rd1;\n"
            f"\tld.param.u32 %r1, [{name}_lo];\n\tld.param.u32 %r2, [{name}_hi];\n"
            f"\tmov.b64 %rd2, {{%r1, %r2}};\n{body}\n\tret;\n}}\n")


def _export(name: str, ordinal: int, bindings: int) -> str:
    layout = ", ".join(["#hal.pipeline.binding<storage_buffer>"] * bindings)
    return (f'    "hal.executable.export"() <{{sym_name = "{name}", sym_visibility = "public", ordinal = '
            f"{ordinal} : index, layout = #hal.pipeline.layout<constants = 2, bindings = [{layout}]>, "
            f"workgroup_size = [1 : index, 1 : index, 1 : index]}}> ({{\n"
            f"    ^bb0(%device: !hal.device):\n      %c1 = arith.constant 1 : index\n"
            f"      hal.return %c1, %c1, %c1 : index, index, index\n    }}, {{}}) : () -> ()\n")


EXECUTABLE = "triton_iree_stream_order"


def _executable(counts: list[tuple[str, int]]) -> str:
    """The executable with one spin or signal export per (name, binding count)."""
    ptx = _PTX_HEADER + "".join(_entry(n, b, _WAIT_BODY if n.startswith("wait") else _SIGNAL_BODY)
                                for n, b in counts)
    data = ptx.encode()
    # Generic form: IREE 3.13 cannot parse `objects` in this op's custom form.
    return (f'  "hal.executable.source"() <{{sym_name = "{EXECUTABLE}", sym_visibility = "private", objects = '
            f'#hal.executable.objects<{{#hal.executable.target<"cuda", "cuda-nvptx-fb"> = [#hal.executable.object<'
            f'{{data = dense<"0x{data.hex().upper()}"> : vector<{len(data)}xi8>}}>]}}>}}> ({{\n'
            + "".join(_export(n, i, b) for i, (n, b) in enumerate(counts))
            + '    "hal.executable.source_end"() : () -> ()\n  }) : () -> ()\n')


def _wrapper(func, counts: dict[str, int]) -> str:
    """The ordered twin of `func`; adds the spin and signal exports it dispatches to `counts`."""
    from iree.compiler import ir
    name = ir.StringAttr(func.attributes["sym_name"]).value
    ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    inputs, results = [str(ty) for ty in ftype.inputs], [str(ty) for ty in ftype.results]
    arg_attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"])) if "arg_attrs" in func.attributes else []
    arg_attrs += [None] * (len(inputs) - len(arg_attrs))
    tied: dict[int, int] = {}   # result number -> the argument it is written into
    for i, a in enumerate(arg_attrs):
        if a is not None and "iree.abi.output" in ir.DictAttr(a):
            tied[ir.IntegerAttr(ir.DictAttr(a)["iree.abi.output"]).value] = i
    if sorted(tied) != list(range(len(results))):
        raise CompileError(f"CUDA stream order: the results of '{name}' are not all tied to its arguments "
                           f"(a bug of triton-iree's)", kernel=name)
    flags = "tensor<2xi64>"
    lines = ["%c0 = arith.constant 0 : index", "%c32 = arith.constant 32 : i64",
             "%lo = arith.trunci %seq : i64 to i32", "%hi64 = arith.shrui %seq, %c32 : i64",
             "%hi = arith.trunci %hi64 : i64 to i32"]
    sizes = {}   # argument -> its dynamic size, as a dispatch's type writes it
    for i, ty in enumerate(inputs):
        if ty.startswith("tensor<?"):
            sizes[i] = f"{{%d{i}}}"
            lines.append(f"%d{i} = tensor.dim %a{i}, %c0 : {ty}")

    def dispatch(result: str, export: str, flags_in: str, values: list[tuple[str, int]]) -> None:
        """`result`:N = the export over `flags_in` and `values` ((SSA value, its argument)), all
        written in place (tied), so IREE orders it after their writers and before their users."""
        counts[export] = len(values) + 1
        operands = ", ".join(["%lo", "%hi", flags_in] + [v for v, _ in values])
        types = ", ".join(["i32", "i32", flags] + [inputs[a] + sizes.get(a, "") for _, a in values])
        outs = ", ".join([flags_in] + [v + sizes.get(a, "") for v, a in values])
        lines.append(f"{result}:{len(values) + 1} = flow.dispatch @{EXECUTABLE}::@{export}({operands}) : "
                     f"({types}) -> ({outs})")

    tensors = [i for i, ty in enumerate(inputs) if ty.startswith("tensor<")]
    dispatch("%w", f"wait_{len(tensors) + 1}", "%flags", [(f"%a{i}", i) for i in tensors])
    after_wait = {i: f"%w#{n + 1}" for n, i in enumerate(tensors)}
    call = (f"func.call @{name}({', '.join(after_wait.get(i, f'%a{i}') for i in range(len(inputs)))}) : "
            f"({', '.join(inputs)}) -> ({', '.join(results)})")
    lines.append(f"%r:{len(results)} = {call}" if results else call)
    dispatch("%s", f"signal_{len(results) + 1}", "%w#0", [(f"%r#{n}", tied[n]) for n in range(len(results))])
    returned = [f"%s#{n + 1}" for n in range(len(results))] + ["%s#0"]
    lines.append(f"return {', '.join(returned)} : {', '.join(results + [flags])}")
    params = [f"%a{i}: {ty}" + (f" {a}" if a is not None and str(a) != "{}" else "")
              for i, (ty, a) in enumerate(zip(inputs, arg_attrs))]
    params += [f"%flags: {flags} {{iree.abi.output = {len(results)} : index}}", "%seq: i64"]
    body = "".join(f"    {line}\n" for line in lines)
    return f"  func.func @\"{ordered_name(name)}\"({', '.join(params)}) -> ({', '.join(results + [flags])}) {{\n{body}  }}\n"


def ordered_functions(module_text: str) -> str:
    """`module_text` with the ordered twin of each public function and the executable they
    dispatch (see the module docstring); a module that has them is returned as it is. They are
    added as text at the end of the module's body and the result verified: IREE 3.13 prints
    `hal.executable.object` in a form its parser rejects, so the module is not printed again."""
    from iree.compiler import ir
    from ..errors import invalid_module
    with ir.Context(load_on_create_dialects=[]):
        module = ir.Module.parse(module_text)
        if EXECUTABLE in ir.SymbolTable(module.operation):
            return module_text
        funcs = [op.operation for op in module.body.operations
                 if op.operation.name == "func.func" and "sym_visibility" not in op.operation.attributes]
        counts: dict[str, int] = {}
        twins = "".join(_wrapper(f, counts) for f in funcs)
        end = module_text.rstrip().rfind("}")
        text = module_text[:end] + _executable(sorted(counts.items())) + twins + module_text[end:]
        try:
            ir.Module.parse(text).operation.verify()
        except ir.MLIRError as e:
            raise invalid_module("CUDA stream-order module", text, e, "") from None
        return text


# --- the launch: torch's stream <-> IREE's, through the flags ---------------------------------

_CU_STREAM_WAIT_VALUE_GEQ = 0
_CU_STREAM_WRITE_VALUE_DEFAULT = 0   # preceded by a memory barrier: torch's earlier writes are visible


class _Cuda:
    """The two CUDA driver functions the order needs (libcuda, which torch has loaded)."""

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        self.write = self._function(lib, "cuStreamWriteValue64")
        self.wait = self._function(lib, "cuStreamWaitValue64")

    @staticmethod
    def _function(lib, name: str):
        f = getattr(lib, f"{name}_v2", None) or getattr(lib, name)
        f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
        f.restype = ctypes.c_int
        return f

    def check(self, status: int, what: str) -> None:
        if status:
            raise LaunchError(f"CUDA's {what} failed with error {status}; nothing ran")


_cuda: _Cuda | None = None


class _Flags:
    """The flags of one torch stream: [what torch reached, what IREE finished], and the last
    sequence number given out."""

    def __init__(self, tensor, view):
        self.tensor, self.view, self.seq = tensor, view, 0
        self.address = tensor.data_ptr()


class StreamOrder:
    """Orders launches on one IREE CUDA device with torch's streams (see the module docstring)."""

    def __init__(self, import_tensor):
        global _cuda
        if _cuda is None:
            _cuda = _Cuda()
        self.cuda = _cuda
        self.import_tensor = import_tensor   # a torch CUDA tensor -> its HAL buffer view
        self.streams: dict[int, _Flags] = {}   # by CUDA stream handle
        # torch's own accessors of the current device and stream (those Triton's launcher uses):
        # a handle, not a torch.cuda.Stream object, a few microseconds less each launch.
        from torch._C import _cuda_getCurrentRawStream, _cuda_getDevice, _cuda_isCurrentStreamCapturing
        self.capturing, self.device, self.stream = \
            _cuda_isCurrentStreamCapturing, _cuda_getDevice, _cuda_getCurrentRawStream

    def _flags(self, stream: int, device: int) -> _Flags:
        flags = self.streams.get(stream)
        if flags is None:
            import torch
            t = torch.zeros(2, dtype=torch.int64, device=torch.device("cuda", device))
            torch.cuda.current_stream(t.device).synchronize()   # zeroed before IREE reads it
            flags = self.streams[stream] = _Flags(t, self.import_tensor(t))
        return flags

    def launch(self, context, function, args, timeline) -> None:
        """Invokes `function` (an ordered twin) with `args` (the kernel's arguments) ordered with
        torch's current stream; `timeline` (`runtime.Timeline`) gives the invocation its fences."""
        if self.capturing():
            raise LaunchError("a launch while torch captures a CUDA graph is not supported: IREE's work "
                              "cannot be captured; nothing ran")
        device = self.device()
        stream = self.stream(device)
        with timeline.lock:
            flags = self._flags(stream, device)
            flags.seq += 1
            seq = flags.seq
            self.cuda.check(self.cuda.write(stream, flags.address, seq, _CU_STREAM_WRITE_VALUE_DEFAULT),
                            "cuStreamWriteValue64")
            args.push_ref(flags.view)
            args.push_int(seq)
            signal = timeline.invoke(context, function, args)
            if self.cuda.wait(stream, flags.address + 8, seq, _CU_STREAM_WAIT_VALUE_GEQ):
                signal.wait()   # torch's stream could not be made to wait: the host waits instead
