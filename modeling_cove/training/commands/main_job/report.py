"""The main job's report: the stages' curves gathered in `<run-dir>/curves/`, the paper's numbers beside ours, and
`REPORT.md`, the summary a reader opens first."""

from __future__ import annotations

import shutil
from pathlib import Path

from ...common.presets import load_preset, preset_path
from .curves import line_label
from .runner import STAGES
from .settings import CLASSIFICATION_TASKS


def collect_curves(run_dir: Path, report: dict) -> list:
    curves = run_dir / "curves"
    curves.mkdir(exist_ok=True)
    out = []
    pre = report["stages"].get("pretrain", {}).get("metrics") or {}
    if pre.get("curve") and Path(pre["curve"]).exists():
        shutil.copyfile(pre["curve"], curves / "pretrain_mt.png")
        out.append("curves/pretrain_mt.png")
    learning = report["stages"].get("curves", {}).get("metrics") or {}
    if learning.get("curve") and Path(learning["curve"]).exists():
        shutil.copyfile(learning["curve"], curves / "learning_curve.png")
        out.append("curves/learning_curve.png")
    for task, columns in (report["stages"].get("classifier", {}).get("metrics") or {}).items():
        for column, m in columns.items():
            if Path(m["curve"]).exists():
                name = f"classifier_{task}_{column.replace('+', '_')}.png"
                shutil.copyfile(m["curve"], curves / name)
                out.append(f"curves/{name}")
    return out


def paper_numbers(cfg: dict) -> dict:
    """The paper's figures (`papers`, typed once): the MT BLEU of the pretraining's translation data (CoVe-S's for
    the embedded default) and the tasks' Table 2 rows."""
    from ...common import papers

    mt_preset_file = cfg["preset_content"]["pretrain"].get("preset")  # the embedded default has none: CoVe-S
    mt_preset = load_preset(str(preset_path(cfg["preset_file"], mt_preset_file)) if mt_preset_file else "cove-small",
                            "models")
    mt = papers.mt_bleu((mt_preset.get("data") or {}).get("dataset"))
    out = {"mt_bleu": mt["bleu"] if mt else None,
           "mt_note": f"{mt['test_set']}, {mt['bleu_kind']}" if mt else None, "table2": {}}
    for t in cfg["tasks"]:
        key = t["task"] if t["task"] in CLASSIFICATION_TASKS else "sst2"
        out["table2"][t["name"]] = {"row": key, "comparable": key == t["task"], **papers.table2_by_input(key)}
    return out


def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def _markdown_data(st: dict, paper: dict, cfg: dict) -> list:
    vec = st.get("vectors", {}).get("metrics") or {}
    voc = st.get("vocab", {}).get("metrics") or {}
    pre = st.get("pretrain", {}).get("metrics") or {}
    lines = ["", "## Data and vectors", "",
             f"- word vectors: {vec.get('source')} `{vec.get('file')}`, {vec.get('dim')} dims"
             + (f", {vec.get('words')} words" if vec.get("words") else ""),
             f"- vocabulary: {voc.get('vocab_size')} entries ({voc.get('words_with_vector')} with a vector, "
             f"{voc.get('token_coverage_vectors')}% of {voc.get('corpus_tokens')} tokens covered); MT-LSTM "
             f"{voc.get('num_hidden_layers')} x {voc.get('hidden_size')} per direction",
             "", "## Pretraining (English→German MT)", "", "| | ours | paper (CoVe-S) |", "|---|---|---|",
             f"| test BLEU | {fmt(pre.get('test_bleu'))} | {fmt(paper['mt_bleu'])} ({paper['mt_note']}) |",
             f"| test perplexity | {fmt(pre.get('test_perplexity'))} | – |",
             f"| epochs / steps | {pre.get('epochs')} / {pre.get('steps')} | |", ""]
    if pre.get("stop_reason"):
        lines.append(f"Stopped: {pre['stop_reason']}.")
    if cfg["preset_content"]["pretrain"].get("dataset") == "tsv":
        lines.append("Ours is trained and tested on the embedded synthetic pairs (examples/en_de), the paper's on "
                     "Multi30k: the numbers are not comparable, the paper's is shown for scale.")
    return lines


