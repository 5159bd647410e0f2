"""Publishing a trained CoVe checkpoint to the Hugging Face Hub: check, stage, verify, upload.

1. Check everything locally (no network): the repo id, the checkpoint (config.json of a CoVe model, safetensors
   weights — pickled `.bin`/`.pt` weights are refused —, a tokenizer; for translation models also
   `target_tokenizer/`), the evaluation JSON (`cards`; its fingerprint must be this checkpoint's config and weights),
   the curve PNG, and a token (unless it is a dry run).
2. `assemble` a Hub-ready folder: the weights, `config.json` with the `auto_map` (and, for a question-answering or
   tagging model, `custom_pipelines`) and the flat remote-code `.py` files from `modeling_cove.hub`'s manifest (as
   `save_pretrained` ships them), the tokenizer files, the generated model card `README.md`, the training curve
   (`training_curve.png`) and the evaluation JSON (`eval_results.json`).
3. `verify_staging`: load the assembled folder back with the package (no missing/unexpected weights, tokenizer size
   = vocab size, one forward pass).
4. `upload` with `huggingface_hub`: `create_repo(exist_ok=True)`, `create_branch` for a revision, `upload_folder`.

`publish` runs the four steps; the command line `cove-push-to-hub` calls it.
"""

import json
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ...hub import MANIFEST, checkpoint_code
from .cards import (
    DEFAULT_LICENSE,
    METRIC_NAMES,
    PICKLE_SUFFIXES,
    CardError,
    CheckpointError,
    EvalRecordError,
    build_card,
    check_record_matches_checkpoint,
    checkpoint_fingerprint,
    find_safetensors_weights,
    load_eval_json,
    read_config,
)

__all__ = ["assemble", "check_checkpoint", "check_curve", "count_parameters", "default_commit_message", "describe",
           "hub_config", "human_size", "load_record", "prepare_output_dir", "Publication", "publish", "PublishError",
           "resolve_token", "skipped_files", "StagedFile", "Staging", "upload", "UploadError", "validate_repo_id",
           "validate_revision", "verify_staging"]

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
REQUIRED_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
EXTRA_CONFIG_FILES = ("generation_config.json",)
TARGET_TOKENIZER_DIR = "target_tokenizer"  # modeling_cove_mt.TARGET_TOKENIZER_SUBFOLDER
CURVE_NAME = "training_curve.png"
EVAL_NAME = "eval_results.json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PublishError(ValueError):
    """Bad input to `publish`, reported before anything is uploaded."""


@dataclass
class StagedFile:
    path_in_repo: str
    size: int
    source: str


@dataclass
class Staging:
    folder: Path
    repo_id: str
    architecture: str
    record: dict
    files: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (file name in the checkpoint, reason)

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)


# ----------------------------------------------------------------------------------------------------------------
# Input checks (all local)
# ----------------------------------------------------------------------------------------------------------------


def validate_repo_id(repo_id: str) -> str:
    """`namespace/name` (the namespace is required), by the Hub's naming rules as huggingface_hub checks them."""
    from huggingface_hub.utils import HFValidationError
    from huggingface_hub.utils import validate_repo_id as check_hub_rules

    if not isinstance(repo_id, str) or repo_id.count("/") != 1:
        raise PublishError(f"malformed repo id {repo_id!r}: expected 'namespace/name', e.g. 'my-org/cove-large'")
    try:
        check_hub_rules(repo_id)
    except HFValidationError as err:
        raise PublishError(f"malformed repo id {repo_id!r}: {err}") from None
    return repo_id


def validate_revision(revision: Optional[str]) -> Optional[str]:
    if revision is None:
        return None
    if (not revision or any(c.isspace() for c in revision) or ".." in revision or revision.startswith(("-", "/"))
            or revision.endswith(("/", ".lock")) or any(c in revision for c in "~^:?*[\\")):
        raise PublishError(f"invalid --revision {revision!r}: not a valid git branch name")
    return revision


def resolve_token(token: Optional[str]) -> str:
    """--token, else HF_TOKEN, else the stored login; a clear error when there is none."""
    if token:
        return token
    from huggingface_hub import get_token

    found = get_token()
    if not found:
        raise PublishError(
            "no Hugging Face token: pass --token, set HF_TOKEN, or log in with `hf auth login` "
            "(a token with write access to the namespace is needed to create the repo and upload)"
        )
    return found


