"""The run-metadata helpers every training CLI and benchmark records with: commit, command, machine, JSON, curves."""

import json
import subprocess

import pytest

from modeling_cove.training.common import run_info
from modeling_cove.training.common.presets import PresetError, load_preset, shipped_path
from modeling_cove.training.common.run_info import command_line, git_commit, machine_info, plot_curves
from modeling_cove.training.common.files import write_json


def test_git_commit_is_the_projects_own_or_the_installed_version(tmp_path, monkeypatch):
    commit = git_commit()
    assert len(commit.removesuffix("-dirty")) == 40 if run_info.source_checkout() else commit.endswith("(installed)")
    assert git_commit(tmp_path) == "unknown"  # not a checkout
    # a package that does not lie at the top of this project's own checkout records its version, never the commit
    # of the repository around it (here: a git repository the package is placed in, like a venv inside a project)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "some-other-project"\n')
    monkeypatch.setattr(run_info, "PACKAGE", tmp_path / "modeling_cove")
    assert run_info.source_checkout() is None
    assert git_commit() == f"modeling-cove {run_info.package_version()} (installed)"


def test_command_line_is_the_command_as_typed(tmp_path, monkeypatch):
    monkeypatch.chdir(run_info.PACKAGE.parent)
    assert command_line(["scripts/main.py", "--quick", "a b"]) == "python scripts/main.py --quick 'a b'"
    assert command_line([str(run_info.PACKAGE.parent / "scripts" / "main.py"), "--quick"]) == \
        "python scripts/main.py --quick"  # below the current directory: relative to it
    assert command_line([str(tmp_path / "venv" / "bin" / "cove-main"), "--quick"]) == "cove-main --quick"
    module = run_info.PACKAGE / "training" / "commands" / "train_mt.py"  # sys.argv[0] of `python -m modeling_cove.training.commands.train_mt`
    assert command_line([str(module), "--resume"]) == "python -m modeling_cove.training.commands.train_mt --resume"
    package = run_info.PACKAGE / "training" / "commands" / "main_job" / "__main__.py"
    assert command_line([str(package)]) == "python -m modeling_cove.training.commands.main_job"
    monkeypatch.chdir(tmp_path)
    assert command_line(["/elsewhere/tool.py", "-x"]) == "python /elsewhere/tool.py -x"
    assert command_line(["-c", "--quick"]) == "python -c '<code>' --quick"  # `python -c CODE --quick`


def test_machine_info_names_the_cpu_and_its_bf16_flags():
    info = machine_info()
    assert info["cpu"] and isinstance(info["avx512_flags"], list)
    assert info["avx512_bf16"] == ("avx512_bf16" in info["avx512_flags"])
    assert info["logical_cores"] >= 1 and info["torch"]


def test_write_json_is_atomic_and_readable(tmp_path):
    path = write_json(tmp_path / "sub" / "m.json", {"loss": [1.0, 0.5], "path": tmp_path})
    assert json.loads(path.read_text())["loss"] == [1.0, 0.5]
    assert not list(path.parent.glob("*.tmp"))


def test_plot_curves_writes_a_png_also_without_data(tmp_path):
    panels = [{"title": "loss", "series": {"train": ([1, 2, 3], [3.0, 2.0, 1.5]), "empty": ([], [])}, "log_y": True},
              {"title": "accuracy", "series": {}, "hlines": {"baseline": 50.0}},
              {"title": "nothing", "series": {}},
              {"title": "many", "series": {"a": ([1, 2], [90.0, 95.0]), "_a (seed 2)": ([1, 2], [89.0, 94.0])},
               "colors": {"a": "C1", "_a (seed 2)": "C1"}, "linestyles": {"_a (seed 2)": "--"}, "ylim": (80, 96),
               "legend_outside": True}]
    path = plot_curves(panels, tmp_path / "curves.png", title="run")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # one row by default; rows of `columns` (a last row's unused places blank): 5.5 x 4 inches a panel at 100 dpi
    assert png_size(path) == (2200, 400)
    assert png_size(plot_curves(panels[:3], tmp_path / "grid.png", columns=2)) == (1100, 800)


def png_size(path) -> tuple:
    """(width, height) of a PNG, from its IHDR chunk."""
    header = path.read_bytes()[16:24]
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


def test_load_preset_by_name_and_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # shipped presets are found from any folder
    preset = load_preset("embedded", "main", required_keys=("vectors", "vocab"))
    assert preset["name"] == "embedded" and preset["path"].endswith("embedded.yaml")
    model = load_preset("cove-small", "models")
    assert model["path"] == str(shipped_path("configuration/models/cove-small.json"))
    assert load_preset("configuration/models/cove-small.json", "models")["path"] == model["path"]
    custom = tmp_path / "p.json"
    custom.write_text('{"name": "x", "config": {}}')
    assert load_preset(str(custom), "models", known_keys={"name", "config"})["name"] == "x"


def test_load_preset_errors_name_the_file_and_key(tmp_path):
    with pytest.raises(PresetError, match="unknown main preset 'nope'.*embedded"):
        load_preset("nope", "main")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncolour: red\n")
    with pytest.raises(PresetError, match=r"bad.yaml: unknown preset keys \['colour'\]"):
        load_preset(str(bad), "main", known_keys={"name"})
    with pytest.raises(PresetError, match=r"missing preset keys \['vocab'\]"):
        load_preset(str(bad), "main", required_keys=("vocab",), known_keys=None)
