"""The offline `evaluate` modules of `modeling_cove/metrics/`: `f1_cove` (scikit-learn's F1) and `sacrebleu_cove`
(sacreBLEU) return what they returned before they became thin wrappers, on the cases of
`tests/fixtures/metrics/make_fixtures.py` (saved in `expected.json` by the code of the commit it names)."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "metrics"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())

_spec = importlib.util.spec_from_file_location("make_metric_fixtures", FIXTURES / "make_fixtures.py")
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)


@pytest.fixture(scope="module")
def f1():
    return make_fixtures.load("f1_cove")


@pytest.fixture(scope="module")
def bleu():
    return make_fixtures.load("sacrebleu_cove")


def without_version(signature: str) -> str:
    """A sacrebleu signature without its `|version:...` field (the installed release may move on)."""
    return "|".join(field for field in signature.split("|") if not field.startswith("version:"))


@pytest.mark.parametrize("case", make_fixtures.F1_CASES, ids=[case[0] for case in make_fixtures.F1_CASES])
def test_f1_reproduces_the_saved_values(f1, case):
    name, predictions, references, kwargs = case
    result = f1.compute(predictions=predictions, references=references, **kwargs)
    assert result.keys() == {"f1"}
    assert result["f1"] == pytest.approx(EXPECTED["f1_cove"][name]["f1"], rel=0, abs=5e-16)


def test_f1_refuses_bad_input_naming_it(f1):
    with pytest.raises(ValueError, match="average must be"):
        f1.compute(predictions=[0, 1], references=[0, 1], average="samples")
    with pytest.raises(ValueError, match="no predictions"):
        f1.compute(predictions=[], references=[])


@pytest.mark.parametrize("case", make_fixtures.BLEU_CASES, ids=[case[0] for case in make_fixtures.BLEU_CASES])
def test_bleu_reproduces_the_saved_values(bleu, case):
    name, kwargs = case
    result = bleu.compute(**kwargs)
    expected = EXPECTED["sacrebleu_cove"][name]
    assert result.keys() == expected.keys()
    for key, value in expected.items():
        if key.endswith("signature"):
            assert without_version(result[key]) == without_version(value), key
        elif isinstance(value, list):
            assert all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(result[key], value, strict=True)), key
        else:
            assert result[key] == pytest.approx(value, abs=0, rel=0), key


def test_bleu_refuses_mismatched_references_naming_them(bleu):
    with pytest.raises(ValueError, match="2 predictions but 1 raw_references"):
        bleu.compute(predictions=["a b", "c d"], references=["a b", "c d"], raw_references=["a b"])
    with pytest.raises(ValueError, match="same \\(non-zero\\) number of references"):
        bleu.compute(predictions=["a b", "c d"], references=[["a b"], ["c d", "c e"]])


def test_tokenized_bleu_scores_tokens_without_a_detokenize_warning(bleu, caplog):
    """The paper's BLEU is on Moses tokens by design: sacrebleu's "forgot to detokenize?" note (for 100 lines ending
    in " .") would be noise in every training log."""
    lines = [f"ein hund läuft {i} ." for i in range(120)]
    with caplog.at_level("WARNING", logger="sacrebleu"):
        assert bleu.compute(predictions=lines, references=lines)["bleu"] == pytest.approx(100.0)
    assert not [record for record in caplog.records if "detokenize" in record.getMessage()]
