#!/usr/bin/env python
"""Train the BCN on a classification task: `cove-train-classifier` (modeling_cove.training.commands.train_classifier)."""

from modeling_cove.training.commands.train_classifier import main

if __name__ == "__main__":
    main()
