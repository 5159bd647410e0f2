"""The embedded example data (`en_de/*.tsv`, `sentiment/*.tsv`), shipped with the package as `modeling_cove.examples`
(pyproject.toml maps this folder there, the TSV files only): data read by the main job's shipped presets, no code.
The generator that writes them (`generator/`) stays in the repository."""
