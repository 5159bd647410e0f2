#!/usr/bin/env python
"""Publish a trained CoVe checkpoint to the Hugging Face Hub.

    python scripts/push_to_hub.py CHECKPOINT_DIR --repo-id org/cove-bcn-sst2 \
        --eval-json CHECKPOINT_DIR/eval_results.json [--curve loss_curve.png] [--private] [--revision BRANCH] \
        [--commit-message MSG] [--token TOKEN] [--dry-run] [--output-dir STAGING_DIR] [--license bsd-3-clause] \
        [--endpoint URL]

Checks everything locally first (repo id, safetensors weights — pickled weights are refused —, tokenizer, the
evaluation JSON of exactly this checkpoint, the curve PNG, a token), assembles a Hub-ready folder (weights, config
with `auto_map`, the remote-code files, tokenizer, the generated model card, curve, eval JSON), loads it back as a
user would, then uploads it with huggingface_hub (`create_repo`, `create_branch` for --revision, `upload_folder`).
--dry-run lists what would be uploaded and stops. The work is `modeling_cove.training.publish.publish`.

The token comes from --token, else `HF_TOKEN`, else the stored login (`hf auth login`). The Hub endpoint from
--endpoint, else `HF_ENDPOINT`, else huggingface.co. `--private` applies when the repo is created; an existing
repo keeps its visibility. Files already in the repo but not in the folder are left there.

Exit status: 0 done, 1 the Hub refused the upload, 2 bad input (nothing sent).
"""

import argparse
import sys
from pathlib import Path

from modeling_cove.training.cards import DEFAULT_LICENSE
from modeling_cove.training.publish import PublishError, UploadError, publish


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("checkpoint_dir", type=Path, help="saved checkpoint (save_pretrained + tokenizer)")
    parser.add_argument("--repo-id", required=True, help="namespace/name on the Hub, e.g. my-org/cove-large")
    parser.add_argument("--eval-json", type=Path, required=True,
                        help="evaluation JSON of this checkpoint (schema: model_cards/README.md)")
    parser.add_argument("--curve", type=Path, default=None, help="training-curve PNG to include")
    parser.add_argument("--private", action="store_true", help="create the repo as private")
    parser.add_argument("--revision", default=None, help="branch to upload to (created from main if missing)")
    parser.add_argument("--commit-message", default=None)
    parser.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the stored login)")
    parser.add_argument("--dry-run", action="store_true", help="assemble and list the files, upload nothing")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where to assemble the folder (new or empty; default: a temporary folder)")
    parser.add_argument("--license", default=DEFAULT_LICENSE, help="license id for the card (default %(default)s)")
    parser.add_argument("--endpoint", default=None, help="Hub endpoint (default: HF_ENDPOINT or huggingface.co)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        publish(args.checkpoint_dir, args.eval_json, args.repo_id, curve=args.curve, license=args.license,
                output_dir=args.output_dir, dry_run=args.dry_run, token=args.token, private=args.private,
                revision=args.revision, commit_message=args.commit_message, endpoint=args.endpoint)
    except UploadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except PublishError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
