#!/usr/bin/env python
"""The main job in one command: text data -> word vectors -> vocabulary -> pretrained CoVe (MT-LSTM) -> BCN
classifier -> evaluation, model card and Hub-ready folder -> loaded back and used for predictions.

    python scripts/main.py                                   # embedded default (examples/), a few minutes on 2 CPUs
    python scripts/main.py --quick                           # the same, reduced (the test suite uses it)
    python scripts/main.py --preset cove-small --data-dir ../shared/data --run-dir runs/main-cove-small
    python scripts/main.py --preset cove-small --data-dir ../shared/data --vectors glove.840B.300d.txt \\
        --vectors-lowercase                                  # real GloVe 840B (cased file, looked up lower-cased)
    python scripts/main.py --tasks trec6 sst2 --data-dir ../shared/data   # embedded CoVe, BCN on real tasks
    python scripts/main.py --preset cove-small --accelerate-config configuration/accelerate/single_gpu.yaml
                                                             # pretraining via `accelerate launch` (GPU / multi-GPU)

Presets are configuration/main/<name>.yaml (`embedded`, `cove-small`) or a path to such a file.

Stages, each in its own folder under --run-dir (default runs/main):
    1 vectors/     PPMI+SVD word vectors from the shipped training text (scripts/train_ppmi_vectors.py), or a check
                   of --vectors FILE
    2 vocab/       vocabulary of every text the job reads + the fixed word-vector matrix + a fresh MT-LSTM of the
                   preset's size, as a CoVe checkpoint (the building blocks of scripts/build_vocab.py)
    3 pretrain/    scripts/train_mt.py --init-from vocab/checkpoint: MT pretraining, BLEU, encoder export
    4 classifier/  scripts/train_classifier.py per task: BCN on the pretrained encoder (+ baseline columns)
    5 publish/     evaluation JSON (model_cards.evaluation), model card and Hub-ready folder
                   (scripts/push_to_hub.py --dry-run) of the column with the best validation accuracy
    6 predict/     the Hub-ready folder loaded with AutoModel and pipeline("text-classification"); predictions
Then <run-dir>/report.json (every stage's metrics), <run-dir>/curves/*.png and <run-dir>/REPORT.md (ours beside
the paper's numbers).

Stages 1, 3, 4 and 5 run the project's scripts as subprocesses (`sys.executable scripts/x.py ...`): each gets its
own interpreter (OpenMP/thread settings, no state leaking between stages), can be killed on its own, and is exactly
the command a user would type (printed before it runs). Stages 2 and 6 are short and run in-process.

Restartable: a finished stage writes `<stage>/.done.json` LAST, after its outputs are complete; a rerun skips it
("skipped" in the log). A stage that did not finish is redone cleanly: stages 1, 2, 5, 6 and each classifier task
are written into `<name>.tmp` and renamed on success; pretraining resumes from its latest complete checkpoint
(train_mt.py --resume; its checkpoints are saved to a temporary folder and renamed). The settings of a run are kept
in <run-dir>/run.json; rerunning the same --run-dir with other settings is refused (use --overwrite).

Bad input (unknown preset or task, missing data folder, a vectors file that does not exist or does not have the
expected dimension) stops before any work with a clear message and exit code 2. A failed stage exits 1.
--threads N sets torch/OpenMP threads in every stage (OMP_WAIT_POLICY=PASSIVE is set for shared machines).
"""

import argparse
import csv
import gzip
import hashlib
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
PRESET_DIR = REPO / "configuration" / "main"
CLASSIFICATION_TASKS = ("sst2", "sst5", "trec6", "trec50", "imdb", "snli")
# the folder of --data-dir that each named source reads (shared/data layout, modeling_cove/data.py)
DATA_SUBFOLDER = {"multi30k": "multi30k", "sst2": "sst", "sst5": "sst", "trec6": "trec", "trec50": "trec",
                  "imdb": "imdb", "snli": "snli", "squad": "squad"}
STAGES = ("vectors", "vocab", "pretrain", "classifier", "publish", "predict")
DONE = ".done.json"
PRESET_KEYS = {"name", "description", "vectors", "vocab", "pretrain", "classifier", "publish", "predict"}


class InputError(Exception):
    """Bad input found before any work: printed as `main.py: error: ...`, exit code 2."""


class StageError(Exception):
    """A stage failed: printed with the stage name, exit code 1."""


