"""Host-device synchronisations counted on CPU: what a forward or a training step would make the host wait for on a
GPU, found without one (`HostSyncCounter`, a `TorchFunctionMode`; tests/test_sync_budget.py holds every entry point to
its budget, docs/lstm_kernels.md gives the counts).

On a CPU every tensor is on the host, so the counter keeps track of which tensors *would* be on the device: the
tensors it is told about (`on_device`: a batch's inputs, a model's parameters and buffers), every result of a call
that reads one of them, and what a factory makes on the `.device` of one of them (`torch.zeros(...,
device=x.device)`; the counter follows the `torch.device` objects that device tensors hand out). A factory given no
device, a host tensor's device or a `"cpu"` string (`torch.tensor(python_list)`, `torch.arange(n)`) makes a host
tensor, as it would in a GPU process. A call is counted when it makes the host
and the device wait for each other there:

- a device tensor's value read on the host: `READS` (`.item()`, `.tolist()`, `bool()`, `int()`, `float()`,
  `operator.index`, `.cpu()`, `.numpy()`, `.to("cpu")`, `torch.equal`, `allclose`, `is_nonzero`, printing it);
- an op on a device tensor whose output shape depends on its values: `VALUE_SHAPED` (`nonzero`, `masked_select`,
  `unique`, `repeat_interleave` without `output_size`, one-argument `where`, ...), and indexing or assigning with a
  boolean mask tensor (`x[mask]`, `x[mask] = v`);
- a host tensor copied to the device without `non_blocking=True` (`.to(device)`, `.cuda()`, `torch.tensor(data,
  device=...)`), which CUDA runs as a copy followed by a wait (transformers' own loops, pinned `non_blocking` copies
  excepted).

What it cannot see: syncs inside a single torch call (C++ kernels, `torch.nn.functional` functions, autograd's
backward), which only a GPU shows (`torch.cuda.set_sync_debug_mode`). Each counted call is recorded with the line of
our code that made it (`calls`), for the message of a failed budget.
"""

import os
import traceback
import weakref

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["HostSyncCounter", "READS", "VALUE_SHAPED"]

# Methods and functions that read a device tensor's values on the host.
READS = frozenset({
    "item", "tolist", "__bool__", "__int__", "__float__", "__index__", "__complex__", "cpu", "numpy", "__array__",
    "equal", "allclose", "is_nonzero", "__repr__", "__format__",
})
# Ops whose output's shape depends on a device tensor's values (the host waits to learn it).
VALUE_SHAPED = frozenset({
    "nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount", "nonzero_static_fallback",
})
# Factories that copy host data (a Python list, an array, a host tensor) into a new tensor.
COPYING_FACTORIES = frozenset({"tensor", "as_tensor", "asarray"})
# Ops whose results hold host tensors whatever their inputs: the result's positions that stay on the host (packing
# keeps the batch sizes on the host, unpacking returns the lengths there).
HOST_RESULTS = {"_pack_padded_sequence": (1,), "_pad_packed_sequence": (1,)}
# Where the counter's and torch's own frames are (skipped when naming the line that made a call).
SKIPPED_FRAMES = (os.path.dirname(torch.__file__), __file__)


