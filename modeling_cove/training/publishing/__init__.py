"""What leaves a run: the encoder export (`export`), the evaluation record and model card (`cards`, `cards_record`,
`card_template.md`, `card_loading.jinja`) and publishing to the Hub (`publish`). Nothing here imports `commands`."""
