"""What every command uses: the argument system (`cli`), run records (`run_info`), atomic file and folder writes
(`files`), presets and the one settings resolver (`presets`), and the papers' numbers (`papers`)."""
