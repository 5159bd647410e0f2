"""The Hub model cards (README.md) of CoVe checkpoints: one writer, `write_card`, for every kind of checkpoint.

`write_card(kind, card_data, **sections)` renders the Jinja template `card_template.md` (shipped with this package)
into a `huggingface_hub.ModelCard`: the YAML front matter is `ModelCardData.to_yaml()`, written by huggingface_hub;
the body is the template's layout for `kind` (CARD_KINDS). Two families of cards use it:

- an evaluated checkpoint (an encoder, the BCN, the DCN, the MT model, a tagger), built from its evaluation record
  by `build_card` / `render_card`;
- an encoder exported at the end of a pretraining run (MT or biLM), a draft card built from the run's metrics by
  `encoder_export_card`.

Every number reported for *this model* comes from the evaluation record (`cards_record`, re-exported here) or the
pretraining metrics; the paper's numbers, shown beside ours, come from `papers` (the one file that holds them). A
card built from an evaluation record states only what the record says happened: the encoder the head really read
(pretrained, randomly initialised, unused, or unknown), the epochs and steps really run ("not recorded" when the
record lacks them, never the configured budget), and a paper column marked comparable only when the setting is.
`build_card` checks the parsed card's model-index against the record.

    from modeling_cove.training.publishing.cards import build_card, load_eval_json
    card = build_card(load_eval_json(ckpt / "eval_results.json"), config_dict, "org/cove-bcn-sst2")
    card.save(ckpt / "README.md")
"""

import json
from importlib import resources
from pathlib import Path
from typing import Optional

import jinja2
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..common import papers
from .cards_record import (  # re-exported: the card and its inputs have one import path
    ENCODER_KINDS,
    PICKLE_SUFFIXES,
    SCHEMA_VERSION,
    CheckpointError,
    EvalRecordError,
    check_record_matches_checkpoint,
    checkpoint_fingerprint,
    config_fingerprint,
    describe_encoder,
    find_safetensors_weights,
    load_eval_json,
    make_eval_record,
    read_config,
    validate_eval_record,
    weights_fingerprint,
    write_eval_json,
)

__all__ = [
    "CARD_KINDS", "CardError", "CheckpointError", "DEFAULT_LICENSE", "ENCODER_KINDS", "EvalRecordError",
    "METRIC_NAMES", "PICKLE_SUFFIXES", "SCHEMA_VERSION", "build_card", "card_data", "check_card",
    "check_record_matches_checkpoint", "checkpoint_fingerprint", "comparable_column", "config_fingerprint",
    "describe_encoder", "encoder_export_card", "encoder_text", "find_safetensors_weights", "load_eval_json",
    "make_eval_record", "progress_text", "read_config", "render_card", "validate_eval_record", "weights_fingerprint",
    "write_card", "write_eval_json",
]

TEMPLATE = resources.files("modeling_cove.training.publishing") / "card_template.md"
# The layouts of card_template.md: kind -> what it is for.
CARD_KINDS = {
    "encoder": "an evaluated CoVe encoder (CoveModel)",
    "bcn": "an evaluated BCN classifier (CoveForSequenceClassification)",
    "dcn": "an evaluated DCN question-answering model (CoveForQuestionAnswering)",
    "mt": "an evaluated English-German translation model (CoveForMachineTranslation)",
    "tagger": "an evaluated sequence tagger (CoveForTokenClassification), with its tag set",
    "mt-encoder-export": "the MT-LSTM encoder exported from a translation run, from the run's metrics",
    "bilm-encoder-export": "the encoder exported from a biLM pretraining run, from the run's metrics",
}
DEFAULT_LICENSE = "bsd-3-clause"
DEFAULT_INSTALL = "pip install modeling-cove   # or the wheel built from the modeling_cove repository"

METRIC_NAMES = {"accuracy": "Accuracy", "f1": "F1", "exact_match": "Exact match", "bleu": "BLEU",
                "precision": "Precision", "recall": "Recall"}

CITATION_COVE = """@inproceedings{mccann2017learned,
  title     = {Learned in Translation: Contextualized Word Vectors},
  author    = {McCann, Bryan and Bradbury, James and Xiong, Caiming and Socher, Richard},
  booktitle = {Advances in Neural Information Processing Systems 30 (NIPS 2017)},
  year      = {2017}
}"""
CITATION_DCN = """@inproceedings{xiong2017dynamic,
  title     = {Dynamic Coattention Networks for Question Answering},
  author    = {Xiong, Caiming and Zhong, Victor and Socher, Richard},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2017}
}"""

