"""Hub packaging: which flat code files each class needs, and what a saved checkpoint advertises and ships.

A checkpoint loads without this package (`trust_remote_code=True`) because its config.json names each class in
`auto_map` and the code files defining those classes lie next to the weights. `MANIFEST` lists, for every class a
checkpoint can advertise, its Auto class and the files its module imports from this folder, transitively (its own
file included); `PIPELINES` does the same for the custom pipeline a checkpoint of one architecture records in
`custom_pipelines`. A checkpoint advertises every class whose files are here and that loads its encoder type (so a
BCN or DCN can start from an encoder checkpoint; the biLM's pretraining head only from a biLM checkpoint) and the
pipelines of its own architecture, and ships the files of every class whose files are here, whatever the encoder type
(one set of code for both), and of those pipelines: no vocabulary, vector, data or checkpoint-building utilities.
tests/test_hub.py derives each closure from the imports and fails when a module here gains an import the manifest
lacks.

Also here: the error for an unreadable weights file (`raise_for_unreadable_weights`), which
`CovePreTrainedModel.from_pretrained` raises and therefore ships with every class.
"""

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .configuration_cove import is_int

__all__ = ["checkpoint_code", "CheckpointCode", "HubClass", "HubPipeline", "MANIFEST", "PIPELINES",
           "raise_for_unreadable_weights", "safetensors_file_problem"]

# The folder whose files a checkpoint ships: this package, or, for a model running as remote code, the module folder
# transformers copied the checkpoint's code into (then only the files that model imported are here).
PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class HubClass:
    """A class a checkpoint can advertise: the Auto class that loads it, its module, and every file it needs."""

    auto_class: str
    module: str
    files: tuple
    encoder_types: tuple = ("mt_lstm", "bilm")  # the `config.encoder_type`s whose checkpoints it loads

    def reference(self, name: str) -> str:
        """The `auto_map` value: `module.ClassName`."""
        return f"{self.module}.{name}"


@dataclass(frozen=True)
class HubPipeline:
    """A custom pipeline recorded in the `custom_pipelines` of checkpoints of `architecture`."""

    architecture: str
    impl: str
    pt: tuple
    type: str
    files: tuple

    def entry(self) -> dict:
        """The `custom_pipelines` value, in the format transformers' `Pipeline.save_pretrained` writes."""
        return {"impl": self.impl, "pt": list(self.pt), "type": self.type}


# The encoder needs its word-vector table and input checks (embeddings.py), its LSTM strategies, this module
# (save_pretrained, the unreadable-weights error) and tokenization_cove.py (the check that a tokenizer's vocabulary
# is the checkpoint's); tokenization_cove.py imports nothing else of the package, so the vocabulary-building and
# vector-reading code stays out.
CONFIG_FILES = ("configuration_cove.py",)
# modeling_cove_bilm_encoder.py: `CoveModel` runs the biLM encoder for `config.encoder_type="bilm"` (`encoder_class`)
ENCODER_FILES = CONFIG_FILES + ("embeddings.py", "hub.py", "lstm_kernels.py", "modeling_cove.py",
                                "modeling_cove_bilm_encoder.py", "tokenization_cove.py")
HEAD_FILES = ENCODER_FILES + ("layers.py",)  # the layers the heads share
DCN_FILES = HEAD_FILES + ("modeling_cove_dcn.py",)

MANIFEST = {
    "CoveConfig": HubClass("AutoConfig", "configuration_cove", CONFIG_FILES),
    "CoveModel": HubClass("AutoModel", "modeling_cove", ENCODER_FILES),
    "CoveForMachineTranslation": HubClass("AutoModelForSeq2SeqLM", "modeling_cove_mt",
                                          ENCODER_FILES + ("modeling_cove_mt.py",)),
    "CoveForSequenceClassification": HubClass("AutoModelForSequenceClassification", "modeling_cove_bcn",
                                              HEAD_FILES + ("modeling_cove_bcn.py",)),
    "CoveForQuestionAnswering": HubClass("AutoModelForQuestionAnswering", "modeling_cove_dcn", DCN_FILES),
    "CoveForTokenClassification": HubClass("AutoModelForTokenClassification", "modeling_cove_tagger",
                                           HEAD_FILES + ("modeling_cove_tagger.py",)),
    # biLM pretraining (docs/bilm.md): advertised by biLM checkpoints only (it refuses an MT-LSTM encoder)
    "CoveForBidirectionalLM": HubClass("AutoModelForPreTraining", "modeling_cove_bilm",
                                       ENCODER_FILES + ("modeling_cove_bilm.py",), ("bilm",)),
}

