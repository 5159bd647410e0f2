"""What leaves a run: the encoder export (`export`), the evaluation record and model card (`cards`, `cards_record`,
`card_template.md`)."""
