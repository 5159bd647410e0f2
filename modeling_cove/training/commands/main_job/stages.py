"""The main job's seven stages, each a function of the run's settings (`settings.resolve`) and its folder that returns
the stage's metrics: vectors and vocab run in-process (seconds), pretraining, the classifiers and the Hub-ready folder
run the package's own command lines as subprocesses (`runner.library_command`), predict loads the result back."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ...common.presets import preset_path
from ...common.files import write_json
from ...common.files import commit_tmp, fresh_tmp
from .runner import Command, StageError, flags, library_command, run_commands
from .settings import CLASSIFICATION_TASKS


def shipped(cfg: dict, path) -> Path:
    """A path written in the run's preset: the shipped example data for a shipped preset (`presets.preset_path`)."""
    return preset_path(cfg["preset_file"], path)


def stage_vectors(cfg: dict, folder: Path) -> dict:
    """Stage 1: PPMI vectors from the shipped training text, or the given file (checked in `resolve`)."""
    tmp = fresh_tmp(folder)
    if cfg["vectors_file"]:
        info = {"source": "file", "file": cfg["vectors_file"], "dim": cfg["dim"],
                "lowercase_lookup": cfg["vectors_lowercase"]}
    else:
        from ..train_ppmi_vectors import train_ppmi_vectors, write_vectors
        from ...data.texts import read_texts

        vec = cfg["preset_content"]["vectors"]
        window, min_count = vec.get("window", 5), vec.get("min_count", 1)
        texts = [text for path, column in vec["texts"] for text in read_texts(shipped(cfg, path), column)]
        words, vectors = train_ppmi_vectors(texts, dim=int(vec["dim"]), window=window, min_count=min_count)
        write_vectors(tmp / "vectors.txt", words, vectors)
        print(f"{len(texts)} texts -> {len(words)} words x {vec['dim']} dims (PPMI + SVD)", flush=True)
        info = {"source": "ppmi", "file": str(folder / "vectors.txt"), "dim": int(vec["dim"]), "words": len(words),
                "texts": vec["texts"], "window": window, "min_count": min_count, "lowercase_lookup": False}
    write_json(tmp / "vectors.json", info)
    commit_tmp(tmp, folder)
    return info


def vocab_texts(cfg: dict) -> tuple:
    """`(texts, sources)`: the English text of every split the job reads (the preset's TSV columns and named
    sources, and every classification task's text)."""
    from ...data.texts import iter_task_texts, read_split_texts

    spec = cfg["preset_content"]["vocab"]
    preset_folders = [shipped(cfg, p).resolve() for p, _ in spec.get("texts") or []]
    texts, sources = [], []
    for path, column in spec.get("texts") or []:
        texts += read_split_texts(shipped(cfg, path), column)
        sources.append(f"{path} ({column})")
    named = list(spec.get("tasks") or [])
    for t in cfg["tasks"]:  # every classification task's text (also --tasks)
        if t["task"] == "tsv" and Path(t["data"]).resolve() not in preset_folders:
            texts += read_split_texts(t["data"], "text")
            sources.append(t["data"])
        elif t["task"] != "tsv" and t["task"] not in named:
            named.append(t["task"])
    for task in named:
        texts += list(iter_task_texts(task, cfg["data_dir"]))
        sources.append(task)
    return texts, sources


def stage_vocab(cfg: dict, folder: Path, vectors: dict) -> dict:
    """Stage 2 (seconds): the vocabulary of every English text the job reads, the fixed word-vector matrix and a
    freshly initialised MT-LSTM of the preset's size (pretraining's --init-from keeps the checkpoint's MT-LSTM)."""
    from ...data.checkpoints import save_checkpoint
    from ..build_vocab import build_vocab_checkpoint

    spec = cfg["preset_content"]["vocab"]
    start = time.time()
    texts, sources = vocab_texts(cfg)
    try:
        model, tokenizer, built = build_vocab_checkpoint(
            texts, vectors["file"], dim=vectors["dim"], lowercase=True, vectors_lowercase=vectors["lowercase_lookup"],
            oov_min_count=spec.get("oov_min_count", 5), seed=0, **(spec.get("config") or {}))
    except ValueError as e:
        raise StageError(f"vocab: {e}") from None
    info = {"sources": sources, **built, "seconds": round(time.time() - start, 1)}
    info["vectors"] = vectors["file"]
    tmp = fresh_tmp(folder)
    save_checkpoint(model, tokenizer, tmp / "checkpoint")
    write_json(tmp / "vocab.json", info)
    commit_tmp(tmp, folder)
    print(f"vocabulary: {info['vocab_size']} entries, {info['words_with_vector']} with a vector; "
          f"{info['token_coverage_vectors']}% of {info['corpus_tokens']} tokens covered -> {folder / 'checkpoint'}",
          flush=True)
    return info