# ---------------------------------------------------------------------------------------------------------------
# command line, preset, input checks


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="embedded",
                   help="configuration/main/<name>.yaml (embedded, cove-small) or a yaml path (default: embedded)")
    p.add_argument("--run-dir", default="runs/main", help="where every stage writes (default: runs/main)")
    p.add_argument("--data-dir", default=None,
                   help="local data folder laid out like ../shared/data (real tasks); default: Hub dataset ids")
    p.add_argument("--vectors", default=None, help="word vectors file (GloVe/word2vec text, .txt/.gz/.xz) "
                   "instead of the preset's (e.g. glove.840B.300d.txt)")
    p.add_argument("--vectors-lowercase", action="store_true",
                   help="look words up lower-cased in a cased vectors file (GloVe 840B)")
    p.add_argument("--tasks", nargs="+", default=None,
                   help=f"classification tasks instead of the preset's: {', '.join(CLASSIFICATION_TASKS)} "
                        "(need --data-dir or the Hub) or a folder with train/validation/test.tsv (text, label)")
    p.add_argument("--repo-id", default=None, help="Hub repo id for the card / dry-run folder (default: preset's)")
    p.add_argument("--quick", action="store_true", help="reduced sizes (preset's quick_args): a smoke run")
    p.add_argument("--threads", type=int, default=None, help="torch/OpenMP threads per stage")
    p.add_argument("--accelerate-config", default=None,
                   help="run pretraining with `accelerate launch --config_file FILE` (GPU, multi-GPU, DDP)")
    p.add_argument("--overwrite", action="store_true", help="delete --run-dir first")
    return p.parse_args(argv)


def fail(message: str):
    raise InputError(message)


def load_preset(name: str) -> dict:
    import yaml

    path = Path(name)
    if not (path.suffix in (".yaml", ".yml", ".json") and path.exists()):
        path = PRESET_DIR / f"{name}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))
        fail(f"unknown preset {name!r}; choose from {', '.join(known)} or give a preset yaml file")
    preset = yaml.safe_load(path.read_text()) or {}
    unknown = set(preset) - PRESET_KEYS
    if unknown:
        fail(f"{path}: unknown preset keys {sorted(unknown)}; known: {sorted(PRESET_KEYS)}")
    missing = {"vectors", "vocab", "pretrain", "classifier", "publish"} - set(preset)
    if missing:
        fail(f"{path}: missing preset sections {sorted(missing)}")
    preset["path"] = str(path)
    return preset


def repo_path(path) -> Path:
    path = Path(path)
    return path if path.is_absolute() else REPO / path


def open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def vectors_file_dim(path: Path) -> int:
    """Dimension of a GloVe/word2vec text file from its first lines; InputError when it is not one."""
    if not path.is_file():
        fail(f"vectors file not found: {path}")
    try:
        with open_text(path) as f:
            lines = [f.readline() for _ in range(2)]
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as e:
        fail(f"cannot read vectors file {path}: {e}")
    fields = lines[0].rstrip("\n").split(" ")
    if len(fields) == 2 and all(x.isdigit() for x in fields):  # word2vec header "count dim"
        fields = lines[1].rstrip("\n").split(" ")
    try:
        values = [float(x) for x in fields[1:] if x != ""]
    except ValueError:
        values = []
    if len(fields) < 2 or not values:
        fail(f"{path} is not a word-vectors text file: expected lines 'word v1 v2 ... vD', got "
             f"{lines[0][:80]!r}")
    return len(values)


def resolve(args) -> dict:
    """Every setting of the run, checked: raises InputError on bad input."""
    preset = load_preset(args.preset)
    data_dir = None
    if args.data_dir is not None:
        data_dir = Path(args.data_dir).resolve()
        if not data_dir.is_dir():
            fail(f"--data-dir {args.data_dir} does not exist or is not a folder")
    if args.threads is not None and args.threads < 1:
        fail("--threads must be >= 1")

    # classification tasks: preset's, or --tasks (named tasks or TSV folders)
    if args.tasks:
        tasks = []
        for task in args.tasks:
            if task in CLASSIFICATION_TASKS:
                tasks.append({"name": task, "task": task})
            elif (Path(task) / "train.tsv").is_file():
                tasks.append({"name": Path(task).resolve().name, "task": "tsv", "data": str(Path(task).resolve())})
            else:
                fail(f"unknown task {task!r}: choose from {', '.join(CLASSIFICATION_TASKS)} or give a folder with "
                     "train.tsv, validation.tsv, test.tsv (columns text, label)")
    else:
        tasks = [dict(t) for t in preset["classifier"]["tasks"]]
    for t in tasks:
        if t["task"] == "tsv":
            t["data"] = str(repo_path(t["data"]))
            for split in ("train", "validation", "test"):
                if not (Path(t["data"]) / f"{split}.tsv").is_file():
                    fail(f"task {t['name']}: {Path(t['data']) / (split + '.tsv')} not found")
        elif t["task"] not in CLASSIFICATION_TASKS:
            fail(f"unknown task {t['task']!r} in the preset; choose from {', '.join(CLASSIFICATION_TASKS)} or tsv")
    if len({t["name"] for t in tasks}) != len(tasks):
        fail("two tasks with the same name")

    pre = preset["pretrain"]
    if pre.get("dataset") == "tsv" and not (repo_path(pre["data"]) / "train.tsv").is_file():
        fail(f"pretraining data not found: {repo_path(pre['data'])}/train.tsv")
    # named sources read from --data-dir must be there
    named = [t["task"] for t in tasks if t["task"] != "tsv"] + list(preset["vocab"].get("tasks") or [])
    if pre.get("preset"):
        named.append(json.loads(repo_path(pre["preset"]).read_text()).get("data", {}).get("dataset", "multi30k"))
    if data_dir is not None:
        for source in sorted(set(named)):
            sub = data_dir / DATA_SUBFOLDER.get(source, source)
            if not sub.is_dir():
                fail(f"--data-dir {args.data_dir} has no {sub.name}/ folder (needed for {source})")

    # vectors: --vectors FILE, the preset's file, or PPMI vectors trained in stage 1
    vec = preset["vectors"]
    if args.vectors:
        vectors_file = Path(args.vectors).resolve()
        dim = vectors_file_dim(vectors_file)
        expected = vec.get("dim") if vec.get("source") == "file" else None
        if expected and dim != expected:
            fail(f"--vectors {args.vectors} has {dim}-dimensional vectors; preset {preset['name']} needs {expected}")
    elif vec["source"] == "file":
        if data_dir is None and "{data_dir}" in vec["default_file"]:
            fail(f"preset {preset['name']} needs --vectors FILE (or --data-dir with the stand-in vectors)")
        vectors_file = Path(vec["default_file"].format(data_dir=data_dir)).resolve()
        dim = vectors_file_dim(vectors_file)
        if dim != vec["dim"]:
            fail(f"{vectors_file} has {dim}-dimensional vectors, expected {vec['dim']}")
    elif vec["source"] == "ppmi":
        vectors_file, dim = None, int(vec["dim"])
    else:
        fail(f"preset vectors.source must be ppmi or file, got {vec['source']!r}")

    accelerate_config = None
    if args.accelerate_config:
        given = Path(args.accelerate_config)
        # a path relative to the working directory, else to the repository (configuration/accelerate/...)
        accelerate_config = given.resolve() if given.is_file() else repo_path(given)
        if not accelerate_config.is_file():
            fail(f"--accelerate-config {args.accelerate_config} not found")

    return {
        "preset": preset["name"],
        "preset_file": preset["path"],
        "preset_content": {k: v for k, v in preset.items() if k != "path"},
        "data_dir": str(data_dir) if data_dir else None,
        "vectors_file": str(vectors_file) if vectors_file else None,
        "vectors_lowercase": bool(args.vectors_lowercase),
        "dim": dim,
        "tasks": tasks,
        "repo_id": args.repo_id or preset["publish"]["repo_id"],
        "quick": bool(args.quick),
        "accelerate_config": str(accelerate_config) if accelerate_config else None,
    }


