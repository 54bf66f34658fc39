"""Where the project's shared datasets are: ``shared/data`` beside the repository (as in CI), else
``/work/shared/data`` (developers' machines)."""

from __future__ import annotations

from pathlib import Path

_ROOTS = (Path(__file__).resolve().parents[2] / "shared" / "data", Path("/work/shared/data"))
DATA = next((r for r in _ROOTS if r.is_dir()), _ROOTS[0])


def data_dir(name: str) -> Path:
    """The folder of one dataset; a clear error if the shared data cannot be found."""
    path = DATA / name
    if not path.is_dir():
        raise FileNotFoundError(f"dataset {name!r} not found: looked in {[str(r) for r in _ROOTS]}")
    return path