# What each architecture is, how it is loaded, and what the Hub should call it.
ARCHITECTURES = {
    "CoveModel": {
        "kind": "encoder",
        "auto_class": "AutoModel",
        "pipeline_tag": "feature-extraction",
        "tags": ["feature-extraction", "word-embeddings"],
        "what": "the CoVe encoder (MT-LSTM) alone: context vectors for every token (eqs. 1, 5, 6)",
    },
    "CoveForSequenceClassification": {
        "kind": "bcn",
        "auto_class": "AutoModelForSequenceClassification",
        "pipeline_tag": "text-classification",
        "tags": ["text-classification", "bcn"],
        "what": "a biattentive classification network (BCN, eqs. 7–16) over a frozen MT-LSTM encoder",
    },
    "CoveForQuestionAnswering": {
        "kind": "dcn",
        "auto_class": "AutoModelForQuestionAnswering",
        "pipeline_tag": "question-answering",
        "tags": ["question-answering", "dcn", "squad"],
        "what": "a dynamic coattention network (DCN) for extractive question answering over a frozen MT-LSTM "
                "encoder",
    },
    "CoveForMachineTranslation": {
        "kind": "mt",
        "auto_class": "AutoModelForSeq2SeqLM",
        "pipeline_tag": "translation",
        "tags": ["translation", "machine-translation", "seq2seq"],
        "what": "the attentional English→German LSTM translation model (eqs. 2–4) whose encoder is CoVe",
    },
    "CoveForTokenClassification": {
        "kind": "tagger",
        "auto_class": "AutoModelForTokenClassification",
        "pipeline_tag": "token-classification",
        "tags": ["token-classification", "sequence-labelling"],
        "what": "a sequence tagger (one tag per word) over the MT-LSTM encoder",
    },
}
HEADS_ON_FROZEN_ENCODER = ("CoveForSequenceClassification", "CoveForQuestionAnswering")
BASE_TAGS = ["cove", "lstm", "contextualized-word-vectors", "custom_code"]

EXAMPLES = {
    "sst2": "A gripping , beautifully acted film .",
    "sst5": "A gripping , beautifully acted film .",
    "imdb": "I loved this movie : the story , the acting , everything .",
    "trec6": "How far is it from Denver to Aspen ?",
    "trec50": "How far is it from Denver to Aspen ?",
}
PAIR_EXAMPLE = ("A man is playing a guitar on stage .", "Someone is making music .")
TAGGER_EXAMPLE = "Angela Merkel visited the Louvre in Paris ."


class CardError(ValueError):
    """The card cannot be generated (unknown architecture, card failing its own checks)."""


def _fmt(value) -> str:
    """A metric for display: at most 2 decimals (the model-index keeps the exact value)."""
    if isinstance(value, float):
        text = f"{value:.2f}".rstrip("0")
        return text + "0" if text.endswith(".") else text  # 89.0 stays "89.0", as printed in the paper
    return str(value)


def _table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _architecture(record: dict, config: dict) -> str:
    architectures = config.get("architectures") or [record["model"]["architecture"]]
    name = architectures[0]
    if name not in ARCHITECTURES:
        raise CardError(f"no model card recipe for architecture {name!r}; known: {sorted(ARCHITECTURES)}")
    return name


def _output_size(config: dict) -> int:
    """Width of `CoveModel.last_hidden_state` (CoveConfig.output_size)."""
    from modeling_cove import CoveConfig

    fields = {k: v for k, v in config.items() if k not in ("auto_map", "custom_pipelines")}
    return CoveConfig.from_dict(fields).output_size


def _has_qa_pipeline(config: dict) -> bool:
    return "question-answering" in (config.get("custom_pipelines") or {})


# ----------------------------------------------------------------------------------------------------------------
# What happened: the encoder really read, the training really run, the paper column really comparable
# ----------------------------------------------------------------------------------------------------------------

# The translation data each CoVe column of Table 2 was pretrained on (`training.encoder.pretraining.dataset`).
COVE_COLUMN_PRETRAINING = {"+CoVe-S": "multi30k", "+CoVe-M": "iwslt", "+CoVe-L": "wmt17", "+Char+CoVe-L": "wmt17"}
# Configured training budgets: never shown as if they had run (the record's epochs_run/steps_run say what ran).
BUDGET_KEYS = ("epochs", "num_train_epochs", "max_steps", "max_epochs")
NOT_RECORDED = "not recorded"


def encoder_block(record: dict) -> Optional[dict]:
    """`training.encoder` as a `{kind, ...}` block; a free-text label (older records) is of kind `unknown`."""
    encoder = record["training"].get("encoder")
    if encoder is None:
        return None
    if isinstance(encoder, str):
        return {"kind": "unknown", "name": encoder}
    return encoder


def _pretraining_text(pretraining: dict) -> str:
    parts = []
    if pretraining.get("source"):
        parts.append(pretraining["source"])
    if pretraining.get("dataset"):
        parts.append(f"translation data: {pretraining['dataset']}")
    if pretraining.get("corpora"):
        parts.append(f"text: {', '.join(pretraining['corpora'])}")
    if pretraining.get("complete_epochs") is not None:
        count = pretraining["complete_epochs"]
        parts.append(f"{count} complete epoch{'' if count == 1 else 's'}")
    if pretraining.get("steps_run") is not None:
        parts.append(f"{pretraining['steps_run']:,} steps")
    if pretraining.get("stop_reason"):
        parts.append(f"stopped: {pretraining['stop_reason']}")
    if pretraining.get("test_bleu") is not None:
        parts.append(f"test BLEU {_fmt(pretraining['test_bleu'])}")
    if pretraining.get("heldout_forward_perplexity") is not None:
        parts.append(f"held-out perplexity forward {_fmt(pretraining['heldout_forward_perplexity'])}, backward "
                     f"{_fmt(pretraining.get('heldout_backward_perplexity'))}")
    return "; ".join(parts) if parts else "its pretraining metrics were not recorded"


