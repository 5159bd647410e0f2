"""The command lines (modeling_cove.training.common.cli): every console entry point's --help in-process, one argument
system (HfArgumentParser over documented options dataclasses), every flag spelled as before still accepted, values
parsed as the flags mean, bad input as usage errors (exit 2), OMP_WAIT_POLICY set before torch loads, and every
command line the docs and docstrings write using only its command's flags."""

import contextlib
import dataclasses
import importlib
import io
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from modeling_cove.training.commands import build_vocab as vocab
from modeling_cove.training.commands import convert_salesforce as convert
from modeling_cove.training.commands import export_encoder as export
from modeling_cove.training.commands import demo
from modeling_cove.training.commands import push_to_hub as publish
from modeling_cove.training.commands import train_bilm as bilm
from modeling_cove.training.commands import train_classifier as classifier
from modeling_cove.training.commands import train_mt as mt
from modeling_cove.training.commands import train_ppmi_vectors as ppmi
from modeling_cove.training.commands import train_qa as qa
from modeling_cove.training.commands import train_tagger as tagger
from modeling_cove.training.common import cli
from modeling_cove.training.common.cli import build_parser, parse_options

from conftest import REPO

# each command line's options dataclass(es)
OPTIONS = {
    "cove-build-vocab": vocab.BuildVocabArguments,
    "cove-train-ppmi-vectors": ppmi.PPMIArguments,
    "cove-convert-salesforce": convert.ConvertArguments,
    "cove-train-mt": mt.MTArguments,
    "cove-train-bilm": (bilm.BiLMSettings, cli.RunArguments),
    "cove-export-encoder": export.ExportArguments,
    "cove-train-classifier": classifier.ClassifierOptions,
    "cove-train-qa": qa.QAOptions,
    "cove-train-tagger": (tagger.TaggerSettings, cli.RunArguments),
    "cove-push-to-hub": publish.PublishArguments,
    "cove-demo": demo.DemoArguments,
}

# the flags each command line took before it moved onto the options dataclasses (its argparse declarations)
FLAGS_BEFORE = {
    "cove-build-vocab": "cased char-ngrams cove-output data-dir dim include-word-vectors max-size model-max-length "
                        "oov-min-count output-dir overwrite seed tasks text-file vectors vectors-lowercase",
    "cove-train-ppmi-vectors": "cds-alpha dim eig-power min-count no-normalize output show text-file tsv-column window",
    "cove-convert-salesforce": "cased cove-output data-dir include-word-vectors model-max-length oov-min-count "
                               "output-dir overwrite tasks vectors vectors-lowercase vocab-file vocab-from-vectors "
                               "weights",
    "cove-export-encoder": "metrics mt-checkpoint name output-dir vocab-from",
    "cove-train-bilm": "batch-size corpus cpu cutoffs data-dir dropout epochs eval-batch-size grad-clip "
                       "heldout-fraction hidden-size init-from keep-checkpoints limit-texts log-every lr max-steps "
                       "no-residual num-layers num-threads output-dir overwrite resume save-steps scheduler seed "
                       "seq-len text-column time-budget-minutes untie-softmax warmup-steps",
    "cove-train-classifier": "batch-size bcn-input cache-dir config data-dir dropout encoder epochs "
                             "freeze-random-embeddings keep-checkpoints learning-rate limit max-cache-gb "
                             "max-eval-examples max-steps max-train-examples no-feature-cache no-save-model output-dir "
                             "overwrite sampling seed task threads train-fraction",
    "cove-train-qa": "batch-size cache-dir cache-dtype checkpoint data-dir dcn-input epochs learning-rate limit-eval "
                     "limit-train max-steps model-override model-preset no-baseline no-cache output-dir overwrite seed "
                     "task-config threads time-budget-minutes",
    "cove-push-to-hub": "commit-message curve dry-run endpoint eval-json license output-dir private repo-id revision "
                        "token",
}
FORBIDDEN_IN_HELP = ("shared/", "../", str(REPO))


def entry_points() -> dict:
    """pyproject.toml's [project.scripts]: name -> "module:function"."""
    text = (REPO / "pyproject.toml").read_text()
    table = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]+)"', table, flags=re.M))


def test_entry_points_are_the_command_lines_named():
    assert set(OPTIONS) | {"cove-main"} == set(entry_points())


