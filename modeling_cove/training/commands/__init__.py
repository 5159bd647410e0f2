"""One module per console command (`docs/commands.md`), each holding its options dataclass and `main(argv)`:
`build_vocab`, `train_ppmi_vectors`, `convert_salesforce`, `train_mt`, `train_bilm`, `export_encoder`,
`train_classifier`, `train_qa`, `train_tagger`, `push_to_hub` and `main_job` (the main job, `cove-main`)."""
