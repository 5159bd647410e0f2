"""The main job's learning curves (stage `curves`): what pretraining is for, measured. The same BCN reads the same
frozen word vectors, alone (`vectors`) or with the states of the MT-LSTM pretrained by translation (`vectors+cove`),
trained on 50, 100, 200, ... labelled sentences; with `--full-curves` also over encoders pretrained on fewer
translation pairs (the paper's Figure 4 in small) and on more seeds.

Pairing: seed s draws the labelled subset (the first n of one permutation of the training split, so a smaller set is
part of a larger one) and the BCN's initialisation and batch order, the same for both columns; a difference is taken
per seed (`stats.paired_difference`). Every run selects its best epoch on the full validation split and is scored on
the full test split. A small training set is seen for at least `min_steps` updates (the task's epochs, or more).

The runs go to worker processes (`main_job/curve_worker.py`, given a SPEC.json this stage writes), each
running its share one after the other in one interpreter (no import per run); a finished run (its `metrics.json`)
is kept when the stage is rerun."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ...common.files import write_json
from ...common.run_info import plot_curves
from ...common.stats import mean_std, paired_difference
from .runner import Command, library_command, run_commands
from .stages import classifier_slots, pretrain_command, summarize_pretrain

CURVE_MODULE = "main_job.curve_worker"  # `python -m modeling_cove.training.commands.main_job.curve_worker`
BASELINE = "vectors"  # the column every other one is compared with


def curve_settings(cfg: dict, full: bool) -> dict | None:
    """The run's curve settings: the preset's `curves` (checked by `settings.check_curves`), updated by its `quick`
    or `full` block; None when the preset has no curves."""
    spec = cfg["preset_content"].get("curves")
    if not spec:
        return None
    settings = {k: v for k, v in spec.items() if k not in ("full", "quick")}
    settings.setdefault("translation_pairs", [])
    if cfg["quick"]:
        settings.update(spec.get("quick") or {})
    elif full:
        settings.update(spec.get("full") or {})
    return settings


def curve_epochs(size: int, batch_size: int, epochs: float, min_steps: int) -> int:
    """The task's epochs, or as many more as make `min_steps` updates on `size` sentences."""
    steps_per_epoch = math.ceil(size / batch_size)
    return max(math.ceil(epochs), math.ceil(min_steps / steps_per_epoch))


def encoder_entry(pretrain: dict) -> dict:
    """An encoder of the curves from its pretraining's summary (`stages.summarize_pretrain`): its folder, the pairs
    it learned from, its test BLEU."""
    data = pretrain.get("data") if isinstance(pretrain.get("data"), dict) else {}
    return {"encoder": pretrain["encoder"], "pairs": data.get("train_pairs"), "test_bleu": pretrain.get("test_bleu")}


def extra_encoder_dir(folder: Path, pairs: int) -> Path:
    """The pretraining run of the encoder on the first `pairs` pairs, inside the curves stage's folder."""
    return folder / "encoders" / f"pairs-{pairs}"


def extra_encoders(cfg: dict, settings: dict, folder: Path, main: dict, main_epochs: int, threads=None,
                   pretrain: bool = True) -> dict:
    """`{"pairs-N": encoder_entry}` of the encoders pretrained on the first N translation pairs (the training file is
    shuffled; N below the main encoder's) for as many updates as the main encoder. `pretrain`: run (or resume) the
    ones not finished; else only those finished."""
    out = {}
    for n in settings["translation_pairs"]:
        if main["pairs"] is not None and n >= main["pairs"]:
            continue
        run_dir = extra_encoder_dir(folder, n)
        if pretrain and not (run_dir / "encoder" / "config.json").exists():
            epochs = math.ceil(main_epochs * (main["pairs"] or 0) / n)
            cmd = pretrain_command(cfg, run_dir, threads, {"limit-train": n, "max-epochs": epochs})
            run_commands([Command(cmd, f"pretrain on {n} pairs (modeling_cove.training.commands.train_mt)", threads)],
                         folder)
        if (run_dir / "metrics.json").exists():
            out[f"pairs-{n}"] = encoder_entry(summarize_pretrain(json.loads((run_dir / "metrics.json").read_text()),
                                                                 run_dir))
    return out


