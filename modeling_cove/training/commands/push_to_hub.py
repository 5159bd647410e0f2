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

Exit status: 0 done, 1 the Hub refused the upload, 2 bad input (nothing sent).
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..common.cli import REQUIRED, fail, option, parse_options
from ..publishing.cards import DEFAULT_LICENSE
from ..publishing.publish import PublishError, UploadError, publish

__all__ = ["main", "PublishArguments"]


@dataclass
class PublishArguments:
    """The arguments of cove-push-to-hub."""

    checkpoint_dir: Path = option("saved checkpoint (save_pretrained + tokenizer)", REQUIRED, positional=True)
    repo_id: str = option("namespace/name on the Hub, e.g. my-org/cove-large", REQUIRED)
    eval_json: Path = option("evaluation JSON of this checkpoint (schema: model_cards/README.md)", REQUIRED)
    curve: Optional[Path] = option("training-curve PNG to include")
    private: bool = option("create the repo as private", False)
    revision: Optional[str] = option("branch to upload to (created from main if missing)")
    commit_message: Optional[str] = option("commit message (default: one naming the checkpoint and its results)")
    token: Optional[str] = option("Hub token (default: HF_TOKEN or the stored login)")
    dry_run: bool = option("assemble and list the files, upload nothing", False)
    output_dir: Optional[Path] = option("where to assemble the folder (new or empty; default: a temporary folder)")
    license: str = option(f"license id for the card (default {DEFAULT_LICENSE})", DEFAULT_LICENSE)
    endpoint: Optional[str] = option("Hub endpoint (default: HF_ENDPOINT or huggingface.co)")


def main(argv=None) -> int:
    """cove-push-to-hub: `publish` with the command line's arguments; exit 0 done, 1 refused by the Hub, 2 bad input."""
    args = parse_options(PublishArguments, argv, description=__doc__)
    try:
        publish(args.checkpoint_dir, args.eval_json, args.repo_id, curve=args.curve, license=args.license,
                output_dir=args.output_dir, dry_run=args.dry_run, token=args.token, private=args.private,
                revision=args.revision, commit_message=args.commit_message, endpoint=args.endpoint)
    except UploadError as err:
        fail(err, status=1)
    except PublishError as err:
        fail(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
