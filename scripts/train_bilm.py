#!/usr/bin/env python
"""Pretrain an ELMo-style biLM encoder on monolingual text, then export the encoder: `cove-train-bilm`
(modeling_cove.training.commands.train_bilm)."""

from modeling_cove.training.commands.train_bilm import main

if __name__ == "__main__":
    main()