def pretrain_command(cfg: dict, folder: Path, threads, extra: dict | None = None) -> list:
    """The argv of the preset's MT pretraining (`modeling_cove.training.commands.train_mt`) into `folder`, with
    `extra` flags over the preset's; `--resume` when `folder` holds an unfinished run."""
    pre = cfg["preset_content"]["pretrain"]
    options = dict(pre.get("args") or {})
    if cfg["quick"]:
        options.update(pre.get("quick_args") or {})
    options.update(extra or {})
    cmd = library_command("train_mt")
    if cfg["accelerate_config"]:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", cfg["accelerate_config"],
               *library_command("train_mt")[1:]]
    cmd += ["--output-dir", folder, "--init-from", Path(cfg["run_dir"]) / "vocab" / "checkpoint"]
    if pre.get("preset"):
        cmd += ["--preset", shipped(cfg, pre["preset"])]
    if pre.get("dataset") == "tsv":
        cmd += ["--dataset", "tsv", "--data-dir", shipped(cfg, pre["data"])]
    else:
        cmd += (["--dataset", pre["dataset"]] if pre.get("dataset") else []) + (
            ["--data-dir", cfg["data_dir"]] if cfg["data_dir"] else [])
    if pre.get("config_overrides"):
        cmd += ["--config-overrides", json.dumps(pre["config_overrides"], sort_keys=True)]
    cmd += flags(options) + (["--num-threads", threads] if threads else [])
    if (folder / "run_settings.json").exists():
        cmd.append("--resume")
        print(f"{folder} holds an unfinished run: resuming from its latest complete checkpoint", flush=True)
    else:
        cmd.append("--overwrite")  # leftovers of a run killed before it wrote its settings
    return cmd