def check_checkpoint(checkpoint_dir: Path) -> tuple:
    """(config, safetensors files, tokenizer files) of a publishable CoVe checkpoint, or a `PublishError`."""
    if not checkpoint_dir.is_dir():
        raise PublishError(f"checkpoint directory not found: {checkpoint_dir}")
    try:
        config = read_config(checkpoint_dir)
        weights = find_safetensors_weights(checkpoint_dir)
    except CheckpointError as err:
        raise PublishError(str(err)) from None
    if config.get("model_type") != "cove":
        raise PublishError(f"{checkpoint_dir}/config.json has model_type {config.get('model_type')!r}, expected 'cove'")
    if not config.get("architectures"):
        raise PublishError(f"{checkpoint_dir}/config.json names no architecture; save it with save_pretrained")
    missing = [name for name in REQUIRED_TOKENIZER_FILES if not (checkpoint_dir / name).is_file()]
    if missing:
        raise PublishError(
            f"checkpoint {checkpoint_dir} has no tokenizer (missing {', '.join(missing)}): save it next to the "
            "weights with `tokenizer.save_pretrained(checkpoint_dir)`"
        )
    tokenizer_files = [checkpoint_dir / name for name in TOKENIZER_FILES if (checkpoint_dir / name).is_file()]
    if config["architectures"][0] == "CoveForMachineTranslation":
        target = checkpoint_dir / TARGET_TOKENIZER_DIR
        missing = [name for name in REQUIRED_TOKENIZER_FILES if not (target / name).is_file()]
        if missing:
            raise PublishError(
                f"translation checkpoint {checkpoint_dir} has no target tokenizer ({TARGET_TOKENIZER_DIR}/ lacks "
                f"{', '.join(missing)})"
            )
        tokenizer_files += [target / name for name in TOKENIZER_FILES if (target / name).is_file()]
    return config, weights, tokenizer_files


def check_curve(curve: Optional[Path]) -> Optional[Path]:
    if curve is None:
        return None
    if not curve.is_file():
        raise PublishError(f"training curve not found: {curve}")
    with open(curve, "rb") as handle:
        if handle.read(8) != PNG_SIGNATURE:
            raise PublishError(f"training curve {curve} is not a PNG file")
    return curve


def load_record(eval_json: Path, checkpoint_dir: Path) -> dict:
    try:
        record = load_eval_json(eval_json)
        check_record_matches_checkpoint(record, checkpoint_dir)
    except (EvalRecordError, CheckpointError) as err:
        raise PublishError(str(err)) from None
    return record


# ----------------------------------------------------------------------------------------------------------------
# Remote code: auto_map, code files, custom pipelines
# ----------------------------------------------------------------------------------------------------------------


def hub_config(config: dict) -> tuple:
    """(config.json as published, code files): the `auto_map`, `custom_pipelines` and code files of the checkpoint's
    architecture from the installed package's manifest (`modeling_cove.hub.checkpoint_code`), as `save_pretrained`
    writes them."""
    try:
        code = checkpoint_code(config["architectures"][0], encoder_type=config.get("encoder_type", "mt_lstm"))
    except ValueError as err:
        raise PublishError(f"a Hub user could not load this checkpoint with trust_remote_code=True: {err}") from None
    config = dict(config)
    config["auto_map"] = dict(code.auto_map)
    if code.custom_pipelines:
        config["custom_pipelines"] = code.custom_pipelines
    else:
        config.pop("custom_pipelines", None)
    return config, list(code.files)


def count_parameters(weight_files: list) -> int:
    from safetensors import safe_open

    total = 0
    for path in weight_files:
        if path.suffix != ".safetensors":
            continue
        with safe_open(str(path), framework="pt") as handle:
            for key in handle.keys():
                total += math.prod(handle.get_slice(key).get_shape())
    return total


# ----------------------------------------------------------------------------------------------------------------
# Assembling and checking the folder
# ----------------------------------------------------------------------------------------------------------------


def prepare_output_dir(output_dir: Optional[Path]) -> Path:
    if output_dir is None:
        return Path(tempfile.mkdtemp(prefix="cove-hub-"))
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        raise PublishError(f"the staging folder {output_dir} (--output-dir) exists and is not empty: give a new or "
                           "empty folder")
    output_dir.mkdir(parents=True, exist_ok=True)
    return output_dir


