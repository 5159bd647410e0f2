"""The package works installed, with no checkout: its wheel is built from this source tree, installed into a fresh
virtual environment in a temporary folder, and used from another temporary folder.

- The new environment sees the test environment's dependencies (a .pth file listing its site-packages folders) but
  not the editable install of this checkout (its finder is set up by a .pth file of the test environment, which the
  listed folders do not run): `modeling_cove` is imported from the new environment, as asserted first.
- Every console entry point of the distribution (read from its installed metadata) answers `--help` with exit 0: all
  of them in one interpreter of the new environment, and `cove-main` also through its console script.
- `cove-main --quick --threads 1` runs the main job to the end, once, from a folder that is a git repository of its
  own and holds a `modeling_cove/` source folder (a user inside a clone who installed the wheel): its outputs go under
  that folder, its stages run the installed package, and its report records the installed version, not that
  repository's commit.
- No installed file and no `--help` text names `shared/`, `../` or this checkout's path.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from test_cli import OPTIONS

pytestmark = pytest.mark.slow  # a wheel built and installed, the main job run

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = ("shared/", "../", str(REPO))
NOT_SOURCE = ("*.egg-info", "__pycache__", ".*", "build", "dist", "runs", "benchmarks", "tests")


def run(argv, cwd, env, timeout=600):
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the source tree (so that the build leaves nothing in the checkout), built offline with
    the test environment's setuptools."""
    source = tmp / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                 "--wheel-dir", tmp / "dist", source], cwd=tmp, env=dict(os.environ))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("modeling_cove-*.whl")
    return wheel


def make_venv(tmp: Path, wheel: Path) -> Path:
    """A fresh venv that sees the test environment's packages (not its editable install) with the wheel installed."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp,
                    dict(os.environ)).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "test_environment.pth").write_text("\n".join(sorted(ours)) + "\n")
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel],
                    cwd=tmp, env=dict(os.environ))
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


def clean_env(venv: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv), HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", HF_EVALUATE_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("installed")
    venv = make_venv(tmp, build_wheel(tmp))
    work = tmp / "work"  # where the user stands: a git repository of its own, to show its commit is not recorded
    work.mkdir()
    env = clean_env(venv)
    for argv in (["git", "init", "-q"], ["git", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q",
                                         "--allow-empty", "-m", "the user's own repository"]):
        subprocess.run(argv, cwd=work, check=True, env=env, capture_output=True, timeout=60)
    probe = run([venv / "bin" / "python", "-c",
                 "import json, importlib.metadata as m, modeling_cove; d = m.distribution('modeling-cove'); "
                 "print(json.dumps({'file': modeling_cove.__file__, 'version': d.version, 'scripts': "
                 "sorted(e.name for e in d.entry_points if e.group == 'console_scripts')}))"], work, env)
    assert probe.returncode == 0, probe.stderr[-3000:]
    return {"venv": venv, "work": work, "env": env, **json.loads(probe.stdout.strip().splitlines()[-1])}


def test_the_package_is_imported_from_the_new_environment(installed):
    assert Path(installed["file"]).is_relative_to(installed["venv"]), installed["file"]
    assert "cove-main" in installed["scripts"] and len(installed["scripts"]) > 1


def test_no_installed_file_names_a_folder_a_user_does_not_have(installed):
    package = Path(installed["file"]).parent
    offending = []
    for path in sorted(package.rglob("*")):
        if path.is_file() and path.suffix not in (".pyc",):
            text = path.read_bytes().decode("utf-8", errors="ignore")
            offending += [f"{path.relative_to(package)}: {word!r}" for word in FORBIDDEN if word in text]
    assert not offending, offending
    shipped = {str(p.relative_to(package)) for p in package.rglob("*") if p.is_file()}
    assert {"configuration/main/embedded.yaml", "configuration/models/cove-small.json", "examples/en_de/train.tsv",
            "examples/sentiment/test.tsv", "training/publishing/card_template.md",
            "training/publishing/card_loading.jinja", "configuration/tagging/conll2000.yaml",
            "metrics/seqeval_cove/seqeval_cove.py"} <= shipped
    assert not any(name.startswith("examples/generator") for name in shipped)  # the generator stays in the repository
    source_packages = {str(p.parent.relative_to(REPO / "modeling_cove")) for p in (REPO / "modeling_cove").rglob(
        "__init__.py")}
    assert source_packages <= {str(Path(name).parent) for name in shipped if name.endswith("__init__.py")}


def flags_of(options_class) -> list:
    """The flags of an options dataclass as its --help spells them (`--output_dir`; positional fields by name)."""
    return [field.name if field.metadata.get("positional") else f"--{field.name}"
            for field in dataclasses.fields(options_class)]


HELP_OF_EVERY_ENTRY_POINT = """
import contextlib, importlib.metadata as metadata, io, json, sys
answers = {}
for entry in metadata.distribution("modeling-cove").entry_points:
    if entry.group != "console_scripts":
        continue
    sys.argv, out, code = [entry.name, "--help"], io.StringIO(), None
    with contextlib.redirect_stdout(out):
        try:
            entry.load()(["--help"])
        except SystemExit as stop:
            code = stop.code
    answers[entry.name] = {"code": code, "text": out.getvalue()}
