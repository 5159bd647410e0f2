"""Model cards (`modeling_cove.training.publishing.cards`): the evaluation-JSON schema and fingerprints, and the generated card.

The card must parse with `huggingface_hub.ModelCard`, its model-index must equal the evaluation JSON, and it must
render the paper's numbers (docs/paper.md §5) beside ours.
"""

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard, ModelCardData
from huggingface_hub.repocard_data import model_index_to_eval_results

from conftest import assert_reproduces
from modeling_cove import CoveConfig, CoveModel
from modeling_cove.training.publishing import cards as generate
from modeling_cove.training.publishing.cards import (
    CheckpointError,
    describe_encoder,
    EvalRecordError,
    checkpoint_fingerprint,
    config_fingerprint,
    load_eval_json,
    make_eval_record,
    validate_eval_record,
    weights_fingerprint,
    write_eval_json,
)

REPO = Path(__file__).resolve().parents[1]
COVE_S = {"kind": "pretrained", "name": "CoVe-S", "pretraining": {"dataset": "multi30k", "test_bleu": 30.25}}
PAPER_SST2 = {"Random": 84.2, "GloVe": 88.4, "GloVe+Char": 90.1, "+CoVe-S": 89.0, "+CoVe-M": 90.9, "+CoVe-L": 91.1,
              "+Char+CoVe-L": 91.2}  # docs/paper.md §5, Table 2, SST-2 row (typed here independently of generate.py)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("card") / "ckpt"
    torch.manual_seed(0)
    CoveModel(CoveConfig(vocab_size=12, word_vector_dim=8, hidden_size=4)).save_pretrained(folder)
    return folder


def sst2_record(checkpoint: Path, value: float = 87.6543, **changes) -> dict:
    kwargs = dict(
        task={"type": "text-classification", "name": "Sentiment classification"},
        dataset={"key": "sst2", "name": "SST-2", "id": "stanfordnlp/sst2", "split": "validation", "num_examples": 872,
                 "source": "../shared/data/sst/senteval"},
        metrics=[{"type": "accuracy", "value": value}],
        training={"command": "python scripts/train_classifier.py --task sst2 --epochs 3",
                  "datasets": ["stanfordnlp/sst2"],
                  "train_split": "SST-2 phrase-level train", "num_train_examples": 67349, "encoder": COVE_S,
                  "base_model": "org/cove-small", "seed": 0, "hyperparameters": {"lr": 0.001, "batch_size": 64},
                  "word_vectors": {"name": "w2v-lower-300d", "stand_in": True},
                  "notes": ["Trained for 3 epochs only (CPU budget)."]},
        paper_column="+CoVe-S",
    )
    kwargs.update(changes)
    return make_eval_record(checkpoint, **kwargs)


def bcn_config(checkpoint: Path) -> dict:
    """config.json of the checkpoint, presented as a classifier (the card only reads it)."""
    config = json.loads((checkpoint / "config.json").read_text())
    config.update(architectures=["CoveForSequenceClassification"], id2label={"0": "negative", "1": "positive"},
                  label2id={"negative": 0, "positive": 1})
    return config


# ----------------------------------------------------------------------------------------------------------------
# Fingerprints and schema
# ----------------------------------------------------------------------------------------------------------------


def test_weights_fingerprint_is_the_sha256_of_the_safetensors_file(checkpoint):
    expected = hashlib.sha256((checkpoint / "model.safetensors").read_bytes()).hexdigest()
    assert weights_fingerprint(checkpoint) == expected


def test_config_fingerprint_ignores_publishing_keys_only():
    config = {"model_type": "cove", "hidden_size": 4, "transformers_version": "5.23.0", "architectures": ["CoveModel"]}
    base = config_fingerprint(config)
    assert config_fingerprint({**config, "auto_map": {"AutoModel": "modeling_cove.CoveModel"},
                               "custom_pipelines": {}, "transformers_version": "9.9", "_name_or_path": "x"}) == base
    assert config_fingerprint({**config, "hidden_size": 5}) != base
    assert config_fingerprint({**config, "architectures": ["CoveForSequenceClassification"]}) != base
    # canonical: key order does not matter
    assert config_fingerprint(dict(reversed(list(config.items())))) == base


