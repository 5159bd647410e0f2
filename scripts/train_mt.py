#!/usr/bin/env python
"""Pretrain CoVe on English->German MT and export its encoder: `cove-train-mt` (modeling_cove.training.commands.train_mt)."""

from modeling_cove.training.commands.train_mt import main

if __name__ == "__main__":
    main()
