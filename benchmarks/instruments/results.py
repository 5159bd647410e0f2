"""The result tables of `benchmarks/results/`, collected from the real runs under `runs/`: the BCN classification
table (mean ± std over seeds; each column minus the vectors-only one, and the biLM minus CoVe-S, paired by seed with a
95% t interval; the dropout search, other pretrainings of CoVe-S, runs on random subsets, the sample-efficiency
curve and its PNG), the CoVe-T comparison (its own family of runs, its own section), the MT and biLM pretraining
records, the DCN runs and the main job's reports. Every file written records the command and the commit that
collected it; the tables (classification.json, squad.json) also the machines their runs ran on (`machine`), the MT,
biLM and main-job records their run's own. A table cell holds runs over one encoder only (checked by the weights'
sha256 the runs record).

Reads runs/bcn/<task>/<column>-seed<N>/metrics.json (`train_classifier.py`; a biLM encoder's `vectors+scalar_mix`
runs are the column `vectors+bilm`; a run whose folder names a column of ENCODER_COLUMNS is that column); the dropout
search in runs/bcn-dropout/<task>/<column>-d<dropout>-seed<N>; BCN runs over other pretrainings of CoVe-S or the biLM
in the folders of ENCODER_VARIANTS, each paired by seed with the table's columns; --train-fraction runs in
runs/bcn-fraction/<task>/<column>-f<fraction>-seed<N>; runs on random subsets, --max-train/eval-examples, in the other
runs/bcn*/ folders, one cell per setup; the CoVe-T comparison in runs/bcn-cove-t/<task>/<column>-seed<N>
(`instruments.classification_table` plans it: vectors, CoVe-S and CoVe-T runs made afresh together, never mixed with
the table's), classification.json's section `cove_t_comparison`; runs/cove-small/metrics.json (`train_mt.py`),
runs/bilm/metrics.json (`train_bilm.py`), runs/dcn-squad-*/metrics.json (`train_qa.py`), runs/main-cove-small/ and
runs/main/ report.json (`main.py`, full size only).
"""

import functools
import json
import logging
import re
import shutil
from pathlib import Path

from modeling_cove.training.common import papers
from modeling_cove.training.common.stats import mean_std, paired_difference, repeated_seeds
from modeling_cove.training.publishing.cards_record import CheckpointError, weights_fingerprint
from modeling_cove.training.common.run_info import git_commit, plot_curves
from modeling_cove.training.common.files import write_json

logger = logging.getLogger(__name__)
PROVENANCE = ("machine", "reconstructed", "reconstructed_from")  # a collected file's keys after command and commit

# BCN runs on an encoder pretrained differently from the table's (runs/cove-small, runs/bilm):
# name -> (runs/<BCN runs folder>, runs/<pretraining run: train_mt.py or train_bilm.py>)
ENCODER_VARIANTS = {
    "cove-s-5-epochs": ("bcn-cove5", "cove-small-5ep"),  # runs/cove-small continued by --resume to 5 epochs
    "cove-s-h200": ("bcn-gpu", "cove-small-gpu"),  # runs/cove-small's recipe on an H200 (IMDb runs there too)
    "bilm-zen3": ("bcn-bilm-repeat", "bilm-repeat"),  # runs/bilm's command on an AVX2-only CPU: other weights
}
# A run's table column when it is not its --bcn-input: (bcn_input, the encoder's config.encoder_type) -> column. ELMo's
# [x; mix] over our biLM is the "vectors+bilm" column of the CoVe-versus-biLM comparison (docs/bilm.md).
TABLE_COLUMNS = {("vectors+scalar_mix", "bilm"): "vectors+bilm"}
# Columns of one --bcn-input over another encoder than the table's, told apart by the run folder's name
# (runs/<family>/<task>/<column>-seed<N>): column -> the column its runs' --bcn-input makes (their encoders:
# instruments.classification_table, whose runner writes them).
ENCODER_COLUMNS = {"vectors+cove-t": "vectors+cove", "cove-t": "cove", "vectors+cove-s-5-epochs": "vectors+cove"}
RUN_FOLDER = re.compile(r"(?P<column>.+?)(-[df][0-9.]+)?-seed(?P<seed>[0-9]+)")  # <column>[-d<x>|-f<x>]-seed<N>
COVE_T_FOLDER = "bcn-cove-t"  # runs/bcn-cove-t/<task>/<column>-seed<N>: the CoVe-T comparison's own family
COVE_T_SECTION = "cove_t_comparison"  # its section of classification.json
# The CoVe-T comparison's paired blocks (classification.json's cove_t_comparison.versus_vectors): each (a, b) as "a - b"
# (the 5-epoch CoVe-S against CoVe-T and CoVe-S: what training length alone gives, on the same seeds)
COVE_T_PAIRS = (("vectors+cove", "vectors"), ("vectors+cove-t", "vectors"), ("vectors+cove-s-5-epochs", "vectors"),
                ("vectors+cove-t", "vectors+cove"), ("cove-t", "cove"),
                ("vectors+cove-t", "vectors+cove-s-5-epochs"), ("vectors+cove-s-5-epochs", "vectors+cove"))
SAMPLE_EFFICIENCY_FOLDER = "bcn-fraction"  # runs/bcn-fraction/<task>/<column>-f<fraction>-seed<N> (--train-fraction)
BILM_KEYS = ("command", "commit", "settings", "machine", "data", "epochs", "global_step", "train_seconds",
             "train_tokens", "train_tokens_per_second", "wall_seconds")  # metrics.json less the per-step loss log
MT_KEYS = ("command", "commit", "preset", "machine", "settings", "config", "trainable_parameters", "data", "corpora",
           "epochs", "global_step", "stop_reason", "best_epoch", "train_seconds", "train_target_tokens_per_second",
           "wall_seconds", "test", "test_by_corpus")  # metrics.json's figures (not its per-step loss log)


PAIRED_SETTINGS = ("epochs", "dropout")  # what two runs of one seed must share to be a pair (the seed fixes the rest)


def training(run: dict) -> tuple:
    """A run record's `PAIRED_SETTINGS` values, numbers as floats (15 epochs, from a yaml, is 15.0, from --epochs)."""
    return tuple(float(run[key]) if isinstance(run.get(key), (int, float)) else run.get(key)
                 for key in PAIRED_SETTINGS)


