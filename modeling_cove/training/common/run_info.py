"""What every training run and benchmark records about itself, written once: the git commit (or the installed version),
the machine, the command line, an atomic JSON writer and one curve plot (loss / metric panels) as a PNG."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

__all__ = ["command_line", "git_commit", "machine_info", "package_version", "plot_curves", "source_checkout"]

PACKAGE = Path(__file__).resolve().parents[2]  # the imported modeling_cove package
DISTRIBUTION = "modeling-cove"


def package_version() -> str:
    """The installed distribution's version ("unknown" when the package runs from a tree that was never installed)."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def source_checkout() -> Path | None:
    """The git checkout of this project that the package was imported from (a source tree, an editable install), or
    None for an installed package: the folder above the package must be the top of a git work tree whose
    pyproject.toml names this distribution, so a wheel installed inside some other repository never counts."""
    root = PACKAGE.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or f'name = "{DISTRIBUTION}"' not in pyproject.read_text(encoding="utf-8"):
        return None
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return root if top.returncode == 0 and Path(top.stdout.strip()).resolve() == root else None


def git_commit(repo: Path | str | None = None) -> str:
    """The HEAD commit of `repo`, with "-dirty" when tracked files differ from it; "unknown" outside a checkout.
    Without `repo`: the commit of the project's own checkout the package was imported from, or for an installed
    package its version (e.g. "modeling-cove 0.1.0 (installed)"), never the commit of the folder a user stands in."""
    if repo is None:
        repo = source_checkout()
        if repo is None:
            return f"{DISTRIBUTION} {package_version()} (installed)"
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        if head.returncode != 0 or not head.stdout.strip():
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty else "")


def _program(path: str) -> list:
    """How a user retypes the program `path` (a process's `sys.argv[0]`): an entry point by its name (`cove-main`), a
    module of this package as `python -m modeling_cove...`, a script as `python <path>` (relative to the current
    directory when it lies below it). A process started as `python -c CODE` (sys.argv[0] "-c", the code not kept):
    `python -c <code>`."""
    if path == "-c":
        return ["python", "-c", "<code>"]
    file = Path(path)
    if file.suffix != ".py":
        return [file.name]
    resolved = file.resolve()
    if resolved.is_relative_to(PACKAGE):
        module = resolved.relative_to(PACKAGE.parent).with_suffix("").parts
        return ["python", "-m", ".".join(module[:-1] if module[-1] == "__main__" else module)]
    if resolved.is_relative_to(Path.cwd()):
        path = str(resolved.relative_to(Path.cwd()))
    return ["python", path]


def command_line(argv: list | None = None, program: str | None = None) -> str:
    """The command as a user would retype it (default: this process's `sys.argv`): `cove-main --quick`,
    `python -m modeling_cove.training.commands.train_mt ...` or `python scripts/main.py ...`, never the path of an entry point."""
    argv = list(sys.argv if argv is None else argv)
    return shlex.join([*_program(program or (argv[0] if argv else "")), *[str(a) for a in argv[1:]]])


def machine_info() -> dict:
    """The CPU (model name, family/model/stepping: VMs report one name for different generations, and the bf16
    flags that decide the LSTM kernel), cores, memory, library versions and the GPU when there is one."""
    import torch

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    fields = {}  # the first CPU's "key: value" lines
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    memory = None
    try:
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        memory = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        pass
    info = {
        "cpu": fields.get("model name", platform.processor() or "unknown"),
        "cpu_model": "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping")) if cpuinfo else "unknown",
        "avx512_flags": sorted(f for f in flags if f.startswith("avx512")),
        "avx2": "avx2" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "amx_bf16": "amx_bf16" in flags,
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_bytes": memory,
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default (unset)"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover - a dependency of the package
        pass
    if torch.cuda.is_available():
        info.update(gpu=torch.cuda.get_device_name(0), gpu_count=torch.cuda.device_count(),
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    return info


def plot_curves(panels: list, path: Path | str, title: str | None = None, columns: int | None = None) -> Path:
    """One PNG with a panel per entry of `panels`, each a dict:
    `{"title": str, "xlabel": str, "ylabel": str, "series": {label: (xs, ys)}, "errors": {label: y_errors},
    "log_x": bool, "log_y": bool, "hlines": {label: y}, "xticks": [x, ...], "colors": {label: color},
    "linestyles": {label: style}, "ylim": (low, high), "legend_outside": bool}` (all keys but "series" optional; a
    series with no points is skipped, a panel with none says "no data"; a series with errors gets error bars; a label
    starting with "_" stays out of the legend; `legend_outside` puts the legend right of the panel, for many series).
    The panels stand in one row, or in rows of `columns`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    width = max(1, min(columns or len(panels), len(panels)))
    rows = max(1, -(-len(panels) // width))
    fig, axes = plt.subplots(rows, width, figsize=(5.5 * width, 4 * rows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, panel in zip(axes.flat, panels):
        drawn = False
        for label, (xs, ys) in panel.get("series", {}).items():
            xs, ys = list(xs), list(ys)
            errors = (panel.get("errors") or {}).get(label)
            style = {"linestyle": "-"} | {key: panel[name][label] for key, name in (("color", "colors"),
                                                                                      ("linestyle", "linestyles"))
                                           if label in (panel.get(name) or {})}
            if xs and errors is not None:
                ax.errorbar(xs, ys, yerr=list(errors), marker="o", markersize=3, lw=1, capsize=3, label=label, **style)
                drawn = True
            elif xs:
                ax.plot(xs, ys, marker="o" if len(xs) <= 50 else None, markersize=3, lw=1, label=label, **style)
                drawn = True
        for label, y in (panel.get("hlines") or {}).items():
            ax.axhline(y, color="gray", linestyle="--", label=label)
            drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        else:
            if panel.get("log_y"):
                ax.set_yscale("log")
            if panel.get("log_x"):
                ax.set_xscale("log")
            if panel.get("xticks"):  # plain numbers where the points are (a log axis would print 6x10^1)
                ax.set_xticks(panel["xticks"], labels=[str(x) for x in panel["xticks"]])
                ax.minorticks_off()
            if panel.get("ylim"):
                ax.set_ylim(*panel["ylim"])
        ax.set(title=panel.get("title", ""), xlabel=panel.get("xlabel", ""), ylabel=panel.get("ylabel", ""))
        if drawn and panel.get("legend_outside"):
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
        elif drawn:
            ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
