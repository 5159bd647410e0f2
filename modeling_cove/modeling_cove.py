"""CoVe encoder: frozen word vectors + MT-LSTM (McCann et al. 2017, eqs. 1, 5, 6).

Parameter names are chosen so that the released Salesforce state dict (`wmtlstm-*.pth`, the state dict of
`nn.LSTM(300, 300, num_layers=2, bidirectional=True)`) maps onto this model by a plain prefix rename:
`weight_ih_l0` -> `encoder.rnn.weight_ih_l0` (and `cove.encoder.rnn.weight_ih_l0` inside a head).
"""

import bisect
import contextlib
import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import logging

from .configuration_cove import CoveConfig
from .hub import checkpoint_code, raise_for_unreadable_weights
from .tokenization_cove import check_tokenizer_matches, parse_vocabulary_fingerprint

logger = logging.get_logger(__name__)


@dataclass
class CoveModelOutput(BaseModelOutput):
    """`BaseModelOutput` of the CoVe encoder.

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch, time, config.output_size)`):
            Per `config`: `[word vectors]; [layer 1]; layer 2; [char n-grams]`. Zero at padded positions.
        hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states=True`):
            `(word vectors (B, T, 300), MT-LSTM layer 1 (B, T, 600), MT-LSTM layer 2 (B, T, 600))`.
        final_hidden_state (`torch.FloatTensor` of shape `(batch, num_layers, 2 * hidden_size)`):
            Final `h` of each MT-LSTM layer, forward and backward directions concatenated (decoder init, §2).
        final_cell_state (`torch.FloatTensor` of shape `(batch, num_layers, 2 * hidden_size)`):
            Final `c` of each layer, same layout. Both are None with `output_final_states=False`.
        attention_mask (`torch.LongTensor` of shape `(batch, time)`): the mask the encoder used (1 = token); the
            last entry of `to_tuple()` and of `return_dict=False` (the MT head and the feature pipelines read it).
        attentions: always None: the encoder has no attention maps (`output_attentions=True` is a ValueError).
    """

    final_hidden_state: Optional[torch.FloatTensor] = None
    final_cell_state: Optional[torch.FloatTensor] = None
    attention_mask: Optional[torch.LongTensor] = None


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


def lengths_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Number of tokens per row of a right-padded `(B, T)` mask. Raises on left padding or holes (while
    `torch.export` traces, a runtime assertion in the graph instead of a Python branch on values)."""
    mask = attention_mask.bool()
    lengths = mask.sum(dim=1)
    positions = torch.arange(mask.shape[1], device=mask.device)
    right_padded = positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)
    if torch.compiler.is_exporting():
        torch._assert_async((right_padded == mask).all(), "attention_mask must be right-padded")
        return lengths
    if not torch.equal(right_padded, mask):
        raise ValueError(
            "attention_mask must be right-padded (a run of 1s followed by 0s in every row); got left padding or "
            "holes. Use a tokenizer with padding_side='right'."
        )
    return lengths


# `length_bucketed_batches`' default cut: a batch ends where the next item is shorter than this times its longest.
# `encode` cuts by size alone (0.0): its time segments (`plan_time_segments`) leave ended rows out instead.
BUCKET_MIN_RATIO = 0.75
# Fill (real tokens / padded tokens) from which a padded batch runs unpacked without final states (else packed), on
# a GPU or a single CPU thread: there the fused kernel over padded rows beats the packed per-step path where the
# padding is at most ~30%. With more than one CPU thread every padded batch runs unpacked: sorted longest first and
# cut in time segments, it beat packing on arrival-order batches of 36-81% tokens (benchmarks/results/packing*.json).
UNPACKED_MIN_FILL = 0.7
# Device types on which a request for the top layer alone (no layer-1 output, no dropout between the layers) runs as
# one call of the whole 2-layer biLSTM (`self.rnn`, packed when lengths differ): cuDNN then runs both directions at
# once and overlaps the layers: 1.3-1.9x faster on an H200 than one call per layer and direction
# (benchmarks/results/encoder_cuda*.json). On CPU the per-layer path (oneDNN, unpacked) stays faster than packing
# (benchmarks/results/encoder.json, "reference").
SINGLE_CALL_DEVICE_TYPES = ("cuda",)
# Device types on which the unpacked path sorts a batch's rows longest first and runs it in time segments
# (`plan_time_segments`, whose cost model is the CPU's). Elsewhere (a GPU, where a step costs about the same for any
# number of rows) each direction runs as one call over the rows in their order.
SEGMENTED_DEVICE_TYPES = ("cpu",)
# Rows a batch may always take before `length_bucketed_batches`' guided cut for several workers ends it: a 1-thread
# LSTM step costs about the same for 1 to 8 rows, so tiny batches of short texts waste their calls. Two workers vs
# one, best of 7 (default policy) / 5 (PASSIVE), no floor / 8 / 16 / 32 rows: SST's first 50 sentences 0.84 / 1.01 /
# 1.02 / 0.79x and 1.23 / 1.69 / 1.64 / 1.23x; IMDb's first 50 reviews 1.10 / 1.13 / 1.11 / 0.81x and 1.44 / 1.53 /
# 1.47 / 1.06x (32: two uneven batches); whole sets within noise of each other (benchmarks/RESULTS.md, "Guided").
GUIDED_MIN_ROWS = 8


def length_bucketed_batches(lengths: list, batch_size: int, min_ratio: float = BUCKET_MIN_RATIO,
                            workers: int = 1, min_rows: int = GUIDED_MIN_ROWS) -> list:
    """Index batches for inference: items sorted by length (longest first, stable) and cut into consecutive runs of
    up to `batch_size`; a run also ends where the next item is shorter than `min_ratio` times the run's first
    (longest) item: with the default BUCKET_MIN_RATIO, padding stays under a quarter of any batch. Most batches
    hold equal or near-equal lengths. For `workers` > 1 host threads pulling the batches in this order
    (`run_on_cpu_workers`), a run of `min_rows` or more also ends once adding the next item would take it past
    1/workers of the tokens not yet batched (each item counted as at least 1): guided scheduling, so the last batches
    shrink and the workers finish close together instead of one running a large last batch alone."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
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


# Cost of one time step of an unpacked batch, in rows: a step of B rows takes about (STEP_OVERHEAD_ROWS + B) times
# the work of one row-step (the fixed part: per-step kernel calls and small-GEMM inefficiency). Fitted on IMDb's
# encode batches on the 2-thread CPU (0.75 + 0.03 * B ms per step for B = 1..64, both layers and directions).
STEP_OVERHEAD_ROWS = 25
# Cost of one more time segment (`plan_time_segments`), in row-steps: four more LSTM kernel calls (both layers and
# directions) and the copies of the segment's rows in and out. Measured on the 2-thread CPU: call costs of 60-250
# gave the same speed within noise (benchmarks/RESULTS.md, "Time segments").
SEGMENT_CALL_ROWS = 130