def same_training(run_a: dict, run_b: dict) -> bool:
    """Whether two run records trained alike (`training`)."""
    return training(run_a) == training(run_b)


def paired_entry(runs_a: list, runs_b: list):
    """Column a minus column b on test and best validation accuracy (paired_difference); None without a shared
    seed, or when runs of a shared seed trained otherwise (`same_training`: 10 epochs against 15 is no pair)."""
    by_seed = {r["seed"]: r for r in runs_b}
    if any(r["seed"] in by_seed and not same_training(r, by_seed[r["seed"]]) for r in runs_a):
        return None
    test = paired_difference(runs_a, runs_b, "test_accuracy")
    if not test:
        return None
    return {"test_accuracy": test,
            "validation_accuracy": paired_difference(runs_a, runs_b, "best_validation_accuracy")}


def versus_vectors(results: dict) -> dict:
    """Per task, each other column minus the vectors-only column, paired by seed, on test and best validation
    accuracy: the bar "vectors + CoVe-S not below vectors only" with its uncertainty."""
    table = {}
    for task, columns in results.items():
        if "vectors" not in columns:
            continue
        for column, cell in columns.items():
            if column == "vectors":
                continue
            entry = paired_entry(cell["runs"], columns["vectors"]["runs"])
            if entry:
                table.setdefault(task, {})[f"{column} - vectors"] = entry
    return table


def head_to_head(results: dict, pairs) -> dict:
    """Per task, for each (a, b) of `pairs` whose columns it has both, a minus b ("a - b") paired by
    seed as versus_vectors; tasks with none left out."""
    table = {}
    for task, columns in results.items():
        for a, b in pairs:
            entry = paired_entry(columns[a]["runs"], columns[b]["runs"]) if a in columns and b in columns else None
            if entry:
                table.setdefault(task, {})[f"{a} - {b}"] = entry
    return table


def bilm_versus_cove(results: dict) -> dict:
    """Per task with both, the biLM column minus the CoVe-S column (`vectors+bilm - vectors+cove`): the two recipes
    for contextual vectors head to head."""
    return head_to_head(results, (("vectors+bilm", "vectors+cove"),))


def variant_differences(variant: dict, results: dict) -> dict:
    """An encoder variant's cells paired by seed with the table's (`results`): per task, the table's columns with the
    variant's in place of those of the same name, then versus_vectors and bilm_versus_cove over that, keeping only
    the differences that involve a variant's cell (a biLM pretrained again against the table's vectors and CoVe-S
    columns on the same seeds). {"versus_vectors": task -> ..., "bilm_versus_cove": task -> ...}, empty tasks left
    out."""
    found = {"versus_vectors": {}, "bilm_versus_cove": {}}
    for task, columns in variant.items():
        tables = {task: {**results.get(task, {}), **columns}}
        ours = set(columns)
        vectors = {name: entry for name, entry in versus_vectors(tables).get(task, {}).items()
                   if "vectors" in ours or name.split(" - ")[0] in ours}
        head_to_head = bilm_versus_cove(tables).get(task) if ours & {"vectors+bilm", "vectors+cove"} else None
        for key, entry in (("versus_vectors", vectors), ("bilm_versus_cove", head_to_head)):
            if entry:
                found[key][task] = entry
    return found


def machine_label(machine: dict | None) -> str | None:
    """Where a run ran, in one line, from the `machine` its metrics.json records: "CPU (family/model/stepping)", with
    " + GPU" when it had one; None when it recorded no CPU (runs written before machine_info named it)."""
    if not isinstance(machine, dict) or not machine.get("cpu"):
        return None
    cpu = f"{machine['cpu']} ({machine['cpu_model']})" if machine.get("cpu_model") else str(machine["cpu"])
    return cpu + (f" + {machine['gpu']}" if machine.get("gpu") else "")


def device_kind(machine: dict | None) -> str:
    """"cpu" or "gpu": where a run's tensors lived, from the `device` its metrics.json's machine records; a run that
    recorded none ran on the GPU when its machine had one (the training commands take it when there is one)."""
    machine = machine if isinstance(machine, dict) else {}
    if machine.get("device"):
        return "gpu" if str(machine["device"]).startswith("cuda") else "cpu"
    return "gpu" if machine.get("gpu") else "cpu"


def run_device_kind(record: dict) -> str:
    """"cpu" or "gpu" of a collected run record: its `device` where the collector kept one, else whether its machine
    had a GPU (a BCN record's machine label ends in " + <GPU>", a tagger record names its `gpu`)."""
    if record.get("device"):
        return record["device"]
    machine = record.get("machine")
    return "gpu" if record.get("gpu") or (isinstance(machine, str) and " + " in machine) else "cpu"


def check_one_device_kind(label: str, runs: list) -> None:
    """Raise ValueError when `runs` ((device kind, seed) of runs paired by seed) ran on both kinds of device: a pair
    of a GPU run and a CPU run differs in its kernels as well as in what it compares."""
    kinds = {}
    for kind, seed in runs:
        kinds.setdefault(kind, set()).add(seed)
    if len(kinds) > 1:
        found = "; ".join(f"{kind}: seeds {sorted(seeds)}" for kind, seeds in sorted(kinds.items()))
        raise ValueError(f"{label}: runs on a CPU and on a GPU ({found}); its pairs compare runs on one kind of "
                         "device: run those seeds again on one kind, or collect the two kinds apart")


def run_machines(labels: list) -> list:
    """A collected file's `machine`: the machines its runs ran on (`labels`, one per run, None where a run recorded
    none), sorted, and how many runs recorded none."""
    missing = sum(label is None for label in labels)
    return sorted({label for label in labels if label}) + ([f"not recorded by {missing} runs"] if missing else [])


def table_runs(node) -> list:
    """Every BCN run record (a dict with a seed and a test accuracy) anywhere in a classification report."""
    if isinstance(node, dict):
        if "seed" in node and "test_accuracy" in node and "command" in node:
            return [node]
        return [run for value in node.values() for run in table_runs(value)]
    if isinstance(node, list):
        return [run for value in node for run in table_runs(value)]
    return []


