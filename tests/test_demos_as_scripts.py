"""Demos run however they are invoked: imported as ``demos.<name>`` (as the tests do) and then as a script
(``python demos/<name>.py --small``), in that order, in separate processes sharing the numba cache.

A demo that held its own ``@njit(cache=True)`` code wrote a cache entry under the module name ``demos.<name>``
when imported, and the script run (module ``__main__``, ``demos`` not importable) then crashed unpickling
it: ``ModuleNotFoundError: No module named 'demos'``.  Jitted code lives in the library now; these tests
keep it that way, and check that demos use only the public API.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
DEMOS = sorted(p.stem for p in (ROOT / "demos").glob("*.py") if not p.stem.startswith("_"))
INTERNAL = ("factors", "schedules", "distributions", "numba")


PACKAGES = ("factorgraph", "factors", "distributions", "schedules")


@pytest.fixture(scope="module")
def library_path(tmp_path_factory) -> Path:
    """A folder holding links to this checkout's packages only: on PYTHONPATH it makes the library importable
    (not an installed copy elsewhere) while ``demos`` stays unimportable from a script, as for a user."""
    folder = tmp_path_factory.mktemp("library")
    for pkg in PACKAGES:
        (folder / pkg).symlink_to(ROOT / pkg, target_is_directory=True)
    return folder


def _run(args: list[str], timeout: float, library: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(library), MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _import_then_script(name: str, library: Path, warm: str = "", timeout: float = 1800) -> None:
    # a numba cache the script wrote before would be reused by the import instead of written by it
    for stale in (ROOT / "demos" / "__pycache__").glob(f"{name}.*.nb[ic]"):
        stale.unlink(missing_ok=True)
    first = _run(["-c", f"import demos.{name} as d\n{warm}"], timeout, library)
    assert first.returncode == 0, f"import demos.{name} failed:\n{first.stderr[-4000:]}"
    second = _run([f"demos/{name}.py", "--small"], timeout, library)
    assert second.returncode == 0, f"demos/{name}.py --small failed after import:\n{second.stderr[-4000:]}"


@pytest.mark.parametrize("name", DEMOS)
def test_demo_uses_only_the_public_api(name):
    """No demo imports the library's internals (factors, schedules, distributions) or numba."""
    tree = ast.parse((ROOT / "demos" / f"{name}.py").read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.split(".")[0] in INTERNAL]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in INTERNAL:
                bad.append(node.module)
    assert bad == [], f"demos/{name}.py imports {bad}: demos use `import factorgraph as fg` only"


def test_demo_runs_as_script_after_import(library_path):
    """The Fig. 2 demo (its Monte Carlo reference runs a parallel numba kernel, cached): import it as
    demos.ncvmp_softmax_bounds_fig2 and compile what it uses, then run it as a script."""
    warm = "import numpy as np\nd.evaluate(10, 1.0, 1.0, 4, 2000, np.random.default_rng(0))"
    _import_then_script("ncvmp_softmax_bounds_fig2", library_path, warm)


def test_every_demo_imports_as_a_module(library_path):
    proc = _run(["-c", "import importlib, sys\nfor n in sys.argv[1:]: importlib.import_module('demos.' + n)",
                 *DEMOS], 600, library_path)
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.mark.slow
@pytest.mark.parametrize("name", DEMOS)
def test_every_demo_runs_as_script_after_import(name, library_path):
    _import_then_script(name, library_path)
