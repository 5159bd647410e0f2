"""Execution strategies of the MT-LSTM, behind one key (`config.lstm_implementation`, as transformers'
`attn_implementation`). `CoveEncoder.forward` (modeling_cove.py) is the reference: the paper's packed biLSTM, layer by
layer. Every strategy here returns what it returns, to 1e-5 (tests/test_lstm_kernels.py); docs/lstm_kernels.md says
what each one buys and where it was measured. The heads' biLSTMs (`layers.run_bilstm`, as `BiLSTMStack`s) and the
biLM's two stacks (`CoveBiLMEncoder`, as `DirectionStacks`, which runs the two strategies it has itself) choose
their strategy by the same key through the same `choose_lstm_implementation`.

- "unpacked" (`run_unpacked`): padded rows, one direction at a time, on the fused kernel (oneDNN on CPU), which packed
  data never reaches; on CPU the rows run longest first in time segments (`plan_time_segments`). No final states.
- "single_call" (`run_single_call`): the whole 2-layer biLSTM as one `nn.LSTM` call (cuDNN overlaps the layers and
  directions). Top layer only, no dropout between the layers.
- while `torch.export` traces, always `run_traceable` (no Python branch on tensor values).

Also here: the bf16 fallback every LSTM call of the package goes through (`autocast_lstm`), and `encode`'s batching
(`length_bucketed_batches`, `run_on_cpu_workers`).
"""

import bisect
import concurrent.futures
import contextlib
import itertools
import threading
from dataclasses import dataclass
from typing import ClassVar, Optional, Union

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from transformers.utils import logging

from .configuration_cove import LSTM_IMPLEMENTATION_CHOICES  # noqa: F401  (the values of the dispatch key)

__all__ = ["autocast_lstm", "bf16_lstm_kernel_available", "BiLSTMStack", "choose_lstm_implementation",
           "cpu_worker_count", "DirectionStacks", "encode_in_batches", "is_longest_first", "length_bucketed_batches",
           "lstm_autocast_fallback", "LSTM_IMPLEMENTATIONS", "lstm_kernel_supports", "onednn_direction",
           "order_longest_first", "pack", "plan_time_segments", "prepack_direction", "PREPACKED_SEGMENT_CALL_ROWS",
           "prepacking_works", "run_on_cpu_workers", "run_single_call", "run_traceable", "run_unpacked",
           "SEGMENT_CALL_ROWS", "STEP_OVERHEAD_ROWS", "to_device_async", "unpack", "unpacked_row_order"]

logger = logging.get_logger(__name__)

# Device types on which "auto" runs a top-layer-only request as one `nn.LSTM` call (docs/lstm_kernels.md).
SINGLE_CALL_DEVICE_TYPES = ("cuda",)
# Device types on which "unpacked" sorts rows longest first and runs time segments (the cost model is the CPU's).
SEGMENTED_DEVICE_TYPES = ("cpu",)
# Fill (real / padded tokens) from which "auto" runs a padded batch unpacked on a GPU, or on one CPU thread where the
# time segments cannot share reordered weights (`prepacking_serves`: bf16 autocast, oneDNN off).
UNPACKED_MIN_FILL = 0.7
# Under autograd on CPU (training), "auto" runs a padded batch unpacked from this mean real length per row, on one
# intra-op thread and on more; below, the packed path wins (fitted on Zen 4 for the heads' one-layer biLSTM calls,
# docs/lstm_kernels.md).
UNPACKED_TRAINING_MIN_MEAN_LENGTH = (12, 8)
# `length_bucketed_batches`' default cut: a batch ends below this fraction of its longest item.
BUCKET_MIN_RATIO = 0.75
# Rows a batch may always take before the guided cut for several workers ends it.
GUIDED_MIN_ROWS = 8
# Fixed cost of one unpacked time step, in rows (fitted on the 2-thread CPU).
STEP_OVERHEAD_ROWS = 25
# Cost of one more time segment, in row-steps (four kernel calls and the row copies), where each call reorders the
# weights (under autograd, under autocast) ...
SEGMENT_CALL_ROWS = 130
# ... and where a direction's segments share weights reordered once (`prepacking_serves`; best of 0-130 on SST and
# IMDb test batches at 1 and 2 threads, benchmarks/results/packing_ragged*.json).
PREPACKED_SEGMENT_CALL_ROWS = 20

# Intra-op threads from which "unpacked" runs a layer's two directions at once on CPU outside autograd, each on its
# own host thread with one intra-op thread (`run_directions`).
PARALLEL_DIRECTIONS_MIN_THREADS = 2

# oneDNN's code for an LSTM cell (`torch.ops.aten.mkldnn_rnn_layer`'s `mode`).
LSTM_MODE = 2

# (device type, dtype) -> whether `torch.lstm` runs in that dtype under autocast there; probed once per process.
_LSTM_KERNEL_SUPPORT = {}


def lstm_kernel_supports(device_type: str, dtype: torch.dtype) -> bool:
    """Whether an LSTM runs under `torch.autocast(device_type, dtype=dtype)` on this machine, found by running a
    tiny one once per process (a capability probe, not a guess from the CPU's name): oneDNN has no bf16 LSTM on
    CPUs without AVX-512 bf16 instructions and refuses to build the primitive (docs/bf16.md)."""
    key = (device_type, dtype)
    if key not in _LSTM_KERNEL_SUPPORT:
        if device_type != "cpu" or dtype == torch.float32:
            _LSTM_KERNEL_SUPPORT[key] = True  # only CPU kernels are known to lack a dtype
        else:
            weights = [torch.zeros(8, 2), torch.zeros(8, 2), torch.zeros(8), torch.zeros(8)]
            state = torch.zeros(1, 1, 2)
            try:
                with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
                    torch.lstm(torch.zeros(1, 1, 2), (state, state), weights, True, 1, 0.0, False, False, True)
                _LSTM_KERNEL_SUPPORT[key] = True
            except RuntimeError:
                _LSTM_KERNEL_SUPPORT[key] = False
    return _LSTM_KERNEL_SUPPORT[key]