# ---------------------------------------------------------------------------------------------------------------
# stage bookkeeping


def banner(number: int, stage: str, text: str):
    line = f"[stage {number}/{len(STAGES)}] {stage}: {text}"
    print("\n" + "=" * len(line) + "\n" + line + "\n" + "=" * len(line), flush=True)


def is_done(folder: Path) -> bool:
    return (folder / DONE).is_file()


def mark_done(folder: Path, info: dict):
    """Completion marker, written LAST (after every output of the stage), atomically."""
    tmp = folder / (DONE + ".tmp")
    tmp.write_text(json.dumps(info, indent=2, default=str) + "\n")
    os.replace(tmp, folder / DONE)


def read_done(folder: Path) -> dict:
    return json.loads((folder / DONE).read_text())


def fresh_tmp(folder: Path) -> Path:
    """`<folder>.tmp`, emptied: a stage writes there and renames it to `folder` on success."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def commit_tmp(tmp: Path, folder: Path):
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def write_json(path: Path, payload):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def child_env(threads) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_command(cmd: list, stage_dir: Path, threads, name: str):
    """Run one stage subprocess (output goes straight to the terminal, bars included); its pid is kept in
    <run-dir>/<stage>.running.json while it runs (outside the stage folder, which the stage may replace)."""
    print("$ " + " ".join(str(c) for c in cmd), flush=True)
    running = stage_dir.parent / f"{stage_dir.name}.running.json"
    proc = subprocess.Popen([str(c) for c in cmd], cwd=REPO, env=child_env(threads))
    running.write_text(json.dumps({"pid": proc.pid, "command": [str(c) for c in cmd]}) + "\n")
    try:
        rc = proc.wait()
    except BaseException:  # Ctrl-C or SIGTERM of the job: stop the stage too (it resumes / reruns next time)
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        raise
    finally:
        running.unlink(missing_ok=True)
    if rc != 0:
        how = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        raise StageError(f"{name} failed ({how}); rerun the same command to continue")


def flags(options: dict) -> list:
    """{"max-epochs": 3, "no-bleu": True} -> ["--max-epochs", "3", "--no-bleu"]."""
    out = []
    for key, value in options.items():
        key = key.replace("_", "-")
        if value is True:
            out.append(f"--{key}")
        elif value is False or value is None:
            continue
        else:
            out += [f"--{key}", str(value)]
    return out


def read_tsv_column(path: Path, column: str) -> list:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if column not in (reader.fieldnames or []):
            raise StageError(f"{path}: no column {column!r} (header {reader.fieldnames})")
        return [row[column] for row in reader]


# ---------------------------------------------------------------------------------------------------------------
# stages


def stage_vectors(cfg: dict, folder: Path, threads) -> dict:
    """Stage 1: PPMI vectors from the shipped training text, or the given file checked."""
    if cfg["vectors_file"]:
        info = {"source": "file", "file": cfg["vectors_file"], "dim": cfg["dim"],
                "lowercase_lookup": cfg["vectors_lowercase"]}
        tmp = fresh_tmp(folder)
        write_json(tmp / "vectors.json", info)
        commit_tmp(tmp, folder)
        return info
    vec = cfg["preset_content"]["vectors"]
    tmp = fresh_tmp(folder)
    cmd = [sys.executable, SCRIPTS / "train_ppmi_vectors.py"]
    for path, column in vec["texts"]:
        cmd += ["--text-file", repo_path(path), "--tsv-column", column]
    cmd += ["--dim", vec["dim"], "--window", vec.get("window", 5), "--min-count", vec.get("min_count", 1),
            "--output", tmp / "vectors.txt"]
    run_command(cmd, folder, threads, "vectors (train_ppmi_vectors.py)")
    words = sum(1 for _ in open(tmp / "vectors.txt", encoding="utf-8"))
    info = {"source": "ppmi", "file": str(folder / "vectors.txt"), "dim": int(vec["dim"]), "words": words,
            "texts": vec["texts"], "window": vec.get("window", 5), "min_count": vec.get("min_count", 1),
            "lowercase_lookup": False}
    write_json(tmp / "vectors.json", info)
    commit_tmp(tmp, folder)
    return info


def stage_vocab(cfg: dict, folder: Path, vectors: dict) -> dict:
    """Stage 2 (in-process, seconds): the vocabulary of every English text the job reads, the fixed word-vector
    matrix and a freshly initialised MT-LSTM of the preset's size, saved as a CoVe checkpoint. The same steps as
    scripts/build_vocab.py (whose text readers it uses), plus the MT-LSTM size (build_vocab.py has no option for
    it, and train_mt.py --init-from keeps the checkpoint's MT-LSTM)."""
    sys.path.insert(0, str(SCRIPTS))
    from build_vocab import iter_task_texts

    from modeling_cove.build import count_tokens, create_cove_checkpoint, select_vocabulary
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS
    from modeling_cove.vectors import embedding_matrix_from_vectors, read_word_vectors

    spec = cfg["preset_content"]["vocab"]
    start = time.time()
    sources = []
    texts = []
    for path, column in spec.get("texts") or []:
        for split in ("train", "validation", "test"):
            texts += read_tsv_column(repo_path(path) / f"{split}.tsv", column)
        sources.append(f"{path} ({column})")
    named = list(spec.get("tasks") or [])
    for t in cfg["tasks"]:  # every classification task's text (also --tasks)
        if t["task"] == "tsv" and not any(repo_path(p).resolve() == Path(t["data"]).resolve()
                                          for p, _ in spec.get("texts") or []):
            for split in ("train", "validation", "test"):
                texts += read_tsv_column(Path(t["data"]) / f"{split}.tsv", "text")
            sources.append(t["data"])
        elif t["task"] != "tsv" and t["task"] not in named:
            named.append(t["task"])
    for task in named:
        texts += list(iter_task_texts(task, cfg["data_dir"]))
        sources.append(task)
    counts = count_tokens(texts, lowercase=True, progress=True)
    found_words, found_vectors = read_word_vectors(vectors["file"], vocab=set(counts), dim=vectors["dim"],
                                                   lowercase=vectors["lowercase_lookup"], progress=True)
    if not found_words:
        raise StageError(f"no word of the text has a vector in {vectors['file']}: wrong vectors file?")
    has_vector = set(found_words).__contains__
    words = select_vocabulary(counts, has_vector=has_vector, oov_min_count=spec.get("oov_min_count", 5))
    matrix, found = embedding_matrix_from_vectors(SPECIAL_TOKENS + words, found_words, found_vectors,
                                                  lowercase=vectors["lowercase_lookup"])
    model, tokenizer = create_cove_checkpoint(words, matrix, lowercase=True, seed=0, **(spec.get("config") or {}))
    total = sum(counts.values())
    info = {
        "sources": sources,
        "vectors": vectors["file"],
        "corpus_tokens": total,
        "corpus_types": len(counts),
        "vocab_size": len(tokenizer),
        "words_with_vector": int(found.sum()),
        "token_coverage_vectors": round(100.0 * sum(c for w, c in counts.items() if has_vector(w)) / total, 2),
        "hidden_size": model.config.hidden_size,
        "num_hidden_layers": model.config.num_hidden_layers,
        "word_vector_dim": model.config.word_vector_dim,
        "seconds": round(time.time() - start, 1),
    }
    tmp = fresh_tmp(folder)
    model.save_pretrained(tmp / "checkpoint")
    tokenizer.save_pretrained(tmp / "checkpoint")
    write_json(tmp / "vocab.json", info)
    commit_tmp(tmp, folder)
    print(f"vocabulary: {info['vocab_size']} entries, {info['words_with_vector']} with a vector; "
          f"{info['token_coverage_vectors']}% of {total} tokens covered -> {folder / 'checkpoint'}", flush=True)
    return info


def stage_pretrain(cfg: dict, folder: Path, threads) -> dict:
    """Stage 3: train_mt.py (subprocess); a killed run resumes from its latest complete checkpoint."""
    pre = cfg["preset_content"]["pretrain"]
    options = dict(pre.get("args") or {})
    if cfg["quick"]:
        options.update(pre.get("quick_args") or {})
    if cfg["accelerate_config"]:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", cfg["accelerate_config"],
               SCRIPTS / "train_mt.py"]
    else:
        cmd = [sys.executable, SCRIPTS / "train_mt.py"]
    cmd += ["--output-dir", folder, "--init-from", folder.parent / "vocab" / "checkpoint"]
    if pre.get("preset"):
        cmd += ["--preset", repo_path(pre["preset"])]
    if pre.get("dataset") == "tsv":
        cmd += ["--dataset", "tsv", "--data-dir", repo_path(pre["data"])]
    else:
        if pre.get("dataset"):
            cmd += ["--dataset", pre["dataset"]]
        if cfg["data_dir"]:
            cmd += ["--data-dir", cfg["data_dir"]]
    if pre.get("config_overrides"):
        cmd += ["--config-overrides", json.dumps(pre["config_overrides"], sort_keys=True)]
    cmd += flags(options)
    if threads:
        cmd += ["--num-threads", threads]
    if (folder / "run_settings.json").exists():
        cmd.append("--resume")
        print(f"{folder} holds an unfinished run: resuming from its latest complete checkpoint", flush=True)
    else:
        cmd.append("--overwrite")  # leftovers of a run killed before it wrote its settings
    run_command(cmd, folder, threads, "pretrain (train_mt.py)")
    metrics = json.loads((folder / "metrics.json").read_text())
    if not (folder / "encoder" / "config.json").exists():
        raise StageError(f"train_mt.py finished without exporting {folder / 'encoder'}")
    return summarize_pretrain(metrics, folder)