def provenance(machine: list, old: dict) -> dict:
    """The `machine` of a file collected anew, with the mark of a reconstruction it inherits: where the file merged
    into (`old`) had its machine reconstructed from git history (`reconstructed_from.machine`), its entries stay, for
    they describe its runs, which stay; the command and the commit are the collection's own."""
    reconstructed = (old.get("reconstructed_from") or {}).get("machine") if old.get("reconstructed") else None
    if not reconstructed:
        return {"machine": machine}
    before = list(old.get("machine") or [])
    added = [entry for entry in machine if entry not in before and not entry.startswith("not recorded")]
    return {"machine": before + added, "reconstructed": True, "reconstructed_from": {"machine": reconstructed}}


def smoke_run(m: dict) -> bool:
    """Whether a BCN run's metrics are a smoke run's (--limit, --max-steps): never a table's figure."""
    return bool(m.get("limit")) or (m.get("max_steps") or -1) > 0


def run_column(m: dict, folder: Path | str) -> str:
    """A BCN run's table column: its folder's (`folder`'s name, RUN_FOLDER) when that names a column of
    ENCODER_COLUMNS made by the run's --bcn-input, else its --bcn-input as TABLE_COLUMNS maps it. A folder naming such
    a column over another input is refused, by its path (a run in the wrong folder)."""
    column = TABLE_COLUMNS.get((m["column"], m.get("encoder_type")), m["column"])
    named = RUN_FOLDER.fullmatch(Path(folder).name)
    if named and named["column"] in ENCODER_COLUMNS:
        if ENCODER_COLUMNS[named["column"]] != column:
            raise ValueError(f"{folder}: the folder names the column {named['column']} (--bcn-input "
                             f"{ENCODER_COLUMNS[named['column']]}) but its run is --bcn-input {m['column']}")
        return named["column"]
    return column


def read_metrics(path: Path) -> dict:
    """A run's metrics.json; ValueError naming it when it does not read as JSON (cut short or zero-filled: a machine
    gone while it was written; cut inside a UTF-8 character too)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{path}: not a JSON file ({error}); run that cell again") from None


def full_runs(runs: Path, pattern: str, subsampled: bool | None = False, exclude=()):
    """(metrics, record) for each finished BCN run matching `pattern` under runs/ but in the run families (runs/
    folders) named in `exclude`, left out before anything of theirs is read; smoke runs (--limit, --max-steps) are
    left out, and so are runs on random subsets (--max-train/eval-examples) unless `subsampled` (then only those;
    None: both)."""
    for metrics_path in sorted(runs.glob(pattern)):
        family = metrics_path.relative_to(runs).parts[0]  # the run family: runs/<folder>/<task>/<run>
        if family in exclude:
            continue
        m = read_metrics(metrics_path)
        m["_folder"] = family
        if smoke_run(m):
            continue
        if subsampled is not None and bool(m.get("subsample")) != subsampled:
            continue
        m["column"] = run_column(m, metrics_path.parent)
        yield m, {
            "seed": m["seed"],
            "test_accuracy": round(100 * m["test"]["accuracy"], 2),
            "test_macro_f1": round(100 * m["test"]["macro_f1"], 2),
            "best_validation_accuracy": round(100 * m["best"]["validation_accuracy"], 2),
            "epochs": m["hyperparameters"].get("epochs"),
            "dropout": m["hyperparameters"].get("dropout"),
            "seconds_per_epoch_mean": m["seconds_per_epoch_mean"],
            "command": m["command"],
            **({"resumed_from_step": m["resumed_from_step"], "started_at_commit": m.get("started_at_commit")}
               if m.get("resumed_from_step") else {}),
            "commit": m.get("git"),
            **({"machine": machine_label(m["machine"])} if machine_label(m.get("machine")) else {}),
            **({"device": device_kind(m["machine"])} if isinstance(m.get("machine"), dict) else {}),
            "encoder": m["encoder"],
            **({"encoder_weights": m["encoder_weights"]} if m.get("encoder_weights") else {}),
            **({"scalar_mix": m["scalar_mix"]} if m.get("scalar_mix") else {}),
            **({"subsample": m["subsample"]} if m.get("subsample") else {}),
        }


def collect_dropout_sweep(runs: Path, table: dict) -> dict:
    """runs/bcn-dropout/<task>/<column>-d<dropout>-seed<N> (the paper's dropout search, 0.1 / 0.2 / 0.3, selected by
    validation accuracy) beside the same task, column and seed at the yaml's dropout (`table`, from runs/bcn)."""
    sweep = {}
    for m, record in full_runs(runs, "bcn-dropout/*/*-seed*/metrics.json"):
        sweep.setdefault(m["task"], {}).setdefault(m["column"], {})[(record["dropout"], record["seed"])] = record
    for task, columns in sweep.items():
        for column, found in columns.items():
            seeds = {seed for _, seed in found}
            for record in table.get(task, {}).get(column, {}).get("runs", []):
                if record["seed"] in seeds:
                    found.setdefault((record["dropout"], record["seed"]), record)
    return {task: {column: [found[key] for key in sorted(found)] for column, found in columns.items()}
            for task, columns in sweep.items()}


def collect_classification(runs: Path, pattern: str = "bcn/*/*-seed*/metrics.json", subsampled: bool = False,
                           exclude=()) -> dict:
    """task -> column -> cell (summarize) over the runs matching `pattern`. With `subsampled`, runs of one task and
    column are pooled only when they share their setup (run family folder, encoder, hyperparameters, subsets): a
    column with several setups gets one cell per setup, labelled "<column> @ <folder>" (with " #k" if one folder
    holds several), each recording its setup. Runs in the runs/ folders named in `exclude` are left out."""
    table, setups = {}, {}
    for m, record in full_runs(runs, pattern, subsampled, exclude):
        if subsampled:
            setup = run_setup(m)
            setups.setdefault((m["task"], m["column"]), {}).setdefault(json.dumps(setup, sort_keys=True), setup)
            key = (m["column"], json.dumps(setup, sort_keys=True))
        else:
            key = (m["column"], None)
        table.setdefault(m["task"], {}).setdefault(key, []).append(record)
    result = {}
    for task, cells in table.items():
        for (column, setup_key), records in cells.items():
            found = setups.get((task, column), {})
            label = column
            if len(found) > 1:
                folder = found[setup_key]["folder"]
                same_folder = sorted(k for k, v in found.items() if v["folder"] == folder)
                label = f"{column} @ {folder}" + (f" #{same_folder.index(setup_key) + 1}" if len(same_folder) > 1
                                                   else "")
            result.setdefault(task, {})[label] = summarize(task, column, records)
            if setup_key is not None:
                result[task][label]["setup"] = found[setup_key]
    return result


