"""The training loops: the Accelerate pretraining scaffold MT and the biLM share (`pretraining`), the MT loop (`mt`)
with its perplexity schedule (`mt_schedule`) and evaluation (`mt_eval`), and Cross-View Training's steps (`cvt`)."""
