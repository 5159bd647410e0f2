"""The shared parts every command uses, each the one home of its job: atomic writes (training/common/files.py), the
settings resolver (training/common/presets.py), the stop-reason wording (training/loops/stopping.py) and the text
readers (training/data/texts.py)."""

import gzip
import json
from pathlib import Path

import pytest

from modeling_cove.training.common import files
from modeling_cove.training.common.presets import PresetError, load_settings, resolve_settings
from modeling_cove.training.data.texts import corpus_texts, read_texts
from modeling_cove.training.loops import stopping


def test_atomic_text_file_keeps_the_old_file_when_writing_fails(tmp_path):
    path = files.write_text(tmp_path / "sub" / "a.txt", "old\n")
    assert path.read_text() == "old\n"
    with pytest.raises(RuntimeError, match="killed midway"):
        with files.atomic_text_file(path) as f:
            f.write("half of the new")
            raise RuntimeError("killed midway")
    assert path.read_text() == "old\n" and sorted(p.name for p in path.parent.iterdir()) == ["a.txt"]
    files.write_json(path, {"ü": 1})
    assert json.loads(path.read_text(encoding="utf-8")) == {"ü": 1} and "ü" in path.read_text(encoding="utf-8")


def test_a_folder_replaces_the_old_one_only_when_committed(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "old.txt").write_text("old")
    tmp = files.fresh_tmp(folder)
    assert tmp == tmp_path / "ckpt.tmp" and list(tmp.iterdir()) == []
    (tmp / "new.txt").write_text("new")
    assert (folder / "old.txt").is_file()  # untouched until the rename
    assert files.commit_tmp(tmp, folder) == folder
    assert sorted(p.name for p in folder.iterdir()) == ["new.txt"] and not tmp.exists()
    (files.fresh_tmp(folder) / "stale").write_text("x")
    assert list(files.fresh_tmp(folder).iterdir()) == []  # a leftover of a killed run is emptied


def test_file_problem_tells_a_checkpoint_file_cut_short_or_zero_filled(tmp_path):
    """Each format by its own structure: what a killed in-place write or a lost machine leaves is not whole."""
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.arange(6.0), "b": torch.ones(2)}, str(tmp_path / "model.safetensors"))
    torch.save({"state": {0: torch.ones(3)}}, tmp_path / "optimizer.pt")
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty.txt").write_text("")
    whole = ["model.safetensors", "optimizer.pt", "trainer_state.json", "notes.txt"]
    assert [files.file_problem(tmp_path / name) for name in whole] == [None] * 4
    assert files.file_problem(tmp_path / "empty.txt") == "empty"
    assert files.file_problem(tmp_path / "absent.pt") == "missing"
    reasons = {".safetensors": "not a whole safetensors file (it has", ".pt": "not a whole torch.save archive",
               ".json": "not valid JSON"}
    for name in whole[:3]:
        data = (tmp_path / name).read_bytes()
        (tmp_path / f"cut-{name}").write_bytes(data[:-3])
        (tmp_path / f"zeros-{name}").write_bytes(bytes(len(data)))
        assert reasons[Path(name).suffix] in files.file_problem(tmp_path / f"cut-{name}")
        assert files.file_problem(tmp_path / f"zeros-{name}"), name
    (tmp_path / "longer.safetensors").write_bytes((tmp_path / "model.safetensors").read_bytes() + b"\0")
    assert "extra bytes" in files.file_problem(tmp_path / "longer.safetensors")  # its header gives its length


def test_settings_are_defaults_then_preset_then_flags(tmp_path):
    defaults = {"epochs": 10, "lr": 1e-3, "dropout": 0.2}
    assert resolve_settings(defaults, {"epochs": 5, "path": "p.yaml"}, {"epochs": 3, "lr": None}) == {
        "epochs": 3, "lr": 1e-3, "dropout": 0.2}
    with pytest.raises(PresetError, match=r"p.yaml: unknown preset keys \['epocs'\]; known: \['dropout', 'epochs'"):
        resolve_settings(defaults, {"epocs": 5}, where="p.yaml")
    preset = tmp_path / "mine.yaml"
    preset.write_text("epochs: 4\ndescription: a test\n")
    settings, source, extra = load_settings(defaults, preset, "tagging", {"dropout": 0.5},
                                            extra_keys=("description",))
    assert settings == {"epochs": 4, "lr": 1e-3, "dropout": 0.5} and source == str(preset)
    assert extra == {"description": "a test"}