def encoder_text(record: dict) -> str:
    """One sentence on what the MT-LSTM under this model really is, from the record only."""
    encoder = encoder_block(record)
    if encoder is None:
        return f"which MT-LSTM it is was {NOT_RECORDED}"
    label = ", ".join(f"`{encoder[key]}`" for key in ("name", "path") if encoder.get(key))
    kind = encoder["kind"]
    if kind == "pretrained":
        pretraining = encoder.get("pretraining") or {}
        objective = ("pretrained as an ELMo-style bidirectional language model on English text"
                     if pretraining.get("objective") == "bilm" else "pretrained on English→German translation")
        return f"{objective} ({label + '; ' if label else ''}{_pretraining_text(pretraining)})"
    label = f" ({label})" if label else ""
    if kind == "random":
        return (f"randomly initialised and never trained{label}: its outputs carry no translation knowledge, so "
                "this is not CoVe")
    if kind == "unused":
        return f"not read by this model, which reads the word vectors only{label}"
    source = f"loaded from `{encoder['path']}`" if encoder.get("path") else \
        f"recorded as `{encoder['name']}`" if encoder.get("name") else "an MT-LSTM"
    return f"{source}; whether it was pretrained is {NOT_RECORDED}"


def comparable_column(record: dict) -> tuple:
    """(the paper column this model is comparable to, or None; why not, or None)."""
    column = record.get("paper_column")
    if column is None:
        return None, "the evaluation record names no paper column"
    if column not in COVE_COLUMN_PRETRAINING:
        return column, None  # Random / GloVe / GloVe+Char: the MT-LSTM plays no part
    encoder = encoder_block(record) or {"kind": "unknown"}
    if encoder["kind"] != "pretrained":
        return None, (f"the record names {column}, but the encoder is not a pretrained MT-LSTM "
                      f"({encoder_text(record)})")
    wanted = COVE_COLUMN_PRETRAINING[column]
    dataset = (encoder.get("pretraining") or {}).get("dataset")
    if dataset is None:
        return None, f"the record names {column}, but the encoder's pretraining data (needs {wanted}) is {NOT_RECORDED}"
    if dataset != wanted:
        return None, f"the record names {column} (pretrained on {wanted}), but the encoder was pretrained on {dataset}"
    return column, None


def progress_text(training: dict) -> str:
    """How long the run really trained, from `epochs_run` / `steps_run` / `stop_reason`; never the configured budget."""
    parts = []
    if training.get("epochs_run") is not None:
        parts.append(f"{_fmt(training['epochs_run'])} epochs")
    if training.get("steps_run") is not None:
        parts.append(f"{training['steps_run']:,} optimizer steps")
    text = ", ".join(parts) if parts else f"{NOT_RECORDED} (the evaluation record does not say how long it trained)"
    if training.get("stop_reason"):
        text += f"; stopped: {training['stop_reason']}"
    return text


# ----------------------------------------------------------------------------------------------------------------
# Sections
# ----------------------------------------------------------------------------------------------------------------


def paper_rows(dataset_key: Optional[str]) -> list:
    """The paper's numbers for a dataset (`papers`): [(label, split, {metric type: value})]."""
    rows = []
    table2 = papers.table2_row(dataset_key)
    mt = papers.mt_bleu(dataset_key)
    if table2:
        metric = papers.table2_metric(dataset_key)
        rows += [(f"{column} (Table 2)", "validation", {metric: value}) for column, value in table2.items()]
        if papers.table3_test(dataset_key) is not None:
            rows.append((f"{papers.table3_model()} (Table 3)", "test", {"accuracy": papers.table3_test(dataset_key)}))
        if dataset_key == "squad":
            rows += [(label, "validation (dev)", values) for label, values in papers.squad_dev()]
    elif mt is not None:
        rows.append((mt["model"], mt["split"], {"bleu": mt["bleu"]}))
    return rows


def render_paper_comparison(record: dict) -> str:
    key = record["dataset"].get("key")
    rows = paper_rows(key)
    if not rows:
        return (f"The paper reports no number for {record['dataset']['name']} (dataset key {key!r}; keys with paper "
                f"numbers: {', '.join(papers.table2_tasks() + papers.mt_datasets())}).")
    ours = {m["type"]: m["value"] for m in record["metrics"]}
    metric_types = [m["type"] for m in record["metrics"]]
    for _, _, values in rows:
        metric_types += [t for t in values if t not in metric_types]
    header = ["model", "split"] + [METRIC_NAMES.get(t, t) for t in metric_types]
    column, not_comparable = comparable_column(record)
    table_rows = [[f"**this model** ({column or 'see Training'})", record["dataset"]["split"]]
                  + [f"**{_fmt(ours[t])}**" if t in ours else "–" for t in metric_types]]
    for label, split, values in rows:
        comparable = column is not None and label.startswith(f"{column} (")
        name = f"McCann et al. 2017: {label}" + (" ← comparable setting" if comparable else "")
        table_rows.append([name, split] + [_fmt(values[t]) if t in values else "–" for t in metric_types])
    if papers.table2_row(key) and not_comparable:
        rows_note = f"No paper column is comparable: {not_comparable}. "
    else:
        rows_note = ""
    if papers.mt_bleu(key) is not None:
        note = ("Paper number as printed in McCann et al. (2017) §2 (uncased, tokenized BLEU of the MT model on the "
                "full training set). ")
    else:
        note = ("Paper numbers as printed in McCann et al. (2017) (Table 2: validation; Table 3: test); they use "
                "GloVe 840B vectors and the full training sets. ")
    if record["training"].get("word_vectors", {}).get("stand_in"):
        note += "This model does not (see Limitations), so the comparison shows the gap, not a reproduction."
    return _table(header, table_rows) + "\n\n" + rows_note + note