def summarize_pretrain(metrics: dict, folder: Path) -> dict:
    epochs = metrics.get("epochs") or []
    test = metrics.get("test") or {}
    return {
        "encoder": str(folder / "encoder"),
        "epochs": len(epochs),
        "steps": epochs[-1]["global_step"] if epochs else None,
        "test_bleu": test.get("bleu"),
        "test_perplexity": test.get("perplexity"),
        "best_val_bleu": max((e.get("val_bleu") or 0 for e in epochs), default=None),
        "last_val_perplexity": epochs[-1].get("val_perplexity") if epochs else None,
        "last_train_perplexity": epochs[-1].get("train_perplexity") if epochs else None,
        "train_seconds": round(sum(e.get("seconds", 0) for e in epochs), 1),
        "data": metrics.get("data"),
        "curve": str(folder / "curves.png"),
    }


def stage_classifier(cfg: dict, folder: Path, threads) -> dict:
    """Stage 4: train_classifier.py per task and column (subprocesses); each run goes to `<name>.tmp` and is renamed
    when it succeeded, so a finished task is kept when a later one is killed."""
    spec = cfg["preset_content"]["classifier"]
    options = dict(spec.get("args") or {})
    baselines = list(spec.get("baselines") or [])
    if cfg["quick"]:
        options.update(spec.get("quick_args") or {})
        baselines = list(spec.get("quick_baselines") or [])
    encoder = folder.parent / "pretrain" / "encoder"
    folder.mkdir(parents=True, exist_ok=True)
    results = {}
    for t in cfg["tasks"]:
        results[t["name"]] = {}
        for column in [spec["bcn_input"]] + baselines:
            out = folder / t["name"] / column
            if (out / "metrics.json").exists():
                print(f"{t['name']} ({column}): finished earlier, skipped", flush=True)
            else:
                tmp = fresh_tmp(out)
                cmd = [sys.executable, SCRIPTS / "train_classifier.py", "--task", t["task"], "--encoder", encoder,
                       "--bcn-input", column, "--output-dir", tmp, "--cache-dir", folder / "feature_cache",
                       "--overwrite"]
                data = t.get("data") or cfg["data_dir"]
                if data:
                    cmd += ["--data-dir", data]
                cmd += flags(options)
                if threads:
                    cmd += ["--threads", threads]
                run_command(cmd, folder, threads, f"classifier {t['name']} {column} (train_classifier.py)")
                commit_tmp(tmp, out)
            m = json.loads((out / "metrics.json").read_text())
            results[t["name"]][column] = {
                "task": t["task"],
                "validation_accuracy": 100 * m["validation"]["accuracy"],
                "test_accuracy": 100 * m["test"]["accuracy"],
                "test_macro_f1": 100 * m["test"]["macro_f1"],
                "epochs": len(m.get("epochs") or []),
                "train_seconds": m.get("train_seconds"),
                "paper_validation_accuracy": m.get("paper_table2_validation_accuracy"),
                "model_dir": str(out / "best"),
                "curve": str(out / "curve.png"),
                "splits": m.get("splits"),
                "command": m.get("command"),
            }
    return results