@pytest.mark.parametrize("name", sorted(entry_points()))
def test_every_entry_point_prints_its_help_in_process(name):
    """`<entry point> --help` exits 0 with the usage (`help_text`), the description and every flag with its help;
    the text names no folder a user does not have."""
    text = help_text(name)
    assert len(text) > 500
    for forbidden in FORBIDDEN_IN_HELP:
        assert forbidden not in text, f"{name} --help names {forbidden!r}"
    if name in OPTIONS:
        classes = OPTIONS[name] if isinstance(OPTIONS[name], tuple) else (OPTIONS[name],)
        for field in (f for cls in classes for f in dataclasses.fields(cls)):
            assert field.metadata.get("help"), f"{name}: field {field.name} has no help"
            flag = field.name if field.metadata.get("positional") else f"--{field.name.replace('_', '-')}"
            assert flag in text, f"{name} --help lacks {flag}"


@pytest.mark.parametrize("script", sorted(str(p.relative_to(REPO)) for folder in ("scripts", "benchmarks")
                                           for p in (REPO / folder).glob("*.py")))
def test_every_script_prints_its_help_in_process(script):
    """scripts/*.py and benchmarks/*.py run as `python <folder>/<script> --help` (`help_text`: exit 0, the usage):
    the thin wrappers, the example generator and the repository's instruments (benchmarks, result collection, the
    tagging table) alike."""
    text = help_text(f"python {script}")
    assert not [forbidden for forbidden in FORBIDDEN_IN_HELP if forbidden in text]


# where command lines are written for a user or a maintainer to copy: the docs, the results page, the cards' sources,
# the example data's README, and the docstrings of the package, the instruments and the wrappers
DOCUMENTED = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "benchmarks" / "RESULTS.md",
              *sorted((REPO / "model_cards").rglob("*.md")), *sorted((REPO / "examples").rglob("*.md")),
              *sorted(p for folder in ("modeling_cove", "benchmarks", "scripts", "examples") for p in
                      (REPO / folder).rglob("*.py"))]
SCRIPT_FOLDERS = r"(?:benchmarks|scripts|examples/generator)/"
COMMAND = re.compile(r"(?<![\w./-])(" + "|".join(sorted(entry_points(), key=len, reverse=True))
                     + rf"|python {SCRIPT_FOLDERS}\w+\.py|-m modeling_cove\.training\.commands\.\w+)(?![\w.-])")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")
# the least each main page writes today (a page whose command lines the finder stopped seeing fails)
FLAGS_AT_LEAST = {"README.md": 3, "docs/commands.md": 100, "docs/tagging.md": 40, "benchmarks/RESULTS.md": 40,
                  "examples/README.md": 5}


def help_text(command: str) -> str:
    """The --help of an entry point (`cove-…` or `-m modeling_cove.training.commands.<module>`) or of a script
    (`python benchmarks/<x>.py`, `scripts/`, `examples/generator/`); it must exit 0."""
    points = entry_points()
    if command.startswith("-m "):
        command = next(name for name, target in points.items() if target.split(":")[0] == command[3:])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_info:
        if command in points:
            module_name, function = points[command].split(":")
            getattr(importlib.import_module(module_name), function)(["--help"])
        else:
            path = REPO / command.split()[1]
            saved, sys.argv = sys.argv, [str(path), "--help"]
            try:
                runpy.run_path(str(path), run_name="__main__")
            finally:
                sys.argv = saved
    assert exit_info.value.code == 0 and out.getvalue().startswith("usage: "), command
    return out.getvalue()


def documented_command_lines(text: str, code: bool) -> list:
    """(command, the text of its arguments) of every command line in `text`: in a code block (`code`: the whole
    text, a .py file) up to the line's end, a comment or the next command, across backslash continuations; in a
    backtick span up to its closing backtick. A name in prose outside both is not a command line."""
    text = re.sub(rf"\bpython\n[ \t]*(?={SCRIPT_FOLDERS})", "python ", text)  # a span wrapped after `python`
    found, lines, opened = [], text.split("\n"), 0  # backticks since the paragraph began (a span may wrap)
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            code, opened = not code, 0
            continue
        opened = 0 if not line.strip() else opened
        for match in COMMAND.finditer(line):
            rest, in_span = line[match.end():], (opened + line[:match.start()].count("`")) % 2 == 1
            if in_span:
                rest = "\n".join([rest, *lines[i + 1:i + 6]]).split("`")[0]
            elif code:
                j = i
                while rest.rstrip().endswith("\\") and j + 1 < len(lines):
                    j += 1
                    rest = rest.rstrip()[:-1] + " " + lines[j]
                rest = re.split(r"\s#|\||&&|;|`", rest)[0]
            else:
                continue
            following = COMMAND.search(rest)
            found.append((match.group(1), rest[:following.start()] if following else rest))
        opened += line.count("`")
    return found