def render_results(record: dict) -> str:
    dataset = record["dataset"]
    rows = [[record["task"].get("name", record["task"]["type"]), f"{dataset['name']} (`{dataset['id']}`)",
             dataset["split"], dataset.get("num_examples", "–"), METRIC_NAMES.get(m["type"], m["type"]),
             f"{_fmt(m['value'])}"] for m in record["metrics"]]
    text = _table(["task", "dataset", "split", "examples", "metric", "value"], rows)
    notes = []
    if dataset.get("source"):
        notes.append(f"Data read from `{dataset['source']}`.")
    if record["model"].get("metrics_source"):
        notes.append(record["model"]["metrics_source"])
    notes.append(f"Values in percent; evaluation record written {record.get('created', 'at evaluation time')}.")
    return text + "\n\n" + " ".join(notes)


def render_details(record: dict, config: dict, architecture: str, num_parameters: Optional[int]) -> str:
    training = record["training"]
    lines = [
        f"- **Architecture:** `{architecture}` — {ARCHITECTURES[architecture]['what']}.",
        f"- **Encoder:** MT-LSTM, {config.get('num_hidden_layers', 2)}-layer biLSTM with {config.get('hidden_size')} "
        f"units per direction over fixed {config.get('word_vector_dim')}-d word vectors, vocabulary of "
        f"{config.get('vocab_size')} words (out-of-vocabulary words get a zero vector); {encoder_text(record)}"
        + ("; frozen while the head was trained" if architecture in HEADS_ON_FROZEN_ENCODER
           and config.get("freeze_encoder", True) else "") + ".",
        f"- **Encoder output:** {_output_size(config)}-d per token (`cove_output={config.get('cove_output')!r}`, "
        f"`include_word_vectors={config.get('include_word_vectors')}`, "
        f"`char_ngram_dim={config.get('char_ngram_dim')}`).",
    ]
    if training.get("word_vectors"):
        vectors = training["word_vectors"]
        stand_in = " — a stand-in, not GloVe 840B." if vectors["stand_in"] else "."
        lines.append(f"- **Word vectors:** {vectors['name']}{stand_in}")
    if architecture == "CoveForSequenceClassification":
        lines.append(f"- **BCN:** reads `bcn_input={config.get('bcn_input')!r}`, hidden size "
                     f"{config.get('bcn_hidden_size')}, pooling {config.get('bcn_pooling')}, maxout reductions "
                     f"{config.get('bcn_maxout_reductions')}.")
    if architecture == "CoveForQuestionAnswering":
        lines.append(f"- **DCN:** hidden size {config.get('dcn_hidden_size')}, maxout pool "
                     f"{config.get('dcn_pool_size')}, up to {config.get('dcn_max_iterations')} decoder iterations, "
                     "answers of at most "
                     f"{config.get('dcn_max_answer_length')} tokens.")
    if architecture == "CoveForSequenceClassification" and config.get("id2label"):
        labels = ", ".join(f"{k}: `{v}`" for k, v in _labels(config))
        lines.append(f"- **Labels:** {labels}.")
    if architecture == "CoveForMachineTranslation":
        lines.append(f"- **Target vocabulary:** {config.get('target_vocab_size')} German words "
                     "(tokenizer in `target_tokenizer/`).")
    if num_parameters is not None:
        lines.append(f"- **Parameters:** {num_parameters:,} (safetensors).")
    lines.append(f"- **Weights sha256:** `{record['model']['weights_sha256']}`.")
    return "\n".join(lines)


def _labels(config: dict) -> list:
    """config.json's `id2label` as [(id, label)] in id order."""
    return sorted(((int(k), v) for k, v in (config.get("id2label") or {}).items()), key=lambda kv: kv[0])


def render_tag_set(config: dict) -> str:
    """A tagger's tags (config.json's `id2label`) and how the token-classification pipeline groups them."""
    tags = _labels(config)
    if not tags:
        return f"The tag set is {NOT_RECORDED} (config.json has no `id2label`)."
    table = _table(["id", "tag"], [[k, f"`{v}`"] for k, v in tags])
    spans = sorted({v[2:] for _, v in tags if v[:2] in ("B-", "I-")})
    if not spans:
        return table
    return (table + f"\n\nBIO tags over the span types {', '.join(f'`{t}`' for t in spans)}: "
            '`pipeline("token-classification", aggregation_strategy="simple")` joins a B- tag and the I- tags after '
            "it into one span (the tokenizer splits words, never sub-words).")