def test_sharded_weights_fingerprint(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"A")
    (tmp_path / "b.safetensors").write_bytes(b"BB")
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "b.safetensors",
                                                                                       "y": "a.safetensors"}}))
    sha = lambda data: hashlib.sha256(data).hexdigest()  # noqa: E731
    expected = sha(f"a.safetensors:{sha(b'A')}\nb.safetensors:{sha(b'BB')}\n".encode())
    assert weights_fingerprint(tmp_path) == expected
    (tmp_path / "b.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing"):
        weights_fingerprint(tmp_path)


def test_record_roundtrip_and_fingerprint(checkpoint, tmp_path):
    record = sst2_record(checkpoint)
    assert record["model"] == {**checkpoint_fingerprint(checkpoint)}
    assert record["model"]["architecture"] == "CoveModel"
    path = write_eval_json(tmp_path / "eval.json", record)
    assert load_eval_json(path) == record


def test_invalid_records_list_every_problem(checkpoint):
    record = sst2_record(checkpoint)
    broken = json.loads(json.dumps(record))
    broken["schema_version"] = 2
    broken["model"]["weights_sha256"] = "abc"
    broken["metrics"] = [{"type": "accuracy", "value": 0.5 * 200.1}, {"type": "accuracy", "value": float("nan")}]
    broken["task"]["type"] = "summarization"
    del broken["dataset"]["split"]
    with pytest.raises(EvalRecordError) as info:
        validate_eval_record(broken)
    message = str(info.value)
    for expected in ("schema_version must be 1", "model.weights_sha256 must be 64", "in percent, 0..100",
                     "finite number", "appears twice", "task.type must be one of", "dataset.split is required"):
        assert expected in message, expected
    with pytest.raises(EvalRecordError, match="metrics must be a non-empty list"):
        validate_eval_record({**record, "metrics": []})
    with pytest.raises(EvalRecordError, match="not valid JSON"):
        bad = checkpoint.parent / "bad.json"
        bad.write_text("{")
        load_eval_json(bad)


# ----------------------------------------------------------------------------------------------------------------
# The card
# ----------------------------------------------------------------------------------------------------------------


def test_card_parses_and_model_index_equals_the_evaluation_json(checkpoint, tmp_path):
    record = sst2_record(checkpoint, metrics=[{"type": "accuracy", "value": 87.6543},
                                              {"type": "f1", "name": "Macro F1", "value": 86.1234}])
    card = generate.build_card(record, bcn_config(checkpoint), "org/cove-bcn-sst2", curve_filename="training_curve.png")
    path = tmp_path / "README.md"
    card.save(path)
    loaded = ModelCard.load(path)
    data = loaded.data
    assert data.library_name == "transformers"
    assert data.license == "bsd-3-clause"
    assert data.pipeline_tag == "text-classification"
    assert data.datasets == ["stanfordnlp/sst2"]
    assert data.base_model == "org/cove-small"
    assert {"cove", "lstm", "bcn", "custom_code"} <= set(data.tags)
    assert data.language == ["en"]
    # model-index: exactly the JSON's numbers, unrounded
    results = data.eval_results
    assert [(r.metric_type, r.metric_value) for r in results] == [("accuracy", 87.6543), ("f1", 86.1234)]
    for result in results:
        assert (result.task_type, result.dataset_type, result.dataset_name, result.dataset_split) == (
            "text-classification", "stanfordnlp/sst2", "SST-2", "validation")
    assert results[1].metric_name == "Macro F1"
    # the raw YAML model-index parses back the same way, and the metadata validates as ModelCardData
    name, again = model_index_to_eval_results(data.to_dict()["model-index"])
    assert name == "cove-bcn-sst2" and [r.metric_value for r in again] == [87.6543, 86.1234]
    ModelCardData(**data.to_dict())
    # the body shows the rounded values and the training curve
    row = "| Sentiment classification | SST-2 (`stanfordnlp/sst2`) | validation | 872 | Accuracy | 87.65 |"
    assert row in loaded.text
    assert "![Training curve](training_curve.png)" in loaded.text
    assert "python scripts/train_classifier.py --task sst2 --epochs 3" in loaded.text