def collect_subsampled(runs: Path) -> dict:
    """The runs on random subsets in runs/bcn*/ with the CoVe-S of runs/cove-small: the encoder variants' folders
    (ENCODER_VARIANTS, another MT-LSTM), the dropout search (runs/bcn-dropout), the sample-efficiency runs
    (collect_sample_efficiency) and the CoVe-T comparison's (COVE_T_FOLDER) are left out; what remains is still
    split by setup (collect_classification)."""
    other = {folder for folder, _ in ENCODER_VARIANTS.values()} | {"bcn-dropout", SAMPLE_EFFICIENCY_FOLDER,
                                                                  COVE_T_FOLDER}
    return collect_classification(runs, "bcn*/*/*-seed*/metrics.json", subsampled=True, exclude=other)


def collect_sample_efficiency(runs: Path) -> dict:
    """task -> column -> training fraction (as "0.1") -> cell, from the --train-fraction runs of
    runs/bcn-fraction/ (the full-data points are the main table's unless a --train-fraction 1 cell gives them:
    sample_efficiency_curve). A --train-fraction 1 run cuts nothing, so it records no subsample: its record states
    the whole training split as "N of N" (the rows it trained on plus those tokenising dropped)."""
    found = {}
    for m, record in full_runs(runs, f"{SAMPLE_EFFICIENCY_FOLDER}/*/*-seed*/metrics.json", subsampled=None):
        if m.get("train_fraction") is None:
            continue
        if not m.get("subsample"):
            whole = m["splits"]["train"] + (m.get("dropped_rows") or {}).get("train", 0)
            record = dict(record, subsample={"train": f"{whole} of {whole}"})
        cell = found.setdefault(m["task"], {}).setdefault(m["column"], {})
        cell.setdefault(f"{m['train_fraction']:g}", []).append(dict(record, train_fraction=m["train_fraction"]))
    return {task: {column: {fraction: summarize(task, column, records) for fraction, records in sorted(
        cells.items(), key=lambda item: float(item[0]))} for column, cells in columns.items()}
        for task, columns in found.items()}


def fraction_pretrainings(runs: Path, sample_efficiency: dict, out: Path) -> dict:
    """`pretraining_records` of the MT-LSTMs the --train-fraction runs read: a CoVe-S pretrained again for the curve
    states its own BLEU beside the table's."""
    return pretraining_records(runs, {r["encoder"] for columns in sample_efficiency.values()
                                      for cells in columns.values() for cell in cells.values() for r in cell["runs"]},
                               out)


def pretraining_records(runs: Path, folders, out: Path) -> dict:
    """encoder folder -> its MT pretraining record (mt_record; its curves copied to out/mt_<run folder>.png), for the
    encoder `folders` (as runs record them, relative to the repository) that an MT run exported, other than
    runs/cove-small (that one is mt_multi30k.json)."""
    found = {}
    for folder in sorted(folders):
        run_dir = (runs.parent / folder).parent  # the encoder folder runs record is relative to the repository
        metrics = run_dir / "metrics.json"
        if run_dir == runs / "cove-small" or not metrics.exists() or "preset" not in json.loads(metrics.read_text()):
            continue
        found[folder] = with_curves(mt_record(metrics), run_dir, out, f"mt_{run_dir.name}.png")
    return found


def full_data_tables(report: dict) -> dict:
    """Where a curve line's full-data runs may come from, in order: the main table ("results"), then each encoder
    variant's table ("encoder_variants/<name>"): a curve over a biLM pretrained again takes its 100% point from that
    biLM's runs."""
    return {"results": report["results"], **{f"encoder_variants/{name}": variant["results"]
                                             for name, variant in report["encoder_variants"].items()}}


def full_data_runs(task: str, column: str, cells: dict, tables: dict) -> tuple[list, str | None, str | None]:
    """The runs of a curve line's full-data point, where they come from, and, when it has none, why: its
    --train-fraction 1 cell, else the first of `tables` (full_data_tables) whose runs on the seeds its fractions ran
    read the fractions' encoder (a column whose fractions ran over another pretraining gets none from a table over
    another encoder)."""
    if "1" in cells:
        return cells["1"]["runs"], None, None
    fraction_runs = [r for cell in cells.values() for r in cell["runs"]]
    seeds = {r["seed"] for r in fraction_runs}
    left_out = None
    for source, results in tables.items():
        full = [r for r in results.get(task, {}).get(column, {}).get("runs", []) if r["seed"] in seeds]
        mismatch = encoder_mismatch(full + fraction_runs) if full else None
        if full and not mismatch:
            return full, source, None
        if mismatch and left_out is None:
            left_out = f"the runs of {source} and the fractions' disagree: {mismatch}"
    return [], None, left_out


def sample_efficiency_differences(sample_efficiency: dict, tables: dict) -> dict:
    """Per training fraction, the table's paired differences (versus_vectors, bilm_versus_cove) over that fraction's
    cells, the full data ("1") over each column's full-data runs (full_data_runs over `tables`): fraction (as "0.1")
    -> {"versus_vectors": task -> ..., "bilm_versus_cove": task -> ...}."""
    by_fraction = {}
    for task, columns in sample_efficiency.items():
        for column, cells in columns.items():
            for fraction, cell in cells.items():
                by_fraction.setdefault(fraction, {}).setdefault(task, {})[column] = cell
            full, source, _ = full_data_runs(task, column, cells, tables)
            if source:
                by_fraction.setdefault("1", {}).setdefault(task, {})[column] = {"runs": full}
    return {fraction: {"versus_vectors": versus_vectors(found), "bilm_versus_cove": bilm_versus_cove(found)}
            for fraction, found in sorted(by_fraction.items(), key=lambda item: float(item[0]))}