def bf16_lstm_kernel_available() -> bool:
    """Whether this CPU runs LSTMs in bf16 under autocast (tests skip the bf16-kernel-only checks where not)."""
    return lstm_kernel_supports("cpu", torch.bfloat16)


def lstm_autocast_fallback(device_type: str) -> Optional[torch.dtype]:
    """None when an LSTM call on `device_type` may run as the current autocast says; else the autocast dtype whose
    LSTM kernel this machine lacks. The caller then runs its LSTM with autocast off, in fp32, and casts the result
    to the returned dtype, so the rest of the model sees what autocast would have given (values within bf16
    tolerance of fp32). Warns once per process."""
    if not torch.is_autocast_enabled(device_type):
        return None
    dtype = torch.get_autocast_dtype(device_type)
    if lstm_kernel_supports(device_type, dtype):
        return None
    logger.warning_once(
        f"This {device_type.upper()} has no {dtype} LSTM kernel (oneDNN needs AVX-512 bf16 instructions): under "
        f"autocast the LSTMs run in float32 and their outputs are cast to {dtype}; the rest runs as autocast says."
    )
    return dtype


def autocast_lstm(inputs: torch.Tensor, batch_sizes: Optional[torch.Tensor], hx: tuple, weights: list,
                  bidirectional: bool, train: bool, batch_first: bool = False):
    """One `torch.lstm` call of one layer (dropout 0): padded `inputs` (`batch_sizes` None) or packed data. Where
    autocast's dtype has no LSTM kernel on this machine (`lstm_autocast_fallback`), the call runs with autocast off
    in fp32, and its results come in the dtype autocast gives with the kernel: the autocast dtype for padded inputs;
    fp32 for packed data, which autocast runs in fp32 anyway. Returns (output, h_n, c_n)."""
    def call(inputs, hx, weights):
        if batch_sizes is None:
            return torch.lstm(inputs, hx, weights, True, 1, 0.0, train, bidirectional, batch_first)
        return torch.lstm(inputs, batch_sizes, hx, weights, True, 1, 0.0, train, bidirectional)

    device_type = inputs.device.type
    fallback = lstm_autocast_fallback(device_type)
    if fallback is None:
        return call(inputs, hx, weights)
    with torch.autocast(device_type, enabled=False):
        results = call(inputs.float(), tuple(h.float() for h in hx), [w.float() for w in weights])
    return results if batch_sizes is not None else tuple(r.to(fallback) for r in results)


_PREPACKING_WORKS = []  # [bool] once probed: whether this build and CPU run `onednn_direction` as `torch.lstm` does
_PREPACKING_PROBE_LOCK = threading.Lock()


def prepacking_works() -> bool:
    """Whether oneDNN here runs an LSTM direction on reordered weights and gives `torch.lstm`'s output and final
    states, found once per process on a tiny LSTM (a capability probe, as `lstm_kernel_supports`); False sends every
    call to `torch.lstm`."""
    if _PREPACKING_WORKS:  # probed already: no lock on the hot path
        return _PREPACKING_WORKS[0]
    with _PREPACKING_PROBE_LOCK:
        if not _PREPACKING_WORKS:
            generator = torch.Generator().manual_seed(0)
            weights = [torch.randn(8, 3, generator=generator), torch.randn(8, 2, generator=generator),
                       torch.randn(8, generator=generator), torch.randn(8, generator=generator)]
            inputs, state = torch.randn(3, 2, 3, generator=generator), torch.randn(1, 2, 2, generator=generator)
            try:
                with torch.no_grad():
                    want = torch.lstm(inputs, (state, state), weights, True, 1, 0.0, False, False, False)
                    got = onednn_direction(inputs, (state, state), prepack_direction(weights))
                works = all(a.shape == b.shape and bool((a - b).abs().max() <= 1e-5) for a, b in zip(got, want))
            except (RuntimeError, AttributeError, NotImplementedError):  # no such op in this build, or no kernel
                works = False
            _PREPACKING_WORKS.append(works)
        return _PREPACKING_WORKS[0]


def prepacking_serves(inputs: torch.Tensor, weights: list) -> bool:
    """Whether one direction's calls on `inputs` may share weights reordered once (`prepack_direction`): on CPU with
    oneDNN on, in float32 with autocast off (its bf16 path stays with `torch.lstm`), where autograd records nothing
    (the reordered copies carry no gradient), not while `torch.compile` traces (its fake tensors do not carry the
    reordered layout), and where the probe `prepacking_works` passed."""
    return (inputs.device.type == "cpu" and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled
            and inputs.dtype == torch.float32 and all(w.dtype == torch.float32 for w in weights)
            and not torch.is_autocast_enabled("cpu") and not autograd_records(inputs, weights)
            and not torch.compiler.is_compiling() and prepacking_works())


def prepack_direction(weights: list) -> list:
    """One direction's 4 weights `[w_ih, w_hh, b_ih, b_hh]` with the two matrices reordered into the layout oneDNN's
    LSTM runs on. `torch.lstm` reorders them inside every call, a fixed cost of 0.2-2 ms at one thread that a ragged
    batch's time segments pay once per segment (docs/lstm_kernels.md); reordered once, they serve all the segments.
    The results are equal to `torch.lstm`'s (tests/test_lstm_kernels.py)."""
    w_ih, w_hh, b_ih, b_hh = weights
    packed = torch.ops.mkldnn._reorder_mkldnn_rnn_layer_weight(w_ih, w_hh, w_hh.shape[1], False, True, False)
    return [packed[0], packed[1], b_ih, b_hh]


def onednn_direction(inputs: torch.Tensor, hx: tuple, weights: list):
    """One direction of one layer by oneDNN's LSTM layer on time-major `(T, B, C)` inputs with `prepack_direction`'s
    weights, from states h, c `(1, B, H)`. Returns (output `(T, B, H)`, h_n, c_n `(1, B, H)`), as `torch.lstm`.
    Without rows or steps (oneDNN would divide by zero) the output is empty and the states are returned as given."""
    w_ih, w_hh, b_ih, b_hh = weights
    h, c = hx
    hidden = h.shape[-1]
    if inputs.numel() == 0:
        return inputs.new_zeros(inputs.shape[0], inputs.shape[1], hidden), h, c
    output, h_n, c_n, _ = torch.ops.aten.mkldnn_rnn_layer(
        inputs.contiguous(), w_ih, w_hh, b_ih, b_hh, h[0].contiguous(), c[0].contiguous(), False, [], LSTM_MODE,
        hidden, 1, True, False, False, False)  # reverse, batch_sizes, mode, hidden, layers, biases, bidir, bf, train
    return output, h_n.view(1, -1, hidden), c_n.view(1, -1, hidden)