def published_column(columns: dict) -> str:
    """The column a task publishes: the best validation accuracy of those trained (model selection on validation,
    never on test); on a tie the first, i.e. the preset's `bcn_input` (the CoVe column), which is trained first."""
    return max(columns, key=lambda column: columns[column]["validation_accuracy"])


def stage_publish(cfg: dict, folder: Path, threads, classifier: dict, pretrain: dict) -> dict:
    """Stage 5: evaluation JSON (fingerprints the checkpoint), model card and Hub-ready folder via push_to_hub.py
    --dry-run, per task: the column with the best validation accuracy (`published_column`)."""
    sys.path.insert(0, str(REPO))
    from model_cards.evaluation import make_eval_record, write_eval_json

    from modeling_cove.data import HUB_IDS

    datasets_meta = cfg["preset_content"]["publish"].get("dataset") or {}
    tmp = fresh_tmp(folder)
    results = {}
    for t in cfg["tasks"]:
        trained = classifier[t["name"]]
        scores = {c: m["validation_accuracy"] for c, m in trained.items()}  # what the choice was made on
        column = published_column(trained)
        run = trained[column]
        ckpt = Path(run["model_dir"])
        meta = datasets_meta.get(t["name"], {})
        dataset = {
            "name": meta.get("name", t["name"]),
            "id": meta.get("id", HUB_IDS.get(t["task"], f"local/{t['name']}")),
            "split": "test",
            "num_examples": (run.get("splits") or {}).get("test"),
            "source": meta.get("source", t.get("data") or cfg["data_dir"] or "Hub"),
        }
        if t["task"] in CLASSIFICATION_TASKS:
            dataset["key"] = t["task"]
        dataset = {k: v for k, v in dataset.items() if v is not None}
        training = {
            "command": run["command"],
            "encoder": f"CoVe pretrained by this run ({cfg['preset']}; test BLEU {pretrain.get('test_bleu')})",
            "word_vectors": {"name": Path(cfg["vectors_file"] or "PPMI vectors of the shipped text").name,
                             "stand_in": cfg["vectors_file"] is None or "glove.840B" not in cfg["vectors_file"]},
            "notes": [f"produced by scripts/main.py --preset {cfg['preset']}" + (" --quick" if cfg["quick"] else ""),
                      f"BCN input {column}: the best validation accuracy of the columns trained ("
                      + ", ".join(f"{c} {v:.1f}" for c, v in scores.items()) + ")"],
        }
        record = make_eval_record(
            ckpt,
            task={"type": "text-classification", "name": "Text classification"},
            dataset=dataset,
            metrics=[{"type": "accuracy", "value": round(run["test_accuracy"], 2)},
                     {"type": "f1", "name": "macro-F1", "value": round(run["test_macro_f1"], 2)}],
            training=training,
        )
        task_dir = tmp / t["name"]
        task_dir.mkdir()
        write_json_path = task_dir / "eval_results.json"
        write_eval_json(write_json_path, record)
        repo_id = cfg["repo_id"] if len(cfg["tasks"]) == 1 else f"{cfg['repo_id']}-{t['name']}"
        cmd = [sys.executable, SCRIPTS / "push_to_hub.py", ckpt, "--repo-id", repo_id, "--eval-json",
               write_json_path, "--curve", run["curve"], "--dry-run", "--output-dir", task_dir / "hub"]
        run_command(cmd, folder, threads, f"publish {t['name']} (push_to_hub.py --dry-run)")
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


