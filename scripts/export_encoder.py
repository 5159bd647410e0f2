#!/usr/bin/env python
"""Export the encoder of a trained MT checkpoint as a CoVe checkpoint: `cove-export-encoder`
(modeling_cove.training.commands.export_encoder)."""

from modeling_cove.training.commands.export_encoder import main

if __name__ == "__main__":
    main()
