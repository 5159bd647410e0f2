"""Agreement of the CoVe fast tokenizer with sacremoses on real sentences.

Reference: `[t.lower() for t in MosesTokenizer(lang="en").tokenize(text, escape=False)]` (how the vectors were
built). Ours: the tokens of `build_cove_tokenizer(...)`, i.e. `moses_tokenize(text)` (the same normalizer and
pre-tokenizer; `check_fast_tokenizer` checks that both give the same strings). Metric: % of texts tokenized
identically, per dataset and overall (pooled), plus the most common disagreements (as "reference span -> our span").
"""

from __future__ import annotations

import collections
import difflib
import gzip
import json
import lzma
import re
import time
from pathlib import Path

# PTB escapes in the SST trees, undone as the vectors' text was (order matters: `` before `).
PTB_UNESCAPES = [
    ("-LRB-", "("), ("-RRB-", ")"), ("-LSB-", "["), ("-RSB-", "]"), ("-LCB-", "{"), ("-RCB-", "}"),
    ("``", '"'), ("''", '"'), ("`", "'"), ("\\/", "/"), ("\\*", "*"),
]
SST_LEAF = re.compile(r"\(\d+ ([^()]+)\)")


def sst_tree_sentence(line: str) -> str:
    """Leaf words of one SST PTB tree joined by spaces, PTB escapes undone."""
    text = " ".join(SST_LEAF.findall(line))
    for escaped, plain in PTB_UNESCAPES:
        text = text.replace(escaped, plain)
    return text


def read_sst_senteval(data_dir: Path, limit: int | None = None) -> list[str]:
    lines = (data_dir / "sst" / "senteval" / "binary.sentiment-test").read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[0] for line in lines if line.strip()][:limit]


def read_sst_trees(data_dir: Path, limit: int | None = None) -> list[str]:
    lines = (data_dir / "sst" / "trees" / "test.txt").read_text(encoding="utf-8").splitlines()
    return [sst_tree_sentence(line) for line in lines if line.strip()][:limit]


def read_trec(data_dir: Path, limit: int | None = None) -> list[str]:
    lines = (data_dir / "trec" / "TREC_10.label").read_text(encoding="latin-1").splitlines()
    return [line.split(" ", 1)[1] for line in lines if line.strip()][:limit]


def read_multi30k(data_dir: Path, limit: int | None = None) -> list[str]:
    with gzip.open(data_dir / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle][:limit]


def read_imdb(data_dir: Path, limit: int | None = 2000) -> list[str]:
    texts = []
    with lzma.open(data_dir / "imdb" / "test.jsonl.xz", "rt", encoding="utf-8") as handle:
        for line in handle:
            if limit is not None and len(texts) >= limit:
                break
            texts.append(json.loads(line)["text"].replace("<br />", " "))
    return texts


