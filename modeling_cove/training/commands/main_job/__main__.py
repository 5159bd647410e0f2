"""`python -m modeling_cove.training.commands.main_job`: the main job's command line (`cove-main`)."""

from .job import main

main()
