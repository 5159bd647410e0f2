"""The Hub model cards (README.md) of CoVe checkpoints, on huggingface_hub's card API.

A card is a `huggingface_hub.ModelCard`: its YAML front matter is a `ModelCardData` (the model-index made of
`EvalResult`s), written by huggingface_hub; its body is the Jinja template `card_template.md`, rendered for the
checkpoint's kind (`CARD_KINDS`). What differs between kinds is data: `ARCHITECTURES` (each class's Auto class from
`modeling_cove.hub.MANIFEST`, plus its card prose) and the template's layouts; the code below only gathers facts.
Two families of cards:

- an evaluated checkpoint (an encoder, the BCN, the DCN, the MT model, a tagger), built from its evaluation record
  by `build_card` / `render_card`;
- an encoder exported at the end of a pretraining run (MT or biLM), a draft card built from the run's metrics by
  `encoder_export_card`.

Every number reported for *this model* comes from the evaluation record (`cards_record`, re-exported here) or the
pretraining metrics; the paper's numbers, shown beside ours, come from `papers`. A card states only what the record
says happened: the encoder the head really read (pretrained, randomly initialised, unused, or unknown), the epochs
and steps really run ("not recorded" when the record lacks them, never the configured budget), and a paper column
marked comparable only when the setting is. `build_card` checks the parsed card's model-index against the record.

    from modeling_cove.training.publishing.cards import build_card, load_eval_json
    card = build_card(load_eval_json(ckpt / "eval_results.json"), config_dict, "org/cove-bcn-sst2")
    card.save(ckpt / "README.md")
"""

import json
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Optional

import jinja2
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ...data import MULTI30K_SPLIT_FILES
from ...hub import MANIFEST
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
from .downstream import downstream_section

__all__ = [
    "ARCHITECTURES", "CARD_KINDS", "CardError", "CheckpointError", "DEFAULT_LICENSE", "ENCODER_KINDS",
    "EvalRecordError", "METRIC_NAMES", "PICKLE_SUFFIXES", "SCHEMA_VERSION", "build_card", "card_data", "check_card",
    "check_record_matches_checkpoint", "checkpoint_fingerprint", "comparable_column", "config_fingerprint",
    "describe_encoder", "encoder_export_card", "encoder_text", "find_safetensors_weights", "load_eval_json",
    "make_eval_record", "paper_rows", "progress_text", "read_config", "render_card", "render_loading",
    "validate_eval_record", "weights_fingerprint", "write_card", "write_eval_json",
]

TEMPLATE = resources.files("modeling_cove.training.publishing") / "card_template.md"
LOADING_TEMPLATE = resources.files("modeling_cove.training.publishing") / "card_loading.jinja"
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
NOT_RECORDED = "not recorded"

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


@dataclass(frozen=True)
class CardRecipe:
    """What the card of one architecture says besides its numbers."""

    kind: str  # its layout in card_template.md (CARD_KINDS)
    auto_class: str  # the Auto class that loads it (modeling_cove.hub.MANIFEST)
    pipeline_tag: str
    tags: tuple
    what: str  # "<name> is <what>"
    intended_use: str  # may name the evaluation data: {dataset}
    languages: tuple = ("en",)
    frozen_encoder: bool = False  # a head trained over the frozen MT-LSTM
    citations: tuple = (CITATION_COVE,)