def call_lstm_module(lstm: nn.LSTM, inputs):
    """`lstm(inputs)` for an `nn.LSTM` over a padded tensor or a `PackedSequence`, with `autocast_lstm`'s fallback:
    where autocast's dtype has no LSTM kernel here, the call runs with autocast off in fp32, and a padded call's
    output and final states come cast to that dtype (a packed call's stay fp32, as autocast gives them)."""
    packed = isinstance(inputs, nn.utils.rnn.PackedSequence)
    device_type = (inputs.data if packed else inputs).device.type
    fallback = lstm_autocast_fallback(device_type)
    if fallback is None:
        return lstm(inputs)
    with torch.autocast(device_type, enabled=False):
        output, (h_n, c_n) = lstm(inputs.float())
    if packed:
        return output, (h_n, c_n)
    return output.to(fallback), (h_n.to(fallback), c_n.to(fallback))


def autograd_records(inputs: torch.Tensor, weights) -> bool:
    """Whether autograd records an LSTM call on `inputs` with `weights` (grad mode on, and a tensor that needs it)."""
    return torch.is_grad_enabled() and (inputs.requires_grad or any(w.requires_grad for w in weights))


def kernel_train_mode(inputs: torch.Tensor) -> bool:
    """`torch.lstm`'s `train` flag (dropout is 0 in every call here, so it never changes a result). cuDNN keeps what
    its backward needs only in train mode, so on CUDA it follows autograd; on CPU it stays off."""
    return inputs.is_cuda and torch.is_grad_enabled()


@dataclass(frozen=True)
class BiLSTMStack:
    """What a strategy runs: a batch-first, bidirectional `nn.LSTM` with biases, of any depth (the MT-LSTM's `rnn`,
    a head's one-layer biLSTM), its `lstm_implementation` key, the dropout between its layers (applied when
    `training`), and where cast copies of frozen weights are kept under autocast (`weights_cast_once`; None: cast at
    every call)."""

    rnn: nn.LSTM
    implementation: str = "auto"
    dropout: float = 0.0
    training: bool = False
    cast_cache: Optional[dict] = None
    runs_as_one_call: ClassVar[bool] = True  # one `nn.LSTM` module: "single_call" may run it whole

    def __post_init__(self):
        rnn = self.rnn
        if not (rnn.bidirectional and rnn.batch_first and rnn.bias and rnn.proj_size == 0):
            raise ValueError("the lstm_implementation strategies run batch-first, bidirectional LSTMs with biases and "
                             f"no projections, got {rnn}")

    @property
    def hidden_size(self) -> int:
        return self.rnn.hidden_size

    @property
    def num_layers(self) -> int:
        return self.rnn.num_layers

    @property
    def drops_between_layers(self) -> bool:
        return self.training and self.dropout > 0 and self.num_layers > 1

    @property
    def first_layer_weights(self) -> list:
        """The first layer's input and hidden weights (what `choose_lstm_implementation` asks about autograd)."""
        return [self.rnn.weight_ih_l0, self.rnn.weight_hh_l0]


@dataclass(frozen=True)
class DirectionStacks:
    """The biLM's LSTMs (`CoveBiLMEncoder`) as `choose_lstm_implementation` takes them: a forward and a backward
    stack of one-layer, batch-first, unidirectional `nn.LSTM`s over the same right-padded rows (the backward stack
    reads each row reversed within its length), and their `lstm_implementation` key. Its encoder runs the two
    strategies it has itself: "reference", packed rows per layer (the oracle), and "unpacked", the padded rows on the
    fused kernel. No single `nn.LSTM` call runs two separate stacks, so "single_call" never serves it."""

    forward_layers: nn.ModuleList
    backward_layers: nn.ModuleList
    implementation: str = "auto"
    runs_as_one_call: ClassVar[bool] = False

    def __post_init__(self):
        for lstm in (*self.forward_layers, *self.backward_layers):
            if lstm.bidirectional or lstm.num_layers != 1 or not lstm.batch_first or lstm.proj_size != 0:
                raise ValueError("the biLM's stacks are one-layer, batch-first, unidirectional LSTMs without "
                                 f"projections, got {lstm}")

    @property
    def first_layer_weights(self) -> list:
        """The forward stack's first layer's input and hidden weights (as `BiLSTMStack.first_layer_weights`)."""
        return [self.forward_layers[0].weight_ih_l0, self.forward_layers[0].weight_hh_l0]


def layer_weights(stack: BiLSTMStack, layer: int) -> list:
    """The 8 tensors of one layer of `stack.rnn` (both directions), in the order `torch.lstm` expects. Under
    autocast, frozen fp32 weights come cast to its dtype here, once per layer for all the layer's calls (autocast
    would cast them at every call), and within `weights_cast_once` once for every batch. Weights that require grad,
    or whose dtype has no kernel here (`autocast_lstm` runs those in fp32), are left as they are."""
    names = []
    for suffix in ("", "_reverse"):
        names += [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}",
                  f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
    weights = [getattr(stack.rnn, name) for name in names]
    device_type = weights[0].device.type
    if not torch.is_autocast_enabled(device_type) or any(w.requires_grad for w in weights):
        return weights
    dtype = torch.get_autocast_dtype(device_type)
    if weights[0].dtype != torch.float32 or dtype == torch.float32 or not lstm_kernel_supports(device_type, dtype):
        return weights
    cache = stack.cast_cache
    cast = None if cache is None else cache.get((layer, dtype))
    if cast is None:
        with torch.inference_mode(False), torch.no_grad():  # normal tensors, usable outside inference mode
            cast = [w.to(dtype) for w in weights]
        if cache is not None:
            cache[(layer, dtype)] = cast
    return cast