def render_intended_use(architecture: str, record: dict) -> str:
    dataset = record["dataset"]["name"]
    common = ("Research and teaching: reproducing and studying CoVe (McCann et al. 2017), and as a small, CPU-friendly "
              "baseline. Not for production decisions about people.")
    specific = {
        "CoveModel": "Contextual word features for English text: feed `last_hidden_state` (optionally concatenated "
                     "with the word vectors, eq. 6) to a downstream model, keeping the encoder frozen as in the paper.",
        "CoveForSequenceClassification": f"Classifying English text like the {dataset} data it was trained on.",
        "CoveForQuestionAnswering": f"Extractive question answering over short English paragraphs like {dataset}.",
        "CoveForMachineTranslation": f"English→German translation of short sentences like {dataset}; mainly the "
                                     "pretraining task of the CoVe encoder.",
        "CoveForTokenClassification": f"Tagging the words of English text like the {dataset} data it was trained on.",
    }[architecture]
    return f"{specific}\n\n{common}"


def render_loading(architecture: str, record: dict, config: dict, repo_id: str, remote: bool) -> str:
    """The Python a user runs to load this model: with the package installed, or as Hub remote code."""
    head = [] if remote else ["import modeling_cove  # registers CoVe with the Auto classes"]
    trust = ", trust_remote_code=True" if remote else ""
    writers = {"CoveModel": _loading_encoder, "CoveForSequenceClassification": _loading_classifier,
               "CoveForQuestionAnswering": _loading_qa, "CoveForMachineTranslation": _loading_mt,
               "CoveForTokenClassification": _loading_tagger}
    if architecture not in writers:
        raise CardError(f"no loading example for {architecture}")
    return "\n".join(head + writers[architecture](record, config, repo_id, remote, trust))


def _loading_encoder(record: dict, config: dict, repo_id: str, remote: bool, trust: str) -> list:
    lines = [
        "from transformers import AutoModel, AutoTokenizer",
        "",
        f'model = AutoModel.from_pretrained("{repo_id}"{trust})',
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}"{trust})',
        'batch = tokenizer(["The cat sat on the mat ."], return_tensors="pt")',
        "outputs = model(**batch)",
        f"outputs.last_hidden_state  # (batch, time, {_output_size(config)})",
        "",
        "# many texts: sorted by length and batched with their neighbours, one (T_i, D) tensor per text",
        'vectors = model.encode(["The cat sat on the mat .", "A dog ran ."], tokenizer, batch_size=64)',
    ]
    if not remote:
        lines += [
            "# the same as a pipeline (registered by the package): each result (1, T_i, D), in the input order",
            "from transformers import pipeline",
            f'extractor = pipeline("cove-feature-extraction", model="{repo_id}")',
            'features = extractor(["The cat sat on the mat .", "A dog ran ."], batch_size=64)',
        ]
    return lines


def _loading_classifier(record: dict, config: dict, repo_id: str, remote: bool, trust: str) -> list:
    key = record["dataset"].get("key")
    lines = [
        "from transformers import pipeline",
        "",
        f'classifier = pipeline("text-classification", model="{repo_id}"{trust})',
    ]
    if key == "snli":
        premise, hypothesis = PAIR_EXAMPLE
        lines.append(f'classifier({{"text": "{premise}", "text_pair": "{hypothesis}"}})')
    else:
        lines.append(f'classifier("{EXAMPLES.get(key, "A gripping , beautifully acted film .")}")')
    return lines + ["", "# or the model itself:", "from transformers import AutoModelForSequenceClassification",
                    f'model = AutoModelForSequenceClassification.from_pretrained("{repo_id}"{trust})']


def _loading_qa(record: dict, config: dict, repo_id: str, remote: bool, trust: str) -> list:
    lines = ["from transformers import AutoModelForQuestionAnswering, AutoTokenizer", "",
             f'model = AutoModelForQuestionAnswering.from_pretrained("{repo_id}"{trust})',
             f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}"{trust})']
    if not _has_qa_pipeline(config):
        return lines
    if remote:
        lines += ["", "# transformers 5 has no built-in question-answering pipeline; this repository ships "
                  "one (pipeline_cove.py):",
                  "from transformers import pipeline",
                  f'qa = pipeline("question-answering", model="{repo_id}", trust_remote_code=True)']
    else:
        lines += ["", "# the package registers its question-answering pipeline as \"cove-question-answering\"",
                  "# (transformers 5 blocks the name \"question-answering\" for local registration):",
                  "from transformers import pipeline",
                  f'qa = pipeline("cove-question-answering", model="{repo_id}")']
    return lines + ['qa(question="Where do the cats sit ?", context="The cats sit on the mat in the kitchen .")']


def _loading_mt(record: dict, config: dict, repo_id: str, remote: bool, trust: str) -> list:
    return [
        "from transformers import AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer",
        "",
        f'model = AutoModelForSeq2SeqLM.from_pretrained("{repo_id}"{trust})',
        f'source_tokenizer = AutoTokenizer.from_pretrained("{repo_id}"{trust})',
        f'target_tokenizer = AutoTokenizer.from_pretrained("{repo_id}", subfolder="target_tokenizer"{trust})',
        'batch = source_tokenizer(["A man is playing a guitar ."], return_tensors="pt",',
        "                         return_token_type_ids=False)",
        "ids = model.generate(**batch, num_beams=5, max_new_tokens=50)",
        "target_tokenizer.batch_decode(ids, skip_special_tokens=True)",
        "",
        "# the CoVe encoder alone (the decoder weights are reported as unused):",
        f'encoder = AutoModel.from_pretrained("{repo_id}"{trust})',
    ]


