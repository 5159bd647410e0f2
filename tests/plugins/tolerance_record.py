"""A pytest plugin that records, for every `torch.testing.assert_close` and scalar `pytest.approx` comparison, the
tolerance given and the largest difference measured, with the test file's line: how the suite's tolerances were set
(each at most 10x the largest difference measured as the machine is and on the AVX2-only path). Not loaded by default:

    TOL_OUT=/tmp/native.jsonl PYTHONPATH=tests/plugins python -m pytest -p tolerance_record -m "not slow"
    TOL_OUT=/tmp/avx2.jsonl ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 PYTHONPATH=tests/plugins \
        python -m pytest -p tolerance_record -m "not slow"

Each line of TOL_OUT is one comparison: the test, "file:line", the tolerance and max_abs / max_rel."""
import json
import os
import traceback

import pytest
import torch

OUT = open(os.environ.get("TOL_OUT", "tolerances.jsonl"), "a")
_orig = torch.testing.assert_close
_current = {"test": None}


def _caller():
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/tests/" in frame.filename and "tolerance_record" not in frame.filename:
            return f"{frame.filename.split('/tests/')[-1]}:{frame.lineno}"
    return "?"


def assert_close(actual, expected, *args, **kwargs):
    rec = {"test": _current["test"], "where": _caller(), "kind": "assert_close",
           "rtol": kwargs.get("rtol"), "atol": kwargs.get("atol")}
    try:
        a = torch.as_tensor(actual).detach().double(); e = torch.as_tensor(expected).detach().double()
        if a.shape == e.shape and a.numel():
            d = (a - e).abs()
            rec["max_abs"] = float(d.max())
            rel = d / e.abs().clamp_min(1e-300)
            rec["max_rel"] = float(rel[e.abs() > 0].max()) if (e.abs() > 0).any() else 0.0
    except Exception as err:  # noqa: BLE001 - a comparison the record cannot read is recorded as such
        rec["error"] = repr(err)[:100]
    OUT.write(json.dumps(rec) + "\n"); OUT.flush()
    return _orig(actual, expected, *args, **kwargs)


torch.testing.assert_close = assert_close

from _pytest import approx as python_api  # noqa: E402

_orig_eq = python_api.ApproxScalar.__eq__


def approx_eq(self, actual):
    rec = {"test": _current["test"], "where": _caller(), "kind": "approx", "rel": self.rel, "abs": self.abs}
    try:
        rec["max_abs"] = abs(float(actual) - float(self.expected))
        rec["max_rel"] = rec["max_abs"] / abs(float(self.expected)) if float(self.expected) else 0.0
    except Exception as err:  # noqa: BLE001 - a comparison the record cannot read is recorded as such
        rec["error"] = repr(err)[:100]
    OUT.write(json.dumps(rec) + "\n"); OUT.flush()
    return _orig_eq(self, actual)


python_api.ApproxScalar.__eq__ = approx_eq


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _current["test"] = item.nodeid
