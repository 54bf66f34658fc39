"""A fresh clone is self-contained: its demos and tests read their data from the repository's own ``data/``.

The repository is copied (the files git tracks, plus new files not ignored; or, without git, the tree minus
``.git``, ``.venv``, caches and outputs) into an empty temporary directory, with nothing beside it, and a
data-using demo runs there as a script, importing the copy's packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SKIP = {".git", ".venv", "__pycache__", "out", ".pytest_cache", ".ruff_cache", ".hypothesis"}


def _repository_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                             capture_output=True, check=True, timeout=60).stdout.decode()
        files = [Path(f) for f in out.split("\0") if f]
    except (OSError, subprocess.SubprocessError):
        files = [p.relative_to(ROOT) for p in ROOT.rglob("*")
                 if p.is_file() and not _SKIP.intersection(p.relative_to(ROOT).parts)]
    return [f for f in files if (ROOT / f).is_file()]  # tracked files deleted in the work tree are not copied


def _copy_repository(dest: Path) -> Path:
    for f in _repository_files():
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dest / f)
    return dest


def test_fresh_clone_runs_data_demo_without_shared(tmp_path):
    repo = _copy_repository(tmp_path / "clone")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clone"]  # no shared/ beside the copy
    assert (repo / "data" / "nodal" / "X.csv").is_file() and (repo / "data" / "nodal" / "PROVENANCE.md").is_file()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR")}
    env["PYTHONPATH"] = str(repo)  # the copy's packages, not an installed checkout elsewhere
    env["MPLBACKEND"] = "Agg"
    proc = subprocess.run([sys.executable, "demos/bvi_nodal.py", "--small"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    loaded = subprocess.run([sys.executable, "-c", "import factorgraph, demos._data as d; "
                             "print(factorgraph.__file__); print(d.DATA)"], cwd=repo, env=env,
                            capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    lib, data = loaded.stdout.split()
    assert Path(lib).resolve().is_relative_to(repo.resolve()) and Path(data).resolve() == (repo / "data").resolve()


@pytest.mark.parametrize("folder", ["demos", "tests", "benchmarks", "factorgraph", "factors", "schedules",
                                    "distributions"])
def test_no_hard_coded_path_to_shared_data(folder):
    """No code or docstring points at the shared folder outside the repository."""
    needles = ("/work/" + "shared", "shared" + "/data", "../" + "shared")
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*.py")
                 if any(s in p.read_text(encoding="utf-8") for s in needles)]
    assert offenders == []


def test_every_dataset_has_provenance_and_csv():
    data = ROOT / "data"
    sets = [p for p in data.iterdir() if p.is_dir()]
    assert len(sets) >= 19
    for d in sets:
        assert (d / "PROVENANCE.md").is_file(), d
        text = (d / "PROVENANCE.md").read_text(encoding="utf-8").lower()
        assert "licen" in text, d
        assert list(d.rglob("*.csv")), d


def test_docs_cited_by_the_code_exist():
    """Every "docs/maths.md §N" or "docs/design.md §N" in the code points at a section that exists; nothing
    cites maths or design notes that live outside the repository."""
    import re

    sections = {}
    for doc in ("maths", "design"):
        text = (ROOT / "docs" / f"{doc}.md").read_text(encoding="utf-8")
        sections[doc] = {int(n) for n in re.findall(r"^## (\d+)\.", text, flags=re.M)}
    cited, stale = [], []
    for folder in ("demos", "tests", "benchmarks", "factorgraph", "factors", "schedules", "distributions"):
        for p in (ROOT / folder).rglob("*.py"):
            text = p.read_text(encoding="utf-8")
            for doc, n in re.findall(r"docs/(maths|design)\.md §(\d+)", text):
                cited.append((doc, int(n)))
                if int(n) not in sections[doc]:
                    stale.append(f"{p.relative_to(ROOT)}: docs/{doc}.md §{n}")
            if re.search(r"\b(MATH|DESIGN)" + r"\.md", text):
                stale.append(f"{p.relative_to(ROOT)} cites notes outside the repository")
    assert len(cited) >= 20 and stale == []