def stage_predict(cfg: dict, folder: Path, publish: dict, threads) -> dict:
    """Stage 6 (in-process): each Hub-ready folder loaded with AutoModel (the CoVe encoder + BCN code shipped in
    the folder, trust_remote_code) and pipeline("text-classification"); predictions printed."""
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, pipeline
    from transformers.utils import logging as transformers_logging

    if threads:
        torch.set_num_threads(threads)
    sentences = list((cfg["preset_content"].get("predict") or {}).get("sentences") or [])
    results = {}
    tmp = fresh_tmp(folder)
    for name, pub in publish.items():
        hub = pub["hub_folder"]
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
        pipe = pipeline("text-classification", model=hub, trust_remote_code=True)
        outputs = pipe(sentences) if sentences else []
        print(f"\n{name}: AutoModel -> {type(base).__name__}, CoVe features {tuple(features.shape)}; "
              f"pipeline('text-classification') from {hub}:", flush=True)
        rows = []
        for sentence, out in zip(sentences, outputs):
            print(f"  {out['label']:>12s} {out['score']:.3f}  {sentence}", flush=True)
            rows.append({"text": sentence, "label": out["label"], "score": round(float(out["score"]), 4)})
        first_label = classifier.config.id2label[int(logits[0].argmax())]
        results[name] = {
            "auto_model_class": type(base).__name__,
            "classifier_class": type(classifier).__name__,
            "feature_shape": list(features.shape),
            "predictions": rows,
            "pipeline_agrees_with_model": bool(rows) and rows[0]["label"] == first_label,
        }
    write_json(tmp / "predictions.json", results)
    commit_tmp(tmp, folder)
    return results


# ---------------------------------------------------------------------------------------------------------------
# report