# pipeline_cove.py holds every pipeline of ours and imports squad_preprocessing.py (windows and answers of the QA
# pipeline), which imports the DCN, and the tagger's module (the casing feature): a checkpoint that records one of
# these pipelines ships those files (every checkpoint ships the heads' files anyway, as it advertises every class).
# squad_preprocessing.py ships whole: its training-side functions come along, and bring no further file (the
# manifest test checks what each file imports).
PIPELINE_FILES = DCN_FILES + ("modeling_cove_tagger.py", "pipeline_cove.py", "squad_preprocessing.py")

# transformers 5.x has no "question-answering" pipeline of its own: a DCN checkpoint records ours under that name.
# A tagger checkpoint records our token-classification pipeline (word-level tokens, `word` as written), which a
# process without the package runs with trust_remote_code=True; with the package imported the task's registered
# class is the same one, and CoveConfig leaves the entry out when reading it, so no flag is asked there
# (configuration_cove.pipelines_needing_remote_code; docs/tagging.md, "Tagging raw text: the pipeline").
PIPELINES = {
    "question-answering": HubPipeline("CoveForQuestionAnswering", "pipeline_cove.CoveQuestionAnsweringPipeline",
                                      ("AutoModelForQuestionAnswering",), "text", PIPELINE_FILES),
    "token-classification": HubPipeline("CoveForTokenClassification", "pipeline_cove.CoveTokenClassificationPipeline",
                                        ("AutoModelForTokenClassification",), "text", PIPELINE_FILES),
}


@dataclass(frozen=True)
class CheckpointCode:
    """What a checkpoint of one architecture records in its config and the code files it ships."""

    auto_map: dict
    custom_pipelines: dict
    files: tuple  # paths in the package folder

    def apply_to(self, config):
        """Set `config.auto_map` and `config.custom_pipelines` (removed when there is none)."""
        config.auto_map = dict(self.auto_map)
        if self.custom_pipelines:
            config.custom_pipelines = {task: dict(entry) for task, entry in self.custom_pipelines.items()}
        elif getattr(config, "custom_pipelines", None) is not None:
            del config.custom_pipelines  # e.g. a BCN built from a DCN checkpoint: the QA pipeline is not its own

    def copy_to(self, save_directory):
        for path in self.files:
            shutil.copyfile(path, Path(save_directory) / path.name)


def checkpoint_code(architecture, package_dir: Optional[Path] = None,
                    encoder_type: str = "mt_lstm") -> CheckpointCode:
    """The `auto_map`, `custom_pipelines` and code files of a checkpoint of `architecture` (a model class name of
    `MANIFEST`, or a model class: its nearest base named there, so a user's subclass saves as the class it extends)
    whose `config.encoder_type` is `encoder_type`: every class that loads that encoder and whose files are all in
    `package_dir` (default `PACKAGE_DIR`), the pipelines of `architecture` whose files are there, and the union of
    the files of those pipelines and of every class whose files are there (also a class of the other encoder type:
    a CoVe checkpoint carries the biLM head's module without naming it, so both kinds ship the same code)."""
    package_dir = Path(package_dir) if package_dir is not None else PACKAGE_DIR
    models = sorted(name for name, entry in MANIFEST.items() if entry.auto_class != "AutoConfig")
    if isinstance(architecture, type):
        architecture = next((cls.__name__ for cls in architecture.__mro__ if cls.__name__ in models),
                            architecture.__name__)
    if architecture not in models:
        raise ValueError(f"architecture {architecture!r} has no Hub code: expected one of {models}")

    def missing(files) -> list:
        return [name for name in files if not (package_dir / name).is_file()]

    if missing(MANIFEST[architecture].files):
        raise ValueError(f"cannot ship the code of {architecture}: {', '.join(missing(MANIFEST[architecture].files))} "
                         f"not in {package_dir}")
    classes = {name: entry for name, entry in MANIFEST.items() if not missing(entry.files)}
    pipelines = {task: pipe for task, pipe in PIPELINES.items()
                 if pipe.architecture == architecture and not missing(pipe.files)}
    names = set().union(*(entry.files for entry in classes.values()), *(pipe.files for pipe in pipelines.values()))
    return CheckpointCode(
        auto_map={entry.auto_class: entry.reference(name) for name, entry in classes.items()
                  if encoder_type in entry.encoder_types},
        custom_pipelines={task: pipe.entry() for task, pipe in pipelines.items()},
        files=tuple(package_dir / name for name in sorted(names)),
    )