# The card prose of each class; its Auto class comes from the Hub manifest.
CARD_PROSE = {
    "CoveModel": dict(
        kind="encoder", pipeline_tag="feature-extraction", tags=("feature-extraction", "word-embeddings"),
        what="the CoVe encoder (MT-LSTM) alone: context vectors for every token (eqs. 1, 5, 6)",
        intended_use="Contextual word features for English text: feed `last_hidden_state` (optionally concatenated "
                     "with the word vectors, eq. 6) to a downstream model, keeping the encoder frozen as in the "
                     "paper."),
    "CoveForSequenceClassification": dict(
        kind="bcn", pipeline_tag="text-classification", tags=("text-classification", "bcn"), frozen_encoder=True,
        what="a biattentive classification network (BCN, eqs. 7–16) over a frozen MT-LSTM encoder",
        intended_use="Classifying English text like the {dataset} data it was trained on."),
    "CoveForQuestionAnswering": dict(
        kind="dcn", pipeline_tag="question-answering", tags=("question-answering", "dcn", "squad"),
        frozen_encoder=True, citations=(CITATION_COVE, CITATION_DCN),
        what="a dynamic coattention network (DCN) for extractive question answering over a frozen MT-LSTM encoder",
        intended_use="Extractive question answering over short English paragraphs like {dataset}."),
    "CoveForMachineTranslation": dict(
        kind="mt", pipeline_tag="translation", tags=("translation", "machine-translation", "seq2seq"),
        languages=("en", "de"),
        what="the attentional English→German LSTM translation model (eqs. 2–4) whose encoder is CoVe",
        intended_use="English→German translation of short sentences like {dataset}; mainly the pretraining task of "
                     "the CoVe encoder."),
    "CoveForTokenClassification": dict(
        kind="tagger", pipeline_tag="token-classification", tags=("token-classification", "sequence-labelling"),
        what="a sequence tagger (one tag per word) over the MT-LSTM encoder",
        intended_use="Tagging the words of English text like the {dataset} data it was trained on."),
}
ARCHITECTURES = {name: CardRecipe(auto_class=MANIFEST[name].auto_class, **prose) for name, prose in CARD_PROSE.items()}
BASE_TAGS = ("cove", "lstm", "contextualized-word-vectors", "custom_code")

# The example inputs of a classifier's loading code, by dataset key.
EXAMPLES = {
    "sst2": "A gripping , beautifully acted film .",
    "sst5": "A gripping , beautifully acted film .",
    "imdb": "I loved this movie : the story , the acting , everything .",
    "trec6": "How far is it from Denver to Aspen ?",
    "trec50": "How far is it from Denver to Aspen ?",
}
PAIR_EXAMPLE = ("A man is playing a guitar on stage .", "Someone is making music .")

# The translation data each CoVe column of Table 2 was pretrained on (`training.encoder.pretraining.dataset`).
COVE_COLUMN_PRETRAINING = {"+CoVe-S": "multi30k", "+CoVe-M": "iwslt", "+CoVe-L": "wmt17", "+Char+CoVe-L": "wmt17"}
# Configured training budgets: never shown as if they had run (the record's epochs_run/steps_run say what ran).
BUDGET_KEYS = ("epochs", "num_train_epochs", "max_steps", "max_epochs")

# The drafts of exported encoders: their layout and front matter.
EXPORT_CARDS = {
    "mt": ("mt-encoder-export", dict(library_name="transformers", pipeline_tag="feature-extraction", language="en",
                                     tags=["cove", "mt-lstm", "contextualized-word-vectors"])),
    "bilm": ("bilm-encoder-export", dict(library_name="transformers", tags=["cove", "elmo", "bilm",
                                                                            "feature-extraction"])),
}


class CardError(ValueError):
    """The card cannot be generated (unknown architecture, card failing its own checks)."""


def _fmt(value) -> str:
    """A metric for display: at most 2 decimals (the model-index keeps the exact value)."""
    if isinstance(value, float):
        text = f"{value:.2f}".rstrip("0")
        return text + "0" if text.endswith(".") else text  # 89.0 stays "89.0", as printed in the paper
    return str(value)