def collect_curves(run_dir: Path, report: dict):
    curves = run_dir / "curves"
    curves.mkdir(exist_ok=True)
    out = []
    pre = report["stages"].get("pretrain", {}).get("metrics") or {}
    if pre.get("curve") and Path(pre["curve"]).exists():
        shutil.copyfile(pre["curve"], curves / "pretrain_mt.png")
        out.append("curves/pretrain_mt.png")
    for task, columns in (report["stages"].get("classifier", {}).get("metrics") or {}).items():
        for column, m in columns.items():
            if Path(m["curve"]).exists():
                name = f"classifier_{task}_{column.replace('+', '_')}.png"
                shutil.copyfile(m["curve"], curves / name)
                out.append(f"curves/{name}")
    return out


def paper_numbers(cfg: dict) -> dict:
    """The paper's figures from the project's own configs (typed there once, from docs/paper.md): MT BLEU of CoVe-S and
    Table 2 rows from configuration/tasks/<task>.yaml."""
    import yaml

    out = {"mt_bleu": None, "mt_note": None, "table2": {}}
    pre = cfg["preset_content"]["pretrain"]
    mt_preset = json.loads(repo_path(pre.get("preset") or "configuration/models/cove-small.json").read_text())
    out["mt_bleu"] = mt_preset.get("paper", {}).get("bleu")
    out["mt_note"] = (f"{mt_preset['paper'].get('test_set')}, {mt_preset['paper'].get('bleu_kind')}"
                      if mt_preset.get("paper") else None)
    for t in cfg["tasks"]:
        key = t["task"] if t["task"] in CLASSIFICATION_TASKS else "sst2"
        hp = yaml.safe_load((REPO / "configuration" / "tasks" / f"{key}.yaml").read_text())
        out["table2"][t["name"]] = {"row": key, "comparable": key == t["task"], **(hp.get("paper_table2") or {})}
    return out