def test_the_command_line_finder_reads_blocks_continuations_and_spans():
    text = ("  ```bash\ncove-train-mt --lr 1 \\\n    --resume  # not --this\ncove-demo --port 8 | tee --x\n"
            "python -m modeling_cove.training.commands.main_job.curve_worker --y\n  ```\n"
            "see `python benchmarks/collect_tagging.py --recipe\n--merge` and cove-main --quick in prose, `python\n"
            "scripts/train_qa.py --epochs 1`")
    found = [(command, FLAG.findall(arguments)) for command, arguments in documented_command_lines(text, code=False)]
    assert found == [("cove-train-mt", ["--lr", "--resume"]), ("cove-demo", ["--port"]),
                     ("python benchmarks/collect_tagging.py", ["--recipe", "--merge"]),
                     ("python scripts/train_qa.py", ["--epochs"])]
    assert "--lr" in help_text("cove-train-mt") and "--epochs" in help_text("python scripts/train_qa.py")


def test_documented_command_lines_use_only_their_commands_flags():
    """Every command line written in the docs, RESULTS.md, the cards' sources, the examples' README and the
    docstrings (`cove-…`, `python -m modeling_cove.training.commands.…`, `python benchmarks/….py`, `scripts/`,
    `examples/generator/`) uses only flags its command's --help lists: a renamed or removed flag cannot linger where
    a user copies it from."""
    helps, wrong, checked = {}, [], {}
    for path in DOCUMENTED:
        name = str(path.relative_to(REPO))
        for command, arguments in documented_command_lines(path.read_text(), code=path.suffix == ".py"):
            if command not in helps:
                helps[command] = set(FLAG.findall(help_text(command)))
            for flag in FLAG.findall(arguments):
                checked[name] = checked.get(name, 0) + 1
                if flag not in helps[command]:
                    wrong.append(f"{name}: {command} {flag}")
    assert wrong == []
    assert {name: checked.get(name, 0) for name in FLAGS_AT_LEAST} == {
        name: max(least, checked.get(name, 0)) for name, least in FLAGS_AT_LEAST.items()}, checked


@pytest.mark.parametrize("name", sorted(FLAGS_BEFORE))
def test_every_flag_spelled_as_before_is_accepted(name):
    parser = build_parser(OPTIONS[name])
    missing = [flag for flag in FLAGS_BEFORE[name].split() if f"--{flag}" not in parser._option_string_actions]
    assert missing == []


def test_mt_flags_are_its_fields_in_both_spellings():
    parser = build_parser(mt.MTArguments)
    for field in dataclasses.fields(mt.MTArguments):
        assert {f"--{field.name}", f"--{field.name.replace('_', '-')}"} <= set(parser._option_string_actions)
    # every training command takes --threads (cove-train-mt's field is num_threads, --threads its alias)
    assert parser._option_string_actions["--threads"].dest == "num_threads"


