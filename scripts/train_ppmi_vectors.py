#!/usr/bin/env python
"""PPMI + SVD word vectors from a text corpus: `cove-train-ppmi-vectors` (modeling_cove.training.commands.train_ppmi_vectors)."""

import sys

from modeling_cove.training.commands.train_ppmi_vectors import main

if __name__ == "__main__":
    sys.exit(main())