def read_snli(data_dir: Path, limit: int | None = 2000) -> list[str]:
    lines = []
    for name in ("s1.test", "s2.test"):
        lines += (data_dir / "snli" / name).read_text(encoding="utf-8").splitlines()[: limit and limit // 2]
    return lines


def read_squad(data_dir: Path, limit: int | None = 2000) -> list[str]:
    with lzma.open(data_dir / "squad" / "dev-v1.1.json.xz", "rt", encoding="utf-8") as handle:
        articles = json.load(handle)["data"]
    contexts = [p["context"] for a in articles for p in a["paragraphs"]]
    questions = [q["question"] for a in articles for p in a["paragraphs"] for q in p["qas"]]
    half = None if limit is None else limit // 2
    return contexts[:half] + questions[:half]


def read_imdb_train(data_dir: Path, limit: int | None = 1000) -> list[str]:
    texts = []
    with lzma.open(data_dir / "imdb" / "train.jsonl.xz", "rt", encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if limit is not None and len(texts) >= limit:
                break
            if index % 25 == 0:  # every 25th review: both labels, spread over the file
                texts.append(json.loads(line)["text"].replace("<br />", " "))
    return texts


def read_multi30k_train(data_dir: Path, limit: int | None = 3000) -> list[str]:
    with gzip.open(data_dir / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle][:limit]


DATASETS = {
    "sst_senteval_test": ("sst/senteval/binary.sentiment-test (text before the tab)", read_sst_senteval),
    "sst_trees_test": ("sst/trees/test.txt (leaves, PTB escapes undone)", read_sst_trees),
    "trec_test": ("trec/TREC_10.label (latin-1, label removed)", read_trec),
    "multi30k_test2016": ("multi30k/test_2016_flickr.en.gz", read_multi30k),
    "imdb_test": ("imdb/test.jsonl.xz, first N reviews in file order (all negative), <br /> -> space", read_imdb),
}
# Further real text, reported separately (not part of the target figure).
EXTRA_DATASETS = {
    "snli_test": ("snli/s1.test + s2.test, first 1000 lines each (PTB-tokenized)", read_snli, 2000),
    "squad_dev": ("squad/dev-v1.1.json.xz, first 1000 contexts + first 1000 questions", read_squad, 2000),
    "imdb_train_every25": ("imdb/train.jsonl.xz, every 25th review (1000), <br /> -> space", read_imdb_train, 1000),
    "multi30k_train": ("multi30k/train.en.gz, first 3000 lines", read_multi30k_train, 3000),
}


def disagreements(reference: list[str], ours: list[str]) -> list[tuple[str, str]]:
    """The differing spans of two token lists, as ("ref tokens", "our tokens") pairs."""
    matcher = difflib.SequenceMatcher(a=reference, b=ours, autojunk=False)
    return [
        (" ".join(reference[i1:i2]), " ".join(ours[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def moses_reference(text: str, moses, lowercase: bool = True) -> list[str]:
    """How the vectors were built: Moses(lang="en", escape=False), then `str.lower()` per token."""
    tokens = moses.tokenize(text, escape=False)
    return [token.lower() for token in tokens] if lowercase else tokens


def reference_tokenizer(lowercase: bool = True):
    from sacremoses import MosesTokenizer

    moses = MosesTokenizer(lang="en")
    return lambda text: moses_reference(text, moses, lowercase)


def measure(texts: list[str], moses, max_examples: int = 3) -> dict:
    """Agreement of `moses_tokenize` with sacremoses on `texts`, lower-cased (the target) and cased."""
    from modeling_cove.tokenization_cove import moses_tokenize

    identical = identical_cased = ref_tokens = 0
    seconds_moses = seconds_ours = 0.0
    spans = collections.Counter()
    examples: dict[tuple[str, str], list[str]] = {}
    for text in texts:
        start = time.perf_counter()
        ref_cased = moses.tokenize(text, escape=False)
        middle = time.perf_counter()
        got_cased = moses_tokenize(text, lowercase=False)
        got = moses_tokenize(text, lowercase=True)
        seconds_moses += middle - start
        seconds_ours += (time.perf_counter() - middle) / 2
        ref = [token.lower() for token in ref_cased]
        ref_tokens += len(ref)
        identical_cased += got_cased == ref_cased
        if ref == got:
            identical += 1
            continue
        for span in disagreements(ref, got):
            spans[span] += 1
            bucket = examples.setdefault(span, [])
            if len(bucket) < max_examples:
                bucket.append(text if len(text) <= 300 else _context(text, span[0]))
    return {
        "texts": len(texts),
        "identical": identical,
        "percent_identical": round(100.0 * identical / max(len(texts), 1), 3),
        "percent_identical_cased": round(100.0 * identical_cased / max(len(texts), 1), 3),
        "reference_tokens": ref_tokens,
        "tokens_per_second_sacremoses": round(ref_tokens / max(seconds_moses, 1e-9)),
        "tokens_per_second_ours": round(ref_tokens / max(seconds_ours, 1e-9)),
        "_spans": spans,
        "_examples": examples,
    }


def _context(text: str, ref_span: str, width: int = 120) -> str:
    """A window of a long text around the first token of a disagreement (best effort)."""
    probe = ref_span.split(" ")[0] if ref_span else ""
    index = text.lower().find(probe) if probe else -1
    if index < 0:
        return text[:300] + " ..."
    lo, hi = max(0, index - width), min(len(text), index + width)
    return ("... " if lo else "") + text[lo:hi] + (" ..." if hi < len(text) else "")


def top_disagreements(spans: collections.Counter, examples: dict, n: int) -> list[dict]:
    return [
        {"reference": ref, "ours": ours, "count": count, "examples": examples[(ref, ours)]}
        for (ref, ours), count in spans.most_common(n)
    ]


def check_fast_tokenizer(texts: list[str], lowercase: bool = True) -> None:
    """The HF tokenizer must produce exactly `moses_tokenize`'s tokens (vocabulary = those tokens)."""
    from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize

    expected = [moses_tokenize(text, lowercase=lowercase) for text in texts]
    fast = build_cove_tokenizer(sorted({t for tokens in expected for t in tokens}), lowercase=lowercase,
                                model_max_length=10**6)
    for text, tokens in zip(texts, expected):
        got = fast.convert_ids_to_tokens(fast(text)["input_ids"])
        if got != tokens:
            raise AssertionError(f"fast tokenizer and moses_tokenize disagree on {text!r}: {got} != {tokens}")


# Synthetic stress test: random strings over the characters and pieces the Moses rules care about.
STRESS_PIECES = [
    "a", "B", "s", "t", "n", "S", "I", "'", "'", "''", ".", ". ", "..", "...", ",", ",", "5", "12", "-", "--", "`",
    "``", '"', "(", ")", "!", "?", " ", " ", "  ", "\t", "Mr", "No", "Dr", "U.S", "e.g", "pp", "Art", "\u00e9",
    "\u00c9", "\u00b2", "\u00df", "\u0130", "\u03a3", "\u00a0", "\x01", "\u2013", "\u2019", "$", "&", "/", ":",
]
# Non-Latin scripts, where Moses' frozen Perl character tables and Unicode properties differ.
NON_LATIN_PROBES = ["\u65e5\u672c\u8a9e\u306e\u6587", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "a\u0363b c",
                    "\u0939\u093f\u0928\u094d\u0926\u0940", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629"]


def stress_test(moses, count: int, seed: int) -> dict:
    import random

    from modeling_cove.tokenization_cove import moses_tokenize

    rng = random.Random(seed)
    texts = ["".join(rng.choice(STRESS_PIECES) for _ in range(rng.randint(1, 14))) for _ in range(count)]
    failures = [(t, moses_reference(t, moses), moses_tokenize(t)) for t in texts
                if moses_reference(t, moses) != moses_tokenize(t)]
    return {
        "description": f"{count} random strings of 1-14 pieces from STRESS_PIECES "
        f"(instruments.tokenizer_agreement), random.Random({seed}); lower-cased comparison",
        "texts": count,
        "identical": count - len(failures),
        "percent_identical": round(100.0 * (count - len(failures)) / count, 3),
        "examples": [{"text": t, "reference": r, "ours": o} for t, r, o in failures[:10]],
        "non_latin_probes": [
            {"text": t, "reference": moses_reference(t, moses), "ours": moses_tokenize(t),
             "identical": moses_reference(t, moses) == moses_tokenize(t)}
            for t in NON_LATIN_PROBES
        ],
    }


def run_datasets(datasets: dict, data_dir: Path, moses, limits: dict, top: int) -> tuple[dict, dict]:
    results, spans, examples = {}, collections.Counter(), {}
    for name, (source, reader) in datasets.items():
        texts = reader(data_dir, limits.get(name))
        stats = measure(texts, moses)
        check_fast_tokenizer(texts[:50], lowercase=True)
        check_fast_tokenizer(texts[:20], lowercase=False)
        dataset_spans, dataset_examples = stats.pop("_spans"), stats.pop("_examples")
        spans.update(dataset_spans)
        for key, value in dataset_examples.items():
            examples.setdefault(key, value)
        stats["source"] = source
        stats["top_disagreements"] = top_disagreements(dataset_spans, dataset_examples, 8)
        results[name] = stats
        print(f"{name:20s} {stats['identical']:5d}/{stats['texts']:5d} = {stats['percent_identical']:7.3f} %"
              f"  (cased {stats['percent_identical_cased']:.3f} %)", flush=True)
    total = sum(r["texts"] for r in results.values())
    identical = sum(r["identical"] for r in results.values())
    summary = {
        "texts": total,
        "identical": identical,
        "percent_identical": round(100.0 * identical / max(total, 1), 3),
        "macro_percent_identical": round(sum(r["percent_identical"] for r in results.values()) / len(results), 3),
        "top_disagreements": top_disagreements(spans, examples, top),
    }
    return results, summary


def agreement_report(data_dir: Path, imdb_limit: int = 2000, limit: int | None = None, top: int = 25,
                     extra: bool = True, stress: int = 20000) -> dict:
    """The agreement figures: the target datasets (`DATASETS`; IMDb cut at `imdb_limit` reviews), the extra ones
    unless `extra` is False, `stress` synthetic strings (0: none); `limit` caps every dataset (smoke runs)."""
    import sacremoses
    import tokenizers
    import transformers

    moses = sacremoses.MosesTokenizer(lang="en")

    def limits_for(names, defaults: dict) -> dict:
        capped = {}
        for name in names:
            cap = defaults.get(name)
            capped[name] = cap if limit is None else limit if cap is None else min(cap, limit)
        return capped

    results, overall = run_datasets(DATASETS, data_dir, moses, limits_for(DATASETS, {"imdb_test": imdb_limit}), top)
    print(f"{'overall (pooled)':20s} {overall['identical']:5d}/{overall['texts']:5d} = "
          f"{overall['percent_identical']:7.3f} %   macro {overall['macro_percent_identical']} %")
    extra_results, extra_overall = {}, None
    if extra:
        print("extra datasets (not part of the target):")
        extra_defs = {name: (source, reader) for name, (source, reader, _) in EXTRA_DATASETS.items()}
        extra_limits = limits_for(extra_defs, {name: cap for name, (_, _, cap) in EXTRA_DATASETS.items()})
        extra_results, extra_overall = run_datasets(extra_defs, data_dir, moses, extra_limits, top)
    stress_results = None
    if stress > 0:
        stress_results = stress_test(moses, stress, seed=0)
        print(f"{'stress (synthetic)':20s} {stress_results['identical']:5d}/{stress_results['texts']:5d} = "
              f"{stress_results['percent_identical']:7.3f} %")
    return {
        "description": "share of texts whose CoVe tokenizer tokens (modeling_cove.tokenization_cove) equal "
        "[t.lower() for t in sacremoses.MosesTokenizer(lang='en').tokenize(text, escape=False)]; "
        "percent_identical_cased compares lowercase=False with the un-lowered Moses tokens",
        "versions": {"sacremoses": getattr(sacremoses, "__version__", "unknown"),
                     "tokenizers": tokenizers.__version__, "transformers": transformers.__version__},
        "target_percent": 97.0,
        "overall": overall,
        "datasets": results,
        "extra_overall": extra_overall,
        "extra_datasets": extra_results,
        "stress_test": stress_results,
    }
