"""cove-demo: a Gradio app over saved CoVe models, one tab per model kind (needs the `demo` extra:
`pip install "modeling-cove[demo]"`; this help works without it).

    cove-demo                                   # the main job's models: runs/main (cove-main --quick makes one)
    cove-demo --qa runs/dcn/model --tagger runs/tagger/best
    cove-demo --run-dir runs/quick --corpus my_sentences.txt --port 7861

Tabs: the classifier (BCN: label, scores and the biattention heat maps of eqs. 9-10, for a text or a pair), question
answering (DCN: the answer highlighted in its context, the start and end distributions), the tagger (its spans
highlighted in the text) and words in context (a word's nearest neighbours in two sentences, CoVe against the word
vectors, over a corpus: by default the main job's texts, which the page names). A tab without a model names the
command that makes one. Each model is a folder (or a Hub id) loaded as a user loads it (pipelines, AutoModel).

By default the classifier is RUN_DIR/publish/sentiment/hub and the encoder RUN_DIR/pretrain/encoder, each where it
exists. The app listens on --host (127.0.0.1: this machine only) and --port (default: the first free from 7860).

Exit status: 0 after the app stops, 2 bad input (a model folder that does not exist, gradio not installed).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..common.cli import A_PORT, fail, option, parse_options
from ..demo.corpus import main_job_corpus, read_corpus

__all__ = ["DemoArguments", "demo_models", "main"]

# the main job's models in its run folder
RUN_MODELS = {"classifier": Path("publish") / "sentiment" / "hub", "encoder": Path("pretrain") / "encoder"}


@dataclass
class DemoArguments:
    """The arguments of cove-demo."""

    run_dir: Path = option("the main job's run folder: its BCN and encoder are the default models, its texts the "
                           "default corpus", Path("runs/main"))
    classifier: Optional[str] = option("BCN folder or Hub id (default: RUN_DIR/publish/sentiment/hub)")
    qa: Optional[str] = option("DCN folder or Hub id (cove-train-qa)")
    tagger: Optional[str] = option("tagger folder or Hub id (cove-train-tagger)")
    encoder: Optional[str] = option("CoVe encoder folder or Hub id (default: RUN_DIR/pretrain/encoder)")
    corpus: Optional[Path] = option("corpus of the words-in-context tab: a text file, one text per line, or a TSV "
                                    "file with --corpus-column (default: the main job's texts)")
    corpus_column: Optional[str] = option("the column of a TSV --corpus")
    trust_remote_code: bool = option("run the code a Hub checkpoint carries (models given by Hub id)", False)
    host: str = option("address to listen on", "127.0.0.1")
    port: Optional[int] = option("port (default: the first free one from 7860)", check=A_PORT)
    share: bool = option("also open a public gradio.live link", False)


def demo_models(args: DemoArguments):
    """The `DemoModels` of the command line: each model given or found in the run folder, and the corpus."""
    from ..demo.app import DemoModels

    given = {"classifier": args.classifier, "qa": args.qa, "tagger": args.tagger, "encoder": args.encoder}
    for kind, relative in RUN_MODELS.items():
        if given[kind] is None and (Path(args.run_dir) / relative / "config.json").exists():
            given[kind] = str(Path(args.run_dir) / relative)
    for kind, value in given.items():
        if value is not None and not Path(value).exists() and (Path(value).is_absolute() or value.count("/") != 1):
            raise ValueError(f"--{kind} {value}: no such folder (and not a Hub id, org/name)")
    texts, name = [], ""
    if given["encoder"]:
        texts, name = (read_corpus(args.corpus, args.corpus_column) if args.corpus else
                       main_job_corpus(args.run_dir))
    return DemoModels(**given, corpus=texts, corpus_name=name, trust_remote_code=args.trust_remote_code)


def main(argv=None) -> int:
    """cove-demo: load the models, build the app and serve it until interrupted; exit 2 on bad input."""
    args = parse_options(DemoArguments, argv, description=__doc__)
    try:
        import gradio  # noqa: F401  (the demo extra)
    except ImportError:
        fail('cove-demo needs gradio, the demo extra: pip install "modeling-cove[demo]"')
    from ..demo.app import build_app, load_demos

    try:
        models = demo_models(args)
        app = build_app(load_demos(models))
    except (OSError, ValueError) as err:
        fail(err)
    app.launch(server_name=args.host, server_port=args.port, share=args.share)
    return 0


if __name__ == "__main__":
    sys.exit(main())
