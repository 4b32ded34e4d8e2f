"""Runtime: load a .vmfb once, launch it on the caller's buffers, zero-copy.

Pointer arguments are imported through DLPack as HAL buffer views over the caller's own
memory: the kernel reads and writes the torch tensor in place. Nothing is copied in or out.
Everything that does not depend on argument values (instance, device, VM context, function
handle, argument plan) is built once and cached.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Sequence

import iree.runtime as rt

from .errors import LaunchError

# Triton signature element types -> (MLIR element type of the buffer, torch dtype name).
POINTER_DTYPES = {
    "fp32": "f32", "fp16": "f16", "bf16": "bf16", "fp64": "f64",
    "i1": "i8", "u1": "i8", "i8": "i8", "u8": "i8", "i16": "i16", "u16": "i16", "i32": "i32", "u32": "i32",
    "i64": "i64", "u64": "i64", "fp8e4nv": "f8E4M3FN", "fp8e5": "f8E5M2",
}
SCALAR_KINDS = {"i1": "int", "i8": "int", "i16": "int", "i32": "int", "i64": "int",
                "u1": "int", "u8": "int", "u16": "int", "u32": "int", "u64": "int",
                "fp32": "float", "fp64": "float"}

_ELEMENT_TYPES = {
    "f32": rt.HalElementType.FLOAT_32, "f16": rt.HalElementType.FLOAT_16,
    "bf16": rt.HalElementType.BFLOAT_16, "f64": rt.HalElementType.FLOAT_64,
    "i8": rt.HalElementType.INT_8, "i16": rt.HalElementType.INT_16,
    "i32": rt.HalElementType.INT_32, "i64": rt.HalElementType.INT_64,
}


@dataclass
class Device:
    """One IREE runtime instance and device per driver (local-task, cuda, ...)."""
    driver: str
    instance: rt.VmInstance
    device: rt.HalDevice
    hal_module: rt.VmModule


_devices: dict[str, Device] = {}
_lock = threading.Lock()

# Triton tiles live on the stack of IREE's CPU worker threads (a 64x64 f32 tile is 16 KiB,
# and LLVM spills vector tiles there too); IREE's default of 128 KiB is too small for them.
# The compiler is told a smaller limit (compile.CPU_STACK_LIMIT), so that a kernel needing
# more fails to compile instead of overflowing at run time.
CPU_WORKER_STACK_BYTES = 64 << 20
_flags_set = False


def _set_runtime_flags() -> None:
    global _flags_set
    if not _flags_set:
        rt.flags.parse_flags(f"--task_worker_stack_size={CPU_WORKER_STACK_BYTES}")
        _flags_set = True


def get_device(driver: str) -> Device:
    with _lock:
        dev = _devices.get(driver)
        if dev is None:
            _set_runtime_flags()
            instance = rt.VmInstance()
            try:
                device = rt.get_driver(driver).create_default_device()
            except Exception as e:  # the runtime raises plain RuntimeError/ValueError
                raise LaunchError(f"IREE driver '{driver}' is not usable here: {e}") from None
            dev = Device(driver, instance, device, rt.create_hal_module(instance, device))
            _devices[driver] = dev
        return dev


LOAD_STATS = {"loads": 0}


class LoadedKernel:
    """A compiled kernel loaded into a VM context, ready to launch."""

    def __init__(self, vmfb: bytes, name: str, driver: str):
        self.name = name
        self.dev = get_device(driver)
        self.module = rt.VmModule.copy_buffer(self.dev.instance, vmfb)
        self.context = rt.VmContext(self.dev.instance, modules=[self.dev.hal_module, self.module])
        self.function = self.module.lookup_function(name)
        if self.function is None:
            raise LaunchError(f"the compiled module has no function '{name}'", kernel=name)
        LOAD_STATS["loads"] += 1

    def invoke(self, args: rt.VmVariantList) -> None:
        results = rt.VmVariantList(4)
        try:
            self.context.invoke(self.function, args, results)
        except Exception as e:
            raise LaunchError(f"the IREE runtime failed during the launch, so output buffers may hold "
                              f"partial results: {e}", kernel=self.name) from None


def flat_view(tensor) -> Any:
    """A 1-D view from the tensor's first element to the end of its storage (no copy)."""
    nbytes = tensor.untyped_storage().nbytes()
    esize = tensor.element_size()
    n = nbytes // esize - tensor.storage_offset()
    return tensor.detach().as_strided((n,), (1,))


def import_tensor(dev: Device, tensor, dtype: str) -> rt.HalBufferView:
    """The caller's tensor memory as a HAL buffer view of `dtype` elements (zero-copy)."""
    view = flat_view(tensor)
    bv = dev.device.from_dlpack_capsule(view.__dlpack__())
    want = _ELEMENT_TYPES.get(dtype)
    if want is not None and bv.element_type != want:
        bv = rt.HalBufferView(bv.get_buffer(), bv.shape, want)
    return bv


@dataclass(frozen=True)
class ArgPlan:
    """How to pass one kernel argument: a buffer of `dtype`, or a scalar of `kind`."""
    name: str
    is_buffer: bool
    dtype: str        # buffer element type (MLIR) or Triton scalar type
    kind: str = ""    # 'int' | 'float' for scalars


def plan_arguments(names: Sequence[str], signature: dict, kernel: str) -> list[ArgPlan]:
    """One ArgPlan per non-constexpr argument, from Triton's signature ('*fp32', 'i32', ...)."""
    plans = []
    for name in names:
        ty = signature[name]
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            elt = ty[1:].lstrip("k")
            if elt not in POINTER_DTYPES:
                raise LaunchError(f"argument '{name}': pointers to {elt} are not supported", kernel=kernel)
            plans.append(ArgPlan(name, True, POINTER_DTYPES[elt]))
        elif ty in SCALAR_KINDS:
            plans.append(ArgPlan(name, False, ty, SCALAR_KINDS[ty]))
        else:
            raise LaunchError(f"argument '{name}': type {ty} is not supported", kernel=kernel)
    return plans


def pack_arguments(dev: Device, plans: Sequence[ArgPlan], values: Sequence[Any], grid: Sequence[int],
                   kernel: str) -> rt.VmVariantList:
    """Builds the VM argument list; raises before anything runs if an argument is unusable."""
    args = rt.VmVariantList(len(plans) + 3)
    for plan, v in zip(plans, values):
        if plan.is_buffer:
            if not hasattr(v, "data_ptr") or not hasattr(v, "untyped_storage"):
                raise LaunchError(f"argument '{plan.name}' must be a torch tensor, got {type(v).__name__}",
                                  kernel=kernel)
            if dev.driver.startswith("local") and v.device.type != "cpu":
                raise LaunchError(f"argument '{plan.name}' is on {v.device}, but the IREE target runs "
                                  f"on the CPU", kernel=kernel)
            args.push_ref(import_tensor(dev, v, plan.dtype))
        elif plan.kind == "int":
            args.push_int(int(v))
        else:
            args.push_float(float(v))
    for g in grid:
        if g < 0 or g >= 2 ** 31:
            raise LaunchError(f"grid dimension {g} is out of range", kernel=kernel)
        args.push_int(int(g))
    return args


@functools.lru_cache(maxsize=None)
def available_drivers() -> tuple[str, ...]:
    return tuple(rt.query_available_drivers())
