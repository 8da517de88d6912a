"""``python -m runner`` runs the same Hydra app as the ``judgesweep`` console script."""

from runner.cli import main

main()
