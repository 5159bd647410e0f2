"""A user's data read into what the loops consume: tagging corpora (`tagging`), translation pairs (`translation`) and
the batch collators (`collators`)."""