def plan_time_segments(lengths: list, time: int, step_overhead_rows: float = STEP_OVERHEAD_ROWS,
                       call_rows: float = SEGMENT_CALL_ROWS) -> list:
    """How the unpacked path runs a padded batch of `time` steps with row `lengths` (each >= 1): as consecutive time
    segments `(start, end, rows)`, each running only its first `rows` rows, the prefix that holds every row still
    going at `start` (h and c carried from segment to segment). Once the short rows of a length-sorted batch have
    ended, the steps of the long ones stop paying for them: packing at the grain of segments instead of steps.
    Segments start at row ends; the plan minimises the estimated cost, sum over segments of
    steps x (step_overhead_rows + rows) + call_rows (exact dynamic programme over the start points). Rows in any
    order are served (a prefix may then keep ended rows), but only longest-first order gains."""
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


def longest_first(lengths: torch.Tensor) -> bool:
    """Whether host `lengths` (B,) are sorted longest first (ties in any order)."""
    return bool((lengths[:-1] >= lengths[1:]).all())


def gather_rows(source: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """`out[i] = source[index[i]]` for the rows of 2-d tensors, written into `out` in place, which may be a column
    slice of a wider tensor: on CPU with no intermediate copy. Where autograd tracks `source` (it does not track
    `out=`), the dtypes differ (autocast), or off the CPU (where `out=` into a column slice is neither measured nor
    tested here), the rows are gathered first and copied in."""
    if source.requires_grad or source.dtype != out.dtype or source.device.type != "cpu":
        return out.copy_(source.index_select(0, index))
    return torch.index_select(source, 0, index, out=out)


def cpu_worker_count(device: torch.device) -> int:
    """How many host threads `run_on_cpu_workers` uses on `device` by default: one per intra-op thread on CPU (with
    OpenMP, whose thread count is per host thread); else 1."""
    if device.type != "cpu" or not torch.backends.openmp.is_available():
        return 1
    return torch.get_num_threads()


def run_on_cpu_workers(fn, items: list, workers: int, progress=None):
    """`fn(item)` for every item, on `workers` host threads that each run with one intra-op thread: data
    parallelism across the CPU's threads instead of every small per-step GEMM of an LSTM split among them (on the
    2-thread CPU, raw `nn.LSTM` on (64, 20) batches ran 1.11-1.14x faster this way, (32, 20) 1.25-1.31x: no
    per-step synchronisation; benchmarks/RESULTS.md, "Workers"). Each worker takes the next item in list order
    (callers put the largest first, so the last ones to finish are small), in inference mode and under the
    caller's CPU autocast. The first exception stops the other workers at their next item and is raised here.
    The intra-op thread count is restored afterwards (torch keeps the last one set, in any thread, for threads
    started later). With `workers` <= 1 the items run one after another in the caller's thread, as they are.
    `progress`: a tqdm bar, advanced once per item."""
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


def pack(vectors: torch.Tensor, lengths: torch.Tensor):
    """`pack_padded_sequence` of right-padded `(B, T, C)` rows with host-side `lengths` (B,). Rows already sorted
    longest first (as `CoveModel.encode` batches them) are packed as they are: no sort, and on a GPU no index copy
    to the device and no wait for it."""
    lengths = lengths.cpu()
    return pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=longest_first(lengths))