def sample_efficiency_curve(sample_efficiency: dict, tables: dict) -> dict:
    """Per task and column, test accuracy against the share of the training data: the --train-fraction cells, and
    the full data (full_data_runs: a --train-fraction 1 cell, else a table's runs on the same seeds over the same
    encoder, named in "full_data_from"; a line with none says why). task -> column -> {"points": [{"fraction",
    "train_examples", "seeds", "test_accuracy": mean ± std}], "encoder": the folder its runs read, and
    "full_data_from" or "full_data_left_out" when so}."""
    curve = {}
    for task, columns in sample_efficiency.items():
        for column, cells in columns.items():
            fraction_runs = [r for cell in cells.values() for r in cell["runs"]]
            check_one_encoder(f"{task} / {column} (sample efficiency)", fraction_runs)
            points = []
            for fraction, cell in cells.items():
                kept, total = cell["runs"][0]["subsample"]["train"].split(" of ")  # "491 of 4906"
                points.append({"fraction": float(fraction), "train_examples": int(kept),
                               "seeds": [r["seed"] for r in cell["runs"]], "test_accuracy": cell["test_accuracy"]})
            entry = {"encoder": fraction_runs[0]["encoder"]}
            full, source, left_out = full_data_runs(task, column, cells, tables)
            if left_out:
                entry["full_data_left_out"] = left_out
            elif source:
                entry["full_data_from"] = source
                points.append({"fraction": 1.0, "train_examples": int(total), "seeds": [r["seed"] for r in full],
                               "test_accuracy": mean_std([r["test_accuracy"] for r in full])})
            curve.setdefault(task, {})[column] = dict(entry, points=sorted(points, key=lambda p: p["fraction"]))
    return curve


def plot_sample_efficiency(curve: dict, path: Path) -> Path:
    """The curve's PNG: one panel per task, test accuracy (mean ± std over the seeds) against training examples."""
    panels = [{"title": f"BCN {task}: test accuracy by training data", "xlabel": "training examples (log scale)",
               "ylabel": "test accuracy (%)", "log_x": True,
               "series": {column: ([p["train_examples"] for p in line["points"]],
                                   [p["test_accuracy"]["mean"] for p in line["points"]])
                          for column, line in columns.items()},
               "errors": {column: [p["test_accuracy"]["std"] for p in line["points"]]
                          for column, line in columns.items()}}
              for task, columns in curve.items()]
    return plot_curves(panels, path, "sample efficiency: fixed random subsets (10% within 25% within 100%)")


def run_setup(m: dict) -> dict:
    """What must match for two seeds to share a table cell: the runs/ family folder (runs/<folder>/<task>/...), the
    encoder, the hyperparameters (but the yaml's path) and the random subsets."""
    hyperparameters = {k: v for k, v in (m.get("hyperparameters") or {}).items() if k != "source"}
    return {"folder": m["_folder"], "encoder": m["encoder"], "hyperparameters": hyperparameters,
            "subsample": m.get("subsample")}


def encoder_mismatch(records: list) -> str | None:
    """Why `records` did not all read one encoder, or None: they name different encoder folders, or different weights
    by the sha256 the runs record (runs from before that record compare by folder only)."""
    for key, what in (("encoder", "folders"), ("encoder_weights", "weights by sha256")):
        seeds = {}
        for r in records:
            if r.get(key):
                seeds.setdefault(r[key] if key == "encoder" else r[key][:12], []).append(r["seed"])
        if len(seeds) > 1:
            return f"the runs read different encoders (seeds by {what}: " + "; ".join(
                f"{name}: {sorted(set(found))}" for name, found in seeds.items()) + ")"
    return None


@functools.lru_cache(maxsize=None)
def checkpoint_weights(encoder: Path) -> str | None:
    """The sha256 of the weights of the checkpoint at `encoder` (a resolved path) as the runs record it
    (`weights_fingerprint`), None where it has none; read once a checkpoint (a runner asking whether a run over it
    is stale)."""
    try:
        return weights_fingerprint(encoder)
    except CheckpointError:  # no checkpoint there, or one without safetensors weights
        return None


def check_one_encoder(label: str, records: list) -> None:
    """Raise ValueError when `records` read different encoders (encoder_mismatch): e.g. a biLM pretrained again in a
    later session, merged with the old runs."""
    mismatch = encoder_mismatch(records)
    if mismatch:
        raise ValueError(f"{label}: {mismatch}; one table cell needs one encoder: rerun the seeds or collect them apart")


def check_cell_runs(label: str, records: list) -> None:
    """Raise ValueError unless a table cell's `records` hold one run a seed and read one encoder (check_one_encoder).
    Two runs of a seed come from a leftover copy of a run folder (or two folders of one column): the mean would count
    that seed twice and the pairs by seed would read one of them."""
    twice = repeated_seeds(records)
    if twice:
        raise ValueError(f"{label}: seed(s) {twice} have two runs (their commands: "
                         f"{[r.get('command') for r in records if r['seed'] in twice]}); keep one run a seed")
    check_one_encoder(label, records)


def summarize(task: str, column: str, records: list) -> dict:
    """A table cell: its runs (sorted by seed) with mean ± std over them (and the scalar mix's learned weights)."""
    records = sorted(records, key=lambda r: r["seed"])
    check_cell_runs(f"{task} / {column}", records)
    entry = {"runs": records,
             "test_accuracy": mean_std([r["test_accuracy"] for r in records]),
             "test_macro_f1": mean_std([r["test_macro_f1"] for r in records]),
             "validation_accuracy": mean_std([r["best_validation_accuracy"] for r in records]),
             "paper_table2_validation": papers.table2_by_input(task).get(column)}
    mixes = [r["scalar_mix"] for r in records if "scalar_mix" in r]
    if mixes:  # the learned layer weights softmax(w) and gamma, mean ± std over the seeds
        layers = mixes[0]["layers"]
        entry["scalar_mix"] = {
            "layers": layers,
            "weights": [mean_std([mix["weights"][k] for mix in mixes], 3) for k in range(len(layers))],
            "gamma": mean_std([mix["gamma"] for mix in mixes], 3)}
    return entry


