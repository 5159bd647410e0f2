#!/usr/bin/env python
"""Publish a trained CoVe checkpoint to the Hugging Face Hub: `cove-push-to-hub` (modeling_cove.training.commands.push_to_hub)."""

import sys

from modeling_cove.training.commands.push_to_hub import main

if __name__ == "__main__":
    sys.exit(main())
