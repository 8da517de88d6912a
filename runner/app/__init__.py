"""Entry points: the judgesweep CLI (Hydra), judgesweep compare, the calibration callback."""