def plan_runs(cfg: dict, settings: dict, folder: Path, encoders: dict, classifier: dict) -> list:
    """Every run of the curves: `{"encoder", "column", "size", "seed", "out", "options"}`; the baseline column reads
    only the word vectors, which every encoder shares, so it runs once per size and seed. A run the classifier stage
    has made already (`classifier`: its metrics; the whole training split, seed 1, the same epochs, the main
    encoder) is taken from there (`"out"` its folder, no `"options"`)."""
    from ..train_classifier import load_hyperparameters

    task = next(t for t in cfg["tasks"] if t["name"] == settings["task"])  # stage_curves checked it is there
    hp = load_hyperparameters(task["task"], None, None)
    runs = []
    for seed in settings["seeds"]:  # seed by seed: a run cut short leaves whole seeds done
        for size in settings["sizes"]:
            epochs = curve_epochs(size, hp["batch_size"], settings.get("epochs") or hp["epochs"], settings["min_steps"])
            for column in settings["columns"]:
                for name, encoder in encoders.items():
                    if column == BASELINE and name != "main":
                        continue
                    run = {"encoder": name if column != BASELINE else None, "column": column, "size": size,
                           "seed": seed}
                    done = (classifier.get(task["name"]) or {}).get(column)
                    if done and name == "main" and seed == 1 and size >= done["splits"]["train"] and \
                            done["epochs"] == epochs:
                        runs.append({**run, "size": done["splits"]["train"], "out": str(Path(done["model_dir"]).parent)})
                        continue
                    out = folder / "runs" / (run["encoder"] or BASELINE) / f"n{size}" / f"{column}-seed{seed}"
                    options = {"task": task["task"], "encoder": str(encoder["encoder"]), "bcn_input": column,
                               "data_dir": task.get("data") or cfg["data_dir"], "seed": seed, "epochs": epochs,
                               "max_train_examples": size, "subsample_seed": seed,
                               "cache_dir": str(folder / "feature_cache" / name), "no_save_model": True}
                    runs.append({**run, "out": str(out), "options": options})
    return runs


def run_record(run: dict) -> dict:
    m = json.loads((Path(run["out"]) / "metrics.json").read_text())
    return {k: run[k] for k in ("encoder", "column", "size", "seed")} | {
        "test_accuracy": round(100 * m["test"]["accuracy"], 2),
        "validation_accuracy": round(100 * m["validation"]["accuracy"], 2),
        "epochs": m.get("epochs_run"), "steps": m.get("global_steps"), "train_seconds": m.get("train_seconds"),
        "cpu_model": (m.get("machine") or {}).get("cpu_model"), "run": run["out"]}


def summarize(records: list, settings: dict, encoders: dict) -> dict:
    """Per size: each line's mean ± std of test (and validation) accuracy over its seeds, and each CoVe line minus
    the vectors line, paired by seed."""
    lines = {BASELINE: [r for r in records if r["column"] == BASELINE]}
    for name in sorted(encoders, key=lambda name: encoders[name].get("pairs") or 0):  # fewest pairs first
        for column in settings["columns"]:
            if column != BASELINE:
                lines[f"{column} ({name})"] = [r for r in records if r["column"] == column and r["encoder"] == name]
    table = {}
    for size in settings["sizes"]:
        row = {}
        for line, runs in lines.items():
            at = [r for r in runs if r["size"] == size]
            row[line] = {"test_accuracy": mean_std([r["test_accuracy"] for r in at]),
                         "validation_accuracy": mean_std([r["validation_accuracy"] for r in at])}
            if line != BASELINE:
                baseline = [r for r in lines[BASELINE] if r["size"] == size]
                row[line]["minus_vectors"] = {key: paired_difference(at, baseline, key) if at else None
                                              for key in ("test_accuracy", "validation_accuracy")}
        table[str(size)] = row
    return {"lines": list(lines), "table": table}


def line_label(line: str, encoders: dict) -> str:
    for name, encoder in encoders.items():
        if line.endswith(f"({name})"):
            return line.replace(f"({name})", f"(MT on {encoder['pairs']:,} pairs)")
    return line


def plot(summary: dict, settings: dict, encoders: dict, path: Path):
    sizes = settings["sizes"]
    series, errors, diffs, diff_errors = {}, {}, {}, {}
    for line in summary["lines"]:
        cells = [summary["table"][str(n)][line] for n in sizes]
        points = [(n, c["test_accuracy"]) for n, c in zip(sizes, cells) if c["test_accuracy"]]
        label = line_label(line, encoders)
        series[label] = ([n for n, _ in points], [s["mean"] for _, s in points])
        errors[label] = [s["std"] for _, s in points]
        if line != BASELINE:
            d = [(n, c["minus_vectors"]["test_accuracy"]) for n, c in zip(sizes, cells)
                 if c.get("minus_vectors", {}).get("test_accuracy")]
            diffs[label] = ([n for n, _ in d], [x["mean"] for _, x in d])
            if all("ci95" in x for _, x in d):
                diff_errors[label] = [[x["mean"] - x["ci95"][0] for _, x in d], [x["ci95"][1] - x["mean"] for _, x in d]]
    seeds = max((c["test_accuracy"]["n"] for row in summary["table"].values() for c in row.values()
                 if c["test_accuracy"]), default=0)
    colors = {label: f"C{i}" for i, label in enumerate(series)}  # a line keeps its colour in both panels
    panels = [{"title": f"test accuracy (mean ± std over {seeds} seeds)" if seeds > 1 else "test accuracy (1 seed)",
               "xlabel": "labelled sentences", "ylabel": "accuracy %", "series": series,
               "errors": errors if seeds > 1 else {}, "log_x": True, "xticks": sizes, "colors": colors},
              {"title": "CoVe minus vectors, paired by seed" + (" (95% interval)" if diff_errors else ""),
               "xlabel": "labelled sentences", "ylabel": "accuracy points", "series": diffs,
               "errors": diff_errors, "log_x": True, "xticks": sizes, "hlines": {"no difference": 0.0},
               "colors": colors}]
    plot_curves(panels, path, "vectors vs vectors + CoVe, by labelled sentences")