def _loading_tagger(record: dict, config: dict, repo_id: str, remote: bool, trust: str) -> list:
    return [
        "from transformers import pipeline",
        "",
        # the package registers our token-classification pipeline; without it, the checkpoint's copy runs as
        # remote code (docs/tagging.md)
        f'tagger = pipeline("token-classification", model="{repo_id}", aggregation_strategy="simple"{trust})',
        f'tagger("{TAGGER_EXAMPLE}")',
        "",
        "# or the model itself:",
        "from transformers import AutoModelForTokenClassification",
        f'model = AutoModelForTokenClassification.from_pretrained("{repo_id}"{trust})',
    ]


def render_training(record: dict, architecture: str) -> str:
    training = record["training"]
    lines = []
    if training.get("train_split"):
        lines.append(f"- **Training data:** {training['train_split']}"
                     + (f" ({training['num_train_examples']:,} examples)" if training.get("num_train_examples") else "")
                     + ".")
    if training.get("datasets"):
        lines.append("- **Datasets (Hub ids):** " + ", ".join(f"`{d}`" for d in training["datasets"]) + ".")
    if architecture in HEADS_ON_FROZEN_ENCODER:
        lines.append(f"- **Encoder:** {encoder_text(record)} (frozen while this head was trained).")
    lines.append(f"- **Trained for:** {progress_text(training)}.")
    if training.get("base_model"):
        base = training["base_model"]
        lines.append(f"- **Base model:** [`{base}`](https://huggingface.co/{base}).")
    hyperparameters = {k: v for k, v in (training.get("hyperparameters") or {}).items() if k not in BUDGET_KEYS}
    if hyperparameters:
        lines.append("- **Hyperparameters:** " + ", ".join(
            f"`{k}={json.dumps(v)}`" for k, v in hyperparameters.items()) + ".")
    if training.get("seed") is not None:
        lines.append(f"- **Seed:** {training['seed']}.")
    if training.get("commit"):
        lines.append(f"- **Code commit:** `{training['commit']}`.")
    lines.append("\nThe command that trained and evaluated it:")
    return "\n".join(lines)


def render_limitations(record: dict, architecture: str) -> str:
    training = record["training"]
    items = []
    vectors = training.get("word_vectors")
    if vectors and vectors["stand_in"]:
        items.append(
            f"**Stand-in word vectors.** The model reads {vectors['name']} instead of GloVe 840B (CommonCrawl, "
            "2.2M words), which the paper used and which was not available here. They cover fewer words and were "
            "trained on far less text, so the numbers are below the paper's and the weights are not "
            "interchangeable with models built on GloVe.")
    encoder = encoder_block(record)
    if encoder is not None and encoder["kind"] == "random" and architecture != "CoveForMachineTranslation":
        items.append("**Untrained encoder.** The MT-LSTM under this model was randomly initialised and never "
                     "trained on translation: the numbers measure the head over random features, not CoVe.")
    items += list(training.get("notes") or [])
    items.append("English only, lower-cased word-level tokens split like the Moses tokenizer; words outside the "
                 "fixed vocabulary get a zero vector.")
    if architecture != "CoveForMachineTranslation":
        items.append("A 2017 LSTM design: far below current pretrained transformers on the same tasks; use it to "
                     "study CoVe, not as a state-of-the-art model.")
    items.append("Inherits the biases of its training data (news/web text for the translation pretraining, and "
                 f"{record['dataset']['name']} for the evaluation task).")
    return "\n".join(f"- {item}" for item in items)


# ----------------------------------------------------------------------------------------------------------------
# The card
# ----------------------------------------------------------------------------------------------------------------


def card_data(record: dict, config: dict, repo_id: str, license: str = DEFAULT_LICENSE) -> ModelCardData:
    architecture = _architecture(record, config)
    info = ARCHITECTURES[architecture]
    dataset, task, training = record["dataset"], record["task"], record["training"]
    eval_results = [
        EvalResult(
            task_type=task["type"],
            task_name=task.get("name"),
            dataset_type=dataset["id"],
            dataset_name=dataset["name"],
            dataset_config=dataset.get("config"),
            dataset_split=dataset["split"],
            metric_type=metric["type"],
            metric_name=metric.get("name", METRIC_NAMES.get(metric["type"], metric["type"])),
            metric_value=metric["value"],
        )
        for metric in record["metrics"]
    ]
    tags = list(BASE_TAGS) + [t for t in info["tags"] if t not in BASE_TAGS]
    if dataset.get("key") and dataset["key"] not in tags:
        tags.append(dataset["key"])
    datasets = list(training.get("datasets") or [dataset["id"]])
    return ModelCardData(
        model_name=repo_id.split("/")[-1],
        library_name="transformers",
        license=license,
        language=["en", "de"] if architecture == "CoveForMachineTranslation" else ["en"],
        datasets=datasets,
        tags=tags,
        base_model=training.get("base_model"),
        pipeline_tag=info["pipeline_tag"],
        metrics=[m["type"] for m in record["metrics"]],
        eval_results=eval_results,
    )