COLUMN_MEANINGS = {
    "random": "random embeddings trained with the BCN",
    "vectors": "the word vectors alone, frozen",
    "vectors+cove": "[word vectors; CoVe], CoVe = the pretrained MT-LSTM's top layer, frozen",
    "cove": "CoVe alone (no word vectors), frozen",
    "scalar_mix": "gamma * sum_k softmax(w)_k h_k over {[vectors; vectors], MT-LSTM layer 1, layer 2}, "
                  "w and gamma learned with the BCN",
    "vectors+scalar_mix": "[word vectors; gamma * sum_k softmax(w)_k h_k over {[vectors; vectors], MT-LSTM layer 1, "
                          "layer 2}], w and gamma learned with the BCN",
}


def _markdown_classifier(st: dict, paper: dict) -> list:
    lines = ["", "## Classification (BCN, accuracy %)", "",
             "| task | column | validation | test | test macro-F1 | epochs | paper validation (same column) | "
             "paper GloVe | paper +CoVe-S |", "|---|---|---|---|---|---|---|---|---|"]
    metrics = st.get("classifier", {}).get("metrics") or {}
    trained = list(dict.fromkeys(column for columns in metrics.values() for column in columns))
    if trained:
        lines.insert(3, "Columns (the BCN's input): " + "; ".join(
            f"`{column}` = {COLUMN_MEANINGS.get(column, column)}" for column in trained) + ".\n")
    for task, columns in metrics.items():
        p = paper["table2"].get(task, {})
        for column, m in columns.items():
            lines.append(f"| {task} | {column} | {fmt(m['validation_accuracy'])} | {fmt(m['test_accuracy'])} | "
                         f"{fmt(m['test_macro_f1'])} | {m.get('epochs')} | "
                         f"{fmt(p.get(column)) if p.get('comparable') else '–'} | "
                         f"{fmt(p.get('vectors'))} | {fmt(p.get('vectors+cove'))} |")
        if p and not p.get("comparable"):
            lines.append(f"\n{task}: no paper counterpart (synthetic data); the paper columns show its "
                         f"{p['row'].upper()} row for scale.")
        stops = {f"{column}: {m['stop_reason']}" for column, m in columns.items() if m.get("stop_reason")}
        if stops:
            lines.append(f"\n{task} runs stopped — " + "; ".join(sorted(stops)) + ".")
    return lines


def difference_text(d: dict | None) -> str:
    """"+2.50 [+0.40, +4.60] (10 seeds: higher on 8, lower on 2)" from a `stats.paired_difference` entry."""
    if not d:
        return "–"
    ci = f" [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]" if "ci95" in d else ""
    n = len(d["seeds"])
    return f"{d['mean']:+.2f}{ci} ({n} seed{'s' * (n > 1)}: higher on {d['higher_on']}, lower on {d['lower_on']})"


def curve_verdict(learning: dict) -> list:
    """What the curve shows, in words, from its own figures: per CoVe line, the sizes where the paired difference
    is above zero, below it, or undecided (with one seed, only its sign: no interval)."""
    lines = []
    for line in learning["lines"][1:]:
        above, below, undecided = [], [], []
        for size in learning["sizes"]:
            d = learning["table"][str(size)][line].get("minus_vectors", {}).get("test_accuracy")
            if not d:
                continue
            if "ci95" in d:
                (above if d["ci95"][0] > 0 else below if d["ci95"][1] < 0 else undecided).append(size)
            else:
                (above if d["mean"] > 0 else below if d["mean"] < 0 else undecided).append(size)
        name = line_label(line, learning["encoders"])
        interval = any("ci95" in (learning["table"][str(n)][line].get("minus_vectors", {}).get("test_accuracy") or {})
                       for n in learning["sizes"])
        how = "the 95% interval of the paired difference" if interval else "one seed (no interval: a difference of " \
              "one seed may be noise; `cove-main --full-curves` runs ten)"
        parts = [f"above the vectors alone at {', '.join(map(str, above))} labelled sentences" if above else "",
                 f"below at {', '.join(map(str, below))}" if below else "",
                 f"not distinguishable at {', '.join(map(str, undecided))}" if undecided else ""]
        lines.append(f"- `{name}`: " + "; ".join(p for p in parts if p) + f" (by {how}).")
    return lines


