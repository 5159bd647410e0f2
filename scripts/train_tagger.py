#!/usr/bin/env python
"""Train a sequence tagger, supervised or with Cross-View Training: `cove-train-tagger`
(modeling_cove.training.tagger)."""

from modeling_cove.training.tagger import main

if __name__ == "__main__":
    main()