def write_card(kind: str, data: ModelCardData, **sections) -> ModelCard:
    """The one card writer: `card_template.md` (Jinja) rendered for `kind` (one of CARD_KINDS) with `sections`, under
    `data.to_yaml()` as the front matter, parsed back as a `huggingface_hub.ModelCard`. A section the kind's layout
    needs and `sections` lacks is a CardError (never an empty section)."""
    if kind not in CARD_KINDS:
        raise CardError(f"unknown card kind {kind!r}; known: {sorted(CARD_KINDS)}")
    template = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(TEMPLATE.read_text(encoding="utf-8"))
    try:
        text = template.render(card_data=data.to_yaml(), kind=kind, **sections)
    except jinja2.UndefinedError as err:
        raise CardError(f"the {kind!r} card: {err} (a section of its layout in card_template.md)") from None
    return ModelCard(text)


def _evaluated_card(
    record: dict,
    config: dict,
    repo_id: str,
    *,
    license: str = DEFAULT_LICENSE,
    curve_filename: Optional[str] = None,
    num_parameters: Optional[int] = None,
    eval_json_name: str = "eval_results.json",
    install: str = DEFAULT_INSTALL,
) -> ModelCard:
    validate_eval_record(record)
    architecture = _architecture(record, config)
    name = repo_id.split("/")[-1]
    summary = (f"**{name}** is {ARCHITECTURES[architecture]['what']}, from *Learned in Translation: Contextualized "
               f"Word Vectors* (McCann et al., 2017), packaged for 🤗 transformers. Evaluated on "
               f"{record['dataset']['name']} ({record['dataset']['split']}): "
               + ", ".join(f"{METRIC_NAMES.get(m['type'], m['type'])} {_fmt(m['value'])}" for m in record["metrics"])
               + ".")
    curve = (f"![Training curve]({curve_filename})\n\n*Training curve written by the training script.*"
             if curve_filename else "")
    citation = CITATION_COVE + ("\n\n" + CITATION_DCN if architecture == "CoveForQuestionAnswering" else "")
    return write_card(
        ARCHITECTURES[architecture]["kind"],
        card_data(record, config, repo_id, license),
        eval_json_name=eval_json_name,
        weights_sha256_short=record["model"]["weights_sha256"][:12],
        title=name,
        summary=summary,
        details=render_details(record, config, architecture, num_parameters),
        tag_set=render_tag_set(config),
        intended_use=render_intended_use(architecture, record),
        install=install,
        load_with_package=render_loading(architecture, record, config, repo_id, remote=False),
        load_remote_code=render_loading(architecture, record, config, repo_id, remote=True),
        results=render_results(record),
        curve=curve,
        paper_comparison=render_paper_comparison(record),
        training=render_training(record, architecture),
        command=record["training"]["command"],
        limitations=render_limitations(record, architecture),
        citation=citation,
    )


def render_card(record: dict, config: dict, repo_id: str, **options) -> str:
    """The card's text (YAML front matter + Markdown); `options` as for `build_card`."""
    return str(_evaluated_card(record, config, repo_id, **options))


def check_card(card: ModelCard, record: dict) -> None:
    """The parsed card's model-index must carry exactly the record's metrics."""
    results = card.data.eval_results or []
    found = {(r.task_type, r.dataset_type, r.dataset_split, r.metric_type): r.metric_value for r in results}
    expected = {(record["task"]["type"], record["dataset"]["id"], record["dataset"]["split"], m["type"]): m["value"]
                for m in record["metrics"]}
    if found != expected:
        raise CardError(f"the card's model-index {found} does not match the evaluation record {expected}")


def build_card(record: dict, config: dict, repo_id: str, **options) -> ModelCard:
    """The card of an evaluated checkpoint from its evaluation record and config.json, its model-index checked
    against the record. `options`: license, curve_filename, num_parameters (shown when given), eval_json_name,
    install (the install command shown)."""
    card = _evaluated_card(record, config, repo_id, **options)
    check_card(card, record)
    return card


# ----------------------------------------------------------------------------------------------------------------
# The card of an encoder exported at the end of a pretraining run (from the run's metrics, before any evaluation)
# ----------------------------------------------------------------------------------------------------------------

ENCODER_EXPORT_TAGS = {"mt": ["cove", "mt-lstm", "contextualized-word-vectors"],
                       "bilm": ["cove", "elmo", "bilm", "feature-extraction"]}


def encoder_export_card(objective: str, config, metrics: Optional[dict], *, path=None,
                        name: Optional[str] = None) -> ModelCard:
    """The draft card of the encoder exported from a pretraining run: `objective` "mt" (a translation run; `path` is
    the export folder, `name` its title, default the folder's name) or "bilm" (a biLM run). `config` is the encoder's
    CoveConfig, `metrics` the run's metrics JSON; the card states what the run did, "not recorded" where it is
    silent."""
    metrics = metrics or {}
    if objective == "mt":
        path = Path(path)
        data = ModelCardData(library_name="transformers", pipeline_tag="feature-extraction", language="en",
                             tags=ENCODER_EXPORT_TAGS["mt"])
        return write_card("mt-encoder-export", data, **_mt_export_sections(config, metrics, path, name or path.name))
    if objective == "bilm":
        data = ModelCardData(library_name="transformers", tags=ENCODER_EXPORT_TAGS["bilm"])
        return write_card("bilm-encoder-export", data, **_bilm_export_sections(config, metrics))
    raise CardError(f"unknown pretraining objective {objective!r}; known: mt, bilm")


