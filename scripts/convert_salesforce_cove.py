#!/usr/bin/env python
"""Convert the original Salesforce CoVe MT-LSTM to a Hugging Face checkpoint: `cove-convert-salesforce`
(modeling_cove.training.commands.convert_salesforce)."""

from modeling_cove.training.commands.convert_salesforce import main

if __name__ == "__main__":
    main()