def check_same_vocabulary(path: Path, record: dict) -> None:
    """A ValueError unless the pretraining `record` was pretrained over the vocabulary of the record at `path` (when
    there is one): runs/cove-small is where two recipes write (the table's CoVe-S over runs/vocab-all, the taggers'
    over runs/vocab-tagging), and a record of one must not replace the other's."""
    if not path.exists():
        return
    before = json.loads(path.read_text()).get("data", {}).get("source_vocab_from")
    now = record.get("data", {}).get("source_vocab_from")
    if before and now and Path(before).name != Path(now).name:
        raise ValueError(f"{path} records a CoVe-S pretrained over {before}, the run found over {now}: another "
                         "recipe's run (move it out of runs/cove-small, or the record away, to collect it)")


def mt_record(metrics_path: Path) -> dict:
    m = json.loads(metrics_path.read_text())
    return {k: m[k] for k in MT_KEYS if k in m}


def with_curves(record: dict, run_dir: Path, out: Path, png_name: str) -> dict:
    """`record` of a pretraining run with its training curves (run_dir/curves.png) copied to out/<png_name> and named
    under "curve_png", when the run drew them."""
    if (run_dir / "curves.png").exists():
        shutil.copyfile(run_dir / "curves.png", out / png_name)
        record["curve_png"] = png_name
    return record


def bilm_record(run_dir: Path, out: Path, png_name: str) -> dict:
    """A train_bilm.py run's record: its metrics.json less the per-step loss log, the sha256 of its exported encoder's
    weights (the one its BCN runs record) and its curves (with_curves)."""
    record = {k: v for k, v in json.loads((run_dir / "metrics.json").read_text()).items() if k in BILM_KEYS}
    if (run_dir / "encoder").is_dir():
        record["encoder_weights"] = weights_fingerprint(run_dir / "encoder")
    return with_curves(record, run_dir, out, png_name)


def collect_encoder_variants(runs: Path, out: Path) -> dict:
    """The BCN table again for each encoder of ENCODER_VARIANTS that has runs, with that encoder's own pretraining
    figures: "mt" for a CoVe-S (its curves copied to out/mt_<name>.png), "bilm" for a biLM (bilm_record,
    out/bilm_pretraining_<name>.png)."""
    variants = {}
    for name, (bcn_folder, pretraining_folder) in ENCODER_VARIANTS.items():
        table = collect_classification(runs, f"{bcn_folder}/*/*-seed*/metrics.json")
        if not table:
            continue
        run_dir = runs / pretraining_folder
        reads_bilm = any("vectors+bilm" in columns for columns in table.values())  # else its runs read a CoVe-S
        record = None
        if (run_dir / "metrics.json").exists():
            record = (bilm_record(run_dir, out, f"bilm_pretraining_{name}.png") if reads_bilm
                      else with_curves(mt_record(run_dir / "metrics.json"), run_dir, out, f"mt_{name}.png"))
        variants[name] = {"bilm" if reads_bilm else "mt": record, "results": table}
    return variants


def union_runs(before: dict, after: dict, runs_of, key) -> dict:
    """task -> column -> {key(run): run} over the cells of two tables (task -> column -> cell, `runs_of(cell)` its
    runs); `after`'s run wins on the same key."""
    merged = {}
    for table in (before, after):
        for task, columns in table.items():
            for column, cell in columns.items():
                merged.setdefault(task, {}).setdefault(column, {}).update({key(r): r for r in runs_of(cell)})
    return merged


def merge_runs_table(before: dict, after: dict) -> dict:
    """Two tables of cells (task -> column -> summarize's cell) as one, run by run: a run of `after` replaces the run
    of the same task, column and seed in `before`, the others stay, and each cell is summarized again (one encoder a
    cell)."""
    cells = union_runs(before, after, lambda cell: cell["runs"], lambda r: r["seed"])
    return {task: {column: summarize(task, column, list(found.values())) for column, found in columns.items()}
            for task, columns in cells.items()}


def merge_classification(old: dict, new: dict) -> dict:
    """classification.json `old` updated with the freshly collected `new`, run by run: a run of `new` replaces the
    run of the same task, column and seed (and dropout, in the dropout search) in `old`, the other runs of `old` are
    kept, and each cell's mean ± std is computed again over the result; an encoder variant's MT record comes from
    `new` when it has one."""

    def sweep(before: dict, after: dict) -> dict:
        cells = union_runs(before, after, lambda cell: cell, lambda r: (r["dropout"], r["seed"]))
        return {task: {column: [found[key] for key in sorted(found)] for column, found in columns.items()}
                for task, columns in cells.items()}

    def fractions(before: dict, after: dict) -> dict:  # task -> column -> fraction -> cell, run by run as the tables
        merged = {}
        for table in (before, after):
            for task, columns in table.items():
                for column, cells in columns.items():
                    for fraction, cell in cells.items():
                        merged.setdefault(task, {}).setdefault(column, {}).setdefault(fraction, {}).update(
                            {r["seed"]: r for r in cell["runs"]})
        return {task: {column: {fraction: summarize(task, column, list(found.values()))
                                for fraction, found in sorted(cells.items(), key=lambda item: float(item[0]))}
                       for column, cells in columns.items()} for task, columns in merged.items()}

    variants = dict(old.get("encoder_variants", {}))
    for name, variant in new["encoder_variants"].items():
        before = variants.get(name, {})
        pretraining = "bilm" if "bilm" in variant else "mt"
        variants[name] = {pretraining: variant[pretraining] or before.get(pretraining),
                          "results": merge_runs_table(before.get("results", {}), variant["results"])}
    return dict(old, what=new["what"], columns=new["columns"],
                results=merge_runs_table(old.get("results", {}), new["results"]),
                dropout_sweep=sweep(old.get("dropout_sweep", {}), new["dropout_sweep"]),
                encoder_variants=variants,
                subsampled=dict(new["subsampled"], results=merge_runs_table(
                    old.get("subsampled", {}).get("results", {}), new["subsampled"]["results"])),
                sample_efficiency=dict(new["sample_efficiency"], results=fractions(
                    old.get("sample_efficiency", {}).get("results", {}), new["sample_efficiency"]["results"]),
                    pretraining={**old.get("sample_efficiency", {}).get("pretraining", {}),
                                 **new["sample_efficiency"]["pretraining"]}))




CLASSIFICATION_WHAT = ("BCN test accuracy (%) per task and input column, mean ± std over seeds; stand-in word2vec "
                       "vectors (not GloVe 840B); CoVe-S = our MT-LSTM pretrained on Multi30k (mt_multi30k.json)")
