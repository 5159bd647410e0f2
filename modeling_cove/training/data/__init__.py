"""A user's data and checkpoints read into what the loops consume: text files and corpora (`texts`), tagging
corpora (`tagging`), translation pairs (`translation`), CoVe checkpoints (`checkpoints`) and the batch collators
(`collators`)."""
