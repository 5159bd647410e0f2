"""What every command uses: the argument system (`cli`), run records and file writes (`run_info`), presets found by
name (`presets`) and the papers' numbers (`papers`)."""
