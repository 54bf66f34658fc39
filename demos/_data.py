"""Where the demos' datasets are: the repository's own ``data/`` folder (one sub-folder per dataset, each with
its CSV files and a ``PROVENANCE.md``; see ``data/README.md``)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"


def data_dir(name: str) -> Path:
    """The folder of one dataset (``name`` may be nested, e.g. ``"raetsch_pooled_nosplits/banana"``).

    Raises FileNotFoundError naming the folder looked in and the datasets that are there.
    """
    path = DATA / name
    if not path.is_dir():
        have = sorted(p.name for p in DATA.iterdir() if p.is_dir()) if DATA.is_dir() else []
        raise FileNotFoundError(f"dataset {name!r} not found in {DATA}; available: {have}")
    return path
