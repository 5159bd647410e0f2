"""The library behind the console commands (`cove-*`, `docs/commands.md`). Not Hub remote code: a checkpoint ships
only the model files `modeling_cove/hub.py` lists, never this subpackage. Laid out by what each part is for:

- `common`: what every command uses — the one argument system (`cli`), run records (`run_info`), atomic file and
  folder writes (`files`), presets and the one settings resolver (`presets`), and the papers' numbers (`papers`).
- `data`: a user's data and checkpoints read into what the loops consume — text files and corpora (`texts`),
  tagging corpora (`tagging`), translation pairs (`translation`), checkpoints (`checkpoints`) and the batch
  collators (`collators`).
- `loops`: the training loops — the Accelerate loop MT, biLM and tagger training run on (`accelerate_loop`), the MT
  loop (`mt`, `mt_schedule`, `mt_eval`), the glue around transformers' `Trainer` for the BCN and DCN (`trainer`), and
  Cross-View Training's steps for the tagger (`cvt`).
- `publishing`: what leaves a run — the encoder export (`export`), model cards (`cards`, `cards_record`, the card
  templates) and publishing to the Hub (`publish`, behind `cove-push-to-hub`).
- `commands`: one module per console command, each with its options dataclass and `main(argv)`; commands import the
  parts above and never each other (the main job, which runs the others as its stages, excepted).

`docs/design.md` draws the layout; `tests/test_layout.py` holds the import rules.
"""