CLASSIFICATION_COLUMNS = {
    "random": "random embeddings trained with the BCN", "vectors": "stand-in vectors, frozen",
    "vectors+cove": "[vectors; CoVe-S] (eq. 6), frozen", "cove": "CoVe-S alone (no word vectors), frozen",
    "scalar_mix": "ELMo-style gamma * sum_k softmax(w)_k h_k over {[vectors; vectors], CoVe-S layer 1, layer 2} "
                  "(docs/paper.md §6), w and gamma learned with the BCN",
    "vectors+bilm": "ELMo-style [vectors; gamma * sum_k softmax(w)_k h_k] over our biLM's layers (docs/bilm.md), "
                    "biLM frozen, w and gamma learned with the BCN"}


COVE_T_WHAT = ("The CoVe-T comparison: BCN test accuracy (%) per task and input column, mean ± std over seeds, over "
               "vectors, CoVe-S and CoVe-T checkpoints all made afresh for it (the table's CoVe-S checkpoint is gone: "
               "CoVe-S is pretrained again by its command with CoVe-T's test-sentence exclusion, so that the two "
               "train on the same exclusion: they differ in their corpora and in how long they train, CoVe-S its "
               "3 epochs, CoVe-T up to 8 with its best epoch kept, the 5-epoch CoVe-S the control for length), "
               "every run of it new; its pairs by "
               "seed with a 95% t interval; never merged with the table's runs (results)")
COVE_T_COLUMNS = {
    "vectors": "stand-in vectors, frozen",
    "vectors+cove": "[vectors; CoVe-S] (eq. 6), frozen; CoVe-S pretrained again with CoVe-T's test-sentence "
                    "exclusion (encoders names its checkpoint)",
    "cove": "CoVe-S alone (no word vectors), frozen",
    "vectors+cove-t": "[vectors; CoVe-T] (eq. 6), frozen; CoVe-T = the MT-LSTM of CoVe-S pretrained on Multi30k + "
                      "Tatoeba pairs (configuration/models/cove-t.json)",
    "cove-t": "CoVe-T alone (no word vectors), frozen",
    "vectors+cove-s-5-epochs": "[vectors; CoVe-S pretrained 5 epochs] (eq. 6), frozen: CoVe-T's control for "
                               "training length"}


def collect_cove_t(runs: Path) -> dict:
    """The CoVe-T comparison's cells (task -> column -> summarize's cell) from runs/bcn-cove-t (COVE_T_FOLDER)."""
    return collect_classification(runs, f"{COVE_T_FOLDER}/*/*-seed*/metrics.json")


def check_one_training(label: str, records: list) -> None:
    """Raise ValueError when `records` (the runs of one task of the CoVe-T comparison, every column) trained otherwise
    (PAIRED_SETTINGS): the plan gives them all the task yaml's, so two settings mean a run of another plan, whose
    pairs paired_entry would leave out without a word."""
    found = {}
    for r in records:
        found.setdefault(training(r), []).append(f"{r['column']} {r['seed']}")
    if len(found) > 1:
        held = "; ".join(f"{dict(zip(PAIRED_SETTINGS, key))}: {runs}" for key, runs in found.items())
        raise ValueError(f"{label}: the runs trained otherwise (columns and seeds by setting: {held}); one task, one "
                         "training: run the odd ones again with the task's settings")


def check_current_weights(label: str, encoder: str, encoder_weights: str | None, runs: Path) -> None:
    """Raise ValueError when the checkpoint a column's runs read (`encoder`, as they recorded it: relative to the
    folder their runner ran in, the repository, whose runs/ is `runs` by default) now holds other weights than the
    sha256 they recorded (`encoder_weights`): it was pretrained again since, and its pretraining record would sit
    beside runs of the old weights. A checkpoint not beside `runs` is not checked, and a warning says so."""
    folder = runs.parent / encoder
    if not folder.is_dir():
        logger.warning("%s: no checkpoint at %s: the weights its runs recorded are not checked against it (runs "
                       "collected away from the folder their runner ran in?)", label, folder)
        return
    now = checkpoint_weights(folder.resolve())
    if encoder_weights and now and now != encoder_weights:
        raise ValueError(f"{label}: its runs read {encoder} with weights {encoder_weights[:12]}, which now holds "
                         f"{now[:12]} (pretrained again): run them again (benchmarks/run_classification_table.py "
                         "reruns stale runs) or collect where the old checkpoint is")


def cove_t_comparison(results: dict, stamp: dict, runs: Path, out: Path, earlier: dict | None = None) -> dict:
    """classification.json's section of the CoVe-T comparison (COVE_T_SECTION) over its cells (`results`, task ->
    column -> cell): what it is, the collection's command and commit (`stamp`), the machines its runs ran on, its
    columns, per column the encoder its runs read (folder and the weights' sha256 they recorded; one encoder a column
    over every task, and the weights that checkpoint holds now where it is there, else ValueError), the MT
    pretraining record of each encoder found under `runs` (`pretraining_records`: its BLEU per corpus, test-sentence
    exclusions and <unk> rates, best epoch; curves copied to `out`), else the one of the section collected before
    (`earlier`), the cells, and per task its pairs by seed (COVE_T_PAIRS, "a - b"). A task whose runs trained
    otherwise is refused (`check_one_training`)."""
    by_column = {}
    for task, columns in results.items():
        task_runs = [dict(r, column=column) for column, cell in columns.items() for r in cell["runs"]]
        check_one_device_kind(f"cove_t_comparison / {task}", [(run_device_kind(r), r["seed"]) for r in task_runs])
        check_one_training(f"cove_t_comparison / {task}", task_runs)
        for column, cell in columns.items():
            by_column.setdefault(column, []).extend(cell["runs"])
    encoders = {}
    for column, records in by_column.items():
        check_one_encoder(f"cove_t_comparison / {column}", records)
        encoders[column] = {"encoder": records[0]["encoder"],
                            "encoder_weights": next((r["encoder_weights"] for r in records if r.get("encoder_weights")),
                                                    None)}
        check_current_weights(f"cove_t_comparison / {column}", **encoders[column], runs=runs)
    folders = {e["encoder"] for e in encoders.values()}
    kept = {folder: record for folder, record in ((earlier or {}).get("pretraining") or {}).items() if folder in folders}
    return {"what": COVE_T_WHAT, **stamp,
            "machine": run_machines([r.get("machine") for records in by_column.values() for r in records]),
            "columns": {column: COVE_T_COLUMNS.get(column) for column in encoders}, "encoders": encoders,
            "pretraining": {**kept, **pretraining_records(runs, folders, out)},
            "results": results, "versus_vectors": head_to_head(results, COVE_T_PAIRS)}


