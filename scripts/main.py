#!/usr/bin/env python
"""The main job in one command: `cove-main` (modeling_cove.training.commands.main_job; `--help` lists the stages and flags)."""

from modeling_cove.training.commands.main_job import main

if __name__ == "__main__":
    main()
