"""What a run reads: datasets (and their splits) and prompt templates."""