def classification_report(runs: Path, out: Path) -> dict:
    """The classification table of the BCN runs under `runs` (empty "results" when there are none)."""
    table = collect_classification(runs)
    fractions = collect_sample_efficiency(runs)
    return {
        "what": CLASSIFICATION_WHAT,
        "columns": CLASSIFICATION_COLUMNS,
        "results": table,
        "dropout_sweep": collect_dropout_sweep(runs, table),
        "encoder_variants": collect_encoder_variants(runs, out),
        "subsampled": {"what": "runs on fixed random subsets of the splits (--max-train-examples, "
                               "--max-eval-examples: a CPU budget, IMDb); each run records its subsets",
                       "results": collect_subsampled(runs)},
        "sample_efficiency": {"what": "BCN test accuracy on a fraction of the training split (--train-fraction: fixed "
                                      "random subsets, each smaller one inside the larger; validation and test whole),"
                                      " per column; the curve adds the full data (a --train-fraction 1 cell, else"
                                      " results on the same seeds over the same encoder); paired: each fraction's"
                                      " differences as in versus_vectors and bilm_versus_cove, the full data's"
                                      " over the curve's full-data runs",
                              "results": fractions,
                              "pretraining": fraction_pretrainings(runs, fractions, out)},
    }


def collect_results(runs: Path | str, out: Path | str, merge: bool = False, command: str = "") -> list:
    """Write the result files of `out` from the runs under `runs`; returns the paths written. `merge` adds the BCN
    runs to the classification.json already in `out` (a run replaces the one of the same task, column and seed; the
    others stay and every mean is computed again) instead of replacing it; the CoVe-T comparison's runs
    (runs/bcn-cove-t) go to the file's section COVE_T_SECTION (cove_t_comparison), with `merge` over that section's
    runs alike (and the MT records it holds of encoders not under `runs`), never into the table; with none of its
    runs under `runs`, the section the file has stays as it is, with or without `merge` (as the tagging collector
    keeps tagging.json's). `command` is recorded in every file."""
    runs, out = Path(runs), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = {"command": command, "commit": git_commit()}
    written = []
    existing = out / "classification.json"
    report = classification_report(runs, out)
    cove_t = collect_cove_t(runs)
    old = {}
    if report["results"] or (merge and existing.exists()):
        if merge and existing.exists():
            old = json.loads(existing.read_text())
            report = merge_classification(old, report)
        report["versus_vectors"] = versus_vectors(report["results"])
        report["bilm_versus_cove"] = bilm_versus_cove(report["results"])
        for variant in report["encoder_variants"].values():
            variant.update(variant_differences(variant["results"], report["results"]))
        fractions = report["sample_efficiency"]["results"]
        if fractions:
            tables = full_data_tables(report)
            curve = sample_efficiency_curve(fractions, tables)
            png = plot_sample_efficiency(curve, out / "sample_efficiency.png")
            report["sample_efficiency"].update(curve=curve, png=png.name,
                                               paired=sample_efficiency_differences(fractions, tables))
        report.pop(COVE_T_SECTION, None)  # the old file's: a family of its own, never merged with the table
        found = provenance(run_machines([run.get("machine") for run in table_runs(report)]), old)
        body = {**stamp, **found, **{k: v for k, v in report.items() if k not in (*stamp, *PROVENANCE)}}
        if cove_t:  # with `merge`, over the section's runs (old: {} without)
            earlier = old.get(COVE_T_SECTION, {})
            body[COVE_T_SECTION] = cove_t_comparison(merge_runs_table(earlier.get("results", {}), cove_t), stamp,
                                                     runs, out, earlier)
        elif existing.exists():  # none of its runs here: the section the file has stays (not the table's to drop)
            kept = json.loads(existing.read_text()).get(COVE_T_SECTION)
            if kept:
                body[COVE_T_SECTION] = kept
        written.append(write_json(existing, body))
    elif report["encoder_variants"] or cove_t:
        logger.warning("%s/bcn holds no runs: merge=True (--merge) adds the encoder variants' and the CoVe-T "
                       "comparison's runs to %s", runs, existing)
    mt = runs / "cove-small" / "metrics.json"
    if mt.exists():
        record = dict(mt_record(mt), paper_test_bleu=papers.mt_bleu("multi30k")["bleu"], bar_test_bleu=30.0,
                      curve_png="mt_multi30k.png")
        check_same_vocabulary(out / "mt_multi30k.json", record)
        written.append(write_json(out / "mt_multi30k.json", record))  # the run's own command and commit
        if (runs / "cove-small" / "curves.png").exists():
            shutil.copyfile(runs / "cove-small" / "curves.png", out / "mt_multi30k.png")
    if (runs / "bilm" / "metrics.json").exists():  # the biLM of the vectors+bilm column
        record = bilm_record(runs / "bilm", out, "bilm_pretraining.png")
        written.append(write_json(out / "bilm_pretraining.json", record))  # the run's own command and commit
    squad = {path.parent.name: json.loads(path.read_text()) for path in sorted(runs.glob("dcn-squad-*/metrics.json"))}
    if squad:
        machine = run_machines([machine_label(run.get("machine")) for run in squad.values()])
        written.append(write_json(out / "squad.json", {**stamp, "machine": machine, "runs": squad}))
    for run_dir, name in (("main-cove-small", "main_cove_small"), ("main", "main_embedded")):
        main_report = runs / run_dir / "report.json"
        found = json.loads(main_report.read_text()) if main_report.exists() else {}
        if found and not found.get("quick"):
            # the figures only: the run's REPORT.md links its curves inside the run folder, which stays behind
            written.append(write_json(out / f"{name}.json", {"commit": found.get("git"), **found}))
    return written