def _environment() -> jinja2.Environment:
    """Jinja as the card templates use it: a variable the layout needs and is not given is an error."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    environment.filters.update(json=json.dumps, repr=repr, thousands="{:,}".format)
    return environment


def _recipe(record: dict, config: dict) -> tuple:
    """(architecture, its CardRecipe): config.json's first architecture, else the record's."""
    name = (config.get("architectures") or [record["model"]["architecture"]])[0]
    if name not in ARCHITECTURES:
        raise CardError(f"no model card recipe for architecture {name!r}; known: {sorted(ARCHITECTURES)}")
    recipe = ARCHITECTURES[name]
    if config.get("encoder_type") == "bilm":  # the head sits on the ELMo-style biLM in the MT-LSTM's place
        recipe = replace(recipe, what=recipe.what.replace("MT-LSTM", "biLM"))
    return name, recipe


def _output_size(config: dict) -> int:
    """Width of `CoveModel.last_hidden_state` (CoveConfig.output_size)."""
    from modeling_cove import CoveConfig

    fields = {k: v for k, v in config.items() if k not in ("auto_map", "custom_pipelines")}
    return CoveConfig.from_dict(fields).output_size


def _labels(config: dict) -> list:
    """config.json's `id2label` as [(id, label)] in id order."""
    return sorted(((int(k), v) for k, v in (config.get("id2label") or {}).items()), key=lambda kv: kv[0])


# ----------------------------------------------------------------------------------------------------------------
# What happened: the encoder really read, the training really run, the paper column really comparable
# ----------------------------------------------------------------------------------------------------------------


def encoder_block(record: dict) -> Optional[dict]:
    """`training.encoder` as a `{kind, ...}` block; a free-text label (older records) is of kind `unknown`."""
    encoder = record["training"].get("encoder")
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


def paper_comparison(record: dict) -> dict:
    """The table of this model beside the paper's numbers for its dataset (none when the paper has none), and what
    the note under it needs to say."""
    key = record["dataset"].get("key")
    rows = paper_rows(key)
    ours = {m["type"]: m["value"] for m in record["metrics"]}
    metric_types = list(ours)
    for _, _, values in rows:
        metric_types += [t for t in values if t not in metric_types]
    column, not_comparable = comparable_column(record)
    table = [[f"**this model** ({column or 'see Training'})", record["dataset"]["split"]]
             + [f"**{_fmt(ours[t])}**" if t in ours else "–" for t in metric_types]]
    for label, split, values in rows:
        comparable = column is not None and label.startswith(f"{column} (")
        name = f"McCann et al. 2017: {label}" + (" ← comparable setting" if comparable else "")
        table.append([name, split] + [_fmt(values[t]) if t in values else "–" for t in metric_types])
    return dict(
        header=["model", "split"] + [METRIC_NAMES.get(t, t) for t in metric_types],
        rows=table if rows else [],
        not_comparable=not_comparable if papers.table2_row(key) else None,
        translation=papers.mt_bleu(key) is not None,
        keys_with_numbers=papers.table2_tasks() + papers.mt_datasets(),
    )


# ----------------------------------------------------------------------------------------------------------------
# The card
# ----------------------------------------------------------------------------------------------------------------


def card_data(record: dict, config: dict, repo_id: str, license: str = DEFAULT_LICENSE) -> ModelCardData:
    """The front matter: the Hub metadata and the model-index (one `EvalResult` per metric of the record)."""
    _, recipe = _recipe(record, config)
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
    tags = list(BASE_TAGS) + [tag for tag in recipe.tags if tag not in BASE_TAGS]
    if dataset.get("key") and dataset["key"] not in tags:
        tags.append(dataset["key"])
    return ModelCardData(
        model_name=repo_id.split("/")[-1],
        library_name="transformers",
        license=license,
        language=list(recipe.languages),
        datasets=list(training.get("datasets") or [dataset["id"]]),
        tags=tags,
        base_model=training.get("base_model"),
        pipeline_tag=recipe.pipeline_tag,
        metrics=[m["type"] for m in record["metrics"]],
        eval_results=eval_results,
    )


def write_card(kind: str, data: ModelCardData, **sections) -> ModelCard:
    """The one card writer: `card_template.md` rendered for `kind` (one of CARD_KINDS) with `sections`, under
    `data.to_yaml()` as the front matter, parsed back as a `huggingface_hub.ModelCard`. A variable the kind's layout
    needs and `sections` lacks is a CardError (never an empty section)."""
    if kind not in CARD_KINDS:
        raise CardError(f"unknown card kind {kind!r}; known: {sorted(CARD_KINDS)}")
    template = _environment().from_string(TEMPLATE.read_text(encoding="utf-8"))
    try:
        text = template.render(card_data=data.to_yaml(), kind=kind, **sections)
    except jinja2.UndefinedError as err:
        raise CardError(f"the {kind!r} card: {err} (a section of its layout in card_template.md)") from None
    return ModelCard(text)


