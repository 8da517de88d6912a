"""What a run writes and shows: MLflow tracking (its only importer), console, HTML report, sweep table, cost-
quality frontier, the results API, comparisons between runs.
"""
