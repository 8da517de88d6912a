"""``python -m runner`` runs the same Hydra app as the ``judgesweep`` console script."""

from runner.app.cli import main

main()