def render_loading(architecture: str, record: dict, config: dict, repo_id: str, remote: bool) -> str:
    """The Python a user runs to load this model (`card_loading.jinja`): with the package installed, or as Hub
    remote code."""
    if architecture not in ARCHITECTURES:
        raise CardError(f"no loading example for {architecture}")
    recipe, key = ARCHITECTURES[architecture], record["dataset"].get("key")
    template = _environment().from_string(LOADING_TEMPLATE.read_text(encoding="utf-8"))
    return template.render(
        kind=recipe.kind, auto_class=recipe.auto_class, repo_id=repo_id, remote=remote,
        output_size=_output_size(config) if recipe.kind == "encoder" else None,
        example=EXAMPLES.get(key, EXAMPLES["sst2"]), pair=PAIR_EXAMPLE if key == "snli" else None,
        qa_pipeline="question-answering" in (config.get("custom_pipelines") or {}),
    ).strip("\n")


def _evaluated_card(record: dict, config: dict, repo_id: str, *, license: str = DEFAULT_LICENSE,
                    curve_filename: Optional[str] = None, num_parameters: Optional[int] = None,
                    eval_json_name: str = "eval_results.json", install: str = DEFAULT_INSTALL) -> ModelCard:
    validate_eval_record(record)
    architecture, recipe = _recipe(record, config)
    training = record["training"]
    labels = _labels(config)
    return write_card(
        recipe.kind,
        card_data(record, config, repo_id, license),
        eval_json_name=eval_json_name,
        title=repo_id.split("/")[-1],
        architecture=architecture,
        recipe=recipe,
        record=record,
        dataset=record["dataset"],
        task_name=record["task"].get("name", record["task"]["type"]),
        metrics=[(METRIC_NAMES.get(m["type"], m["type"]), _fmt(m["value"])) for m in record["metrics"]],
        training=training,
        config=config,
        output_size=_output_size(config),
        encoder_text=encoder_text(record),
        encoder_kind=(encoder_block(record) or {}).get("kind"),
        labels=labels,
        tag_spans=sorted({tag[2:] for _, tag in labels if tag[:2] in ("B-", "I-")}),
        num_parameters=num_parameters,
        intended_use=recipe.intended_use.format(dataset=record["dataset"]["name"]),
        install=install,
        load_with_package=render_loading(architecture, record, config, repo_id, remote=False),
        load_remote_code=render_loading(architecture, record, config, repo_id, remote=True),
        curve=curve_filename,
        paper=paper_comparison(record),
        progress=progress_text(training),
        hyperparameters={k: v for k, v in (training.get("hyperparameters") or {}).items() if k not in BUDGET_KEYS},
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


def encoder_export_card(objective: str, config, metrics: Optional[dict], *, path=None,
                        name: Optional[str] = None, downstream: Optional[dict] = None) -> ModelCard:
    """The draft card of the encoder exported from a pretraining run: `objective` "mt" (a translation run; `path` is
    the export folder, `name` its title, default the folder's name) or "bilm" (a biLM run). `config` is the encoder's
    CoveConfig, `metrics` the run's metrics JSON; the card states what the run did, "not recorded" where it is
    silent. `downstream` (downstream results, `publishing.downstream`) adds the section "Downstream results"."""
    if objective not in EXPORT_CARDS:
        raise CardError(f"unknown pretraining objective {objective!r}; known: mt, bilm")
    kind, front_matter = EXPORT_CARDS[objective]
    metrics = metrics or {}
    if objective == "mt":
        sections = _mt_export_sections(config, metrics, Path(path), name or Path(path).name)
    else:
        sections = _bilm_export_sections(config, metrics)
    section = downstream_section(downstream) if downstream is not None else None
    return write_card(kind, ModelCardData(**front_matter), downstream=section, **sections)


def _mt_export_sections(config, metrics: dict, path: Path, name: str) -> dict:
    settings = metrics.get("settings", {})
    vectors = (settings.get("vectors") or metrics.get("data", {}).get("source_vectors")
               or _init_vectors(settings.get("init_from")) or "unknown")
    return dict(
        name=name, path=str(path), config=config, settings=settings, run_data=metrics.get("data", {}),
        vectors=vectors, stand_in="w2v-lower" in str(vectors), optimisation=optimisation_text(settings),
        progress=pretraining_progress_text(metrics), results=mt_results_table(metrics), citation=papers.citation(),
        corpora=mt_corpora_text(settings, metrics.get("data", {})),
        training_pairs=training_pairs_text(settings, metrics.get("data", {})),
    )


def _init_vectors(init_from) -> str | None:
    """The word vectors of a run started from a vocabulary checkpoint (--init-from) that recorded none in its data
    record (runs before it did): the vectors file its build_info.json names (cove-build-vocab writes it; the folder
    as the run recorded it, from the folder the export runs in), else the checkpoint's folder; None without one."""
    if not init_from:
        return None
    try:
        return str(json.loads((Path(init_from) / "build_info.json").read_text())["vectors"])
    except (OSError, ValueError, KeyError, TypeError):
        return str(init_from)


def _count(value) -> str:
    """A count as a card writes it (1,234), "?" where the record has none."""
    return f"{value:,}" if isinstance(value, int) else "?"


def training_pairs_text(settings: dict, run_data: dict) -> str:
    """How many training pairs a translation run kept and why it dropped the others (too long, empty); a run whose
    record has no such counts (before it kept them) word for word as its card said then."""
    kept, too_long = run_data.get("train_pairs_kept"), run_data.get("train_pairs_dropped_too_long")
    max_length = settings.get("max_length", "?")
    if too_long is None:
        return (f"{run_data.get('train_pairs_kept', '?')} training pairs after dropping pairs longer than {max_length} "
                "tokens")
    return (f"{_count(kept)} training pairs ({_count(too_long)} dropped as longer than {max_length} tokens, "
            f"{_count(run_data.get('train_pairs_dropped_empty'))} as empty)")


def excluded_pairs_text(stats: dict) -> str:
    """The pairs of a corpus dropped because their English side is a test sentence of an evaluation task (by split,
    and by task), or "" when none was."""
    dropped = stats.get("excluded_pairs") or {}
    total = sum(dropped.values())
    if not total:
        return ""
    by_task = ", ".join(f"{task} {_count(n)}" for task, n in (stats.get("excluded_pairs_by_source") or {}).items() if n)
    return (f"{_count(total)} pair{'s' if total != 1 else ''} dropped whose English side is a test sentence of an "
            f"evaluation task (" + ", ".join(f"{split} {_count(n)}" for split, n in dropped.items()) +
            (f"; matches by task, a pair may match several: {by_task}" if by_task else "") + ")")


def mt_corpora_text(settings: dict, run_data: dict) -> str:
    """The translation corpora of a run (data_stats.json's "corpora") as Markdown list items: for a run on several,
    per corpus its training pairs, its held-out splits, the pairs dropped because their English side is a test
    sentence of an evaluation task (by split and task), its training tokens' `<unk>` rates on each side and the
    licence the preset gave it; for a run on one, those dropped pairs and its licence, each when there is one ("" when
    neither is)."""
    corpora = run_data.get("corpora") or {}
    licences = settings.get("corpus_licences") or {}
    if len(corpora) < 2:
        excluded = {name: excluded_pairs_text(stats) for name, stats in corpora.items()}
        lines = [f"- Of the `{name}` training pairs, {text}." for name, text in excluded.items() if text]
        return "\n".join(lines + [f"- Licence of the `{name}` data: {licences[name]}." for name in corpora
                                  if name in licences])

    lines = [f"- Corpora, shuffled into one mixture (seed {settings.get('seed', '?')}):"]
    for name, stats in corpora.items():
        pairs = stats.get("pairs", {})
        text = f"  - `{name}`: {_count(stats.get('train_pairs_kept', pairs.get('train')))} training pairs"
        held_out = f"{_count(pairs.get('validation'))} and {_count(pairs.get('test'))} pairs"
        if "pairs_in_file" in stats:
            text += (f" of {_count(stats['pairs_in_file'])} in the file; validation and test carved from it "
                     f"({held_out}; no English or German sentence on two sides)")
        else:
            text += f"; its own validation and test splits ({held_out})"
        if excluded := excluded_pairs_text(stats):
            text += "; " + excluded
        if "train_source_unk_rate" in stats and "train_target_unk_rate" in stats:
            text += (f"; `<unk>`: {stats['train_source_unk_rate']:g}% of its English and "
                     f"{stats['train_target_unk_rate']:g}% of its German training tokens")
        if name in licences:
            text += f". Licence: {licences[name]}"
        lines.append(text + ".")
    return "\n".join(lines)


def mt_results_table(metrics: dict) -> str:
    """A translation run's per-epoch records and its test figures, as Markdown."""
    if not metrics:
        return "(no metrics recorded)"
    lines = ["| epoch | lr | train ppl | val ppl | val BLEU |", "|---|---|---|---|---|"]
    for h in metrics.get("epochs", []):
        bleu = f"{h['val_bleu']:.2f}" if h.get("val_bleu") is not None else "-"
        train = f"{h['train_perplexity']:.2f}" if h.get("train_perplexity") is not None else "-"
        lines.append(f"| {h['epoch']} | {h['lr']:g} | {train} | {h['val_perplexity']:.2f} | {bleu} |")
    test, by_corpus = metrics.get("test"), metrics.get("test_by_corpus") or {}
    names = list(by_corpus) if len(by_corpus) > 1 else []  # a run on several corpora: name each one's figures
    if names:
        lines.append("")
        lines.append(f"Validation: {names[0]}'s (the first corpus; it drives the lr schedule).")
    corpora = metrics.get("data", {}).get("corpora") or {}
    for index, figures in enumerate([by_corpus[name] for name in names] or ([test] if test else [])):
        where = f" on {names[index]} ({test_split_text(names[index], corpora.get(names[index], {}))})" if names else ""
        lines.append("")
        lines.append(f"Test{where}: BLEU {figures['bleu']:.2f} (uncased, tokenized, as the paper reports; beam "
                     f"{figures['num_beams']}), detokenized sacreBLEU {figures['sacrebleu']:.2f} "
                     f"(`{figures['sacrebleu_signature']}`), perplexity {figures['perplexity']:.2f}.")
    return "\n".join(lines)


def test_split_text(name: str, stats: dict) -> str:
    """Which pairs a corpus's test figures are on, from its data record (`stats`): Multi30k's own test split, or the
    pairs a run held out of a parallel file (how: the corpora list, `mt_corpora_text`)."""
    pairs = stats.get("pairs", {}).get("test")
    size = f"{pairs:,} pairs" if isinstance(pairs, int) else "pairs"
    if "heldout_pairs_per_split" in stats:
        return f"{size} held out of `{stats.get('read_from', name)}`"
    if name == "multi30k":
        return f"its test split `{MULTI30K_SPLIT_FILES['test']}`, {size}"
    return f"its test split, {size}"


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
    """What a pretraining run ran: complete epochs, optimizer steps, the logged stop reason and, for a run that kept
    its best validation epoch, which one it is."""
    epochs = metrics.get("epochs", [])
    complete = sum(1 for e in epochs if e.get("complete", True))
    text = f"{complete} complete epoch{'s' if complete != 1 else ''}"
    if epochs:
        text += f", {epochs[-1].get('global_step', '?')} optimizer steps"
    if metrics.get("stop_reason"):
        text += f" (stopped: {metrics['stop_reason']})"
    best = metrics.get("best_epoch")
    if best:
        text += (f"; these are the weights of epoch {best['epoch']} (step {best['global_step']}), the best validation "
                 f"BLEU ({best['val_bleu']:.2f})")
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
