"""The training loops: the Accelerate loop that MT, biLM and tagger training run on (`accelerate_loop`), the MT loop
(`mt`) with its perplexity schedule (`mt_schedule`) and evaluation (`mt_eval`), the glue around transformers'
`Trainer` that the BCN and DCN commands share (`trainer`), and Cross-View Training's steps (`cvt`)."""