def _markdown_curves(st: dict) -> list:
    learning = st.get("curves", {}).get("metrics") or {}
    if not learning.get("table"):
        return []
    encoders = learning["encoders"]
    lines = ["", "## What pretraining is for: the learning curve (test accuracy %)", "",
             "The same BCN reads the same frozen word vectors, alone (`vectors`) or with the states of the MT-LSTM that "
             "translation pretrained (`vectors+cove`); both are trained on the same labelled sentences with the same "
             "seed. Where the CoVe line is above the vectors line, what the encoder learned from translation pairs "
             "(which carry no sentiment labels) helps the task; the paper's claim is that this help is largest when "
             "labels are few and grows with the translation data.", "",
             f"Seeds {', '.join(map(str, learning['seeds']))}; every run keeps its best epoch on the full validation "
             f"split and sees at least {learning['min_steps']} updates. Encoders: " + "; ".join(
                 f"{k}: MT on {v['pairs']:,} pairs, test BLEU {fmt(v.get('test_bleu'))}" for k, v in encoders.items()
                 if v.get("pairs")) + ".", ""]
    header = ["labelled sentences"] + [line_label(l, encoders) for l in learning["lines"]] + [
        f"{line_label(l, encoders)} − vectors" for l in learning["lines"][1:]]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for size in learning["sizes"]:
        row = learning["table"][str(size)]
        cells = [str(size)]
        for l in learning["lines"]:
            acc = row[l]["test_accuracy"]
            cells.append("–" if not acc else f"{acc['mean']:.2f}" + (f" ± {acc['std']:.2f}" if acc["n"] > 1 else ""))
        cells += [difference_text(row[l].get("minus_vectors", {}).get("test_accuracy")) for l in learning["lines"][1:]]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "What it shows:"] + curve_verdict(learning) + ["", "![learning curve](curves/learning_curve.png)"]
    return lines


def _markdown_publish(st: dict, cfg: dict, run_dir: Path) -> list:
    lines = []
    pub = st.get("publish", {}).get("metrics") or {}
    if pub:
        lines += ["", "## Hub-ready folders (cove-push-to-hub --dry-run)", ""]
        for task, p in pub.items():
            column = p.get("column", cfg["preset_content"]["classifier"]["bcn_input"])
            lines.append(f"- {task}: the {column} BCN (best validation accuracy: "
                         + ", ".join(f"{c} {fmt(v)}" for c, v in (p.get("validation_accuracy") or {}).items())
                         + f") in `{p['hub_folder']}` → `{p['repo_id']}` ({len(p['files'])} files; upload with "
                         f"`cove-push-to-hub {run_dir}/classifier/{task}/{column}/best --repo-id "
                         f"ORG/NAME --eval-json {p['eval_json']}`)")
    pred = st.get("predict", {}).get("metrics") or {}
    if pred:
        lines += ["", "## Predictions of the reloaded model (pipeline(\"text-classification\"))", ""]
        for task, p in pred.items():
            lines += [f"{task} (AutoModel → {p['auto_model_class']}):", "", "| text | label | score |",
                      "|---|---|---|"]
            lines += [f"| {r['text']} | {r['label']} | {r['score']:.3f} |" for r in p["predictions"]]
            lines.append("")
    return lines


def write_markdown(run_dir: Path, report: dict, cfg: dict):
    st = report["stages"]
    lines = [f"# Main job report: preset `{cfg['preset']}`" + (" (--quick)" if cfg["quick"] else ""), "",
             f"Run folder `{run_dir}`; command `{report['command']}`; git `{report.get('git')}`.", "",
             "| stage | status | seconds |", "|---|---|---|"]
    for stage in STAGES:
        s = st.get(stage, {})
        lines.append(f"| {stage} | {s.get('status', 'not run')} | {fmt(s.get('seconds'), 1)} |")
    lines += _markdown_data(st, report["paper"], cfg)
    lines += _markdown_classifier(st, report["paper"])
    lines += _markdown_curves(st)
    lines += _markdown_publish(st, cfg, run_dir)
    if report.get("curves"):
        lines += ["", "## Curves", ""] + [f"![{c}]({c})" for c in report["curves"] if "learning_curve" not in c]
    (run_dir / "REPORT.md").write_text("\n".join(lines) + "\n")
