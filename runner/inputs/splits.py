"""Dev / test splits of a dataset (``dataset.split``): which items a calibration search may tune on and which
it must never see. An item's side comes from a seeded hash of its id, not from its position, so the split is
the same in every process and machine and whatever the order of the file."""

from __future__ import annotations

import hashlib

from runner.core.config import DatasetConfig
from runner.core.errors import DatasetError

SPLITS = ("dev", "test")


def check_split(cfg: DatasetConfig) -> None:
    """``dataset.split`` is dev, test or unset, and the test fraction leaves both sides non-empty in principle."""
    if cfg.split is not None and cfg.split not in SPLITS:
        raise DatasetError(f"dataset.split={cfg.split!r} is not one of {list(SPLITS)} (or null for every item)")
    if not 0.0 < cfg.split_test_fraction < 1.0:
        raise DatasetError(f"dataset.split_test_fraction={cfg.split_test_fraction} must be between 0 and 1")


def split_of(item_id: str, cfg: DatasetConfig) -> str:
    """The split an item belongs to: a seeded hash of its id, stable across processes, machines and file order."""
    digest = hashlib.sha256(f"{cfg.split_seed}:{item_id}".encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < cfg.split_test_fraction else "dev"