class CoveEncoder(nn.Module):
    """The MT-LSTM (eq. 1): a 2-layer biLSTM, 300 per direction. `self.rnn` holds exactly the released weights.

    The layers are run one at a time (with `torch.lstm` on the layer's own weights) so that the first layer's
    output is available (`cove_output="both"`, `hidden_states`) without running anything twice. Padded batches
    are packed, so padding never changes a result; batches of equal lengths skip packing. Without final states
    (`final_states=False`), padded batches run unpacked instead where that is faster (`unpacked_by_default`;
    `encode`'s always), each direction on its own (`run_unpacked`): the fused CPU kernel (oneDNN) then serves
    them, which packed data never reaches.
    """

    def __init__(self, config: CoveConfig):
        super().__init__()
        self.num_layers = config.num_hidden_layers
        self.hidden_size = config.hidden_size
        self.dropout = config.encoder_dropout
        self.rnn = nn.LSTM(
            config.word_vector_dim,
            config.hidden_size,
            num_layers=config.num_hidden_layers,
            bidirectional=True,
            batch_first=True,
        )
        self._autocast_cache = None  # (layer, dtype) -> cast weights inside `weights_cast_once`, else None

    def layer_weights(self, layer: int) -> list:
        """The 8 tensors of one layer (both directions), in the order `torch.lstm` expects; under autocast, frozen
        weights come cast to the autocast dtype once (`autocast_weights`)."""
        names = []
        for suffix in ("", "_reverse"):
            names += [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}",
                      f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
        return self.autocast_weights(layer, [getattr(self.rnn, name) for name in names])

    def autocast_weights(self, layer: int, weights: list) -> list:
        """Autocast casts fp32 LSTM weights to its dtype at every `torch.lstm` call and keeps the cast only for
        weights that require grad. The CoVe encoder is frozen, and the unpacked path makes several calls per layer
        (two directions, time segments), so frozen weights are cast here, once per layer, and the calls share the
        cast (12% of bf16 encoding time on CPU). Inside `weights_cast_once` (`encode`) the cast is also kept for
        every batch of the call. Weights that require grad are left to autocast."""
        device_type = weights[0].device.type
        if not torch.is_autocast_enabled(device_type) or any(w.requires_grad for w in weights):
            return weights
        dtype = torch.get_autocast_dtype(device_type)
        if weights[0].dtype != torch.float32 or dtype == torch.float32 or not lstm_kernel_supports(device_type, dtype):
            return weights  # (no kernel in that dtype: `autocast_lstm` runs in fp32 on these weights)
        cache = self._autocast_cache
        cast = None if cache is None else cache.get((layer, dtype))
        if cast is None:
            with torch.inference_mode(False), torch.no_grad():  # normal tensors, usable outside inference mode
                cast = [w.to(dtype) for w in weights]
            if cache is not None:
                cache[(layer, dtype)] = cast
        return cast

    @contextlib.contextmanager
    def weights_cast_once(self):
        """Within this context (on any thread), `autocast_weights` keeps each layer's cast weights for reuse; they
        are dropped on leaving, so a change to the weights between calls, even through `.data` (which no version
        counter sees), is always cast afresh. A nested use shares the outer one."""
        if self._autocast_cache is not None:
            yield
            return
        self._autocast_cache = {}
        try:
            yield
        finally:
            self._autocast_cache = None

    def run_layer(self, layer: int, inputs: torch.Tensor, batch_sizes: Optional[torch.Tensor]):
        """One biLSTM layer on padded `(B, T, C)` inputs (batch_sizes None) or packed data `(N, C)`.
        Returns (output, h_n (2, B, H), c_n (2, B, H))."""
        num_rows = inputs.shape[0] if batch_sizes is None else int(batch_sizes[0])
        zeros = inputs.new_zeros(2, num_rows, self.hidden_size)
        weights = self.layer_weights(layer)
        train = self.kernel_train_mode(inputs)
        if batch_sizes is None:
            output, h_n, c_n = autocast_lstm(inputs, None, (zeros, zeros), weights, True, train, True)
        else:
            output, h_n, c_n = autocast_lstm(inputs, batch_sizes, (zeros, zeros), weights, True, train)
        return output, h_n, c_n

    @staticmethod
    def kernel_train_mode(inputs: torch.Tensor) -> bool:
        """`torch.lstm`'s `train` flag (dropout is 0 in every call here, so it never changes a result). cuDNN keeps
        what its backward needs only in train mode ("cudnn RNN backward can only be called in training mode"), so
        on CUDA it follows autograd; on CPU it stays off, which keeps inference and training on the kernels the CPU
        figures were measured with."""
        return inputs.is_cuda and torch.is_grad_enabled()

    def run_direction(self, inputs: torch.Tensor, weights: list, segments: Optional[list] = None) -> torch.Tensor:
        """One direction of one layer over time-major `(T, B, C)` inputs from zero states; returns `(T, B, H)`.
        Time-major is the layout `torch.lstm` works in, so the call copies neither its input nor its output.
        With `segments` (`plan_time_segments`, more than one) each runs its rows on from the states the one before
        left; the steps a segment skips are past every skipped row's end and are set to zero."""
        batch = inputs.shape[1]
        zeros = inputs.new_zeros(1, batch, self.hidden_size)
        train = self.kernel_train_mode(inputs)
        if segments is None or len(segments) == 1:
            return autocast_lstm(inputs, None, (zeros, zeros), weights, False, train)[0]
        output = None  # (T, B, H) in the dtype the kernel gives (under autocast, its dtype)
        h, c = zeros, zeros
        for start, end, rows in segments:
            piece, h, c = autocast_lstm(inputs[start:end, :rows], None, (h[:, :rows], c[:, :rows]), weights, False,
                                        train)  # (end - start, rows, H), h and c (1, rows, H)
            if output is None:
                output = piece.new_empty(inputs.shape[0], batch, self.hidden_size)
            output[start:end, :rows] = piece
            output[start:end, rows:] = 0  # the skipped rows: padding, zero (finite, as callers may mask by product)
        return output

    def run_unpacked(self, vectors: torch.Tensor, lengths: torch.Tensor, top_only: bool = False,
                     out: Optional[torch.Tensor] = None) -> list:
        """All layers on right-padded `(B, T, C)` rows of unequal lengths, unpacked, one direction at a time, so
        the fused CPU kernel (oneDNN) serves them, which packed data never reaches. The forward direction runs over
        the rows as they are: padding comes after every real token, so it never reaches one. The backward direction
        runs over each row reversed within its length, so its padding comes last too, and is reversed back. The
        layers run time-major `(T, B, C)`; a reversal is a row gather (`index_select`) on the flattened `(T*B, C)`
        steps (5-20x faster than `gather` along T on CPU, fp32/bf16), and the last gather of each layer writes
        batch-major rows directly. On SEGMENTED_DEVICE_TYPES (CPU), the rows run longest first (a batch in another order
        is sorted by the first gather and put back by the last ones), and both directions of every layer run in the
        time segments of `plan_time_segments` (padding comes last in both, so they share one plan; its cost model is
        the CPU's: on a GPU a step costs about the same for any number of rows, so more calls would only add
        launches). The gathers
        write their rows straight into place (the next layer's input, each layer's output, `out`), so nothing is
        concatenated afterwards. Returns a list of each layer's output `(B, T, 2H)` (the top layer's alone with
        `top_only`; the top layer's is `out` when given), with garbage at padding: callers mask it or cut it off.
        `lengths` (B,) on the host."""
        batch, time, _ = vectors.shape
        device = vectors.device
        order, segments = None, None
        if device.type in SEGMENTED_DEVICE_TYPES:  # rows run longest first, so a time segment can leave out ended rows
            if not longest_first(lengths):
                order = torch.sort(lengths, descending=True, stable=True).indices  # running row j = input row order[j]
                lengths = lengths[order]
            segments = plan_time_segments(lengths.tolist(), time)
        steps = torch.arange(time, device=device).unsqueeze(1)  # (T, 1)
        rows = torch.arange(batch, device=device).unsqueeze(0)  # (1, B)
        row_lengths = lengths.to(device).unsqueeze(0)  # (1, B), in running order
        reverse_steps = torch.where(steps < row_lengths, row_lengths - 1 - steps, steps)  # (T, B); padding stays
        reversed_steps = (reverse_steps * batch + rows).reshape(-1)  # (T*B,): step t of row j <- its reversed step
        if order is None:
            layer_input = vectors.transpose(0, 1).contiguous()  # (T, B, C)
            forward_to_batch_major = None  # the forward output's transpose is already in batch order
            reversed_to_batch_major = reversed_steps.view(time, batch).t().reshape(-1)  # (B*T,): as above, rows first
        else:  # the sort is folded into the gathers: into time-major running order, and back to batch order
            order = order.to(device)
            position = torch.empty_like(order)
            position[order] = torch.arange(batch, device=device)  # (B,): input row b runs as row position[b]
            from_input = (order * time + steps).reshape(-1)  # (T*B,): step t of running row j <- flat (B*T) input
            layer_input = vectors.reshape(batch * time, -1).index_select(0, from_input).view(time, batch, -1)
            forward_to_batch_major = (steps * batch + position).t().reshape(-1)  # (B*T,): row b, step t <- (T*B)
            reversed_to_batch_major = reversed_steps.view(time, batch)[:, position].t().reshape(-1)
        width = 2 * self.hidden_size  # [forward; backward]
        outputs = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                layer_input = nn.functional.dropout(layer_input, self.dropout, training=True)
            weights = self.layer_weights(layer)
            channels = layer_input.shape[-1]
            forward = self.run_direction(layer_input, weights[:4], segments)  # (T, B, H)
            reversed_input = layer_input.view(time * batch, channels).index_select(0, reversed_steps)
            reversed_input = reversed_input.view(time, batch, channels)
            backward = self.run_direction(reversed_input, weights[4:], segments)  # reversed rows
            backward = backward.view(time * batch, self.hidden_size)
            last = layer == self.num_layers - 1
            if last or not top_only:
                batch_major = out if last and out is not None else forward.new_empty(batch, time, width)
                flat_rows = batch_major.view(batch * time, width)  # (B*T, 2H): [forward; backward] per step
                if forward_to_batch_major is None:
                    batch_major[..., :self.hidden_size] = forward.transpose(0, 1)
                else:
                    gather_rows(forward.view(time * batch, self.hidden_size), forward_to_batch_major,
                                flat_rows[:, :self.hidden_size])
                gather_rows(backward, reversed_to_batch_major, flat_rows[:, self.hidden_size:])
                outputs.append(batch_major)  # (B, T, 2H)
            if not last:  # the next layer's input, time-major (T, B, 2H): [forward; backward put back in order]
                layer_input = forward.new_empty(time, batch, width)
                layer_input[..., :self.hidden_size] = forward
                gather_rows(backward, reversed_steps, layer_input.view(time * batch, width)[:, self.hidden_size:])
        return outputs

    def forward(self, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool = True,
                top_only: bool = False, unpacked: Optional[bool] = None, out: Optional[torch.Tensor] = None):
        """vectors: (B, T, 300) word vectors, zero at padding; lengths: (B,) tokens per row (>= 1).

        Returns a list with each layer's output (B, T, 2H) (zero at padding when packed; unspecified at padding
        on the unpacked path), and final h and c as (B, L, 2H) (None when `final_states=False`). `top_only=True`
        says only the last layer's output will be read: on SINGLE_CALL_DEVICE_TYPES (`run_single_call`) and on the
        unpacked path the list then holds that layer alone; packed or uniform batches elsewhere return every layer.
        Without final states a padded batch runs unpacked when `unpacked` is True (`encode`, whose batches are
        sorted), or, when it is None, as `unpacked_by_default` decides. `out`: a `(B, T, 2H)` tensor (a column slice
        of the caller's output is fine) that receives the top layer's output, and is then the list's last entry;
        the unpacked path writes its rows there directly, the others copy.
        """
        return self.run_layers(vectors, lengths, final_states, top_only, unpacked, out)

    def run_layers(self, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool, top_only: bool,
                   unpacked: Optional[bool], out: Optional[torch.Tensor]):
        """`forward`; every LSTM call goes through `autocast_lstm` (fp32 where the autocast dtype has no kernel)."""
        batch, time, _ = vectors.shape
        if out is not None and out.shape != (batch, time, 2 * self.hidden_size):
            raise ValueError(f"out must have shape {(batch, time, 2 * self.hidden_size)}, got {tuple(out.shape)}")
        if out is not None and (out.stride(2) != 1 or out.stride(0) != time * out.stride(1)):
            raise ValueError("out must be a column slice of a contiguous (B, T, D) tensor (its rows are written as "
                             f"B*T rows of one view), got strides {out.stride()}")
        if torch.compiler.is_exporting():
            return self.run_traceable(vectors, lengths, final_states, top_only, out)
        uniform = bool((lengths == time).all())
        if top_only and self.uses_single_call(vectors.device):
            outputs, final_h, final_c = self.run_single_call(vectors, lengths, uniform, final_states)
            return self.top_layer_into(outputs, out), final_h, final_c
        if unpacked is None:
            unpacked = self.unpacked_by_default(lengths, time, vectors.device)
        if not uniform and not final_states and unpacked:
            # outputs only: unpacked, one direction at a time, on the fused kernel (on CPU sorted, in time segments)
            return self.run_unpacked(vectors, lengths, top_only, out), None, None
        if uniform:  # equal lengths: nothing to pack
            layer_input, batch_sizes = vectors, None
        else:
            packed = pack(vectors, lengths)
            layer_input, batch_sizes = packed.data, packed.batch_sizes
        outputs, final_h, final_c = [], [], []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                layer_input = nn.functional.dropout(layer_input, self.dropout, training=True)
            layer_output, h_n, c_n = self.run_layer(layer, layer_input, batch_sizes)
            if uniform:
                outputs.append(layer_output)
            else:
                repacked = packed._replace(data=layer_output)
                outputs.append(pad_packed_sequence(repacked, batch_first=True, total_length=time)[0])
                if packed.unsorted_indices is not None:  # packed h_n/c_n are in sorted order: back to batch order
                    h_n = h_n.index_select(1, packed.unsorted_indices)
                    c_n = c_n.index_select(1, packed.unsorted_indices)
            final_h.append(torch.cat([h_n[0], h_n[1]], dim=-1))  # [forward; backward] (B, 2H)
            final_c.append(torch.cat([c_n[0], c_n[1]], dim=-1))
            layer_input = layer_output
        outputs = self.top_layer_into(outputs, out)
        if not final_states:
            return outputs, None, None
        return outputs, torch.stack(final_h, dim=1), torch.stack(final_c, dim=1)

    def run_traceable(self, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool, top_only: bool,
                      out: Optional[torch.Tensor]):
        """`forward` with no Python branch on tensor values and no read back to the host, the path `torch.export`
        traces: right-padded `(B, T, C)` rows run unpacked, rows in their order, no time segments; the backward
        direction runs over each row reversed within its length (a gather along time by a `(T, B)` index built
        from the `lengths` tensor; the same gather puts it back). With `final_states`, each direction runs one
        `torch.lstm` step at a time and keeps its state past a row's end (`run_direction_stepwise`): the graph then
        holds T steps per direction and layer, and the export is for that T. Same results as the other paths
        (garbage at padding, which callers mask)."""
        time, device = vectors.shape[1], vectors.device
        steps = torch.arange(time, device=device).unsqueeze(1)  # (T, 1)
        row_lengths = lengths.to(device).unsqueeze(0)  # (1, B)
        valid = steps < row_lengths  # (T, B)
        reverse = torch.where(valid, row_lengths - 1 - steps, steps)  # (T, B): each row reversed within its length
        layer_input = vectors.transpose(0, 1)  # (T, B, C)
        outputs, final_h, final_c = [], [], []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                layer_input = nn.functional.dropout(layer_input, self.dropout, training=True)
            weights = self.layer_weights(layer)
            reversed_input = layer_input.gather(0, reverse.unsqueeze(-1).expand_as(layer_input))  # (T, B, C)
            if final_states:
                forward, h_forward, c_forward = self.run_direction_stepwise(layer_input, weights[:4], valid)
                backward, h_backward, c_backward = self.run_direction_stepwise(reversed_input, weights[4:], valid)
                final_h.append(torch.cat([h_forward, h_backward], dim=-1))  # [forward; backward] (B, 2H)
                final_c.append(torch.cat([c_forward, c_backward], dim=-1))
            else:
                forward = self.run_direction(layer_input, weights[:4])  # (T, B, H)
                backward = self.run_direction(reversed_input, weights[4:])
            backward = backward.gather(0, reverse.unsqueeze(-1).expand_as(backward))  # back in order
            layer_input = torch.cat([forward, backward], dim=-1)  # (T, B, 2H)
            outputs.append(layer_input.transpose(0, 1))  # (B, T, 2H)
        outputs = self.top_layer_into(outputs[-1:] if top_only else outputs, out)
        if not final_states:
            return outputs, None, None
        return outputs, torch.stack(final_h, dim=1), torch.stack(final_c, dim=1)

    def run_direction_stepwise(self, inputs: torch.Tensor, weights: list, valid: torch.Tensor):
        """One direction over time-major `(T, B, C)` inputs, one step at a time, each row's state kept from its last
        `valid` (T, B) step on. Returns the outputs `(T, B, H)` and the final h and c `(B, H)`."""
        h = c = inputs.new_zeros(1, inputs.shape[1], self.hidden_size)
        train = self.kernel_train_mode(inputs)
        pieces = []
        for t in range(inputs.shape[0]):
            piece, h_next, c_next = autocast_lstm(inputs[t:t + 1], None, (h, c), weights, False, train)
            keep = valid[t].view(1, -1, 1)  # (1, B, 1)
            h, c = torch.where(keep, h_next, h), torch.where(keep, c_next, c)
            pieces.append(piece)  # (1, B, H)
        return torch.cat(pieces, dim=0), h[0], c[0]

    @staticmethod
    def top_layer_into(outputs: list, out: Optional[torch.Tensor]) -> list:
        """The layer outputs with the top layer copied into `out` (when given) and replaced by it."""
        if out is None:
            return outputs
        return outputs[:-1] + [out.copy_(outputs[-1])]

    @staticmethod
    def unpacked_by_default(lengths: torch.Tensor, time: int, device: torch.device) -> bool:
        """Whether a padded `(B, time)` batch with host `lengths` runs unpacked when nobody asked (no final states):
        always with more than one CPU thread; on a GPU or a single CPU thread when its real tokens fill at least
        UNPACKED_MIN_FILL of it."""
        if device.type == "cpu" and torch.get_num_threads() > 1:
            return True
        return bool(lengths.sum() >= UNPACKED_MIN_FILL * len(lengths) * time)

    def uses_single_call(self, device: torch.device) -> bool:
        """Whether a top-layer-only request on `device` runs as one `self.rnn` call (`run_single_call`): on
        SINGLE_CALL_DEVICE_TYPES, unless dropout between the layers is active (training)."""
        return device.type in SINGLE_CALL_DEVICE_TYPES and not (self.training and self.dropout > 0)

    def run_single_call(self, vectors: torch.Tensor, lengths: torch.Tensor, uniform: bool, final_states: bool):
        """All layers in one `self.rnn` call (packed unless every row is full). Returns ([top layer (B, T, 2H), zero
        at padding], final h and c as (B, L, 2H) or None)."""
        batch, time, _ = vectors.shape
        if uniform:
            output, (h_n, c_n) = self.rnn(vectors)
        else:
            packed_output, (h_n, c_n) = self.rnn(pack(vectors, lengths))  # h_n, c_n (2L, B, H) in batch order
            output = pad_packed_sequence(packed_output, batch_first=True, total_length=time)[0]
        if not final_states:
            return [output], None, None
        # (2L, B, H) as [l0 forward, l0 backward, l1 forward, ...] -> (B, L, 2H) as [forward; backward] per layer
        def per_layer(states):
            return states.view(self.num_layers, 2, batch, self.hidden_size).permute(2, 0, 1, 3).flatten(2)

        return [output], per_layer(h_n), per_layer(c_n)