def _mt_export_sections(config, metrics: dict, path: Path, name: str) -> dict:
    settings = metrics.get("settings", {})
    data = metrics.get("data", {})
    vectors = settings.get("vectors") or settings.get("init_from") or "unknown"
    stand_in = "w2v-lower" in str(vectors)
    limitations = [
        "- The encoder saw only the MT training text: quality depends on its size "
        "(Multi30k = CoVe-S, IWSLT = CoVe-M, WMT = CoVe-L in the paper).",
        "- Words without a word vector map to a zero vector, as in the paper.",
    ]
    if stand_in:
        limitations.insert(0, "- Trained with STAND-IN word2vec vectors (not GloVe 840B): not comparable to the "
                              "published CoVe; use it with the same vectors.")
    return dict(
        name=name, hidden=config.hidden_size, out=config.encoder_output_size, dim=config.word_vector_dim,
        path=str(path), dataset=settings.get("dataset", "unknown"), pairs=data.get("train_pairs_kept", "?"),
        max_length=settings.get("max_length", "?"), vectors=vectors,
        vector_note="Stand-in word2vec vectors, NOT GloVe 840B." if stand_in else "",
        vocab_size=config.vocab_size, target_vocab_size=data.get("target_vocab_size", "?"),
        optimisation=optimisation_text(settings), grad_clip=settings.get("grad_clip", "?"),
        batch_size=settings.get("batch_size", "?"), dropout=config.decoder_dropout,
        progress=pretraining_progress_text(metrics), results=mt_results_table(metrics),
        limitations="\n".join(limitations), citation=papers.citation(),
    )


def mt_results_table(metrics: dict) -> str:
    """A translation run's per-epoch records and its test figures, as Markdown."""
    if not metrics:
        return "(no metrics recorded)"
    lines = ["| epoch | lr | train ppl | val ppl | val BLEU |", "|---|---|---|---|---|"]
    for h in metrics.get("epochs", []):
        bleu = f"{h['val_bleu']:.2f}" if h.get("val_bleu") is not None else "-"
        train = f"{h['train_perplexity']:.2f}" if h.get("train_perplexity") is not None else "-"
        lines.append(f"| {h['epoch']} | {h['lr']:g} | {train} | {h['val_perplexity']:.2f} | {bleu} |")
    test = metrics.get("test")
    if test:
        lines.append("")
        lines.append(f"Test: BLEU {test['bleu']:.2f} (uncased, tokenized, as the paper reports; beam "
                     f"{test['num_beams']}), detokenized sacreBLEU {test['sacrebleu']:.2f} "
                     f"(`{test['sacrebleu_signature']}`), perplexity {test['perplexity']:.2f}.")
    return "\n".join(lines)


def optimisation_text(settings: dict) -> str:
    """The optimizer and lr schedule a translation run used (its resolved settings), and whether it is the paper's."""
    if not settings.get("optimizer"):
        return NOT_RECORDED
    optimizer = {"sgd": "SGD", "adam": "Adam"}.get(settings["optimizer"], settings["optimizer"])
    decay, start = settings.get("lr_decay", "?"), settings.get("start_decay_at")
    factor = "halved" if decay == 0.5 else f"multiplied by {decay}"
    when = "after validation perplexity first rose" + (f" or from epoch {start} on" if start is not None else "")
    paper = (settings["optimizer"], settings.get("lr"), decay, start) == ("sgd", 1.0, 0.5, None)
    source = "the schedule of docs/paper.md §2" if paper else "differs from docs/paper.md §2 (SGD lr 1, halved)"
    return (f"{optimizer} lr {settings.get('lr', '?')}, {factor} each epoch {when}, stop below "
            f"{settings.get('min_lr', '?')} ({source})")


def pretraining_progress_text(metrics: dict) -> str:
    """What a pretraining run ran: complete epochs, optimizer steps and the logged stop reason."""
    epochs = metrics.get("epochs", [])
    complete = sum(1 for e in epochs if e.get("complete", True))
    text = f"{complete} complete epoch{'s' if complete != 1 else ''}"
    if epochs:
        text += f", {epochs[-1].get('global_step', '?')} optimizer steps"
    if metrics.get("stop_reason"):
        text += f" (stopped: {metrics['stop_reason']})"
    return text


def _bilm_export_sections(config, metrics: dict) -> dict:
    last = (metrics.get("epochs") or [{}])[-1]
    data = metrics.get("data", {})
    perplexity = NOT_RECORDED
    if "heldout_forward_perplexity" in last:
        perplexity = (f"forward {last['heldout_forward_perplexity']:.1f}, "
                      f"backward {last['heldout_backward_perplexity']:.1f}")
    return dict(
        layers=config.num_hidden_layers, hidden=config.hidden_size, dim=config.word_vector_dim,
        residual=", residual from layer 1 on" if config.bilm_residual else "",
        corpora=", ".join(data.get("texts_per_corpus", {})) or NOT_RECORDED,
        tokens=data.get("train_tokens", NOT_RECORDED), perplexity=perplexity,
        command=metrics.get("command", NOT_RECORDED), commit=metrics.get("commit", NOT_RECORDED),
    )
