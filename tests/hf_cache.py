"""Build an offline Hugging Face Hub cache by hand, so tests can load `"org/name"` exactly as users type it.

The layout is the one `huggingface_hub` writes when it downloads a repo (docs/transformers_notes.md):

    $HF_HOME/hub/models--org--name/refs/<revision>          one line: the commit id
    $HF_HOME/hub/models--org--name/snapshots/<commit>/...   the repo's files

With `HF_HOME` pointing there and `HF_HUB_OFFLINE=1`, `AutoModel.from_pretrained("org/name")` resolves the repo id
from this cache without any network access (the unchanged user code path). huggingface_hub and transformers read
`HF_HOME` when they are imported, so use it in a subprocess started with `offline_env(hf_home)`.
"""

import hashlib
import os
import shutil
from pathlib import Path
from typing import Iterable, Optional

__all__ = ["build_offline_cache", "cache_repo_dir", "offline_env"]


def cache_repo_dir(hf_home: Path, repo_id: str) -> Path:
    """`$HF_HOME/hub/models--org--name` for a model repo id `org/name`."""
    if repo_id.count("/") != 1:
        raise ValueError(f"repo_id must be 'namespace/name', got {repo_id!r}")
    return Path(hf_home) / "hub" / ("models--" + repo_id.replace("/", "--"))


def _commit_id(files_dir: Path) -> str:
    """A deterministic 40-hex 'commit' id derived from the files' paths and contents."""
    digest = hashlib.sha1()
    for path in sorted(p for p in files_dir.rglob("*") if p.is_file()):
        digest.update(path.relative_to(files_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build_offline_cache(
    hf_home: Path,
    repo_id: str,
    files_dir: Path,
    revision: str = "main",
    commit: Optional[str] = None,
    missing: Iterable[str] = (),
) -> Path:
    """Put every file under `files_dir` into the cache of model repo `repo_id` at `revision`.

    `missing`: repo paths recorded as absent (`.no_exist/<commit>/<path>`), as huggingface_hub records a file the Hub
    answered 404 for. transformers probes some optional files and accepts their absence online; offline it needs
    this record (e.g. `AutoTokenizer.from_pretrained(repo, subfolder="target_tokenizer")` probes
    `target_tokenizer/config.json`).

    Returns the snapshot folder (`.../snapshots/<commit>`). Several repos (or revisions) can share one `hf_home`.
    """
    files_dir = Path(files_dir)
    if not files_dir.is_dir():
        raise FileNotFoundError(f"no such folder to cache: {files_dir}")
    if not any(p.is_file() for p in files_dir.rglob("*")):
        raise ValueError(f"{files_dir} holds no files")
    commit = commit or _commit_id(files_dir)
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise ValueError(f"commit must be 40 lowercase hex digits, got {commit!r}")
    repo_dir = cache_repo_dir(hf_home, repo_id)
    snapshot = repo_dir / "snapshots" / commit
    if snapshot.exists():
        shutil.rmtree(snapshot)
    shutil.copytree(files_dir, snapshot)
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / revision).write_text(commit)  # no trailing newline, as huggingface_hub writes it
    for path in missing:
        if (snapshot / path).exists():
            raise ValueError(f"{path} is in {files_dir}: it cannot also be recorded as missing")
        marker = repo_dir / ".no_exist" / commit / path
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return snapshot


def offline_env(hf_home: Path, base: Optional[dict] = None) -> dict:
    """Environment for a subprocess that must use only the cache in `hf_home` (no network)."""
    env = dict(os.environ if base is None else base)
    env.update({
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "TOKENIZERS_PARALLELISM": "false",
    })
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_MODULES_CACHE"):
        env.pop(key, None)  # everything under HF_HOME
    return env
