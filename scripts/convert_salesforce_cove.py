#!/usr/bin/env python
"""Convert the original Salesforce CoVe MT-LSTM to a Hugging Face checkpoint: `cove-convert-salesforce`
(modeling_cove.training.convert)."""

from modeling_cove.training.convert import main

if __name__ == "__main__":
    main()
