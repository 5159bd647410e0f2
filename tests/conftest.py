import fcntl
import os
from pathlib import Path

# OpenMP threads that spin at barriers make every op 10-100x slower on shared cores; must precede `import torch`.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO.parent / "shared" / "data"

# Tests never reach the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def require_data(*parts) -> Path:
    """Path under ../shared/data, or skip the test with a clear reason where that folder is absent."""
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available: {path} (the tests expect ../shared/data beside the repo)")
    return path


@pytest.fixture
def data_dir() -> Path:
    return require_data()


@pytest.fixture
def alone_with_the_cores(tmp_path_factory):
    """Held while a test launches a two-process (DDP) job: such a job takes both of the machine's cores, so the
    suite's workers (pytest-xdist) run one at a time, not side by side (one had its launcher hang at exit once so)."""
    lock_file = tmp_path_factory.getbasetemp().parent / "two-process-jobs.lock"  # shared by every worker of the run
    with open(lock_file, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture
def single_thread():
    """Tiny models gain nothing from threads, and on a busy shared CPU every OpenMP barrier can wait for a scheduler
    slice (seconds per tiny forward measured here): run single-threaded, then restore."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def exit_of(main, argv: list, capsys) -> tuple:
    """(exit status, stderr) of a command's `main(argv)` run in this process, on an input it refuses (SystemExit):
    the bad-input checks of the command line without an interpreter of their own. A command sets torch's thread
    count; it is put back."""
    import torch

    threads = torch.get_num_threads()
    try:
        with pytest.raises(SystemExit) as stop:
            main(argv)
    finally:
        torch.set_num_threads(threads)
    return stop.value.code, capsys.readouterr().err


def assert_reproduces(actual, expected, what=""):
    """A model rebuilt from saved weights (bit-equal) reproduces the original's outputs: token ids and other integer
    outputs exactly, floats to within float rounding. Not bit-equal: on some CPUs (seen on AMD EPYC: 1.2e-7 on a BCN
    logit of 0.77) two models with bit-equal weights differ by an ulp inside the test session while the same comparison
    alone in a fresh process is bit-equal; most likely the loaded weights' memory alignment (safetensors places them
    at other offsets) steers MKL to kernels that sum in another order. The tolerance is under 10x that difference."""
    import torch

    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (what, actual.dtype, actual.shape)
    if actual.is_floating_point():
        torch.testing.assert_close(actual, expected, rtol=0, atol=1e-6, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(actual, expected), what


def assert_same_weights(model, loaded):
    """`loaded` (from `model.save_pretrained`) holds the same tensors as `model`, bit for bit, under the same names."""
    import torch

    saved, restored = model.state_dict(), loaded.state_dict()
    assert saved.keys() == restored.keys()
    for name, tensor in saved.items():
        assert torch.equal(restored[name], tensor), name


def simulate_cpu_without_bf16_lstm(monkeypatch):
    """What an AVX2-only CPU does, on any CPU: the model's capability probe reports no bf16 LSTM kernel (the switch
    `lstm_kernels.py` documents for tests, `_LSTM_KERNEL_SUPPORT`), and `torch.lstm` / `nn.LSTM` raise oneDNN's
    error when called under CPU bf16 autocast (outside autocast, with any weights, they run as usual)."""
    import torch
    from torch import nn

    from modeling_cove import lstm_kernels

    monkeypatch.setattr(lstm_kernels, "_LSTM_KERNEL_SUPPORT", {("cpu", torch.bfloat16): False})
    kernel = torch.lstm

    def lstm_without_bf16_kernel(*args, **kwargs):
        if torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16:
            raise RuntimeError("could not create a primitive descriptor for the LSTM forward propagation primitive "
                               "(simulated: this CPU has no bf16 LSTM kernel)")
        return kernel(*args, **kwargs)

    monkeypatch.setattr(torch, "lstm", lstm_without_bf16_kernel)
    monkeypatch.setattr(torch._VF, "lstm", lstm_without_bf16_kernel)  # what nn.LSTM calls
    lstm = nn.LSTM(2, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(RuntimeError, match="primitive descriptor"):
        lstm(torch.zeros(1, 1, 2))  # the simulation is in force


@pytest.fixture
def cpu_without_bf16_lstm(monkeypatch):
    """`simulate_cpu_without_bf16_lstm` for the test that asks for it."""
    simulate_cpu_without_bf16_lstm(monkeypatch)


@pytest.fixture(autouse=True)
def no_leaked_accelerate_precision():
    """`TrainingArguments(bf16=True)` sets ACCELERATE_MIXED_PRECISION for the process, and every later `Accelerator()`
    (train_bilm's, train_mt's) would then train under bf16 autocast: each test starts from the value it found."""
    before = os.environ.get("ACCELERATE_MIXED_PRECISION")
    yield
    if before is None:
        os.environ.pop("ACCELERATE_MIXED_PRECISION", None)
    else:
        os.environ["ACCELERATE_MIXED_PRECISION"] = before


def tiny_tagging_setup(root: Path, task: str, sentences: int, preset_lines: str = "") -> tuple:
    """(data folder, a tiny encoder checkpoint, a tiny tagging preset) in `root` for training runs on `task`: the
    encoder's vocabulary is the lower-cased words of the task's first `sentences` training sentences."""
    import torch

    from modeling_cove import CoveConfig, CoveModel
    from modeling_cove.tokenization_cove import build_cove_tokenizer
    from modeling_cove.training.data.tagging import load_tagging_splits

    data_dir = require_data(task).parent
    train = load_tagging_splits(task, data_dir)["train"]
    tokenizer = build_cove_tokenizer(sorted({w.lower() for s in train["words"][:sentences] for w in s}))
    torch.manual_seed(0)
    CoveModel(CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=8)).save_pretrained(root / "enc")
    tokenizer.save_pretrained(root / "enc")
    preset = root / "tiny.yaml"
    preset.write_text(f"task: {task}\nepochs: 2\nbatch_size: 8\nhidden_size: 6\nmodule_dim: 6\n{preset_lines}"
                      "eval_batch_size: 32\n")
    return data_dir, root / "enc", preset
