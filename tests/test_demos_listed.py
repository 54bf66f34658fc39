"""The Demos page lists every demo: each ``demos/*.py`` script has a row in the table of ``docs/pages/demos.md``
with its run time at the default size, every row names a script that exists, and the demos that take
``--full`` accept it (and refuse it together with ``--small``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMOS = sorted(p.stem for p in (ROOT / "demos").glob("*.py") if not p.stem.startswith("_"))
PAGE = ROOT / "docs" / "pages" / "demos.md"
ROW = re.compile(r"^\| `demos/(?P<name>\w+)\.py` \|(?P<rest>.*)\|\s*$")


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        m = ROW.match(line)
        if m:
            assert m["name"] not in rows, f"demos/{m['name']}.py has two rows in {PAGE.name}"
            rows[m["name"]] = [c.strip() for c in m["rest"].split("|")]
    return rows


def _takes_full(name: str) -> bool:
    """Whether the script's argument parser has a ``--full`` option."""
    tree = ast.parse((ROOT / "demos" / f"{name}.py").read_text(encoding="utf-8"))
    return any(isinstance(node, ast.Constant) and node.value == "--full" for node in ast.walk(tree))


def test_every_demo_has_a_row_and_every_row_a_demo():
    rows = _rows()
    assert sorted(rows) == DEMOS, (f"not in {PAGE.name}: {sorted(set(DEMOS) - set(rows))}; "
                                   f"listed but absent from demos/: {sorted(set(rows) - set(DEMOS))}")


def test_every_row_gives_the_default_run_time():
    """Each row: what it shows | time at the default size | the ``--full`` size and its time."""
    for name, cells in _rows().items():
        assert len(cells) == 3, (name, cells)
        shows, default, full = cells
        assert shows, name
        assert re.search(r"\d+ s\b|\d+ min\b", default), f"demos/{name}.py: no run time in {default!r}"
        if _takes_full(name):
            assert re.search(r"\d+ s\b|\d+ min\b|not measured", full), f"demos/{name}.py: --full time {full!r}"
        else:
            assert full in ("", "—"), f"demos/{name}.py has no --full option but its row says {full!r}"


@pytest.mark.parametrize("name", [n for n in DEMOS if _takes_full(n)])
def test_full_and_small_together_are_refused(name):
    pytest.importorskip("matplotlib")
    import importlib

    demo = importlib.import_module(f"demos.{name}")
    with pytest.raises(ValueError, match="small=True and full=True"):
        demo.main(small=True, full=True)