@contextlib.contextmanager
def weights_cast_once(encoder: nn.Module):
    """Within this context (on any thread), `layer_weights` keeps each layer's cast weights for reuse; they are
    dropped on leaving, so a change to the weights between calls, even through `.data`, is always cast afresh. A
    nested use shares the outer one."""
    if encoder._autocast_cache is not None:
        yield
        return
    encoder._autocast_cache = {}
    try:
        yield
    finally:
        encoder._autocast_cache = None


def run_lstm_layer(stack: BiLSTMStack, layer: int, inputs: torch.Tensor, batch_sizes: Optional[torch.Tensor]):
    """One biLSTM layer of `stack.rnn` on padded `(B, T, C)` inputs (batch_sizes None) or packed data `(N, C)`,
    from zero states. Returns (output, h_n (2, B, H), c_n (2, B, H))."""
    num_rows = inputs.shape[0] if batch_sizes is None else int(batch_sizes[0])
    zeros = inputs.new_zeros(2, num_rows, stack.hidden_size)
    weights = layer_weights(stack, layer)
    return autocast_lstm(inputs, batch_sizes, (zeros, zeros), weights, True, kernel_train_mode(inputs),
                         batch_sizes is None)


def is_longest_first(lengths: torch.Tensor) -> bool:
    """Whether host `lengths` (B,) are sorted longest first (ties in any order)."""
    return bool((lengths[:-1] >= lengths[1:]).all())


def order_longest_first(keys: list) -> list:
    """Positions of `keys` (one length per item) longest first, ties in input order (a stable sort): the one order
    in which batching (`length_bucketed_batches`), the pipelines and the benchmarks visit items of mixed lengths, so
    that each batch holds near-equal lengths and its LSTMs pad or pack little."""
    return sorted(range(len(keys)), key=lambda i: -keys[i])


def pack(vectors: torch.Tensor, lengths: torch.Tensor, keep_sorted_rows: bool = True) -> PackedSequence:
    """`pack_padded_sequence` of right-padded `(B, T, C)` rows with host-side `lengths` (B,), without a wait for the
    device: rows already sorted longest first (as `CoveModel.encode` batches them) are packed as they are (unless
    `keep_sorted_rows=False`: `enforce_sorted=False` sorts them all the same); others are sorted on the host (the
    sort `pack_padded_sequence` makes) and the order goes to the device without a wait (`to_device_async`;
    `pack_padded_sequence` copies it there and waits). The same `PackedSequence` as `pack_padded_sequence`."""
    lengths = lengths.cpu()
    if keep_sorted_rows and is_longest_first(lengths):
        return pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=True)
    lengths, order = torch.sort(lengths.to(torch.int64), descending=True)
    order = to_device_async(order, vectors.device)
    packed = pack_padded_sequence(vectors.index_select(0, order), lengths, batch_first=True, enforce_sorted=True)
    return PackedSequence(packed.data, packed.batch_sizes, order)


def unpack(packed: PackedSequence, total_length: int) -> torch.Tensor:
    """`pad_packed_sequence(packed, batch_first=True, total_length=...)[0]`, the rows back in batch order, without
    the host read of the order that `pad_packed_sequence` makes for the lengths it also returns."""
    output = pad_packed_sequence(packed._replace(sorted_indices=None, unsorted_indices=None), batch_first=True,
                                 total_length=total_length)[0]
    return output if packed.unsorted_indices is None else output.index_select(0, packed.unsorted_indices)


def top_layer_into(outputs: list, out: Optional[torch.Tensor]) -> list:
    """The layer outputs with the top layer copied into `out` (when given) and replaced by it."""
    if out is None:
        return outputs
    return outputs[:-1] + [out.copy_(outputs[-1])]


def uses_single_call(implementation: str, device: torch.device, top_only: bool = True,
                     drops_between_layers: bool = False) -> bool:
    """Whether a request on `device` runs as one `nn.LSTM` call under `implementation`: "single_call", or "auto" on
    SINGLE_CALL_DEVICE_TYPES; and the call serves it (the top layer alone, no dropout between the layers)."""
    chosen = implementation == "single_call" or (implementation == "auto" and device.type in SINGLE_CALL_DEVICE_TYPES)
    return chosen and top_only and not drops_between_layers


def unpacked_by_default(lengths: torch.Tensor, time: int, device: torch.device, records_grad: bool = False,
                        prepacked: bool = False) -> bool:
    """Whether "auto" runs a padded `(B, time)` batch with host `lengths` unpacked when the caller gave no hint. On CPU
    where autograd records the call (training) when the rows' mean length reaches UNPACKED_TRAINING_MIN_MEAN_LENGTH
    for the thread count (the fused kernel's backward wins on longer rows, the packed path on short ones:
    docs/lstm_kernels.md); else on CPU always with more than one thread, or where the time segments share reordered
    weights (`prepacked`: `prepacking_serves`); on a GPU or one CPU thread when real tokens fill UNPACKED_MIN_FILL of
    it."""
    if device.type == "cpu" and records_grad:
        mean_length = UNPACKED_TRAINING_MIN_MEAN_LENGTH[0 if torch.get_num_threads() == 1 else 1]
        return float(lengths.sum()) >= mean_length * len(lengths)
    if device.type == "cpu" and (torch.get_num_threads() > 1 or prepacked):
        return True
    return bool(lengths.sum() >= UNPACKED_MIN_FILL * len(lengths) * time)