def assemble(
    checkpoint_dir: Path,
    eval_json: Path,
    repo_id: str,
    output_dir: Optional[Path] = None,
    curve: Optional[Path] = None,
    license: str = DEFAULT_LICENSE,
) -> Staging:
    """Check the inputs and build the Hub-ready folder (no network)."""
    checkpoint_dir, eval_json = Path(checkpoint_dir), Path(eval_json)
    validate_repo_id(repo_id)
    config, weights, tokenizer_files = check_checkpoint(checkpoint_dir)
    record = load_record(eval_json, checkpoint_dir)
    curve = check_curve(Path(curve) if curve is not None else None)
    published_config, code_files = hub_config(config)

    folder = prepare_output_dir(Path(output_dir) if output_dir is not None else None)
    staging = Staging(folder=folder, repo_id=repo_id, architecture=config["architectures"][0], record=record)

    def add(source: Path, path_in_repo: str):
        target = folder / path_in_repo
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        staging.files.append(StagedFile(path_in_repo, target.stat().st_size, str(source)))

    for path in weights:
        add(path, path.name)
    for path in tokenizer_files:
        add(path, path.relative_to(checkpoint_dir).as_posix())
    for name in EXTRA_CONFIG_FILES:
        if (checkpoint_dir / name).is_file():
            add(checkpoint_dir / name, name)
    for path in code_files:
        add(path, path.name)
    if curve is not None:
        add(curve, CURVE_NAME)
    add(eval_json, EVAL_NAME)

    (folder / "config.json").write_text(json.dumps(published_config, indent=2, sort_keys=True) + "\n",
                                        encoding="utf-8")
    staging.files.append(StagedFile("config.json", (folder / "config.json").stat().st_size,
                                    f"{checkpoint_dir / 'config.json'} + auto_map"))

    try:
        card = build_card(record, published_config, repo_id, license=license,
                          curve_filename=CURVE_NAME if curve is not None else None,
                          num_parameters=count_parameters(weights), eval_json_name=EVAL_NAME)
    except CardError as err:
        raise PublishError(f"cannot write the model card: {err}") from None
    card.save(folder / "README.md")
    staging.files.append(StagedFile("README.md", (folder / "README.md").stat().st_size, f"generated from {eval_json}"))
    staging.skipped = skipped_files(checkpoint_dir, {f.path_in_repo for f in staging.files}, eval_json)

    # self-check: staging changed neither the config (beyond auto_map/custom_pipelines) nor the weights
    if checkpoint_fingerprint(folder) != checkpoint_fingerprint(checkpoint_dir):
        raise PublishError("internal error: the assembled folder's fingerprint differs from the checkpoint's")
    return staging


def skipped_files(checkpoint_dir: Path, staged: set, eval_json: Path) -> list:
    """(file, reason) for every file of the checkpoint folder that is not published."""
    skipped = []
    for path in sorted(checkpoint_dir.rglob("*")):
        relative = path.relative_to(checkpoint_dir).as_posix()
        if path.is_file() and relative not in staged and path.resolve() != eval_json.resolve():
            reason = "pickled weights are never published" if path.suffix in PICKLE_SUFFIXES \
                else "the code files come from the installed package" if path.suffix == ".py" \
                else "not part of a Hub model repo"
            skipped.append((relative, reason))
    return skipped


def verify_staging(staging: Staging) -> dict:
    """Load the folder with the package exactly as a user would and run one sentence through the encoder."""
    try:
        return _verify_staging(staging)
    except PublishError:
        raise
    except Exception as err:  # noqa: BLE001  (any failure to load means: do not upload)
        raise PublishError(f"the assembled folder {staging.folder} does not load: {type(err).__name__}: {err}") from err


