"""``python -m runner`` runs the same Hydra app as the ``judgesweep`` console script."""

from runner.app.entry import main

main()
