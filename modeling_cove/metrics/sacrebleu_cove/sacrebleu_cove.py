"""BLEU for the CoVe MT model as an `evaluate` module that loads offline by path:

    evaluate.load("modeling_cove/metrics/sacrebleu_cove")

Two scores, both computed with `sacrebleu` on the whole corpus:

- `bleu`: **uncased tokenized BLEU**, as the CoVe paper reports it (McCann et al. 2017, §2): hypotheses and
  references are the lower-cased Moses tokens joined by single spaces, scored with
  `sacrebleu.corpus_bleu(hyps, refs, tokenize="none", lowercase=True)` (multi-bleu.perl on tokenized text).
- `sacrebleu`: **detokenized sacreBLEU**: the same token strings detokenized with `sacremoses.MosesDetokenizer(lang)`
  and scored with sacreBLEU's default `13a` tokenizer. Pass `raw_references` (the untokenized references) to score
  against them instead of detokenized token strings. Uncased by default (`detok_lowercase=True`) because the CoVe MT
  model produces lower-cased text; the standard cased sacreBLEU is `detok_lowercase=False`.
"""

import datasets
import evaluate

_DESCRIPTION = "Corpus BLEU (sacrebleu): uncased BLEU on Moses tokens (the CoVe paper's number) and detokenized sacreBLEU."
_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[str]`): one hypothesis per segment, tokens joined by spaces.
    references (`list[str]` or `list[list[str]]`): one tokenized reference (or several) per segment.
    raw_references (`list[str]` or `list[list[str]]`, *optional*): untokenized references for `sacrebleu`
        (default: `references` detokenized).
    lang (`str`, defaults to `"de"`): language of the Moses detokenizer.
    detok_lowercase (`bool`, defaults to `True`): case-insensitive detokenized sacreBLEU.
Returns:
    bleu (`float`): uncased tokenized BLEU in [0, 100].
    sacrebleu (`float`): detokenized BLEU (13a tokenizer) in [0, 100].
    precisions (`list[float]`), brevity_penalty (`float`), sys_len (`int`), ref_len (`int`): of `bleu`.
    signature, sacrebleu_signature (`str`): sacrebleu signatures of the two scores.
Example:
    >>> bleu = evaluate.load("modeling_cove/metrics/sacrebleu_cove")
    >>> bleu.compute(predictions=["ein hund läuft ."], references=["ein hund läuft ."])["bleu"]
    100.00000000000004
"""


def _as_reference_streams(references, num_predictions: int, name: str) -> list:
    """[[ref per segment], ...] (one stream per reference index), from one or several references per segment."""
    if len(references) != num_predictions:
        raise ValueError(f"{num_predictions} predictions but {len(references)} {name}")
    per_segment = [[ref] if isinstance(ref, str) else list(ref) for ref in references]
    counts = {len(refs) for refs in per_segment}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"every segment needs the same (non-zero) number of {name}, got {sorted(counts)}")
    return [list(stream) for stream in zip(*per_segment)]


class SacrebleuCove(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Post (2018), A Call for Clarity in Reporting BLEU Scores; McCann et al. (2017).",
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features({"predictions": datasets.Value("string"),
                                   "references": datasets.Sequence(datasets.Value("string"))}),
                datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            ],
        )

    def _compute(self, predictions, references, raw_references=None, lang="de", detok_lowercase=True):
        import sacrebleu
        from sacremoses import MosesDetokenizer

        if len(predictions) == 0:
            raise ValueError("BLEU of zero segments is undefined: got no predictions")
        ref_streams = _as_reference_streams(references, len(predictions), "references")
        # uncased tokenized BLEU (the paper's number): sacrebleu splits the Moses tokens at whitespace, as multi-bleu
        tokenized_bleu = sacrebleu.BLEU(tokenize="none", lowercase=True, force=True)  # force: no "detokenize?" note
        tokenized = tokenized_bleu.corpus_score(predictions, ref_streams)

        # detokenized sacreBLEU (13a)
        detok = MosesDetokenizer(lang=lang)
        hyps = [detok.detokenize(p.split()) for p in predictions]
        if raw_references is not None:
            detok_refs = _as_reference_streams(raw_references, len(predictions), "raw_references")
        else:
            detok_refs = [[detok.detokenize(r.split()) for r in stream] for stream in ref_streams]
        detok_bleu = sacrebleu.BLEU(lowercase=detok_lowercase)  # default tokenize="13a"
        detokenized = detok_bleu.corpus_score(hyps, detok_refs)
        return {
            "bleu": tokenized.score,
            "sacrebleu": detokenized.score,
            "precisions": tokenized.precisions,
            "brevity_penalty": tokenized.bp,
            "sys_len": tokenized.sys_len,
            "ref_len": tokenized.ref_len,
            "signature": str(tokenized_bleu.get_signature()),
            "sacrebleu_signature": str(detok_bleu.get_signature()),
        }