def test_card_numbers_follow_the_json_not_the_template(checkpoint):
    config = bcn_config(checkpoint)
    one = generate.render_card(sst2_record(checkpoint, value=12.5), config, "org/x")
    two = generate.render_card(sst2_record(checkpoint, value=99.25), config, "org/x")
    assert "value: 12.5" in one and "value: 99.25" in two
    assert "**12.5**" in one and "**99.25**" in two and "12.5" not in two


def test_card_renders_the_paper_comparison_table(checkpoint):
    record = sst2_record(checkpoint)
    text = str(generate.build_card(record, bcn_config(checkpoint), "org/cove-bcn-sst2"))
    section = text.split("### Beside the paper")[1].split("## Training")[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows[0] == "| model | split | Accuracy |"
    assert rows[2] == "| **this model** (+CoVe-S) | validation | **87.65** |"
    for column, value in PAPER_SST2.items():
        marker = " ← comparable setting" if column == "+CoVe-S" else ""
        assert f"| McCann et al. 2017: {column} (Table 2){marker} | validation | {value:.1f} |" in rows, column
    assert "| McCann et al. 2017: BCN+Char+CoVe (Table 3) | test | 90.3 |" in rows
    assert "stand-in" in section.lower() or "does not" in section


def test_squad_card_shows_em_and_f1_beside_the_dcn_numbers(checkpoint):
    record = make_eval_record(
        checkpoint,
        task={"type": "question-answering"},
        dataset={"key": "squad", "name": "SQuAD v1.1", "id": "rajpurkar/squad",
                 "split": "validation (held-out articles of dev)"},
        metrics=[{"type": "exact_match", "value": 40.5}, {"type": "f1", "value": 52.25}],
        training={"command": "python scripts/train_qa.py", "word_vectors": {"name": "w2v", "stand_in": True},
                  "notes": ["Trained on a split of SQuAD dev by article (no train split here)."]},
    )
    config = json.loads((checkpoint / "config.json").read_text())
    config["architectures"] = ["CoveForQuestionAnswering"]
    config["custom_pipelines"] = {"question-answering": {"impl": "pipeline_cove.CoveQuestionAnsweringPipeline",
                                                         "pt": ["AutoModelForQuestionAnswering"]}}
    card = generate.build_card(record, config, "org/cove-dcn-squad")
    text = str(card)
    assert card.data.pipeline_tag == "question-answering"
    assert "| **this model** (see Training) | validation (held-out articles of dev) | **40.5** | **52.25** |" in text
    assert "| McCann et al. 2017: DCN+Char+CoVe | validation (dev) | 71.3 | 79.9 |" in text
    assert "| McCann et al. 2017: +Char+CoVe-L (Table 2) | validation | – | 79.9 |" in text
    assert 'pipeline("question-answering", model="org/cove-dcn-squad", trust_remote_code=True)' in text
    assert "Trained on a split of SQuAD dev by article" in text
    assert "xiong2017dynamic" in text  # DCN citation beside CoVe's


def test_card_sections_loading_limits_and_citation(checkpoint):
    text = generate.render_card(sst2_record(checkpoint), bcn_config(checkpoint), "org/cove-bcn-sst2")
    for heading in ("## Intended use", "## How to load", "### With the `modeling_cove` package",
                    "### Without the package (Hub remote code)", "## Evaluation", "## Training", "## Limitations",
                    "## Citation"):
        assert heading in text, heading
    with_pkg = text.split("### With the `modeling_cove` package")[1].split("### Without")[0]
    remote = text.split("### Without the package (Hub remote code)")[1].split("## Evaluation")[0]
    assert "import modeling_cove" in with_pkg and "trust_remote_code" not in with_pkg
    assert "import modeling_cove" not in remote
    assert 'pipeline("text-classification", model="org/cove-bcn-sst2", trust_remote_code=True)' in remote
    limits = text.split("## Limitations")[1].split("## Citation")[0]
    assert "Stand-in word vectors" in limits and "GloVe 840B" in limits
    assert "Trained for 3 epochs only (CPU budget)." in limits
    assert "@inproceedings{mccann2017learned" in text and "Learned in Translation: Contextualized Word Vectors" in text
    assert "[`org/cove-small`](https://huggingface.co/org/cove-small)" in text


def test_snli_card_shows_a_pair_example_and_unknown_dataset_says_so(checkpoint):
    config = bcn_config(checkpoint)
    snli = sst2_record(checkpoint, dataset={"key": "snli", "name": "SNLI", "id": "stanfordnlp/snli", "split": "test"})
    text = generate.render_card(snli, config, "org/cove-bcn-snli")
    assert '"text_pair"' in text and "| McCann et al. 2017: BCN+Char+CoVe (Table 3) | test | 88.1 |" in text
    other = sst2_record(checkpoint, dataset={"name": "My data", "id": "me/data", "split": "test"})
    assert "The paper reports no number for My data" in generate.render_card(other, config, "org/x")


def test_unknown_architecture_kind_or_objective_is_a_clear_error(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    config["architectures"] = ["CoveForMultipleChoice"]
    with pytest.raises(generate.CardError, match="no model card recipe for architecture 'CoveForMultipleChoice'"):
        generate.render_card(sst2_record(checkpoint), config, "org/x")
    with pytest.raises(generate.CardError, match="unknown card kind 'summary'; known: "):
        generate.write_card("summary", ModelCardData())
    with pytest.raises(generate.CardError, match="unknown pretraining objective 'mlm'"):
        generate.encoder_export_card("mlm", CoveConfig(vocab_size=12, word_vector_dim=8, hidden_size=4), {})


def test_the_writer_takes_its_front_matter_from_huggingface_hub_and_names_a_missing_section():
    data = ModelCardData(library_name="transformers", tags=["cove"])
    assert generate.TEMPLATE.read_text(encoding="utf-8").startswith("---\n{{ card_data }}\n---\n")
    with pytest.raises(generate.CardError, match="the 'bcn' card: 'eval_json_name' is undefined"):
        generate.write_card("bcn", data)
    sections = dict(layers=2, hidden=4, residual="", dim=8, corpora="trec6", tokens=10, perplexity="not recorded",
                    command="train", commit="abc")
    card = generate.write_card("bilm-encoder-export", data, **sections)
    assert str(card).startswith(f"---\n{data.to_yaml()}\n---\n") and card.data.tags == ["cove"]
    assert "Command: `train` at commit `abc`." in card.text


def test_tagger_card_lists_its_tags_and_loads_with_the_token_classification_pipeline(checkpoint):
    """The taggers to come: a CoveForTokenClassification checkpoint gets its card from the same writer."""
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    config = json.loads((checkpoint / "config.json").read_text())
    config.update(architectures=["CoveForTokenClassification"], id2label={str(i): t for i, t in enumerate(tags)},
                  label2id={t: i for i, t in enumerate(tags)})
    record = make_eval_record(
        checkpoint, task={"type": "token-classification", "name": "Named entity recognition"},
        dataset={"key": "conll2003", "name": "CoNLL-2003", "id": "eriktks/conll2003", "split": "validation"},
        metrics=[{"type": "f1", "name": "Span F1", "value": 71.25}, {"type": "precision", "value": 70.5},
                 {"type": "recall", "value": 72.0}],
        training={"command": "cove-train-tagger --task conll2003", "epochs_run": 2, "steps_run": 30})
    card = generate.build_card(record, config, "org/cove-tagger")
    text = str(card)
    assert card.data.pipeline_tag == "token-classification" and "sequence-labelling" in card.data.tags
    assert [(r.metric_type, r.metric_value) for r in card.data.eval_results] == [
        ("f1", 71.25), ("precision", 70.5), ("recall", 72.0)]
    tag_set = text.split("## Tag set")[1].split("## Intended use")[0]
    assert "| 1 | `B-PER` |" in tag_set and "| 4 | `I-LOC` |" in tag_set
    assert "BIO tags over the span types `LOC`, `PER`" in tag_set
    assert ('pipeline("token-classification", model="org/cove-tagger", aggregation_strategy="simple", '
            'trust_remote_code=True)') in text  # without the package
    assert 'pipeline("token-classification", model="org/cove-tagger", aggregation_strategy="simple")' in text
    assert "AutoModelForTokenClassification.from_pretrained(\"org/cove-tagger\")" in text
    assert "The paper reports no number for CoNLL-2003" in text
    assert "- **Trained for:** 2 epochs, 30 optimizer steps." in text


def test_a_fresh_interpreter_with_the_installed_package_writes_an_eval_json_and_a_card(tmp_path):
    """The Trainer user's story: no repository on the path, only `pip install`ed modeling_cove."""
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from modeling_cove import CoveConfig, CoveForSequenceClassification
        from modeling_cove.training.publishing.cards import build_card, describe_encoder, make_eval_record, write_eval_json

        ckpt = Path({str(tmp_path / "ckpt")!r})
        CoveForSequenceClassification(CoveConfig(vocab_size=12, word_vector_dim=8, hidden_size=4, num_labels=2,
                                                 bcn_hidden_size=4)).save_pretrained(ckpt)
        record = make_eval_record(
            ckpt, task={{"type": "text-classification"}},
            dataset={{"key": "sst2", "name": "SST-2", "id": "stanfordnlp/sst2", "split": "validation"}},
            metrics=[{{"type": "accuracy", "value": 51.5}}],
            training={{"command": "my_trainer_script.py", "encoder": describe_encoder(ckpt), "epochs_run": 2.0,
                      "steps_run": 40, "stop_reason": "epochs done"}})
        write_eval_json(ckpt / "eval_results.json", record)
        card = build_card(record, json.loads((ckpt / "config.json").read_text()), "me/cove-bcn")
        card.save(ckpt / "README.md")
        print(any(Path(p or ".").resolve() == Path({str(REPO)!r}) for p in sys.path))  # the repository: not on the path
    """)
    done = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    card = ModelCard.load(tmp_path / "ckpt" / "README.md")
    assert card.data.eval_results[0].metric_value == 51.5
    assert "2.0 epochs, 40 optimizer steps; stopped: epochs done" in card.text


# ----------------------------------------------------------------------------------------------------------------
# A card states only what happened (encoder, steps run, comparable paper column)
# ----------------------------------------------------------------------------------------------------------------


def never_pretrained_encoder(tmp_path: Path) -> Path:
    """What build_vocab.py writes: a checkpoint whose MT-LSTM was initialised and saved, never trained."""
    folder = tmp_path / "vocab"
    CoveModel(CoveConfig(vocab_size=12, word_vector_dim=8, hidden_size=4)).save_pretrained(folder)
    (folder / "build_info.json").write_text(json.dumps({"command": "build_vocab.py", "vocab_size": 12}))
    return folder


def bcn_over_vocab_record(checkpoint: Path, encoder, **training) -> dict:
    """The record of a BCN over a build_vocab.py encoder, run with `--max-steps 20` though configured for 15 epochs."""
    return sst2_record(checkpoint, training={
        "command": "python scripts/train_classifier.py --task sst2 --encoder runs/vocab --max-steps 20",
        "encoder": encoder, "hyperparameters": {"epochs": 15, "batch_size": 64, "learning_rate": 0.001},
        **training})


def test_card_over_a_never_pretrained_encoder_says_so_and_claims_no_cove_column(checkpoint, tmp_path):
    encoder = describe_encoder(never_pretrained_encoder(tmp_path))
    assert encoder["kind"] == "random"
    text = str(generate.build_card(bcn_over_vocab_record(checkpoint, encoder), bcn_config(checkpoint), "org/x"))
    assert "pretrained as" not in text and "pretrained on English" not in text
    assert "← comparable setting" not in text and "**this model** (+CoVe-S)" not in text
    assert "| **this model** (see Training) | validation | **87.65** |" in text
    assert "No paper column is comparable: the record names +CoVe-S, but the encoder is not a pretrained" in text
    assert "randomly initialised and never trained" in text
    assert "**Untrained encoder.**" in text.split("## Limitations")[1]


def test_card_never_shows_the_configured_epochs_as_run(checkpoint, tmp_path):
    encoder = describe_encoder(never_pretrained_encoder(tmp_path))
    unrecorded = str(generate.build_card(bcn_over_vocab_record(checkpoint, encoder), bcn_config(checkpoint), "org/x"))
    assert "epochs=15" not in unrecorded and "15 epochs" not in unrecorded
    assert "- **Trained for:** not recorded (the evaluation record does not say how long it trained)." in unrecorded
    assert '`batch_size=64`' in unrecorded  # the other hyperparameters stay
    recorded = bcn_over_vocab_record(checkpoint, encoder, epochs_run=0.35, steps_run=20,
                                     stop_reason="max steps 20 reached")
    text = str(generate.build_card(recorded, bcn_config(checkpoint), "org/x"))
    assert "- **Trained for:** 0.35 epochs, 20 optimizer steps; stopped: max steps 20 reached." in text
    assert "epochs=15" not in text


def test_the_card_describes_the_encoder_and_tokens_its_config_holds(checkpoint):
    """The encoder line and the limits follow the config: an MT-LSTM over fixed vectors, lower-cased, by default; a
    biLM over trained vectors, cased, when the config says so."""
    default = str(generate.build_card(sst2_record(checkpoint), bcn_config(checkpoint), "org/x"))
    assert "- **Encoder:** MT-LSTM, 2-layer biLSTM with 4 units per direction over fixed 8-d word vectors" in default
    assert "- English only, lower-cased word-level tokens" in default
    config = {**bcn_config(checkpoint), "encoder_type": "bilm", "lowercase": False, "freeze_embeddings": False}
    other = str(generate.build_card(sst2_record(checkpoint), config, "org/x"))
    assert "- **Encoder:** ELMo-style biLM, 2-layer biLSTM with 4 units per direction over trained 8-d" in other
    assert "(BCN, eqs. 7–16) over a frozen biLM encoder" in other and "MT-LSTM encoder" not in other
    assert "- English only, word-level tokens" in other and "lower-cased" not in other


def test_a_free_text_encoder_label_is_not_a_claim_of_pretraining(checkpoint):
    text = str(generate.build_card(bcn_over_vocab_record(checkpoint, "runs/vocab"), bcn_config(checkpoint), "org/x"))
    assert "pretrained as" not in text and "← comparable setting" not in text
    assert "recorded as `runs/vocab`; whether it was pretrained is not recorded" in text
    hub_encoder = {"training": {"encoder": describe_encoder("org/cove-large")}}
    assert generate.encoder_text(hub_encoder) == "loaded from `org/cove-large`; whether it was pretrained is not recorded"


def test_describe_encoder_reads_what_the_checkpoint_is(tmp_path):
    exported = tmp_path / "exported"
    exported.mkdir()
    (exported / "mt_metrics.json").write_text(json.dumps({
        "settings": {"dataset": "iwslt"}, "stop_reason": "max steps 250 reached", "global_step": 250,
        "epochs": [{"epoch": 1, "global_step": 200}, {"epoch": 2, "global_step": 250, "complete": False}],
        "test": {"bleu": 12.3456, "perplexity": 40.0}}))
    encoder = describe_encoder(exported, name="CoVe-M")
    assert encoder == {
        "kind": "pretrained", "path": str(exported), "name": "CoVe-M",
        "pretraining": {"dataset": "iwslt", "complete_epochs": 1, "steps_run": 250,
                        "stop_reason": "max steps 250 reached", "test_bleu": 12.35, "test_perplexity": 40.0}}
    record = {"training": {"encoder": encoder}}
    assert generate.encoder_text(record) == (
        f"pretrained on English→German translation (`CoVe-M`, `{exported}`; translation data: iwslt; 1 complete "
        "epoch; 250 steps; stopped: max steps 250 reached; test BLEU 12.35)")
    converted = tmp_path / "converted"
    converted.mkdir()
    (converted / "conversion_info.json").write_text("{}")
    assert describe_encoder(converted)["pretraining"]["dataset"] == "wmt17"
    assert describe_encoder(never_pretrained_encoder(tmp_path))["kind"] == "random"
    assert describe_encoder(exported, used=False)["kind"] == "unused"
    assert describe_encoder("org/some-hub-encoder") == {"kind": "unknown", "path": "org/some-hub-encoder"}


def test_describe_encoder_reads_a_bilm_encoder(checkpoint, tmp_path):
    bilm = tmp_path / "bilm"
    bilm.mkdir()
    (bilm / "bilm_metrics.json").write_text(json.dumps({
        "data": {"texts_per_corpus": {"trec6": 10, "imdb": 20}}, "global_step": 40, "stop_reason": "epochs",
        "epochs": [{"epoch": 1, "complete": True, "heldout_forward_perplexity": 123.456,
                    "heldout_backward_perplexity": 130.0}]}))
    encoder = describe_encoder(bilm)
    assert encoder["kind"] == "pretrained" and encoder["pretraining"] == {
        "source": "ELMo-style bidirectional language model (this package's biLM pretraining)", "objective": "bilm",
        "corpora": ["imdb", "trec6"], "complete_epochs": 1, "steps_run": 40, "stop_reason": "epochs",
        "heldout_forward_perplexity": 123.46, "heldout_backward_perplexity": 130.0}
    text = generate.encoder_text({"training": {"encoder": encoder}})
    assert text.startswith("pretrained as an ELMo-style bidirectional language model on English text")
    assert "translation" not in text and "held-out perplexity forward 123.46, backward 130.0" in text
    column, why = generate.comparable_column(sst2_record(checkpoint, paper_column="+CoVe-S", training={
        "command": "x", "encoder": encoder}))
    assert column is None and why  # a biLM is no CoVe column of the paper


def test_paper_column_is_comparable_only_for_the_matching_setting(checkpoint, tmp_path):
    iwslt = {"kind": "pretrained", "pretraining": {"dataset": "iwslt"}}
    assert generate.comparable_column(sst2_record(checkpoint, paper_column="+CoVe-M", training={
        "command": "x", "encoder": iwslt})) == ("+CoVe-M", None)
    column, why = generate.comparable_column(sst2_record(checkpoint, training={"command": "x", "encoder": iwslt}))
    assert column is None and "pretrained on multi30k), but the encoder was pretrained on iwslt" in why
    column, why = generate.comparable_column(sst2_record(checkpoint, training={
        "command": "x", "encoder": {"kind": "pretrained"}}))
    assert column is None and "pretraining data (needs multi30k) is not recorded" in why
    vectors_only = sst2_record(checkpoint, paper_column="GloVe", training={
        "command": "x", "encoder": describe_encoder(tmp_path, used=False)})
    text = str(generate.build_card(vectors_only, bcn_config(checkpoint), "org/x"))
    assert "| McCann et al. 2017: GloVe (Table 2) ← comparable setting |" in text
    assert "not read by this model, which reads the word vectors only" in text


def test_encoder_and_paper_column_are_validated(checkpoint):
    with pytest.raises(EvalRecordError) as err:
        sst2_record(checkpoint, paper_column="CoVe-XL", training={
            "command": "x", "encoder": {"kind": "trained-ish", "pretraining": {"dataset": "wmt17"}},
            "epochs_run": -1, "steps_run": 2.5})
    message = str(err.value)
    for problem in ("paper_column must be one of the paper's Table 2 columns", "training.encoder.kind must be one of",
                    "training.encoder.pretraining is only for kind 'pretrained'",
                    "training.epochs_run must be a number >= 0", "training.steps_run must be an integer >= 0"):
        assert problem in message, problem


def test_encoder_card_loading_code_runs_and_its_fast_paths_agree(tmp_path):
    """The CoveModel card's two loading blocks, run as written against a local checkpoint (its path as repo id):
    `encode` and the "cove-feature-extraction" pipeline give the same vectors as the model on each text."""
    from modeling_cove.build import create_cove_checkpoint
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS

    words = ["the", "cat", "sat", "on", "mat", ".", "a", "dog", "ran"]
    torch.manual_seed(0)
    model, tokenizer = create_cove_checkpoint(words, torch.randn(len(SPECIAL_TOKENS) + len(words), 8), hidden_size=4)
    model.save_pretrained(tmp_path / "enc")
    tokenizer.save_pretrained(tmp_path / "enc")
    record = sst2_record(tmp_path / "enc")
    config = json.loads((tmp_path / "enc" / "config.json").read_text())
    for remote in (False, True):
        code = generate.render_loading("CoveModel", record, config, str(tmp_path / "enc"), remote=remote)
        assert ("cove-feature-extraction" in code) is not remote  # the pipeline needs the package
        namespace = {}
        exec(code, namespace)  # noqa: S102 - the card's own example
        texts = ["The cat sat on the mat .", "A dog ran ."]
        for i, text in enumerate(texts):
            with torch.no_grad():
                alone = model(**tokenizer([text], return_tensors="pt")).last_hidden_state[0]  # (T_i, D)
            assert_reproduces(namespace["vectors"][i], alone, text)
            if not remote:
                assert_reproduces(torch.tensor(namespace["features"][i][0]), alone, text)