def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def write_markdown(run_dir: Path, report: dict, cfg: dict):
    st = report["stages"]
    paper = report["paper"]
    lines = [f"# Main job report: preset `{cfg['preset']}`" + (" (--quick)" if cfg["quick"] else ""), ""]
    lines += [f"Run folder `{run_dir}`; command `{report['command']}`; git `{report.get('git')}`.", ""]
    lines += ["| stage | status | seconds |", "|---|---|---|"]
    for stage in STAGES:
        s = st.get(stage, {})
        lines.append(f"| {stage} | {s.get('status', 'not run')} | {fmt(s.get('seconds'), 1)} |")
    vec = st.get("vectors", {}).get("metrics") or {}
    voc = st.get("vocab", {}).get("metrics") or {}
    lines += ["", "## Data and vectors", "",
              f"- word vectors: {vec.get('source')} `{vec.get('file')}`, {vec.get('dim')} dims"
              + (f", {vec.get('words')} words" if vec.get("words") else ""),
              f"- vocabulary: {voc.get('vocab_size')} entries ({voc.get('words_with_vector')} with a vector, "
              f"{voc.get('token_coverage_vectors')}% of {voc.get('corpus_tokens')} tokens covered); MT-LSTM "
              f"{voc.get('num_hidden_layers')} x {voc.get('hidden_size')} per direction"]
    pre = st.get("pretrain", {}).get("metrics") or {}
    lines += ["", "## Pretraining (English→German MT)", "",
              "| | ours | paper (CoVe-S) |", "|---|---|---|",
              f"| test BLEU | {fmt(pre.get('test_bleu'))} | {fmt(paper['mt_bleu'])} ({paper['mt_note']}) |",
              f"| test perplexity | {fmt(pre.get('test_perplexity'))} | – |",
              f"| epochs / steps | {pre.get('epochs')} / {pre.get('steps')} | |", ""]
    if cfg["preset_content"]["pretrain"].get("dataset") == "tsv":
        lines.append("Ours is trained and tested on the embedded synthetic pairs (examples/en_de), the paper's on "
                     "Multi30k: the numbers are not comparable, the paper's is shown for scale.")
    lines += ["", "## Classification (BCN, accuracy %)", "",
              "| task | column | validation | test | test macro-F1 | paper validation (same column) | "
              "paper GloVe | paper +CoVe-S |", "|---|---|---|---|---|---|---|---|"]
    for task, columns in (st.get("classifier", {}).get("metrics") or {}).items():
        p = paper["table2"].get(task, {})
        for column, m in columns.items():
            ref = p.get(column)
            lines.append(f"| {task} | {column} | {fmt(m['validation_accuracy'])} | {fmt(m['test_accuracy'])} | "
                         f"{fmt(m['test_macro_f1'])} | {fmt(ref) if p.get('comparable') else '–'} | "
                         f"{fmt(p.get('vectors'))} | {fmt(p.get('vectors+cove'))} |")
        if p and not p.get("comparable"):
            lines.append(f"\n{task}: no paper counterpart (synthetic data); the paper columns show its "
                         f"{p['row'].upper()} row for scale.")
    pub = st.get("publish", {}).get("metrics") or {}
    if pub:
        lines += ["", "## Hub-ready folders (push_to_hub.py --dry-run)", ""]
        for task, p in pub.items():
            column = p.get("column", cfg["preset_content"]["classifier"]["bcn_input"])
            lines.append(f"- {task}: the {column} BCN (best validation accuracy: "
                         + ", ".join(f"{c} {fmt(v)}" for c, v in (p.get("validation_accuracy") or {}).items())
                         + f") in `{p['hub_folder']}` → `{p['repo_id']}` ({len(p['files'])} files; upload with "
                         f"`python scripts/push_to_hub.py {run_dir}/classifier/{task}/{column}/best --repo-id "
                         f"ORG/NAME --eval-json {p['eval_json']}`)")
    pred = st.get("predict", {}).get("metrics") or {}
    if pred:
        lines += ["", "## Predictions of the reloaded model (pipeline(\"text-classification\"))", ""]
        for task, p in pred.items():
            lines += [f"{task} (AutoModel → {p['auto_model_class']}):", "", "| text | label | score |",
                      "|---|---|---|"]
            lines += [f"| {r['text']} | {r['label']} | {r['score']:.3f} |" for r in p["predictions"]]
            lines.append("")
    if report.get("curves"):
        lines += ["", "## Curves", ""] + [f"![{c}]({c})" for c in report["curves"]]
    (run_dir / "REPORT.md").write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------------------------


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def settings_fingerprint(cfg: dict) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run(args) -> dict:
    cfg = resolve(args)
    run_dir = Path(args.run_dir).resolve()
    if args.overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    run_file = run_dir / "run.json"
    fingerprint = settings_fingerprint(cfg)
    if run_file.exists():
        previous = json.loads(run_file.read_text())
        if previous.get("fingerprint") != fingerprint:
            fail(f"{run_dir} holds a run with other settings ({previous.get('command')}); use another --run-dir "
                 "or --overwrite")
    else:
        write_json(run_file, {"fingerprint": fingerprint, "settings": cfg,
                              "command": " ".join(["python", "scripts/main.py"] + sys.argv[1:])})
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    for key in ("HF_HUB_DISABLE_TELEMETRY",):
        os.environ.setdefault(key, "1")
    threads = args.threads
    if threads:
        import torch

        torch.set_num_threads(threads)

    report_path = run_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    report.update({"preset": cfg["preset"], "quick": cfg["quick"], "run_dir": str(run_dir),
                   "command": " ".join(["python", "scripts/main.py"] + sys.argv[1:]), "git": git_commit(),
                   "settings": cfg, "paper": paper_numbers(cfg)})
    report.setdefault("stages", {})
    job_start = time.time()
    results = {}

    def do(number, stage, description, fn):
        folder = run_dir / stage
        if is_done(folder):
            banner(number, stage, f"skipped (finished earlier; {folder / DONE})")
            results[stage] = read_done(folder)["metrics"]
            report["stages"][stage]["status"] = "skipped (finished earlier)"
            return
        banner(number, stage, description)
        start = time.time()
        metrics = fn(folder)
        seconds = round(time.time() - start, 1)
        mark_done(folder, {"stage": stage, "seconds": seconds, "metrics": metrics})  # LAST: the stage is complete
        results[stage] = metrics
        report["stages"][stage] = {"status": "done", "seconds": seconds, "metrics": metrics}
        write_json(report_path, report)
        print(f"[stage {number}/{len(STAGES)}] {stage}: done in {seconds} s", flush=True)

    for stage in STAGES:  # keep finished stages' figures when the report is rebuilt after a rerun
        if is_done(run_dir / stage):
            done = read_done(run_dir / stage)
            report["stages"][stage] = {"status": "done", "seconds": done.get("seconds"), "metrics": done["metrics"]}

    vec_desc = (f"check {cfg['vectors_file']}" if cfg["vectors_file"] else
                f"PPMI {cfg['dim']}-d vectors from the shipped text (scripts/train_ppmi_vectors.py)")
    do(1, "vectors", vec_desc, lambda f: stage_vectors(cfg, f, threads))
    do(2, "vocab", "vocabulary, word-vector matrix, fresh MT-LSTM", lambda f: stage_vocab(cfg, f, results["vectors"]))
    do(3, "pretrain", "MT pretraining of the CoVe encoder (scripts/train_mt.py)",
       lambda f: stage_pretrain(cfg, f, threads))
    do(4, "classifier", "BCN on " + ", ".join(t["name"] for t in cfg["tasks"]) + " (scripts/train_classifier.py)",
       lambda f: stage_classifier(cfg, f, threads))
    do(5, "publish", f"evaluation JSON, model card, Hub-ready folder for {cfg['repo_id']} (dry run)",
       lambda f: stage_publish(cfg, f, threads, results["classifier"], results["pretrain"]))
    do(6, "predict", "load the Hub-ready folder with AutoModel / pipeline and predict",
       lambda f: stage_predict(cfg, f, results["publish"], threads))

    report["curves"] = collect_curves(run_dir, report)
    report["wall_seconds_this_invocation"] = round(time.time() - job_start, 1)
    write_json(report_path, report)
    write_markdown(run_dir, report, cfg)
    print(f"\nreport: {report_path}\nsummary: {run_dir / 'REPORT.md'}", flush=True)
    return report


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)  # `kill JOB` also stops the running stage subprocess
    try:
        run(args)
    except InputError as e:
        print(f"main.py: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    except StageError as e:
        print(f"main.py: stage failed: {e}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
