"""cove-push-to-hub: publish a trained CoVe checkpoint to the Hugging Face Hub.

Checks everything locally first (the repo id; the checkpoint: config.json of a CoVe model, safetensors weights —
pickled `.bin`/`.pt` weights are refused —, its tokenizer, and `target_tokenizer/` for a translation model; the
evaluation JSON, whose fingerprint must be this checkpoint's; the curve PNG; a token unless it is a dry run), then
assembles a Hub-ready folder (weights, config.json with its `auto_map`, the remote-code files, tokenizer, the
generated model card, curve, evaluation JSON), loads it back with the package, and uploads it. The steps are
`modeling_cove.training.publishing.publish`. Also `python -m modeling_cove.training.commands.push_to_hub`:

    cove-push-to-hub CHECKPOINT_DIR --repo-id org/cove-bcn-sst2 \\
        --eval-json CHECKPOINT_DIR/eval_results.json [--curve loss_curve.png] [--private] [--revision BRANCH] \\
        [--commit-message MSG] [--token TOKEN] [--dry-run] [--output-dir STAGING_DIR] [--license bsd-3-clause] \\
        [--endpoint URL]

--dry-run lists what would be uploaded and stops. The token comes from --token, else `HF_TOKEN`, else the stored
login (`hf auth login`). The Hub endpoint from --endpoint, else `HF_ENDPOINT`, else huggingface.co. `--private`
applies when the repo is created; an existing repo keeps its visibility. Files already in the repo but not in the
folder are left there.

--space writes the folder of a Gradio Space over published models instead (`modeling_cove.training.demo.space`): the
demo app (`cove-demo`'s module, as it is, plus a block naming the models by Hub id), its corpus, requirements.txt
and the Space's card. A dry run by default: it writes the folder (--output-dir) and lists it; --upload-space also
creates the Space --repo-id and uploads the folder:

    cove-push-to-hub --space --repo-id org/cove-demo --space-classifier org/cove-bcn-sst2 \\
        --space-encoder org/cove-large [--space-qa org/cove-dcn] [--space-tagger org/cove-tagger] \\
        [--space-corpus FILE] --output-dir space [--upload-space]

The corpus of the words-in-context tab is --space-corpus (one text per line), else the main job's texts.

Exit status: 0 done, 1 the Hub refused the upload, 2 bad input (nothing sent).
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..common.cli import REQUIRED, fail, option, parse_options
from ..demo.corpus import main_job_corpus, read_corpus
from ..demo.space import upload_space, write_space
from ..publishing.cards import DEFAULT_LICENSE
from ..publishing.publish import PublishError, UploadError, publish, resolve_token, validate_repo_id

__all__ = ["main", "PublishArguments", "publish_space"]


@dataclass
class PublishArguments:
    """The arguments of cove-push-to-hub."""

    repo_id: str = option("namespace/name on the Hub, e.g. my-org/cove-large (with --space: the Space's)", REQUIRED)
    checkpoint_dir: Optional[Path] = option("saved checkpoint (save_pretrained + tokenizer); not with --space",
                                            positional=True)
    eval_json: Optional[Path] = option("evaluation JSON of this checkpoint (schema: model_cards/README.md); "
                                       "required but with --space")
    curve: Optional[Path] = option("training-curve PNG to include")
    private: bool = option("create the repo as private", False)
    revision: Optional[str] = option("branch to upload to (created from main if missing)")
    commit_message: Optional[str] = option("commit message (default: one naming the checkpoint and its results)")
    token: Optional[str] = option("Hub token (default: HF_TOKEN or the stored login)")
    dry_run: bool = option("assemble and list the files, upload nothing", False)
    output_dir: Optional[Path] = option("where to assemble the folder (new or empty; default: a temporary folder)")
    license: str = option(f"license id for the card (default {DEFAULT_LICENSE})", DEFAULT_LICENSE)
    endpoint: Optional[str] = option("Hub endpoint (default: HF_ENDPOINT or huggingface.co)")
    space: bool = option("write a Gradio Space over published models (a dry run unless --upload-space)", False)
    space_classifier: Optional[str] = option("with --space: the BCN's Hub id")
    space_qa: Optional[str] = option("with --space: the DCN's Hub id")
    space_tagger: Optional[str] = option("with --space: the tagger's Hub id")
    space_encoder: Optional[str] = option("with --space: the CoVe encoder's Hub id (the words-in-context tab)")
    space_corpus: Optional[Path] = option("with --space: the words-in-context corpus, one text per line "
                                          "(default: the main job's texts)")
    upload_space: bool = option("with --space: create the Space and upload the folder", False)

    def __post_init__(self):
        if self.space and self.checkpoint_dir is not None:
            raise ValueError("--space publishes a Space over models already on the Hub: give no CHECKPOINT_DIR")
        if not self.space and (self.checkpoint_dir is None or self.eval_json is None):
            raise ValueError("CHECKPOINT_DIR and --eval-json are required (or --space for a Space)")


def main(argv=None) -> int:
    """cove-push-to-hub: `publish` with the command line's arguments; exit 0 done, 1 refused by the Hub, 2 bad input."""
    args = parse_options(PublishArguments, argv, description=__doc__)
    if args.space:
        return publish_space(args)
    try:
        publish(args.checkpoint_dir, args.eval_json, args.repo_id, curve=args.curve, license=args.license,
                output_dir=args.output_dir, dry_run=args.dry_run, token=args.token, private=args.private,
                revision=args.revision, commit_message=args.commit_message, endpoint=args.endpoint)
    except UploadError as err:
        fail(err, status=1)
    except PublishError as err:
        fail(err)
    return 0


def publish_space(args: PublishArguments) -> int:
    """--space: write the Space folder (`write_space`), list it, and upload it with --upload-space."""
    import tempfile

    from huggingface_hub.errors import HfHubHTTPError

    models = {"classifier": args.space_classifier, "qa": args.space_qa, "tagger": args.space_tagger,
              "encoder": args.space_encoder}
    try:
        repo_id = validate_repo_id(args.repo_id)
        for kind, model in models.items():
            if model is not None:
                validate_repo_id(model)
        texts, name = read_corpus(args.space_corpus) if args.space_corpus else main_job_corpus(Path("runs/main"))
        token = resolve_token(args.token) if args.upload_space else None
        folder = Path(args.output_dir or tempfile.mkdtemp(prefix="cove-space-"))
        files = write_space(folder, models, texts, name, title="CoVe demo", license=args.license)
    except (PublishError, OSError, ValueError) as err:
        fail(err)
    print(f"Space {repo_id} (sdk gradio) in {folder}:")
    for path in files:
        print(f"  {path.name:18s} {path.stat().st_size:>9,d} bytes")
    if not args.upload_space:
        print("dry run: nothing uploaded (--upload-space uploads it)")
        return 0
    try:
        commit = upload_space(folder, repo_id, token=token, private=args.private, endpoint=args.endpoint,
                              commit_message=args.commit_message)
    except (HfHubHTTPError, OSError, ValueError) as err:  # the Hub refused, or could not be reached
        fail(f"the Hub refused the Space upload: {err}", status=1)
    print(f"uploaded: {getattr(commit, 'commit_url', commit)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