def tensors_in(value):
    """The tensors in a call's arguments or results (nested in tuples, lists and dicts, e.g. a PackedSequence)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors_in(item)


def is_bool_mask(index) -> bool:
    """Whether an indexing key holds a boolean (or uint8) mask tensor."""
    keys = index if isinstance(index, tuple) else (index,)
    return any(isinstance(key, torch.Tensor) and key.dtype in (torch.bool, torch.uint8) for key in keys)


class HostSyncCounter(TorchFunctionMode):
    """Counts the host-device synchronisations of what runs inside `with counter:` (module docstring). `count` is
    how many; `calls` lists each as "name at file:line in function" (the first frame of ours)."""

    def __init__(self):
        super().__init__()
        self._device = {}  # id(tensor) -> weak reference to it: the tensors that would be on the device
        self._device_objects = {}  # id -> the `torch.device` objects device tensors handed out (kept alive here)
        self.calls = []

    @property
    def count(self) -> int:
        return len(self.calls)

    def on_device(self, *values) -> None:
        """Declare tensors (or every parameter and buffer of modules) as living on the device."""
        for value in values:
            if isinstance(value, torch.nn.Module):
                self.on_device(*value.parameters(), *value.buffers())
            elif isinstance(value, dict):
                self.on_device(*value.values())
            else:
                for tensor in tensors_in(value):
                    self._device[id(tensor)] = weakref.ref(tensor)

    def is_on_device(self, tensor: torch.Tensor) -> bool:
        ref = self._device.get(id(tensor))
        return ref is not None and ref() is tensor

    def is_device_object(self, device) -> bool:
        return isinstance(device, torch.device) and self._device_objects.get(id(device)) is device

    def reset(self) -> None:
        self.calls = []

    def _record(self, name: str) -> None:
        frame = next((f for f in reversed(traceback.extract_stack()[:-2])
                      if not f.filename.startswith(SKIPPED_FRAMES)), None)
        where = "?" if frame is None else f"{os.path.relpath(frame.filename)}:{frame.lineno} in {frame.name}"
        self.calls.append(f"{name} at {where}")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        inputs = list(tensors_in(args)) + list(tensors_in(kwargs))
        reads_device = any(self.is_on_device(t) for t in inputs)
        if name == "copy_":  # in place: counted when it crosses over; the destination stays where it is
            destination, source = self.is_on_device(args[0]), self.is_on_device(args[1])
            if destination != source and (not destination or not kwargs.get("non_blocking", False)):
                self._record("copy_ " + ("host -> device" if destination else "device -> host"))
            return func(*args, **kwargs)
        target = self._copy_target(name, args, kwargs, reads_device)
        counted = self._sync_of(name, kwargs, args, inputs, reads_device, target)
        if counted is not None:
            self._record(counted)
        result = func(*args, **kwargs)
        if isinstance(result, torch.device):  # `x.device`: a factory given it makes a tensor on x's side
            if reads_device:
                self._device_objects[id(result)] = result
            return result
        copied = any(result is t for t in inputs)  # on CPU `.cpu()` or `.to(device)` may return the tensor itself
        if target == "host" or name in READS:
            return result.clone() if reads_device and copied else result  # a host copy, apart from the original
        if target == "device" and not reads_device and copied:
            result = result.clone()  # the host tensor stays on the host; its device copy is another tensor
        if reads_device or target == "device" or (not inputs and self.is_device_object(kwargs.get("device"))):
            self.on_device(result)
            for position in HOST_RESULTS.get(name, ()):
                self._device.pop(id(result[position]), None)
        return result

    def _sync_of(self, name: str, kwargs, args, inputs: list, reads_device: bool, target):
        """What to record for this call (not `copy_`), or None when it makes nobody wait."""
        if target == "host" and reads_device:
            return f"{name} device -> host"
        if target == "device" and not reads_device and inputs and not kwargs.get("non_blocking", False):
            return f"{name} host -> device"
        if name in COPYING_FACTORIES and self.is_device_object(kwargs.get("device")) and not reads_device:
            return f"{name}(data, device=...) host -> device"
        if not reads_device:
            return None
        if name in READS or name in VALUE_SHAPED:
            return name
        if name in ("__getitem__", "__setitem__", "index_put", "index_put_") and is_bool_mask(args[1]):
            return f"{name} with a boolean mask"
        if name == "where" and len(args) + len(kwargs) == 1:
            return "where(condition)"
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if name == "repeat_interleave" and isinstance(repeats, torch.Tensor) and kwargs.get("output_size") is None:
            return "repeat_interleave without output_size"
        return None

    def _copy_target(self, name: str, args, kwargs, reads_device: bool):
        """For a copy between host and device: "host" (`.cpu()`, `.to("cpu")`, `.to(d)` with a host tensor's device
        or a host tensor `d`), "device" (`.cuda()`, `.to(d)` with a device tensor's device or a device tensor),
        else None (no device named, or the tensor's own side)."""
        if name == "cpu":
            return "host"
        if name == "cuda":
            return "device"
        if name != "to":
            return None
        for target in list(args[1:]) + [kwargs.get("device")]:
            if isinstance(target, str) and target.startswith("cpu"):
                return "host"
            if isinstance(target, torch.Tensor):
                return "device" if self.is_on_device(target) else "host"
            if isinstance(target, torch.device):
                return "device" if self.is_device_object(target) else "host"
        return None