def choose_lstm_implementation(stack: Union[BiLSTMStack, DirectionStacks], vectors: torch.Tensor,
                               lengths: torch.Tensor, final_states: bool, top_only: bool,
                               unpacked: Optional[bool]) -> str:
    """The strategy that runs one call of `stack` (a `BiLSTMStack`, or the biLM's `DirectionStacks`) on `vectors`
    (B, T, C) with host `lengths` (B,): "traceable" while `torch.export` traces; else `stack.implementation` where
    that strategy serves the request ("unpacked": a padded batch without final states; "single_call":
    `uses_single_call`, and a stack that one `nn.LSTM` call runs, `stack.runs_as_one_call`), "reference" where it
    does not. "auto": "single_call" on SINGLE_CALL_DEVICE_TYPES where it serves; else "unpacked" where it serves and
    `unpacked` (the caller's hint; None: `unpacked_by_default`) says so; else "reference"."""
    if torch.compiler.is_exporting():
        return "traceable"
    implementation = stack.implementation
    if implementation == "reference":
        return "reference"
    if stack.runs_as_one_call and uses_single_call(implementation, vectors.device, top_only,
                                                   stack.drops_between_layers):
        return "single_call"
    time = vectors.shape[1]
    if final_states or bool((lengths == time).all()):  # "unpacked" serves padded batches without final states
        return "reference"
    if implementation == "unpacked":
        return "unpacked"
    if implementation == "auto":
        if unpacked is None:
            weights = stack.first_layer_weights
            unpacked = unpacked_by_default(lengths, time, vectors.device, autograd_records(vectors, weights),
                                           prepacking_serves(vectors, weights))
        if unpacked:
            return "unpacked"
    return "reference"


def run_single_call(stack: BiLSTMStack, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool,
                    top_only: bool, out: Optional[torch.Tensor]):
    """"single_call": every layer in one `stack.rnn` call (packed unless every row is full). Returns ([top layer
    (B, T, 2H), zero at padding], final h and c as (B, L, 2H) or None)."""
    batch, time, _ = vectors.shape
    if bool((lengths == time).all()):
        output, (h_n, c_n) = call_lstm_module(stack.rnn, vectors)
    else:  # h_n, c_n (2L, B, H) in batch order
        packed_output, (h_n, c_n) = call_lstm_module(stack.rnn, pack(vectors, lengths))
        output = unpack(packed_output, time)
    if not final_states:
        return top_layer_into([output], out), None, None

    # (2L, B, H) as [l0 forward, l0 backward, l1 forward, ...] -> (B, L, 2H) as [forward; backward] per layer
    def per_layer(states):
        return states.view(stack.num_layers, 2, batch, stack.hidden_size).permute(2, 0, 1, 3).flatten(2)

    return top_layer_into([output], out), per_layer(h_n), per_layer(c_n)


def plan_time_segments(lengths: list, time: int, step_overhead_rows: float = STEP_OVERHEAD_ROWS,
                       call_rows: float = SEGMENT_CALL_ROWS) -> list:
    """How "unpacked" runs a padded batch of `time` steps with row `lengths` (each >= 1): as consecutive time
    segments `(start, end, rows)`, each running only its first `rows` rows, the prefix that holds every row still
    going at `start` (h and c carried from segment to segment). Segments start at row ends; the plan minimises the
    estimated cost, sum over segments of steps x (step_overhead_rows + rows) + call_rows (exact dynamic programme
    over the start points). Rows in any order are served (a prefix may then keep ended rows), but only
    longest-first order gains."""
    points = [0] + sorted(set(n for n in lengths if 0 < n < time)) + [time]  # segment bounds to choose from
    # rows at p: the shortest prefix of rows holding every row longer than p = how many suffix maxima exceed p
    suffix_max = list(itertools.accumulate(reversed(lengths), max))  # ascending: max of the last 1, 2, ... rows
    rows = [len(lengths) - bisect.bisect_right(suffix_max, p) for p in points[:-1]]
    best_cost = [0.0] * len(points)  # best_cost[i]: cheapest way to run steps points[i]..time
    next_point = [len(points) - 1] * len(points)
    for i in range(len(points) - 2, -1, -1):
        step_cost = step_overhead_rows + rows[i]
        best_cost[i], next_point[i] = min(
            ((points[j] - points[i]) * step_cost + call_rows + best_cost[j], j) for j in range(i + 1, len(points)))
    segments, i = [], 0
    while i < len(points) - 1:
        segments.append((points[i], points[next_point[i]], rows[i]))
        i = next_point[i]
    return segments


