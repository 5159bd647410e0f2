#!/usr/bin/env python
"""Build a CoVe checkpoint folder from text data and word vectors: `cove-build-vocab` (modeling_cove.training.commands.build_vocab)."""

from modeling_cove.training.commands.build_vocab import main

if __name__ == "__main__":
    main()
