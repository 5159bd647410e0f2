"""Model cards for CoVe checkpoints: the evaluation-JSON schema (`evaluation.py`), the card template
(`template.md`) and the generator (`generate.py`). See `model_cards/README.md` for the schema.

This is repository tooling, not part of the `modeling_cove` package (which ships unchanged as Hub remote code).
Scripts import it with the repository root on `sys.path` (`scripts/push_to_hub.py` does that itself).
"""