def stage_pretrain(cfg: dict, folder: Path, threads) -> dict:
    """Stage 3: MT pretraining (`modeling_cove.training.commands.train_mt`, a subprocess); a killed run resumes from its latest
    complete checkpoint."""
    run_commands([Command(pretrain_command(cfg, folder, threads), "pretrain (modeling_cove.training.commands.train_mt)",
                          threads)], folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    if not (folder / "encoder" / "config.json").exists():
        raise StageError(f"pretraining finished without exporting {folder / 'encoder'}")
    return summarize_pretrain(metrics, folder)


def summarize_pretrain(metrics: dict, folder: Path) -> dict:
    epochs = metrics.get("epochs") or []
    test = metrics.get("test") or {}
    return {
        "encoder": str(folder / "encoder"),
        "epochs": len(epochs),
        "steps": epochs[-1]["global_step"] if epochs else None,
        "stop_reason": metrics.get("stop_reason"),
        "test_bleu": test.get("bleu"),
        "test_perplexity": test.get("perplexity"),
        "best_val_bleu": max((e.get("val_bleu") or 0 for e in epochs), default=None),
        "last_val_perplexity": epochs[-1].get("val_perplexity") if epochs else None,
        "last_train_perplexity": epochs[-1].get("train_perplexity") if epochs else None,
        "train_seconds": round(sum(e.get("seconds", 0) for e in epochs), 1),
        "data": metrics.get("data"),
        "curve": str(folder / "curves.png"),
    }


def classifier_slots(spec: dict, threads, cores: int | None = None) -> tuple:
    """`(runs at once, threads per run)`. The BCN of the embedded default is small: one thread per run is as fast as
    two, so two runs side by side on 2 cores take about half the time of one after the other. `threads` (--threads)
    fixes the threads per run; the runs at once are then what the cores hold (`cores`: default, those this process
    may use), at most `concurrent_runs`."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    wanted = max(1, int(spec.get("concurrent_runs", 1)))
    per_run = threads or max(1, cores // wanted)
    return max(1, min(wanted, cores // per_run)), per_run


def classifier_columns(cfg: dict) -> tuple:
    spec = cfg["preset_content"]["classifier"]
    options = dict(spec.get("args") or {})
    baselines = list(spec.get("baselines") or [])
    if cfg["quick"]:
        options.update(spec.get("quick_args") or {})
        baselines = list(spec.get("quick_baselines") or [])
    return [spec["bcn_input"]] + baselines, options


def stage_classifier(cfg: dict, folder: Path, threads) -> dict:
    """Stage 4: the BCN (`modeling_cove.training.commands.train_classifier`) per task and column (subprocesses, several at once
    where `classifier_slots` allows); each run goes to `<column>.tmp`, renamed when it succeeded, so a finished run
    is kept when another one is killed."""
    columns, options = classifier_columns(cfg)
    slots, per_run = classifier_slots(cfg["preset_content"]["classifier"], threads)
    encoder = folder.parent / "pretrain" / "encoder"
    folder.mkdir(parents=True, exist_ok=True)
    commands = []
    for t in cfg["tasks"]:
        for column in columns:
            out = folder / t["name"] / column
            if (out / "metrics.json").exists():
                print(f"{t['name']} ({column}): finished earlier, skipped", flush=True)
                continue
            tmp = fresh_tmp(out)
            cmd = [*library_command("train_classifier"), "--task", t["task"], "--encoder", encoder,
                   "--bcn-input", column, "--output-dir", tmp, "--cache-dir", folder / "feature_cache", "--overwrite"]
            data = t.get("data") or cfg["data_dir"]
            cmd += (["--data-dir", data] if data else []) + flags(options) + ["--threads", per_run]
            log = tmp / "train.log" if slots > 1 and commands else None  # the first one prints to the terminal
            name = f"classifier {t['name']} {column} (modeling_cove.training.commands.train_classifier)"
            commands.append(Command(cmd, name, per_run, log, on_success=lambda tmp=tmp, out=out: commit_tmp(tmp, out)))
    slots = min(slots, max(1, len(commands)))
    run_commands(commands, folder, slots)
    return {t["name"]: {column: classifier_summary(t, folder / t["name"] / column, slots, per_run)
                        for column in columns} for t in cfg["tasks"]}


def classifier_summary(task: dict, out: Path, slots: int, threads: int) -> dict:
    m = json.loads((out / "metrics.json").read_text())
    return {
        "task": task["task"],
        "validation_accuracy": 100 * m["validation"]["accuracy"],
        "test_accuracy": 100 * m["test"]["accuracy"],
        "test_macro_f1": 100 * m["test"]["macro_f1"],
        "epochs": len(m.get("epochs") or []),
        "stop_reason": m.get("stop_reason"),
        "train_seconds": m.get("train_seconds"),
        "threads": threads,
        "runs_at_once": slots,
        "paper_validation_accuracy": m.get("paper_table2_validation_accuracy"),
        "model_dir": str(out / "best"),
        "curve": str(out / "curve.png"),
        "splits": m.get("splits"),
        "command": m.get("command"),
    }


def published_column(columns: dict) -> str:
    """The column a task publishes: the best validation accuracy of those trained (model selection on validation,
    never on test); on a tie the first, i.e. the preset's `bcn_input` (the CoVe column), which is trained first."""
    return max(columns, key=lambda column: columns[column]["validation_accuracy"])


def eval_record(cfg: dict, task: dict, run: dict, column: str, scores: dict) -> dict:
    """The evaluation record of the published checkpoint for its model card: the one the classifier run wrote
    beside it (what the encoder really is, epochs and steps really run, why it stopped), with the preset's dataset
    description and the main job's notes (which column was published and why)."""
    from ...publishing.cards import make_eval_record

    own = json.loads((Path(run["model_dir"]).parent / "eval_results.json").read_text())
    meta = (cfg["preset_content"]["publish"].get("dataset") or {}).get(task["name"], {})
    dataset = {**own["dataset"], "name": meta.get("name", task["name"]),
               "source": meta.get("source", task.get("data") or cfg["data_dir"] or "Hub")}
    dataset.pop("key", None)
    if "id" in meta:
        dataset["id"] = meta["id"]
    if task["task"] in CLASSIFICATION_TASKS:
        dataset["key"] = task["task"]
    training = dict(own["training"])
    training["word_vectors"] = {"name": Path(cfg["vectors_file"] or "PPMI vectors of the shipped text").name,
                                "stand_in": cfg["vectors_file"] is None or "glove.840B" not in cfg["vectors_file"]}
    training["notes"] = list(training.get("notes") or []) + [
        f"produced by cove-main --preset {cfg['preset']}" + (" --quick" if cfg["quick"] else ""),
        f"BCN input {column}: the best validation accuracy of the columns trained ("
        + ", ".join(f"{c} {v:.1f}" for c, v in scores.items()) + ")"]
    return make_eval_record(Path(run["model_dir"]), task=own["task"], dataset=dataset, metrics=own["metrics"],
                            training=training, paper_column=own.get("paper_column"))


def stage_publish(cfg: dict, folder: Path, threads, classifier: dict) -> dict:
    """Stage 5: evaluation JSON, model card and Hub-ready folder (`modeling_cove.training.commands.push_to_hub --dry-run`), per
    task: the column
    with the best validation accuracy (`published_column`)."""
    from ...publishing.cards import write_eval_json

    tmp = fresh_tmp(folder)
    results = {}
    for t in cfg["tasks"]:
        trained = classifier[t["name"]]
        scores = {c: m["validation_accuracy"] for c, m in trained.items()}  # what the choice was made on
        column = published_column(trained)
        run = trained[column]
        task_dir = tmp / t["name"]
        task_dir.mkdir()
        write_eval_json(task_dir / "eval_results.json", eval_record(cfg, t, run, column, scores))
        repo_id = cfg["repo_id"] if len(cfg["tasks"]) == 1 else f"{cfg['repo_id']}-{t['name']}"
        cmd = [*library_command("push_to_hub"), run["model_dir"], "--repo-id", repo_id, "--eval-json",
               task_dir / "eval_results.json", "--curve", run["curve"], "--dry-run", "--output-dir", task_dir / "hub"]
        run_commands([Command(cmd, f"publish {t['name']} (modeling_cove.training.commands.push_to_hub --dry-run)", threads)], folder)
        results[t["name"]] = {
            "column": column,
            "validation_accuracy": scores,
            "repo_id": repo_id,
            "hub_folder": str(folder / t["name"] / "hub"),
            "files": sorted(str(p.relative_to(task_dir / "hub")) for p in (task_dir / "hub").rglob("*")
                            if p.is_file()),
            "eval_json": str(folder / t["name"] / "eval_results.json"),
        }
    commit_tmp(tmp, folder)
    return results


def predict_with(hub: str, sentences: list) -> dict:
    """Load a Hub-ready folder with AutoModel (the CoVe encoder part), AutoModelForSequenceClassification and
    pipeline("text-classification") (remote code shipped in the folder) and classify `sentences`."""
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, pipeline
    from transformers.utils import logging as transformers_logging

    tokenizer = AutoTokenizer.from_pretrained(hub)
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # AutoModel = the CoVe encoder part: the BCN weights are unused
    try:
        base = AutoModel.from_pretrained(hub, trust_remote_code=True).eval()
    finally:
        transformers_logging.set_verbosity(verbosity)
    classifier = AutoModelForSequenceClassification.from_pretrained(hub, trust_remote_code=True).eval()
    sample = [s for s in sentences if s][:1] or ["a test sentence ."]
    with torch.no_grad():
        enc = tokenizer(sample, return_tensors="pt")
        features = base(**enc).last_hidden_state
        logits = classifier(**enc).logits
    outputs = pipeline("text-classification", model=hub, trust_remote_code=True)(sentences) if sentences else []
    rows = [{"text": s, "label": o["label"], "score": round(float(o["score"]), 4)} for s, o in zip(sentences, outputs)]
    return {
        "auto_model_class": type(base).__name__,
        "classifier_class": type(classifier).__name__,
        "feature_shape": list(features.shape),
        "predictions": rows,
        "pipeline_agrees_with_model": bool(rows) and rows[0]["label"] == classifier.config.id2label[
            int(logits[0].argmax())],
    }


def stage_predict(cfg: dict, folder: Path, publish: dict, threads) -> dict:
    """Stage 6 (in-process): each Hub-ready folder loaded back and used for predictions (printed)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    sentences = list((cfg["preset_content"].get("predict") or {}).get("sentences") or [])
    results = {}
    tmp = fresh_tmp(folder)
    for name, pub in publish.items():
        results[name] = predict_with(pub["hub_folder"], sentences)
        print(f"\n{name}: AutoModel -> {results[name]['auto_model_class']}, CoVe features "
              f"{tuple(results[name]['feature_shape'])}; pipeline('text-classification') from {pub['hub_folder']}:",
              flush=True)
        for row in results[name]["predictions"]:
            print(f"  {row['label']:>12s} {row['score']:.3f}  {row['text']}", flush=True)
    write_json(tmp / "predictions.json", results)
    commit_tmp(tmp, folder)
    return results
