"""Judging items: plans and judgments, the stages that run them, parsing and scoring answers, checks, generation,
aggregation of repeats, cost estimates, progress.
"""