# ---------------------------------------------------------------------------------------------------------------
# Unreadable weights: name the broken file instead of safetensors' bare "incomplete metadata".
# ---------------------------------------------------------------------------------------------------------------
def safetensors_file_problem(path) -> Optional[str]:
    """Why the safetensors file at `path` is incomplete or corrupt, or `None` when its layout is whole.

    A safetensors file is an 8-byte little-endian header length, a JSON header naming each tensor's byte range
    (`data_offsets`) in the data that follows, then that data: the file must be exactly as long as the header
    says. Reads only the header.
    """
    path = Path(path)
    size = path.stat().st_size
    if size < 8:
        return f"it has {size} bytes, fewer than the 8-byte header length field"
    with open(path, "rb") as handle:
        header_length = int.from_bytes(handle.read(8), "little")
        if 8 + header_length > size:
            return (f"its header length field says {header_length} bytes of metadata, but the file has only {size} "
                    f"bytes")
        raw = handle.read(header_length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "its metadata is not valid JSON (not a safetensors file, e.g. an error page saved in its place)"
    if not isinstance(header, dict):
        return "its metadata is not a JSON object"
    ends = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(is_int(x) for x in offsets)):
            return f"its metadata has no valid data_offsets for tensor {name!r}"
        ends.append(offsets[1])
    expected = 8 + header_length + max(ends, default=0)
    if size < expected:
        return f"it has {size} bytes but its header describes {expected} (the end is missing)"
    if size > expected:
        return f"it has {size} bytes but its header describes {expected} (extra bytes after the tensors)"
    return None


def _weights_folder(checkpoint, subfolder: str = "", cache_dir=None, revision=None) -> Optional[Path]:
    """The local folder holding the weights of `checkpoint` (a folder, or a Hub id already in the cache)."""
    folder = Path(checkpoint) / subfolder if subfolder else Path(checkpoint)
    if folder.is_dir():
        return folder
    if os.path.isfile(str(checkpoint)):
        return Path(checkpoint).parent
    try:
        from huggingface_hub import try_to_load_from_cache

        for filename in ("model.safetensors", "model.safetensors.index.json"):
            found = try_to_load_from_cache(str(checkpoint), f"{subfolder}/{filename}" if subfolder else filename,
                                           cache_dir=cache_dir, revision=revision)
            if isinstance(found, str):
                return Path(found).parent
    except Exception:  # not a Hub id (huggingface_hub validates it), or no cache: the caller reports without a folder
        return None
    return None


def raise_for_unreadable_weights(error: Exception, checkpoint, subfolder: str = "", cache_dir=None,
                                 revision=None):
    """Re-raise a weights-reading `error` of `from_pretrained(checkpoint)` as an `OSError` naming the broken file.

    safetensors reports a truncated or corrupt file as e.g. `SafetensorError: Error while deserializing header:
    incomplete metadata, file not fully covered`, naming no file. This finds the checkpoint's folder (a local
    folder, or the Hub cache's snapshot for a Hub id), checks every `*.safetensors` file in it
    (`safetensors_file_problem`) and raises an `OSError` naming each broken file, its size and what is wrong, the
    likely cause (an interrupted or truncated download or copy) and the fix (download or copy it again;
    `force_download=True` for a Hub id), with `error` as its cause. When no file is found broken, the `OSError`
    still names the checkpoint and quotes `error`. Always raises.
    """
    folder = _weights_folder(checkpoint, subfolder, cache_dir, revision)
    broken = []
    if folder is not None:
        for path in sorted(folder.glob("*.safetensors")):
            problem = safetensors_file_problem(path)
            if problem is not None:
                broken.append(f"{path} ({path.stat().st_size} bytes): {problem}")
    hub = folder is None or not Path(checkpoint).exists()
    redo = (f"download it again: from_pretrained({str(checkpoint)!r}, force_download=True)" if hub
            else "copy or download it again (or save the model again)")
    if broken:
        raise OSError(
            f"cannot load the weights of {checkpoint}: " + "; ".join(broken) + ". The file is incomplete or corrupt, "
            f"most likely a download or copy that was interrupted or truncated; {redo}. (safetensors: {error})"
        ) from error
    where = f" in {folder}" if folder is not None else ""
    raise OSError(f"cannot load the weights of {checkpoint}{where}: {error}. If a weights file was downloaded or "
                  f"copied, it may be corrupt; {redo}") from error
