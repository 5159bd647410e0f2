"""A pytest plugin that records, for every comparison written in tests/ (`torch.testing.assert_close`,
`torch.allclose`, `numpy.allclose`, `numpy.testing.assert_allclose`, `math.isclose` and scalar `pytest.approx`,
element by element for sequences), the tolerance given and the largest difference measured, with the test file's line:
how the suite's tolerances were set (each at most 10x the largest difference measured as the machine is and on the
AVX2-only path, exact where every run measured 0). Not loaded by default:

    TOL_OUT=/tmp/native.jsonl PYTHONPATH=tests/plugins python -m pytest -p tolerance_record -m "not slow"
    TOL_OUT=/tmp/avx2.jsonl ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 PYTHONPATH=tests/plugins \
        python -m pytest -p tolerance_record -m "not slow"

The two variables hold ATen's and oneDNN's kernels to AVX2; MKL (matrix products) and numpy's OpenBLAS pick theirs
apart, so an AVX2-only CPU is nearer with `MKL_ENABLE_INSTRUCTIONS=AVX2 NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL"
OPENBLAS_CORETYPE=Haswell` added (a third run: some comparisons equal in the first two differed there by a few ulps).

Each line of TOL_OUT is one comparison: the test, "file:line", the function, the tolerance keywords given (absent:
the function's default), the dtype, max_abs / max_rel and, for the boolean functions, their result (a site that
asserts a difference, `assert not torch.allclose(...)`, shows there how far apart the values were)."""
import json
import math
import os
import traceback

import numpy as np
import pytest
import torch

OUT = open(os.environ.get("TOL_OUT", "tolerances.jsonl"), "a")
_current = {"test": None}
_TOLERANCES = ("rtol", "atol", "rel_tol", "abs_tol")


def _caller(direct=False):
    """The test file's "file:line" that made the comparison; `direct`: only when the calling frame itself is in tests/
    (the library's own calls of torch.allclose or math.isclose are not the suite's comparisons)."""
    frames = [f for f in traceback.extract_stack()[:-2] if "tolerance_record" not in f.filename]
    for frame in reversed(frames[-1:] if direct else frames):
        if "/tests/" in frame.filename:
            return f"{frame.filename.split('/tests/')[-1]}:{frame.lineno}"
    return None


def _measure(rec, actual, expected):
    try:
        a, e = torch.as_tensor(np.asarray(actual) if not torch.is_tensor(actual) else actual), \
            torch.as_tensor(np.asarray(expected) if not torch.is_tensor(expected) else expected)
        rec["dtype"] = f"{str(a.dtype).replace('torch.', '')}/{str(e.dtype).replace('torch.', '')}"
        a, e = torch.broadcast_tensors(a.detach().cpu().double(), e.detach().cpu().double())
        if a.numel():
            d = (a - e).abs()
            rec["max_abs"] = float(d.max())
            nonzero = e.abs() > 0
            rec["max_rel"] = float((d[nonzero] / e.abs()[nonzero]).max()) if nonzero.any() else 0.0
    except Exception as err:  # noqa: BLE001 - a comparison the record cannot read is recorded as such
        rec["error"] = repr(err)[:100]


def _wrap(original, kind, direct):
    def wrapper(actual, expected, *args, **kwargs):
        where = _caller(direct)
        if where is None:
            return original(actual, expected, *args, **kwargs)
        rec = {"test": _current["test"], "where": where, "kind": kind,
               **{k: kwargs[k] for k in _TOLERANCES if k in kwargs}, "positional": len(args)}
        _measure(rec, actual, expected)
        try:
            result = original(actual, expected, *args, **kwargs)
        except AssertionError:
            rec["result"] = False
            OUT.write(json.dumps(rec) + "\n"); OUT.flush()
            raise
        if isinstance(result, (bool, np.bool_)):
            rec["result"] = bool(result)
        OUT.write(json.dumps(rec) + "\n"); OUT.flush()
        return result
    return wrapper


torch.testing.assert_close = _wrap(torch.testing.assert_close, "assert_close", direct=False)
torch.allclose = _wrap(torch.allclose, "torch.allclose", direct=True)
np.allclose = _wrap(np.allclose, "np.allclose", direct=True)
np.testing.assert_allclose = _wrap(np.testing.assert_allclose, "np.assert_allclose", direct=True)
math.isclose = _wrap(math.isclose, "math.isclose", direct=True)

from _pytest import approx as python_api  # noqa: E402

_orig_eq = python_api.ApproxScalar.__eq__


def approx_eq(self, actual):
    rec = {"test": _current["test"], "where": _caller(), "kind": "approx", "rel": self.rel, "abs": self.abs}
    try:
        rec["dtype"] = type(actual).__name__
        rec["max_abs"] = abs(float(actual) - float(self.expected))
        rec["max_rel"] = rec["max_abs"] / abs(float(self.expected)) if float(self.expected) else 0.0
    except Exception as err:  # noqa: BLE001 - a comparison the record cannot read is recorded as such
        rec["error"] = repr(err)[:100]
    result = _orig_eq(self, actual)
    rec["result"] = bool(result)
    OUT.write(json.dumps(rec) + "\n"); OUT.flush()
    return result


python_api.ApproxScalar.__eq__ = approx_eq


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _current["test"] = item.nodeid