def test_values_parse_as_the_flags_mean(tmp_path):
    """Repeatable flags add up, `--tasks` alone is an empty list, negative switches, a positional argument,
    choices, lists of numbers."""
    texts = [str(tmp_path / name) for name in ("x.txt", "y.txt")]  # files that exist: --text-file checks
    for text in texts:
        Path(text).write_text("a text\n")
    args = parse_options(ppmi.PPMIArguments, ["--text-file", texts[0], "--tsv-column", "en", "--text-file", texts[1],
                                              "--tsv-column", "-", "--output", "v.txt", "--show", "good", "bad"])
    assert (args.text_file, args.tsv_column, args.show) == (texts, ["en", "-"], ["good", "bad"])
    assert parse_options(ppmi.PPMIArguments, ["--text-file", texts[0], "--output", "v"]).tsv_column == ["-"]

    built = parse_options(vocab.BuildVocabArguments, ["--output-dir", "o", "--vectors", "v", "--tasks",
                                                      "--text-file", texts[0], "--text-file", texts[1]])
    assert (built.tasks, built.text_file) == ([], texts)
    assert parse_options(vocab.BuildVocabArguments, ["--output-dir", "o", "--vectors", "v"]).tasks == ["multi30k"]

    settings, run = parse_options(OPTIONS["cove-train-bilm"], ["--init-from", "e", "--output-dir", "o",
                                                               "--no-residual", "--untie-softmax", "--cutoffs", "50",
                                                               "200", "--cpu", "--num-threads", "2"])
    assert (settings.residual, settings.tie_softmax, settings.cutoffs) == (False, False, [50, 200])
    assert (run.cpu, run.threads) == (True, 2)
    # one RunArguments for the scaffold's commands: --threads, with --num-threads kept as its alias
    for flag in ("--threads", "--num-threads", "--num_threads"):
        _, run = parse_options(OPTIONS["cove-train-tagger"], ["--task", "conll2000", "--encoder", "e", "--output-dir",
                                                                "o", flag, "3"])
        assert (run.threads, run.cpu) == (3, False)
    default, _ = parse_options(OPTIONS["cove-train-bilm"], ["--init-from", "e", "--output-dir", "o"])
    assert default == bilm.BiLMSettings(init_from="e", output_dir="o") and default.residual and default.tie_softmax

    published = parse_options(publish.PublishArguments, ["ckpt", "--repo-id", "org/x", "--eval-json", "e.json",
                                                         "--dry-run"])
    assert (published.checkpoint_dir, published.eval_json, published.dry_run) == (Path("ckpt"), Path("e.json"), True)

    options = parse_options(classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "enc", "--sampling",
                                                           "random", "--overwrite", "--train-fraction", "0.25"])
    assert (options.sampling, options.overwrite, options.train_fraction) == ("random", True, 0.25)
    assert options.output_dir == str(Path("runs") / "bcn" / "trec6" / "vectors+cove-seed1")  # under the current folder
    assert options.cache_dir == str(Path("runs") / "cove-features")
    assert parse_options(qa.QAOptions, ["--checkpoint", "c", "--output-dir", "o", "--model-override", "a=1",
                                        "b=2"]).model_override == ["a=1", "b=2"]