def _verify_staging(staging: Staging) -> dict:
    import torch
    import transformers
    from transformers import AutoTokenizer

    import modeling_cove  # noqa: F401  (registers the Auto classes)

    folder = str(staging.folder)
    config = json.loads((staging.folder / "config.json").read_text(encoding="utf-8"))
    auto_name = MANIFEST[staging.architecture].auto_class
    model, info = getattr(transformers, auto_name).from_pretrained(folder, output_loading_info=True)
    problems = {key: value for key, value in info.items() if value and key != "error_msgs"} 
    if problems or info.get("error_msgs"):
        raise PublishError(f"the assembled checkpoint does not load cleanly with {auto_name}: {info}")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if len(tokenizer) != config["vocab_size"]:
        raise PublishError(f"the tokenizer has {len(tokenizer)} tokens but the model's vocab_size is "
                           f"{config['vocab_size']}: tokenizer and weights do not belong together")
    if staging.architecture == "CoveForMachineTranslation":
        target = AutoTokenizer.from_pretrained(folder, subfolder=TARGET_TOKENIZER_DIR)
        if len(target) != config["target_vocab_size"]:
            raise PublishError(f"the target tokenizer has {len(target)} tokens but target_vocab_size is "
                               f"{config['target_vocab_size']}: tokenizer and weights do not belong together")
    encoder = getattr(model, model.base_model_prefix, model)
    batch = tokenizer(["the cat sat on the mat ."], return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        output = encoder(**batch)
    return {"auto_class": auto_name, "encoder_output_shape": tuple(output.last_hidden_state.shape)}


# ----------------------------------------------------------------------------------------------------------------
# Upload
# ----------------------------------------------------------------------------------------------------------------


def default_commit_message(staging: Staging) -> str:
    record = staging.record
    metrics = ", ".join(f"{METRIC_NAMES.get(m['type'], m['type'])} {m['value']:.2f}" for m in record["metrics"])
    return f"Upload {staging.architecture} ({record['dataset']['name']} {record['dataset']['split']}: {metrics})"


def upload(
    staging: Staging,
    *,
    token: str,
    private: bool = False,
    revision: Optional[str] = None,
    commit_message: Optional[str] = None,
    endpoint: Optional[str] = None,
):
    """create_repo (exist_ok) -> create_branch (for a revision other than main) -> upload_folder."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    # private=None (not False) without --private: the namespace's default visibility applies to a new repo
    repo_url = api.create_repo(staging.repo_id, private=True if private else None, exist_ok=True, repo_type="model")
    if revision not in (None, "main"):
        api.create_branch(staging.repo_id, branch=revision, exist_ok=True, repo_type="model")
    return repo_url, api.upload_folder(
        repo_id=staging.repo_id,
        folder_path=str(staging.folder),
        repo_type="model",
        revision=revision,
        commit_message=commit_message or default_commit_message(staging),
        commit_description=f"Generated by modeling_cove.training.publishing.publish; weights sha256 "
                           f"{staging.record['model']['weights_sha256']}.",
    )


def human_size(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024


def describe(staging: Staging, revision: Optional[str], private: bool, commit_message: str, endpoint: str) -> str:
    width = max(len(f.path_in_repo) for f in staging.files)
    visibility = "private" if private else "the namespace's default visibility"
    lines = [f"repo:     {endpoint.rstrip('/')}/{staging.repo_id} ({visibility} if created)",
             f"revision: {revision or 'main'}",
             f"commit:   {commit_message}",
             f"folder:   {staging.folder}",
             f"files ({len(staging.files)}, {human_size(staging.total_size)}):"]
    lines += [f"  {f.path_in_repo:<{width}}  {human_size(f.size):>10}" for f in sorted(staging.files,
                                                                                     key=lambda f: f.path_in_repo)]
    if staging.skipped:
        lines.append("not uploaded:")
        lines += [f"  {name}  ({reason})" for name, reason in staging.skipped]
    return "\n".join(lines)


class UploadError(PublishError):
    """The Hub refused the upload (the assembled folder is kept)."""


@dataclass
class Publication:
    staging: Staging
    check: dict
    commit_url: Optional[str] = None  # None for a dry run


def publish(
    checkpoint_dir,
    eval_json,
    repo_id: str,
    *,
    curve=None,
    license: str = DEFAULT_LICENSE,
    output_dir=None,
    dry_run: bool = False,
    token: Optional[str] = None,
    private: bool = False,
    revision: Optional[str] = None,
    commit_message: Optional[str] = None,
    endpoint: Optional[str] = None,
    log: Callable[[str], None] = print,
) -> Publication:
    """Check, assemble and verify the Hub folder of `checkpoint_dir`, then upload it (unless `dry_run`).

    Raises `PublishError` for bad input (before any request) and `UploadError` when the Hub refuses the upload.
    A temporary staging folder (no `output_dir`) is removed after a successful upload.
    """
    from huggingface_hub import constants

    validate_repo_id(repo_id)
    validate_revision(revision)
    token = None if dry_run else resolve_token(token)
    staging = assemble(checkpoint_dir, eval_json, repo_id, output_dir=output_dir, curve=curve, license=license)
    check = verify_staging(staging)
    message = commit_message or default_commit_message(staging)
    log(describe(staging, revision, private, message, endpoint or constants.ENDPOINT))
    log(f"checked: loads with {check['auto_class']}, encoder output {check['encoder_output_shape']}")
    if dry_run:
        log("dry run: nothing uploaded")
        return Publication(staging, check)
    from huggingface_hub.errors import HfHubHTTPError

    try:
        repo_url, commit = upload(staging, token=token, private=private, revision=revision, commit_message=message,
                                  endpoint=endpoint)
    except HfHubHTTPError as err:
        raise UploadError(f"the Hub refused the upload: {err}\n(the assembled folder is kept in {staging.folder})") \
            from err
    log(f"uploaded to {repo_url} ({revision or 'main'}): {commit.commit_url}")
    if output_dir is None:
        shutil.rmtree(staging.folder, ignore_errors=True)
    return Publication(staging, check, commit.commit_url)