def gather_rows(source: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """`out[i] = source[index[i]]` for the rows of 2-d tensors, written into `out` in place, which may be a column
    slice of a wider tensor: on CPU with no intermediate copy. Where autograd tracks `source`, the dtypes differ
    (autocast), or off the CPU, the rows are gathered first and copied in."""
    if source.requires_grad or source.dtype != out.dtype or source.device.type != "cpu":
        return out.copy_(source.index_select(0, index))
    return torch.index_select(source, 0, index, out=out)


def run_direction(stack: BiLSTMStack, inputs: torch.Tensor, weights: list, segments: Optional[list] = None):
    """One direction of one layer over time-major `(T, B, C)` inputs from zero states; returns `(T, B, H)`. With
    `segments` (`plan_time_segments`, more than one) each runs its rows on from the states the one before left; the
    steps a segment skips are past every skipped row's end and are set to zero. Where `prepacking_serves`, the
    segments share one reorder of the weights (`prepack_direction`)."""
    batch = inputs.shape[1]
    zeros = inputs.new_zeros(1, batch, stack.hidden_size)
    train = kernel_train_mode(inputs)
    if segments is None or len(segments) == 1:
        return autocast_lstm(inputs, None, (zeros, zeros), weights, False, train)[0]
    if prepacking_serves(inputs, weights):  # one weight reorder for all the segments
        packed = prepack_direction(weights)

        def call(x, hx):
            return onednn_direction(x, hx, packed)
    elif autograd_records(inputs, weights):
        # Where autograd records: split, pad and cat, whose backward passes are a cat, slices and a split. Slicing
        # and writing each segment into place instead costs the backward a zero-filled copy of the whole tensor per
        # segment (a BCN training step spent ~10% of its time there).
        pieces, h, c = [], zeros, zeros
        chunks = inputs.split([end - start for start, end, _ in segments])  # (end - start, B, C) each
        for chunk, (_, _, rows) in zip(chunks, segments):
            piece, h, c = autocast_lstm(chunk[:, :rows], None, (h[:, :rows], c[:, :rows]), weights, False, train)
            pieces.append(nn.functional.pad(piece, (0, 0, 0, batch - rows)))  # the skipped rows: zero
        return torch.cat(pieces)
    else:
        def call(x, hx):
            return autocast_lstm(x, None, hx, weights, False, train)
    output = None  # (T, B, H) in the dtype the kernel gives (under autocast, its dtype)
    h, c = zeros, zeros
    for start, end, rows in segments:
        piece, h, c = call(inputs[start:end, :rows], (h[:, :rows], c[:, :rows]))  # (end - start, rows, H), (1, rows, H)
        if output is None:
            output = piece.new_empty(inputs.shape[0], batch, stack.hidden_size)
        output[start:end, :rows] = piece
        output[start:end, rows:] = 0  # the skipped rows: padding, zero (finite, as callers may mask by product)
    return output


_direction_worker = None  # the second host thread of `run_directions`, started on first use
_direction_worker_lock = threading.Lock()


def directions_in_parallel(inputs: torch.Tensor) -> bool:
    """Whether `run_directions` runs the two directions at once: on CPU with PARALLEL_DIRECTIONS_MIN_THREADS or more
    intra-op threads (one thread each, no OpenMP barrier per step), where autograd records nothing (its graph and
    the backward stay on one thread)."""
    return (inputs.device.type == "cpu" and torch.get_num_threads() >= PARALLEL_DIRECTIONS_MIN_THREADS
            and not torch.is_grad_enabled())


def run_directions(stack: BiLSTMStack, forward_input: torch.Tensor, backward_input: torch.Tensor, weights: list,
                   segments: Optional[list]):
    """Both directions of one layer (`run_direction` on time-major inputs, `weights` the layer's 8): one after the
    other, or where `directions_in_parallel` says so the backward one on a second host thread (in the caller's
    inference mode and autocast) while the forward one runs here, each with one intra-op thread; the caller's thread
    count is restored afterwards. Returns (forward, backward), each `(T, B, H)`."""
    if not directions_in_parallel(forward_input):
        return (run_direction(stack, forward_input, weights[:4], segments),
                run_direction(stack, backward_input, weights[4:], segments))
    global _direction_worker
    with _direction_worker_lock:
        if _direction_worker is None:
            _direction_worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cove-lstm-direction")
    inference = torch.is_inference_mode_enabled()
    autocast = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")

    def backward_direction():  # grad mode is per thread: off here as in the caller (`directions_in_parallel`)
        torch.set_num_threads(1)
        with torch.inference_mode(inference), torch.no_grad(), torch.autocast("cpu", dtype=autocast[1],
                                                                               enabled=autocast[0]):
            return run_direction(stack, backward_input, weights[4:], segments)

    threads = torch.get_num_threads()
    backward = _direction_worker.submit(backward_direction)
    try:
        torch.set_num_threads(1)
        forward = run_direction(stack, forward_input, weights[:4], segments)
    finally:
        torch.set_num_threads(threads)
        concurrent.futures.wait([backward])
    return forward, backward.result()


def unpacked_row_order(vectors: torch.Tensor, lengths: torch.Tensor, call_rows: float = SEGMENT_CALL_ROWS):
    """The gathers of "unpacked": the time-major `(T, B, C)` first layer input in running order (on
    SEGMENTED_DEVICE_TYPES longest first, folded into the gather), the time segments (or None; planned at
    `call_rows` per segment), the flat `(T*B,)` index reversing every row within its length, and the flat indices
    taking the forward and reversed time-major outputs back to batch-major rows (forward None: a plain transpose)."""
    batch, time, _ = vectors.shape
    device = vectors.device
    order, segments = None, None
    if device.type in SEGMENTED_DEVICE_TYPES:  # rows run longest first, so a time segment can leave out ended rows
        if not is_longest_first(lengths):
            order = torch.sort(lengths, descending=True, stable=True).indices  # running row j = input row order[j]
            lengths = lengths[order]
        segments = plan_time_segments(lengths.tolist(), time, call_rows=call_rows)
    steps = torch.arange(time, device=device).unsqueeze(1)  # (T, 1)
    rows = torch.arange(batch, device=device).unsqueeze(0)  # (1, B)
    row_lengths = to_device_async(lengths, device).unsqueeze(0)  # (1, B), in running order; no wait
    reverse_steps = torch.where(steps < row_lengths, row_lengths - 1 - steps, steps)  # (T, B); padding stays
    reversed_steps = (reverse_steps * batch + rows).reshape(-1)  # (T*B,): step t of row j <- its reversed step
    if order is None:
        layer_input = vectors.transpose(0, 1).contiguous()  # (T, B, C)
        return layer_input, segments, reversed_steps, None, reversed_steps.view(time, batch).t().reshape(-1)
    order = order.to(device)
    position = torch.empty_like(order)
    position[order] = torch.arange(batch, device=device)  # (B,): input row b runs as row position[b]
    from_input = (order * time + steps).reshape(-1)  # (T*B,): step t of running row j <- flat (B*T) input
    layer_input = vectors.reshape(batch * time, -1).index_select(0, from_input).view(time, batch, -1)
    forward_to_batch_major = (steps * batch + position).t().reshape(-1)  # (B*T,): row b, step t <- (T*B)
    reversed_to_batch_major = reversed_steps.view(time, batch)[:, position].t().reshape(-1)
    return layer_input, segments, reversed_steps, forward_to_batch_major, reversed_to_batch_major


def run_unpacked(stack: BiLSTMStack, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool,
                 top_only: bool, out: Optional[torch.Tensor]):
    """"unpacked": every layer on right-padded `(B, T, C)` rows (`lengths` (B,) on the host), time-major, one
    direction at a time. The forward direction runs over the rows as they are (padding comes after every token); the
    backward one over each row reversed within its length (a row gather on the flat `(T*B, C)` steps), and is
    reversed back. The gathers write their rows straight into place (the next layer's input, each layer's output,
    `out`). Returns (each layer's output `(B, T, 2H)`, the top one's alone with `top_only`, garbage at padding;
    None, None): no final states."""
    batch, time, _ = vectors.shape
    hidden = stack.hidden_size
    prepacked = prepacking_serves(vectors, [stack.rnn.weight_ih_l0, stack.rnn.weight_hh_l0])
    layer_input, segments, reversed_steps, forward_to_batch_major, reversed_to_batch_major = unpacked_row_order(
        vectors, lengths, PREPACKED_SEGMENT_CALL_ROWS if prepacked else SEGMENT_CALL_ROWS)
    outputs = []
    for layer in range(stack.num_layers):
        if layer > 0 and stack.dropout > 0 and stack.training:
            layer_input = nn.functional.dropout(layer_input, stack.dropout, training=True)
        weights = layer_weights(stack, layer)
        channels = layer_input.shape[-1]
        reversed_input = layer_input.view(time * batch, channels).index_select(0, reversed_steps)
        forward, backward = run_directions(stack, layer_input, reversed_input.view(time, batch, channels), weights,
                                           segments)  # (T, B, H) each
        backward = backward.view(time * batch, hidden)  # reversed rows
        last = layer == stack.num_layers - 1
        if last or not top_only:
            batch_major = out if last and out is not None else forward.new_empty(batch, time, 2 * hidden)
            flat_rows = batch_major.view(batch * time, 2 * hidden)  # (B*T, 2H): [forward; backward] per step
            if forward_to_batch_major is None:
                batch_major[..., :hidden] = forward.transpose(0, 1)
            else:
                gather_rows(forward.view(time * batch, hidden), forward_to_batch_major, flat_rows[:, :hidden])
            gather_rows(backward, reversed_to_batch_major, flat_rows[:, hidden:])
            outputs.append(batch_major)  # (B, T, 2H)
        if not last:  # the next layer's input, time-major (T, B, 2H): [forward; backward put back in order]
            layer_input = forward.new_empty(time, batch, 2 * hidden)
            layer_input[..., :hidden] = forward
            gather_rows(backward, reversed_steps, layer_input.view(time * batch, 2 * hidden)[:, hidden:])
    return outputs, None, None


def run_direction_stepwise(stack: BiLSTMStack, inputs: torch.Tensor, weights: list, valid: torch.Tensor):
    """One direction over time-major `(T, B, C)` inputs, one step at a time, each row's state kept from its last
    `valid` (T, B) step on. Returns the outputs `(T, B, H)` and the final h and c `(B, H)`."""
    h = c = inputs.new_zeros(1, inputs.shape[1], stack.hidden_size)
    train = kernel_train_mode(inputs)
    pieces = []
    for t in range(inputs.shape[0]):
        piece, h_next, c_next = autocast_lstm(inputs[t:t + 1], None, (h, c), weights, False, train)
        keep = valid[t].view(1, -1, 1)  # (1, B, 1)
        h, c = torch.where(keep, h_next, h), torch.where(keep, c_next, c)
        pieces.append(piece)  # (1, B, H)
    return torch.cat(pieces, dim=0), h[0], c[0]


def run_traceable(stack: BiLSTMStack, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool,
                  top_only: bool, out: Optional[torch.Tensor]):
    """The path `torch.export` traces: no Python branch on tensor values, no read back to the host. Rows run
    unpacked in their order, no time segments; the backward direction over each row reversed within its length (a
    gather along time by a `(T, B)` index from the `lengths` tensor; the same gather puts it back). With
    `final_states`, each direction runs one step at a time and keeps its state past a row's end
    (`run_direction_stepwise`): the graph then holds T steps per direction and layer. Garbage at padding."""
    time, device = vectors.shape[1], vectors.device
    steps = torch.arange(time, device=device).unsqueeze(1)  # (T, 1)
    row_lengths = lengths.to(device).unsqueeze(0)  # (1, B)
    valid = steps < row_lengths  # (T, B)
    reverse = torch.where(valid, row_lengths - 1 - steps, steps)  # (T, B): each row reversed within its length
    layer_input = vectors.transpose(0, 1)  # (T, B, C)
    outputs, final_h, final_c = [], [], []
    for layer in range(stack.num_layers):
        if layer > 0 and stack.dropout > 0 and stack.training:
            layer_input = nn.functional.dropout(layer_input, stack.dropout, training=True)
        weights = layer_weights(stack, layer)
        reversed_input = layer_input.gather(0, reverse.unsqueeze(-1).expand_as(layer_input))  # (T, B, C)
        if final_states:
            forward, h_forward, c_forward = run_direction_stepwise(stack, layer_input, weights[:4], valid)
            backward, h_backward, c_backward = run_direction_stepwise(stack, reversed_input, weights[4:], valid)
            final_h.append(torch.cat([h_forward, h_backward], dim=-1))  # [forward; backward] (B, 2H)
            final_c.append(torch.cat([c_forward, c_backward], dim=-1))
        else:
            forward = run_direction(stack, layer_input, weights[:4])  # (T, B, H)
            backward = run_direction(stack, reversed_input, weights[4:])
        backward = backward.gather(0, reverse.unsqueeze(-1).expand_as(backward))  # back in order
        layer_input = torch.cat([forward, backward], dim=-1)  # (T, B, 2H)
        outputs.append(layer_input.transpose(0, 1))  # (B, T, 2H)
    outputs = top_layer_into(outputs[-1:] if top_only else outputs, out)
    if not final_states:
        return outputs, None, None
    return outputs, torch.stack(final_h, dim=1), torch.stack(final_c, dim=1)


# The strategies besides the reference (`CoveEncoder.forward`), by name: fn(stack, vectors (B, T, C), lengths (B,)
# on the host, final_states, top_only, out) -> (layer outputs, final h (B, L, 2H) or None, final c or None).
LSTM_IMPLEMENTATIONS = {
    "unpacked": run_unpacked,
    "single_call": run_single_call,
    "traceable": run_traceable,
}


def length_bucketed_batches(lengths: list, batch_size: int, min_ratio: float = BUCKET_MIN_RATIO,
                            workers: int = 1, min_rows: int = GUIDED_MIN_ROWS) -> list:
    """Index batches for inference: items sorted by length (longest first, stable) and cut into consecutive runs of
    up to `batch_size`; a run also ends where the next item is shorter than `min_ratio` times the run's first
    (longest) item. For `workers` > 1 host threads pulling the batches in this order (`run_on_cpu_workers`), a run
    of `min_rows` or more also ends once adding the next item would take it past 1/workers of the tokens not yet
    batched (each item counted as at least 1): guided scheduling, so the workers finish close together."""
    order = order_longest_first(lengths)
    unbatched = sum(max(length, 1) for length in lengths)  # tokens not yet in a batch
    batches, tokens, share = [], 0, 0.0
    for i in order:
        cost = max(lengths[i], 1)
        if (batches and len(batches[-1]) < batch_size and lengths[i] >= min_ratio * lengths[batches[-1][0]]
                and (workers <= 1 or len(batches[-1]) < min_rows or tokens + cost <= share)):
            batches[-1].append(i)
            tokens += cost
        else:
            batches.append([i])
            tokens, share = cost, unbatched / max(workers, 1)  # (read only with workers > 1)
        unbatched -= cost
    return batches


def cpu_worker_count(device: torch.device) -> int:
    """How many host threads `run_on_cpu_workers` uses on `device` by default: one per intra-op thread on CPU (with
    OpenMP, whose thread count is per host thread); else 1."""
    if device.type != "cpu" or not torch.backends.openmp.is_available():
        return 1
    return torch.get_num_threads()


def run_on_cpu_workers(fn, items: list, workers: int, progress=None):
    """`fn(item)` for every item, on `workers` host threads that each run with one intra-op thread (data
    parallelism instead of every small per-step GEMM split among the threads). Each worker takes the next item in
    list order, in inference mode and under the caller's CPU autocast. The first exception stops the other workers
    at their next item and is raised here. The intra-op thread count is restored afterwards. With `workers` <= 1
    the items run one after another in the caller's thread. `progress`: a tqdm bar, advanced once per item."""
    if workers <= 1:
        for item in items:
            fn(item)
            if progress is not None:
                progress.update(1)
        return
    pending = iter(items)
    lock = threading.Lock()
    errors = []
    autocast = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")

    def work():
        torch.set_num_threads(1)
        with torch.inference_mode(), torch.autocast("cpu", dtype=autocast[1], enabled=autocast[0]):
            while True:
                with lock:
                    item = next(pending, None) if not errors else None
                if item is None:
                    return
                try:
                    fn(item)
                except BaseException as error:  # noqa: BLE001  (re-raised in the caller's thread below)
                    with lock:
                        errors.append(error)
                    return
                if progress is not None:
                    with lock:
                        progress.update(1)

    threads_before = torch.get_num_threads()
    threads = [threading.Thread(target=work, name=f"cove-encode-{i}", daemon=True) for i in range(workers)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        torch.set_num_threads(threads_before)
    if errors:
        raise errors[0]


def to_device_async(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`; to a CUDA GPU through pinned memory without waiting for the copy (the copy is queued
    before any kernel that reads it, and the pinned buffer is held until it is done). Other devices get a blocking
    copy: a non-blocking copy from pageable memory can read the host tensor after it was freed. A no-op on CPU, and
    for a tensor already on `device`."""
    if device.type == "cuda" and tensor.device.type == "cpu" and not torch.compiler.is_exporting():
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=device.type in ("cuda", "cpu"))  # to CPU: no copy at all


def encode_in_batches(model: nn.Module, ids: list, batch_size: int, workers: int, progress: bool) -> list:
    """`CoveModel.encode` of checked lists of token ids: sorted by length, cut into batches of up to `batch_size`
    (`length_bucketed_batches`, guided for `workers` > 1), run on `workers` host threads (`run_on_cpu_workers`)
    with the hint to run unpacked and no final states. Padded ids are gathered from one flat tensor, checked once
    on the host, and go to a GPU without a wait. Returns one `(T_i, output_size)` tensor per input, in order."""
    device = model.embeddings.weight.device
    results = [None] * len(ids)
    all_lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
    flat_ids = torch.tensor([token for x in ids for token in x] + [model.config.pad_token_id], dtype=torch.long)
    model.check_token_ids(flat_ids)  # once, on the host: forward's per-batch device checks are skipped
    starts = all_lengths.cumsum(0) - all_lengths  # where each input begins in flat_ids
    pad_position = flat_ids.shape[0] - 1  # the pad id appended at the end
    encoder = model.encoder
    single_call = uses_single_call(model.config.lstm_implementation, device, model.reads_top_layer_only(False),
                                   encoder.training and encoder.dropout > 0)
    batches = length_bucketed_batches(all_lengths.tolist(), batch_size, min_ratio=0.0, workers=workers)  # longest 1st
    workers = min(workers, len(batches))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(batches), desc="encoding", unit=" batches")

    def run_batch(batch):
        lengths = all_lengths[batch]  # (B,) on the host, longest first
        if lengths[0] == 0:  # the rest of the (sorted) batch is empty too: (0, D) rows in the others' dtype
            dtype = model.output_dtype(model.embeddings.weight, masked=False)
            for i in batch:
                results[i] = torch.zeros(0, model.config.output_size, dtype=dtype, device=device)
            return
        steps = torch.arange(int(lengths[0])).unsqueeze(0)  # (1, T)
        valid = steps < lengths.unsqueeze(1)  # (B, T)
        input_ids = flat_ids[torch.where(valid, starts[batch].unsqueeze(1) + steps, pad_position)]  # (B, T)
        mask = None if lengths[-1] == lengths[0] else to_device_async(valid.long(), device)
        hidden = model.forward_checked(to_device_async(input_ids, device), mask, lengths,
                                       output_hidden_states=False, output_final_states=False, return_dict=False,
                                       unpacked=not single_call, zero_padding=False)[0]  # (B, T, D)
        for i, length, row in zip(batch, lengths.tolist(), hidden.unbind(0)):
            results[i] = row[:length]

    with weights_cast_once(model.encoder):  # under autocast: frozen weights cast once for all batches
        run_on_cpu_workers(run_batch, batches, workers, bar)  # on CPU: one intra-op thread each
    if bar is not None:
        bar.close()
    return results