@pytest.mark.parametrize("options, argv, message", [
    (classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "e", "--max-eval-examples", "0"],
     "--max-eval-examples must be an integer >= 1, got 0"),
    (classifier.ClassifierOptions, ["--task", "trec7", "--encoder", "e"], "invalid choice"),
    (vocab.BuildVocabArguments, ["--output-dir", "o", "--vectors", "v", "--tasks", "trec7"],
     "unknown task 'trec7' in --tasks"),
    (ppmi.PPMIArguments, ["--text-file", "a", "--tsv-column", "x", "--tsv-column", "y", "--output", "o"],
     "1 --text-file but 2 --tsv-column"),
    (convert.ConvertArguments, ["--weights", "w", "--vectors", "v", "--output-dir", "o"],
     "give exactly one of --vocab-file, --tasks, --vocab-from-vectors (got none)"),
    (qa.QAOptions, ["--checkpoint", "c", "--output-dir", "o", "--cache-dtype", "int8"], "invalid choice"),
    (mt.MTArguments, ["--output-dir", "o", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    # a value outside a flag's range: named before any work, not a failure inside torch or an emptied data split
    (classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "e", "--batch-size", "0"],
     "--batch-size must be an integer >= 1, got 0"),
    (classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "e", "--learning-rate", "-1"],
     "--learning-rate must be > 0, got -1.0"),
    (classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "e", "--dropout", "1"],
     "--dropout must be in [0, 1), got 1.0"),
    (classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "e", "--epochs", "0"],
     "--epochs must be > 0, got 0.0"),
    (classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "e", "--limit", "0"],
     "--limit must be an integer >= 1, got 0"),
    (qa.QAOptions, ["--checkpoint", "c", "--output-dir", "o", "--limit-eval", "-1"],
     "--limit-eval must be an integer >= 1, got -1"),
    ((tagger.TaggerSettings, cli.RunArguments), ["--task", "conll2000", "--encoder", "e", "--output-dir", "o",
                                                 "--threads", "-1"], "--threads must be an integer >= 1, got -1"),
    ((tagger.TaggerSettings, cli.RunArguments), ["--task", "conll2000", "--encoder", "e", "--output-dir", "o",
                                                 "--limit-sentences", "0"],
     "--limit-sentences must be an integer >= 1"),
    (mt.MTArguments, ["--output-dir", "o", "--limit-train", "0"], "--limit-train must be an integer >= 1, got 0"),
    (ppmi.PPMIArguments, ["--text-file", "/no/such.txt", "--output", "o"],
     "--text-file must be an existing file, got '/no/such.txt'"),
    (demo.DemoArguments, ["--port", "70000"], "--port must be a port number in 1-65535, got 70000"),
    (qa.QAOptions, ["--checkpoint", "c", "--output-dir", "o", "--data-dir", "/no/such/folder"],
     "--data-dir must be an existing folder, got '/no/such/folder'"),
    (convert.ConvertArguments, ["--weights", "/no/such.pth", "--vectors", "v", "--output-dir", "o", "--vocab-file",
                                "w"], "--weights must be an existing file, got '/no/such.pth'"),
])
def test_bad_input_is_a_usage_error_naming_it(options, argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_options(options, argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_values_at_the_edge_of_a_flag_range_are_accepted(tmp_path):
    """The ranges' edges that are in: dropout 0, the highest port, a fraction of a minute, one thread; and a named
    pipe as an input file (`--text-file <(zcat texts.gz)`)."""
    options = parse_options(classifier.ClassifierOptions, ["--task", "trec6", "--encoder", "e", "--dropout", "0",
                                                           "--threads", "1", "--limit", "1"])
    assert (options.dropout, options.threads, options.limit) == (0.0, 1, 1)
    assert parse_options(demo.DemoArguments, ["--port", "65535"]).port == 65535
    assert parse_options(qa.QAOptions, ["--checkpoint", "c", "--output-dir", "o", "--time-budget-minutes",
                                        "0.5"]).time_budget_minutes == 0.5
    os.mkfifo(tmp_path / "texts")
    built = parse_options(vocab.BuildVocabArguments, ["--output-dir", "o", "--vectors", "v", "--text-file",
                                                      str(tmp_path / "texts")])
    assert built.text_file == [str(tmp_path / "texts")]


@pytest.mark.parametrize("command, train, argv", [
    (classifier, "train_classifier", ["--task", "trec6", "--encoder", "e"]),
    (qa, "train_qa", ["--checkpoint", "c", "--output-dir", "o"]),
])
def test_a_finished_run_exits_0(command, train, argv, monkeypatch):
    """A console entry point exits with what its `main` returns: a run's metrics returned there would print them on
    stderr and exit 1 after a run that went well."""
    monkeypatch.setattr(command, train, lambda options, command: {"accuracy": 0.9})
    assert command.main(argv) is None


def test_ppmi_vectors_of_no_text_end_in_one_line(tmp_path, capsys):
    """A file with no text (or no co-occurrence) is named in one line, exit 2, and no vector file is written."""
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(SystemExit) as exit_info:
        ppmi.main(["--text-file", str(tmp_path / "empty.txt"), "--output", str(tmp_path / "v.txt")])
    assert exit_info.value.code == 2 and capsys.readouterr().err == "error: no texts given\n"
    assert not (tmp_path / "v.txt").exists()


WATCH_TORCH = """
import os, sys
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch":  # what the policy is when torch starts loading is all we need: stop there
            print(os.environ.get("OMP_WAIT_POLICY"), "torch", flush=True)
            os._exit(0)
sys.meta_path.insert(0, Watch())
import {module}  # what the command imports first
print("torch was never imported")
"""


def test_the_benchmarks_settle_the_wait_policy_before_torch_loads():
    """The speed benchmarks (benchmarks/*.py import `instruments` first) get the package's policy too: `instruments`
    imports the package before anything imports torch, so its timings run under the policy their report records."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    code = WATCH_TORCH.format(module="instruments.common")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=REPO / "benchmarks", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["PASSIVE", "torch"]


@pytest.mark.parametrize("given, at_torch_import", [(None, "PASSIVE"), ("default", "None"), ("ACTIVE", "ACTIVE")])
def test_omp_wait_policy_is_settled_before_torch_loads(given, at_torch_import):
    """OpenMP reads OMP_WAIT_POLICY once, when torch loads it; an entry point imports the package (and torch) before
    its main() runs, so the package sets it first: PASSIVE unless given, and `default` leaves OpenMP's own."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = WATCH_TORCH.format(module="modeling_cove.training.commands.train_mt")  # cove-train-mt's first import
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [at_torch_import, "torch"]