class CovePreTrainedModel(PreTrainedModel):
    config_class = CoveConfig
    base_model_prefix = "cove"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    # Trainer must not pass `num_items_in_batch`: our heads compute mean losses themselves (HF_NOTES.md).
    accepts_loss_kwargs = False
    _no_split_modules = []

    def cove_encoder_model(self) -> "CoveModel":
        """The CoveModel inside this model (itself for the base model, `self.cove` for a head)."""
        return self if isinstance(self, CoveModel) else getattr(self, self.base_model_prefix)

    def post_init(self):
        """`PreTrainedModel.post_init`; in a head, also marks its `CoveModel` as serving a head (`inside_head`): the
        head's `output_attentions` asks for the head's own attention maps, which the encoder then does not refuse."""
        super().post_init()
        if not isinstance(self, CoveModel) and isinstance(getattr(self, self.base_model_prefix, None), CoveModel):
            self.cove_encoder_model().inside_head = True

    def _resize_token_embeddings(self, new_num_tokens, pad_to_multiple_of=None, mean_resizing=True):
        """`resize_token_embeddings`' hook: the source vocabulary's tables (word vectors, and char n-grams when
        present) get `new_num_tokens` rows (rounded up to `pad_to_multiple_of`); rows past the old size are ZERO,
        the paper's vector for a word without one (as `<unk>`), whatever `mean_resizing` says, and the tables keep
        their `requires_grad` (frozen under `config.freeze_embeddings`). Removing rows cuts them from the end. The
        MT head's target vocabulary (`lm_head`, `target_vocab_size`) is another vocabulary and is left as it is.
        `resize_token_embeddings` then stores the new size as `config.vocab_size`. `config.vocabulary_fingerprint`
        covers the recorded vocabulary's ids only, so it stays when rows are added (the tokenizer check stays in
        force) and is cleared, with a warning, when rows of that vocabulary are cut."""
        cove = self.cove_encoder_model()
        if new_num_tokens is None and pad_to_multiple_of is None:
            return cove.embeddings
        if new_num_tokens is None:
            new_num_tokens = cove.embeddings.num_embeddings
        if pad_to_multiple_of is not None:
            if (isinstance(pad_to_multiple_of, bool) or not isinstance(pad_to_multiple_of, int)
                    or pad_to_multiple_of < 1):
                raise ValueError(f"pad_to_multiple_of must be an int >= 1, got {pad_to_multiple_of!r}")
            new_num_tokens = -(-new_num_tokens // pad_to_multiple_of) * pad_to_multiple_of
        if isinstance(new_num_tokens, bool) or not isinstance(new_num_tokens, int) or new_num_tokens < 1:
            raise ValueError(f"new_num_tokens must be an int >= 1, got {new_num_tokens!r}")
        specials = [i for i in (self.config.pad_token_id, self.config.unk_token_id) if i is not None]
        if specials and new_num_tokens <= max(specials):
            raise ValueError(f"new_num_tokens={new_num_tokens} would remove the pad/unk rows (ids {specials})")
        fingerprint = getattr(self.config, "vocabulary_fingerprint", None)
        if fingerprint and new_num_tokens < parse_vocabulary_fingerprint(fingerprint)[0]:
            # rows of the recorded vocabulary are cut: the fingerprint no longer describes this table (growing keeps
            # it: it covers the first ids only, which tokens added after them leave as they were)
            logger.warning("resize_token_embeddings: the table is cut below the recorded vocabulary, so "
                           "config.vocabulary_fingerprint is cleared; record the new tokenizer's "
                           "(tokenization_cove.vocabulary_fingerprint) to check it")
            self.config.vocabulary_fingerprint = None
        for table in (cove.embeddings, cove.char_ngram_embeddings):
            if table is not None:
                resize_rows_with_zeros(table, new_num_tokens)
        cove.embeddings.special_rows = [i for i in specials if i < new_num_tokens]
        return cove.embeddings

    def freeze_frozen_parts(self):
        """Apply `config.freeze_embeddings` / `config.freeze_encoder` (`requires_grad=False`)."""
        cove = self.cove_encoder_model()
        if self.config.freeze_embeddings:
            cove.embeddings.weight.requires_grad_(False)
            if cove.char_ngram_embeddings is not None:
                cove.char_ngram_embeddings.weight.requires_grad_(False)
        if self.config.freeze_encoder:
            cove.encoder.requires_grad_(False)
        return self

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`, with the frozen parts frozen again, and an unreadable weights file (a
        truncated or corrupt `model.safetensors`, for which safetensors names no file) an `OSError` naming the file,
        what is wrong with it and the fix (`hub.raise_for_unreadable_weights`)."""
        try:
            model = super().from_pretrained(*args, **kwargs)
        except Exception as error:
            if not type(error).__module__.startswith("safetensors"):
                raise
            checkpoint = args[0] if args else kwargs.get("pretrained_model_name_or_path")
            raise_for_unreadable_weights(error, checkpoint, subfolder=kwargs.get("subfolder") or "",
                                         cache_dir=kwargs.get("cache_dir"), revision=kwargs.get("revision"))
        # transformers 5.x loads checkpoint tensors as new `nn.Parameter`s with requires_grad=True, undoing the
        # freezing done in `__init__`: apply it again so Trainer/optimizers never update a frozen encoder.
        if isinstance(model, tuple):  # output_loading_info=True
            return (model[0].freeze_frozen_parts(), *model[1:])
        return model.freeze_frozen_parts()

    def train(self, mode: bool = True):
        """A frozen encoder stays in eval mode (no dropout between MT-LSTM layers), so cached features equal live
        ones and a frozen encoder is exactly the pretrained function."""
        super().train(mode)
        if self.config.freeze_encoder:
            self.cove_encoder_model().encoder.eval()
        return self

    def save_pretrained(self, save_directory, *args, push_to_hub: bool = False, **kwargs):
        """`PreTrainedModel.save_pretrained` (safetensors) plus Hub remote code (`hub.checkpoint_code`): config.json
        names in `auto_map` every class whose code files are here and in `custom_pipelines` this architecture's
        pipelines, and exactly their flat code files lie next to the weights, so that a process without
        `modeling_cove` installed loads the checkpoint through every class the config names, with
        `trust_remote_code=True`. (Running as remote code, only the files that model imported are here, and the
        config then names only their classes.) `push_to_hub=True` uploads the folder after the code files are in
        it (`push_to_hub`, with `repo_id` defaulting to the folder's name, `token`, `commit_message`, `private`,
        `revision`, `create_pr` from the keyword arguments)."""
        code = checkpoint_code(type(self))
        code.apply_to(self.config)
        hub_kwargs = {}
        if push_to_hub:
            hub_kwargs = {key: kwargs.pop(key) for key in ("repo_id", "commit_message", "commit_description",
                                                           "private", "revision", "create_pr", "tags")
                          if key in kwargs}
            hub_kwargs.setdefault("repo_id", Path(save_directory).name)
            hub_kwargs["token"] = kwargs.get("token")
        result = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            code.copy_to(save_directory)
            if push_to_hub:
                self.push_to_hub(**hub_kwargs)
        return result

    @torch.no_grad()
    def _init_weights(self, module):
        """Uniform U(-r, r) for LSTM/linear weights (PAPER.md §2), N(0, 1) word vectors with zero PAD/UNK rows."""
        r = self.config.initializer_range
        if isinstance(module, (nn.LSTM, nn.LSTMCell)):
            for param in module.parameters():
                nn.init.uniform_(param, -r, r)
        elif isinstance(module, nn.Linear):
            nn.init.uniform_(module.weight, -r, r)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 1.0)
            if isinstance(module, CoveWordEmbeddings):
                module.zero_special_rows()
        elif isinstance(module, (nn.BatchNorm1d, nn.LayerNorm)):
            if module.weight is not None:
                nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


@torch.no_grad()
def resize_rows_with_zeros(table: nn.Embedding, num_rows: int):
    """`table` (in place, same module and parameter object kind) with `num_rows` rows: the old ones first, zero rows
    after them; its `requires_grad` is kept."""
    old = table.weight
    weight = old.new_zeros(num_rows, old.shape[1])  # (num_rows, C)
    kept = min(num_rows, old.shape[0])
    weight[:kept] = old[:kept]
    table.weight = nn.Parameter(weight, requires_grad=old.requires_grad)
    table.num_embeddings = num_rows


class CoveWordEmbeddings(nn.Embedding):
    """Fixed word-vector table (GloVe). Rows `pad_token_id` and `unk_token_id` are zero: OOV words get a zero
    vector, as in the paper."""

    def __init__(self, num_embeddings: int, embedding_dim: int, pad_token_id: int, unk_token_id: int):
        super().__init__(num_embeddings, embedding_dim, padding_idx=pad_token_id)
        self.special_rows = [i for i in (pad_token_id, unk_token_id) if i is not None and 0 <= i < num_embeddings]

    @torch.no_grad()
    def zero_special_rows(self):
        for row in self.special_rows:
            self.weight[row].zero_()


class CoveModel(CovePreTrainedModel):
    """The CoVe encoder: word vectors (frozen) -> MT-LSTM. `last_hidden_state` is CoVe(w) (eq. 5), or eq. 6's
    `[GloVe(w); CoVe(w)]` with `config.include_word_vectors`, optionally with both layers and char n-grams."""

    def __init__(self, config: CoveConfig):
        super().__init__(config)
        self.embeddings = CoveWordEmbeddings(
            config.vocab_size, config.word_vector_dim, config.pad_token_id, config.unk_token_id
        )
        self.char_ngram_embeddings = (
            nn.Embedding(config.vocab_size, config.char_ngram_dim, padding_idx=config.pad_token_id)
            if config.char_ngram_dim > 0
            else None
        )
        self.encoder = CoveEncoder(config)
        # True when a head holds this model (`self.cove`): `output_attentions` then asks for the head's maps
        self.inside_head = False
        self.post_init()
        self.freeze_frozen_parts()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def check_inputs(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """Up-front checks with clear messages; returns the (B, T) attention mask."""
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (batch, time), got {tuple(input_ids.shape)}")
        if input_ids.dtype not in (torch.long, torch.int):  # what nn.Embedding takes
            raise TypeError(f"input_ids must be integer token ids (int64 or int32), got dtype {input_ids.dtype} "
                            "(convert with .long())")
        if input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
            raise ValueError(
                f"input_ids is empty (shape {tuple(input_ids.shape)}): the input text produced no tokens"
            )
        self.check_token_ids(input_ids)
        return self.check_attention_mask(attention_mask, input_ids, "input_ids")

    def check_inputs_embeds(self, inputs_embeds: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """Up-front checks of word-vector rows passed instead of ids; returns the (B, T) attention mask."""
        config = self.config
        if not isinstance(inputs_embeds, torch.Tensor):
            raise TypeError(f"inputs_embeds must be a tensor, got {type(inputs_embeds).__name__}")
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.word_vector_dim:
            raise ValueError(f"inputs_embeds must have shape (batch, time, word_vector_dim={config.word_vector_dim}), "
                             f"got {tuple(inputs_embeds.shape)}")
        if not inputs_embeds.is_floating_point():
            raise TypeError(f"inputs_embeds must be floating-point word vectors, got dtype {inputs_embeds.dtype}")
        if inputs_embeds.shape[0] == 0 or inputs_embeds.shape[1] == 0:
            raise ValueError(f"inputs_embeds is empty (shape {tuple(inputs_embeds.shape)}): no tokens")
        if inputs_embeds.device != self.embeddings.weight.device:
            raise ValueError(f"inputs_embeds is on {inputs_embeds.device}, the model on "
                             f"{self.embeddings.weight.device}: move one of them")
        if self.char_ngram_embeddings is not None:
            raise ValueError(
                f"inputs_embeds cannot be used with char n-gram embeddings (config.char_ngram_dim="
                f"{config.char_ngram_dim}): they are looked up by token id, so pass input_ids instead"
            )
        return self.check_attention_mask(attention_mask, inputs_embeds[..., 0], "inputs_embeds")

    @staticmethod
    def check_attention_mask(attention_mask: Optional[torch.Tensor], like: torch.Tensor, name: str) -> torch.Tensor:
        """The `(B, T)` mask for inputs whose first two dimensions are `like`'s (all ones when None)."""
        if attention_mask is None:
            return torch.ones(like.shape, dtype=torch.long, device=like.device)
        if attention_mask.shape != like.shape:
            raise ValueError(
                f"attention_mask shape {tuple(attention_mask.shape)} != {name} shape {tuple(like.shape)} "
                "(batch, time)"
            )
        return attention_mask

    def check_token_ids(self, ids: torch.Tensor):
        """Every id in `ids` must index the vocabulary (a clear error instead of one deep in the embedding). While
        `torch.export` traces the model, the check is a runtime assertion in the graph (no Python branch on values)."""
        vocab_size = self.config.vocab_size
        if torch.compiler.is_exporting():
            torch._assert_async(((ids >= 0) & (ids < vocab_size)).all(), f"input_ids contain ids outside "
                                f"[0, {vocab_size}): tokenizer and checkpoint do not match")
            return
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
            raise ValueError(
                f"input_ids contain ids outside [0, {vocab_size}) (min {int(ids.min())}, "
                f"max {int(ids.max())}): tokenizer and checkpoint do not match"
            )

    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        output_final_states: Optional[bool] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
    ) -> CoveModelOutput:
        """
        input_ids: (B, T) token ids, right-padded. attention_mask: (B, T), 1 = token (default: all tokens).
        inputs_embeds: (B, T, config.word_vector_dim) word vectors instead of `input_ids` (e.g. your own GloVe rows),
        zeroed at padding and cast to the model's dtype; the same as `input_ids` whose rows
        `model.get_input_embeddings()(input_ids)` are these. Exactly one of the two is required (else a ValueError);
        models with char n-gram embeddings (`config.char_ngram_dim > 0`, looked up by id) need `input_ids`.
        token_type_ids: accepted (tokenizers return them) and ignored by the encoder.
        output_final_states: False skips the final h/c (None in the output) and lets padded batches run unpacked
        where `CoveEncoder.unpacked_by_default` finds that faster than packing (same outputs).
        Default: config.output_final_states.
        output_attentions: the MT-LSTM has no attention maps, so True is a ValueError here. Inside a head (its
        `self.cove`) the flag asks for the head's own maps (BCN biattention, DCN coattention, MT decoder), and the
        encoder ignores it.
        return_dict=False: the output's `to_tuple()` (the fields that are not None, in order, `attention_mask` last).
        Any other keyword argument is a TypeError naming it.
        A row with no tokens (all-zero mask) gives zero outputs (a defined result, not an error).
        """
        if output_attentions and not self.inside_head:
            raise ValueError(
                "output_attentions=True: CoveModel has no attention maps (the CoVe encoder is an LSTM). The heads "
                "return their own (BCN biattention, DCN coattention, MT decoder attention)."
            )
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("CoveModel needs exactly one of input_ids and inputs_embeds, got "
                             + ("both" if input_ids is not None else "neither"))
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if output_final_states is None:
            output_final_states = self.config.output_final_states
        if inputs_embeds is not None:
            attention_mask = self.check_inputs_embeds(inputs_embeds, attention_mask)
        else:
            attention_mask = self.check_inputs(input_ids, attention_mask)
        lengths = lengths_from_mask(attention_mask).cpu()  # (B,) on the host: packing and the checks below read it
        return self.forward_checked(input_ids, attention_mask, lengths, output_hidden_states, output_final_states,
                                    return_dict, inputs_embeds=inputs_embeds)

    def reads_top_layer_only(self, output_hidden_states: bool) -> bool:
        """Whether a forward reads the MT-LSTM's top layer alone: no hidden states, no layer 1 in the output."""
        return not output_hidden_states and self.config.cove_output != "both"

    def output_is_top_layer(self) -> bool:
        """Whether `last_hidden_state` is the top MT-LSTM layer and nothing else (CoVe(w) of eq. 5: no word vectors,
        no layer 1, no char n-grams concatenated to it in `forward_checked`)."""
        config = self.config
        return self.reads_top_layer_only(False) and not config.include_word_vectors and config.char_ngram_dim == 0

    def output_dtype(self, vectors: torch.Tensor, masked: bool) -> torch.dtype:
        """The dtype of `last_hidden_state` for word `vectors`: what concatenating its parts gives (the top layer
        alone: its own). Under autocast the MT-LSTM's layers come in the autocast dtype, word vectors and char
        n-grams in the model's, and a layer masked at padding (`masked`) in their promotion (the mask has the
        model's dtype)."""
        device_type = vectors.device.type
        dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else vectors.dtype
        if self.config.include_word_vectors or self.char_ngram_embeddings is not None or masked:
            dtype = torch.promote_types(dtype, vectors.dtype)
        return dtype

    def forward_checked(self, input_ids: Optional[torch.Tensor], attention_mask: Optional[torch.Tensor],
                        lengths: torch.Tensor, output_hidden_states: bool, output_final_states: bool, return_dict: bool,
                        unpacked: Optional[bool] = None, zero_padding: bool = True,
                        inputs_embeds: Optional[torch.Tensor] = None):
        """`forward` after its checks: `input_ids` (B, T) valid ids, `attention_mask` (B, T) right-padded (None = no
        padding), `lengths` (B,) its row sums *on the host*. Reads nothing back from the device on the way, so on a
        GPU the host can queue the next batch while this one runs (`encode`). `unpacked`: see `CoveEncoder.forward`.
        `zero_padding=False` skips zeroing the outputs at padding (they hold garbage there) for a caller that cuts
        each row to its length (`encode`); no path lets padding reach a real token, so that changes nothing else.
        `inputs_embeds` (B, T, word_vector_dim), checked, replaces the lookup of `input_ids` (then None)."""
        shape = (input_ids if inputs_embeds is None else inputs_embeds[..., 0]).shape  # (B, T)
        if attention_mask is None:
            attention_mask = torch.ones(shape, dtype=torch.long, device=self.embeddings.weight.device)
        exporting = torch.compiler.is_exporting()  # no Python branch on tensor values then: always masked
        mask_outputs = zero_padding and (exporting or bool((lengths < shape[1]).any()))  # else a mask of ones
        mask = attention_mask.unsqueeze(-1).to(self.embeddings.weight.dtype) if mask_outputs else None  # (B, T, 1)

        if inputs_embeds is not None:
            vectors = inputs_embeds.to(self.embeddings.weight.dtype)  # the caller's GloVe(w), (B, T, 300)
        elif unpacked and not output_hidden_states:
            # `encode`'s batches: looked up time-major, the layout the LSTM kernels read, so the encoder's transpose
            # to it copies nothing (the vectors are not returned, so their layout is not seen)
            vectors = self.embeddings(input_ids.t()).transpose(0, 1)  # GloVe(w), (B, T, 300), time-major in memory
        else:
            vectors = self.embeddings(input_ids)  # GloVe(w), (B, T, 300)
        if mask_outputs:
            vectors = vectors * mask
        # eq. 6: w~ = [GloVe(w); CoVe(w)] (+ first layer, + char n-grams, per config), as one (B, T, D) tensor whose
        # parts are written into their columns. Unless the hidden states are returned too (they keep the encoder's own
        # top layer), the encoder writes the top layer there itself: no concatenation copy.
        config = self.config
        output = None  # None: the output is the top layer alone
        if not self.output_is_top_layer():
            dtype = self.output_dtype(vectors, mask_outputs)
            output = vectors.new_empty(*shape, config.output_size, dtype=dtype)
        vectors_end = config.word_vector_dim if config.include_word_vectors else 0
        top_start = vectors_end + (config.encoder_output_size if config.cove_output == "both" else 0)
        top_end = top_start + config.encoder_output_size
        top_in_output = output is not None and not output_hidden_states
        # eq. 1/5: CoVe(w) = MT-LSTM(GloVe(w)); empty rows run on one pad step and are masked to zero below
        top_only = self.reads_top_layer_only(output_hidden_states)
        layers, final_h, final_c = self.encoder(vectors, lengths.clamp(min=1), final_states=output_final_states,
                                                top_only=top_only, unpacked=unpacked,
                                                out=output[..., top_start:top_end] if top_in_output else None)
        if final_h is not None and (exporting or bool((lengths == 0).any())):  # empty rows ran on a pad step: zero
            has_tokens = (lengths > 0).to(device=final_h.device, dtype=final_h.dtype).view(-1, 1, 1)  # (B, 1, 1)
            final_h, final_c = final_h * has_tokens, final_c * has_tokens
        # zero at padding: the layers where they are returned as they are, (B, T, 600) each; `output` once, below
        if mask_outputs and (output is None or output_hidden_states):
            layers = [layer * mask for layer in layers]

        if output is None:
            last_hidden_state = layers[-1]
        else:
            if config.include_word_vectors:
                output[..., :vectors_end] = vectors
            if config.cove_output == "both":
                output[..., vectors_end:top_start] = layers[0]
            if not top_in_output:
                output[..., top_start:top_end] = layers[-1]
            if self.char_ngram_embeddings is not None:
                output[..., top_end:] = self.char_ngram_embeddings(input_ids)  # zero at pad ids (padding_idx)
            if mask_outputs:
                output.mul_(mask)  # every part at once, the top layer too where the encoder wrote it here
            last_hidden_state = output

        hidden_states = (vectors, *layers) if output_hidden_states else None
        output = CoveModelOutput(
            last_hidden_state=last_hidden_state,
            hidden_states=hidden_states,
            final_hidden_state=final_h,
            final_cell_state=final_c,
            attention_mask=attention_mask,
        )
        return output if return_dict else output.to_tuple()

    @torch.inference_mode()
    def encode(
        self,
        texts: list,
        tokenizer=None,
        batch_size: int = 64,
        progress: bool = False,
        num_workers: Optional[int] = None,
    ) -> list:
        """Texts (or lists of token ids) -> one `(T_i, config.output_size)` tensor per input, in the input order.

        The fast path for feature extraction. Inputs are sorted by length and cut into batches of up to `batch_size`
        neighbours (`length_bucketed_batches` without its length-ratio cut), so most batches hold equal or near-equal
        lengths; they run without final states (`output_final_states=False`). On CPU they run unpacked, on the fused
        LSTM kernel, in time segments (`plan_time_segments`), so the long rows of a mixed batch go on alone once the
        short ones end and the padding costs little. Where the top layer runs as one packed call
        (`CoveEncoder.uses_single_call`: CUDA), packing wastes no work on padding. Padded ids are gathered from one flat
        tensor (no per-item tensor building), the ids are checked once on the host, and on a GPU each batch goes over in
        pinned memory, without a wait: nothing in the loop reads back from the device, so the host queues the next batch
        while the GPU runs this one. On CPU with more than one intra-op thread (OpenMP), the batches are shared among
        that many host threads that each run with one (`run_on_cpu_workers`): whole batches side by side instead of each
        small per-step GEMM split among the threads; a batch past GUIDED_MIN_ROWS rows then holds at most 1/workers of
        the tokens still to batch, so the last batches shrink and the workers finish together. `num_workers` overrides
        the count (1: batches of `batch_size`, one at a time on every intra-op thread; more than 1 on CPU only). Results
        equal running each input alone (tested), whatever the workers. An empty input gives a `(0, output_size)` tensor.
        `tokenizer` is required for strings; it must be the checkpoint's tokenizer. Runs in the model's current mode
        (eval after `from_pretrained`).
        """
        if isinstance(texts, str):
            raise TypeError("encode expects a list of texts; wrap a single text in a list")
        device = self.embeddings.weight.device
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int)
                                        or num_workers < 1 or (num_workers > 1 and device.type != "cpu")):
            raise ValueError(f"num_workers must be None or an int >= 1, and 1 off the CPU; got {num_workers!r} on "
                             f"{device}")
        texts = list(texts)
        if texts and isinstance(texts[0], str):
            if tokenizer is None:
                raise ValueError("encode needs the tokenizer to encode strings")
            check_tokenizer_matches(self.config, tokenizer)
            ids = tokenizer(texts, add_special_tokens=True)["input_ids"]
        else:
            ids = [list(x) for x in texts]
        results = [None] * len(ids)
        all_lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
        flat_ids = torch.tensor([token for x in ids for token in x] + [self.config.pad_token_id], dtype=torch.long)
        self.check_token_ids(flat_ids)  # once, on the host: forward's per-batch device checks are skipped
        starts = all_lengths.cumsum(0) - all_lengths  # where each input begins in flat_ids
        pad_position = flat_ids.shape[0] - 1  # the pad id appended at the end
        packed_top_layer = self.reads_top_layer_only(False) and self.encoder.uses_single_call(device)
        length_list = all_lengths.tolist()
        workers = cpu_worker_count(device) if num_workers is None else num_workers
        batches = length_bucketed_batches(length_list, batch_size, min_ratio=0.0, workers=workers)  # longest first
        workers = min(workers, len(batches))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(batches), desc="encoding", unit=" batches")

        def run_batch(batch):
            lengths = all_lengths[batch]  # (B,) on the host, longest first
            if lengths[0] == 0:  # the rest of the (sorted) batch is empty too: (0, D) rows in the others' dtype
                dtype = self.output_dtype(self.embeddings.weight, masked=False)
                for i in batch:
                    results[i] = torch.zeros(0, self.config.output_size, dtype=dtype, device=device)
                return
            steps = torch.arange(int(lengths[0])).unsqueeze(0)  # (1, T)
            valid = steps < lengths.unsqueeze(1)  # (B, T)
            positions = torch.where(valid, starts[batch].unsqueeze(1) + steps, pad_position)
            input_ids = flat_ids[positions]  # (B, T), right-padded
            mask = None if lengths[-1] == lengths[0] else to_device_async(valid.long(), device)
            hidden = self.forward_checked(to_device_async(input_ids, device), mask, lengths, output_hidden_states=False,
                                          output_final_states=False, return_dict=False,
                                          unpacked=not packed_top_layer, zero_padding=False)[0]  # (B, T, D)
            for i, length, row in zip(batch, lengths.tolist(), hidden.unbind(0)):
                results[i] = row[:length]

        with self.encoder.weights_cast_once():  # under autocast: frozen weights cast once for all batches
            run_on_cpu_workers(run_batch, batches, workers, bar)  # on CPU: side by side, one intra-op thread each
        if bar is not None:
            bar.close()
        return results


def to_device_async(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`; to a GPU through pinned memory without waiting for the copy (the copy is queued
    before any kernel that reads it). A no-op on CPU."""
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)
