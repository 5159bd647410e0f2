#!/usr/bin/env python
"""Train a sequence tagger, supervised or with Cross-View Training: `cove-train-tagger`
(modeling_cove.training.commands.train_tagger)."""

from modeling_cove.training.commands.train_tagger import main

if __name__ == "__main__":
    main()
