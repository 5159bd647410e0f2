"""The library behind the console commands (`cove-*`, `docs/commands.md`). Not Hub remote code: a checkpoint ships
only the model files `modeling_cove/hub.py` lists, never this subpackage. Laid out by what each part is for:

- `common`: what every command uses — the one argument system (`cli`), run records and files (`run_info`), presets
  found by name (`presets`) and the papers' numbers (`papers`).
- `data`: readers of a user's data into what the loops consume — tagging corpora (`tagging`), translation pairs
  (`translation`) and the batch collators (`collators`).
- `loops`: the training loops — the Accelerate pretraining scaffold (`pretraining`) with its MT loop (`mt`,
  `mt_schedule`, `mt_eval`), and Cross-View Training's steps for the tagger (`cvt`).
- `publishing`: what leaves a run — the encoder export (`export`), model cards (`cards`, `cards_record`, the card
  templates) and publishing to the Hub (`publish`, behind `cove-push-to-hub`).
- `commands`: one module per console command, each with its options dataclass and `main(argv)`; commands import the
  parts above and never each other (the main job, which runs the others as its stages, excepted).

`docs/design.md` draws the layout; `tests/test_layout.py` holds the import rules.
"""
