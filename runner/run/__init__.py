"""One run, end to end: from a composed config (experiment) through the pipeline to its outcome and gates."""