def curves_info(settings: dict, encoders: dict, runs: list, folder: Path, full: bool) -> dict:
    """The curves' figures from the runs that finished (`metrics.json`): the table and the plot (`folder/curves.png`)
    over the complete seeds (every run of the seed finished), and every finished run."""
    finished = [r for r in runs if (Path(r["out"]) / "metrics.json").exists()]
    records = [run_record(r) for r in finished]
    complete = [seed for seed in settings["seeds"] if all(r in finished for r in runs if r["seed"] == seed)]
    # every point over the same seeds: the complete ones (all of them once the stage has run)
    summary = summarize([r for r in records if r["seed"] in complete], settings, encoders)
    plot(summary, settings, encoders, folder / "curves.png")
    return {"task": settings["task"], "sizes": settings["sizes"], "seeds": settings["seeds"],
            "complete_seeds": complete, "runs_finished": f"{len(finished)} of {len(runs)}",
            "columns": settings["columns"], "min_steps": settings["min_steps"], "full": bool(full),
            "encoders": {k: {**v, "encoder": str(v["encoder"])} for k, v in encoders.items()},
            **summary, "runs": records, "curve": str(folder / "curves.png")}


def collect_curve_runs(run_dir) -> dict:
    """The learning curves of a main-job run folder as far as they got (a `--full-curves` run takes about 4 hours:
    this reads one that is running or was stopped; rerunning its command continues it). Writes and returns what the
    curves stage would (`curves/curves.json`, `curves/curves.png`) from the runs finished so far."""
    run_dir = Path(run_dir)
    cfg = json.loads((run_dir / "run.json").read_text())["settings"]
    results = {stage: json.loads((run_dir / stage / ".done.json").read_text())["metrics"]
               for stage in ("pretrain", "classifier") if (run_dir / stage / ".done.json").exists()}
    if "pretrain" not in results:
        raise FileNotFoundError(f"{run_dir} has no finished pretraining stage: no curves yet")
    settings = curve_settings(cfg, cfg["full_curves"])
    folder = run_dir / "curves"
    encoders = {"main": encoder_entry(results["pretrain"])}
    encoders.update(extra_encoders(cfg, settings, folder, encoders["main"], results["pretrain"]["epochs"],
                                   pretrain=False))
    runs = plan_runs(cfg, settings, folder, encoders, results.get("classifier") or {})
    info = curves_info(settings, encoders, runs, folder, cfg["full_curves"])
    write_json(folder / "curves.json", info)
    return info


def stage_curves(cfg: dict, folder: Path, threads, results: dict, full: bool) -> dict:
    """Stage 5: the learning curves (see the module's docstring); `results` holds the earlier stages' metrics."""
    settings = curve_settings(cfg, full)
    if settings is None:
        return {"skipped": f"preset {cfg['preset']} has no curves"}
    if settings["task"] not in {t["name"] for t in cfg["tasks"]}:
        return {"skipped": f"the curves are drawn on the preset's task {settings['task']!r}, which --tasks replaced"}
    folder.mkdir(parents=True, exist_ok=True)
    encoders = {"main": encoder_entry(results["pretrain"])}
    encoders.update(extra_encoders(cfg, settings, folder, encoders["main"], results["pretrain"]["epochs"], threads))
    runs = plan_runs(cfg, settings, folder, encoders, results.get("classifier") or {})
    pending = [r for r in runs if "options" in r and not (Path(r["out"]) / "metrics.json").exists()]
    slots, per_run = classifier_slots(settings, threads)
    lanes = [pending[i::slots] for i in range(min(slots, len(pending)))]
    commands = []
    for i, lane in enumerate(lanes):
        spec = folder / f"worker-{i}.json"
        write_json(spec, {"threads": per_run, "runs": lane})
        log = folder / f"worker-{i}.log" if i else None  # the first one prints to the terminal
        commands.append(Command([*library_command(CURVE_MODULE), spec], f"curve worker {i + 1}/{len(lanes)}",
                                per_run, log))
    run_commands(commands, folder, max(1, len(commands)))
    info = curves_info(settings, encoders, runs, folder, full)
    write_json(folder / "curves.json", info)
    return info


__all__ = ["collect_curve_runs", "curve_epochs", "stage_curves", "summarize"]
