"""The two run modes and what each builds from its judgments: pairwise and pointwise summaries, ensembles (panels),
scorecards, trust and bias reports.
"""
