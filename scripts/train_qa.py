#!/usr/bin/env python
"""Train the DCN question-answering head on SQuAD: `cove-train-qa` (modeling_cove.training.commands.train_qa)."""

from modeling_cove.training.commands.train_qa import main

if __name__ == "__main__":
    main()