print(json.dumps(answers))
"""


def test_every_entry_point_answers_help(installed):
    """Each entry point's `main(["--help"])` in one interpreter of the new environment, as its console script calls
    it; `cove-main` also through the script itself."""
    result = run([installed["venv"] / "bin" / "python", "-c", HELP_OF_EVERY_ENTRY_POINT], installed["work"],
                 installed["env"])
    assert result.returncode == 0, result.stderr[-3000:]
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(answers) == installed["scripts"]
    options_of = {name: cls if isinstance(cls, tuple) else (cls,) for name, cls in OPTIONS.items()}
    script = run([installed["venv"] / "bin" / "cove-main", "--help"], installed["work"], installed["env"])
    assert script.returncode == 0 and script.stdout == answers["cove-main"]["text"], script.stderr[-2000:]
    for name, answer in answers.items():
        assert answer["code"] in (0, None), (name, answer)
        assert answer["text"].startswith("usage: " + name), (name, answer["text"][:200])
        flags = [flag for cls in options_of.get(name, ()) for flag in flags_of(cls)]
        assert [flag for flag in flags if flag not in answer["text"]] == [], name  # every option a user needs
        assert not [word for word in FORBIDDEN if word in answer["text"]], (name, answer["text"])


def test_the_main_job_runs_from_another_folder(installed):
    """One run of the main job where the user stands: a git repository of its own holding a `modeling_cove/` source
    folder (a user inside a clone who installed the wheel: the stages' `python -m` would put that folder first on
    sys.path; they run the installed package)."""
    work, env = installed["work"] / "clone", installed["env"]  # inside the user's repository
    shutil.copytree(REPO / "modeling_cove", work / "modeling_cove", ignore=shutil.ignore_patterns("__pycache__"))
    result = run(["cove-main", "--quick", "--threads", "1"], work, env, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr
    report = json.loads((work / "runs" / "main" / "report.json").read_text())  # outputs under the current folder
    assert report["command"] == "cove-main --quick --threads 1"
    assert report["git"] == f"modeling-cove {installed['version']} (installed)"
    users_commit = run(["git", "rev-parse", "HEAD"], work, env).stdout.strip()
    assert users_commit not in json.dumps(report)
    assert all(report["stages"][stage]["status"] == "done" for stage in report["stages"])
    assert report["settings"]["tasks"][0]["data"].startswith(str(installed["venv"]))  # the shipped example data
    assert (work / "runs" / "main" / "publish" / "sentiment" / "hub" / "model.safetensors").is_file()
    assert str(REPO) not in result.stdout


def test_a_source_tree_on_the_path_reads_its_own_configuration(installed):
    """`modeling_cove` imported from a source tree that is not installed (PYTHONPATH=<checkout>, or `python -m` inside
    a checkout on a Python without PYTHONSAFEPATH) finds the presets and example data of that tree."""
    env = {**installed["env"], "PYTHONPATH": str(REPO)}
    code = ("import modeling_cove, json; from modeling_cove.training.common import presets; "
            "print(json.dumps([modeling_cove.__file__, str(presets.CONFIGURATION), "
            "str(presets.shipped_path('examples/en_de')), presets.load_preset('cove-small', 'models')['path']]))")
    result = run([installed["venv"] / "bin" / "python", "-c", code], installed["work"], env)
    assert result.returncode == 0, result.stderr[-3000:]
    package, configuration, examples, preset = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(package).is_relative_to(REPO)
    assert configuration == str(REPO / "configuration") and examples == str(REPO / "examples" / "en_de")
    assert preset == str(REPO / "configuration" / "models" / "cove-small.json")