def test_an_optional_preset_may_be_absent_but_never_malformed(tmp_path):
    defaults = {"epochs": 10}
    assert load_settings(defaults, "no-such-task", "tagging", optional=True) == ({"epochs": 10}, "defaults", {})
    with pytest.raises(PresetError, match="unknown tagging preset 'no-such-task'"):
        load_settings(defaults, "no-such-task", "tagging")
    bad = tmp_path / "bad.yaml"
    bad.write_text("epoch: 4\n")
    with pytest.raises(PresetError, match=r"bad.yaml: unknown preset keys \['epoch'\]"):
        load_settings(defaults, bad, "tagging", optional=True)


def test_a_malformed_tagging_preset_is_an_error_not_the_defaults(tmp_path):
    """A tagger's preset with a typo used to fall back silently to the defaults; it is now refused, by name."""
    from modeling_cove.training.commands.train_tagger import TaggerSettings, load_hyperparameters

    bad = tmp_path / "conll2000.yaml"
    bad.write_text("epochs: 3\nlearning_rte: 0.1\n")
    with pytest.raises(PresetError, match=r"conll2000.yaml: unknown preset keys \['learning_rte'\]"):
        load_hyperparameters(TaggerSettings(task=["conll2000"], encoder="-", output_dir="-", preset=str(bad)))
    hub_task = load_hyperparameters(TaggerSettings(task=["hf:some/dataset@tags"], encoder="-", output_dir="-"))
    assert hub_task["source"] == "defaults" and hub_task["epochs"] == 20  # no preset of that name: the defaults
    shipped = load_hyperparameters(TaggerSettings(task=["conll2000"], encoder="-", output_dir="-", epochs=2))
    assert shipped["source"].endswith("conll2000.yaml") and shipped["epochs"] == 2


def test_one_wording_of_why_a_run_stopped():
    assert stopping.max_steps(20) == "max steps 20 reached"
    assert stopping.max_epochs(2.0) == stopping.max_epochs(2) == "max epochs 2 reached"
    assert stopping.time_budget(1, 61.4) == "time budget 1 min spent (61 s)"
    assert stopping.time_budget(2, 90, 50) == "time budget 2 min: another epoch of 50 s would exceed it"
    assert stopping.time_budget(0.5) == "time budget 0.5 min spent"
    assert stopping.min_lr(0.01, 0.03) == "lr 0.01 fell below min_lr 0.03"
    assert stopping.early_stopping(3, "score", "epochs") == "early stopping: no better validation score in 3 epochs"
    assert stopping.where(stopping.max_epochs(2), "10 steps") == "max epochs 2 reached (10 steps)"
    assert stopping.stopped_early(4, 10) == "stopped at step 4 of 10 by a callback"


def test_text_readers(tmp_path):
    lines = tmp_path / "texts.txt"
    lines.write_text("  first line \n\n second\r\n   \nthird", encoding="utf-8")
    assert read_texts(lines) == ["  first line ", " second", "third"]  # blank lines dropped, spaces kept
    assert corpus_texts(str(lines)) == ["first line", "second", "third"]  # a corpus: stripped
    tsv = tmp_path / "t.tsv"
    tsv.write_text("text\tlabel\na b\tpos\nc\tneg\n", encoding="utf-8")
    assert read_texts(tsv, "text") == ["a b", "c"]
    tsv.write_text("text\tlabel\na b\tpos\textra\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"t.tsv:2: expected 2 TAB-separated fields, got 3"):
        read_texts(tsv, "text")
    with pytest.raises(FileNotFoundError, match="no such text file"):
        read_texts(tmp_path / "absent.txt")


def test_compressed_text_opens_by_suffix(tmp_path):
    from modeling_cove.data import open_text

    path = tmp_path / "v.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("the 1 0\n")
    with open_text(path) as f:
        assert f.read() == "the 1 0\n"
    with pytest.raises(FileNotFoundError, match="data file not found"):
        open_text(tmp_path / "absent.gz")


def test_the_main_job_starts_commands_that_exist():
    """Every command the main job's stages start in a new interpreter (`runner.library_command`) is a module of
    training/commands/ with a `main` (a string-built module path survives no move on its own)."""
    import ast
    import importlib
    import inspect

    from modeling_cove.training.commands.main_job import runner, stages

    named = {node.args[0].value for node in ast.walk(ast.parse(inspect.getsource(stages)))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "library_command"}
    assert named == {"train_mt", "train_classifier", "push_to_hub"}
    for command in named:
        argv = runner.library_command(command)
        assert argv[1] == "-m" and callable(importlib.import_module(argv[2]).main)
