"""The Space folder of the demo (`cove-push-to-hub --space`): a Gradio Space over published CoVe models.

    app.py            the demo module (`app.py` beside this file) as it is, then a block that names the models by
                      Hub id (loaded with `trust_remote_code=True`: the Space does not install this package) and
                      launches the app
    corpus.txt        the texts of the words-in-context tab, one per line
    requirements.txt  what app.py and the checkpoints' code import, pinned to the versions installed here
    README.md         the Space's card: its front matter (`huggingface_hub.SpaceCardData`: sdk gradio and its
                      version, app_file, license, the models) and a text naming the models

`write_space` writes the folder; `upload_space` creates the Space repository (sdk gradio) and uploads the folder.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Optional

from . import app as demo_app

__all__ = ["SPACE_BLOCK", "SPACE_FILES", "space_app_source", "upload_space", "write_space"]

SPACE_FILES = ("app.py", "corpus.txt", "requirements.txt", "README.md")
# the line that separates the demo module's text from the block written for one Space
SPACE_BLOCK = "# ---- written by cove-push-to-hub --space: the models this Space shows ----"
# what the Space installs (gradio comes with the Space's sdk_version): app.py's imports and the checkpoints' code's
REQUIREMENTS = ("torch", "transformers", "tokenizers", "safetensors", "huggingface_hub", "numpy", "matplotlib")
CARD_TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

CoVe (McCann et al. 2017, *Learned in Translation*): context vectors from the encoder of an English-German
translation model. This Space shows the published models below, each loaded from the Hub with its own code
(`trust_remote_code=True`):

{{ model_lines }}

Words in context: {{ corpus_name }}.

"""


def space_app_source(models: dict, corpus_name: str) -> str:
    """app.py of a Space: the demo module's text as it is, then `SPACE_BLOCK` and the block naming `models`
    ({kind: Hub id}, kinds of `app.MAKES`) that launches the app."""
    unknown = sorted(set(models) - set(demo_app.MAKES))
    if unknown:
        raise ValueError(f"unknown model kinds {unknown}; known: {sorted(demo_app.MAKES)}")
    module = Path(demo_app.__file__).read_text(encoding="utf-8")
    arguments = "".join(f"    {kind}={models[kind]!r},\n" for kind in demo_app.MAKES if models.get(kind))
    return (f"{module.rstrip()}\n\n\n{SPACE_BLOCK}\n"
            f"SPACE_MODELS = DemoModels(\n{arguments}    corpus_name={corpus_name!r},\n"
            "    trust_remote_code=True,\n)\n\n"
            "if __name__ == \"__main__\":\n"
            "    from pathlib import Path\n\n"
            "    SPACE_MODELS.corpus = Path(__file__).with_name(\"corpus.txt\").read_text(encoding=\"utf-8\")"
            ".splitlines()\n"
            "    build_app(load_demos(SPACE_MODELS)).launch()\n")


def requirements() -> str:
    """requirements.txt: `REQUIREMENTS` pinned to the versions installed here (the tested set)."""
    lines = []
    for name in REQUIREMENTS:
        try:
            lines.append(f"{name}=={version(name).split('+')[0]}")
        except PackageNotFoundError:
            lines.append(name)
    return "\n".join(lines) + "\n"


def space_card(models: dict, corpus_name: str, title: str, license: str) -> str:
    """README.md of the Space: its front matter written by `huggingface_hub`'s SpaceCardData, and a short text."""
    from huggingface_hub import SpaceCard, SpaceCardData

    try:
        gradio_version = version("gradio")
    except PackageNotFoundError:
        gradio_version = None  # the Hub's current gradio
    data = SpaceCardData(title=title, sdk="gradio", sdk_version=gradio_version, app_file="app.py", license=license,
                         models=[models[kind] for kind in demo_app.MAKES if models.get(kind)],
                         tags=["cove", "text-classification", "question-answering", "token-classification"])
    lines = "\n".join(f"- {demo_app.MAKES[kind][0]}: [{models[kind]}](https://huggingface.co/{models[kind]})"
                      for kind in demo_app.MAKES if models.get(kind))
    card = SpaceCard.from_template(data, template_str=CARD_TEMPLATE, title=title, model_lines=lines,
                                   corpus_name=corpus_name)
    return str(card)


def write_space(output_dir: Path, models: dict, corpus: list, corpus_name: str, title: str = "CoVe demo",
                license: str = "bsd-3-clause") -> list:
    """Write the Space folder (`SPACE_FILES`) into `output_dir` (created; it must hold none of them yet); returns the
    files written. `models`: {kind: Hub id} for the kinds to show (at least one)."""
    models = {kind: repo for kind, repo in models.items() if repo}
    if not models:
        raise ValueError("a Space needs at least one model: --space-classifier, --space-qa, --space-tagger or "
                         "--space-encoder")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    present = [name for name in SPACE_FILES if (output_dir / name).exists()]
    if present:
        raise ValueError(f"{output_dir} already holds {present}: give a new or empty --output-dir")
    texts = [text.replace("\n", " ").strip() for text in corpus]
    files = {
        "app.py": space_app_source(models, corpus_name),
        "corpus.txt": "".join(f"{text}\n" for text in texts if text),
        "requirements.txt": requirements(),
        "README.md": space_card(models, corpus_name, title, license),
    }
    for name, text in files.items():
        (output_dir / name).write_text(text, encoding="utf-8")
    return [output_dir / name for name in SPACE_FILES]


def upload_space(folder: Path, repo_id: str, token: Optional[str] = None, private: bool = False,
                 endpoint: Optional[str] = None, commit_message: Optional[str] = None):
    """Create the Space repository (sdk gradio; exist_ok) and upload `folder`; returns the commit info."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    api.create_repo(repo_id, repo_type="space", space_sdk="gradio", private=True if private else None,
                    exist_ok=True)
    manifest = json.dumps(sorted(p.name for p in Path(folder).iterdir()))
    return api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=str(folder),
                             commit_message=commit_message or f"CoVe demo Space: {manifest}")
