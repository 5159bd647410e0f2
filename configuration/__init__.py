"""The presets and task configurations, shipped with the package as `modeling_cove.configuration` (pyproject.toml maps
this folder there): data read by name through `modeling_cove.training.common.presets`, no code."""
