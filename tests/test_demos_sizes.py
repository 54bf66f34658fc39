"""The demos that scale a paper's experiment down by default, run at that default size (what
``python demos/<name>.py`` runs, about a minute each) with the findings they print, and at the paper's size
(``--full``) where that takes at most a few minutes.

Each runs in a child process with one-thread BLAS, as the demos set it for themselves when run as scripts
(the environment variable only takes effect before numpy is loaded).  Marked slow: deselected by default,
run by the slow job (``pytest -m slow``).  The linear regression demo's ``--full`` is in ``tests/test_demos.py``;
the other paper sizes take ten minutes to hours and are listed on the Demos page.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parent.parent
_CHILD = """
import importlib, pickle, sys
module = importlib.import_module("demos." + sys.argv[1])  # cwd is the repository root
with open(sys.argv[2], "wb") as f:
    pickle.dump(module.main(seed=0, full=sys.argv[3] == "full"), f)
"""


def _run(name: str, tmp_path: Path, size: str = "default") -> dict:
    """``main()`` of ``demos/<name>.py`` at its default size (or ``full``), in a child process with one-thread
    BLAS."""
    out = tmp_path / "result.pkl"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-c", _CHILD, name, str(out), size], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(f"demos/{name}.py failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    with open(out, "rb") as f:
        return pickle.load(f)


@pytest.mark.slow
def test_linear_regression_default(tmp_path):
    """§2.6.3 at D = 700, N = 350 (N < D, as in the paper): ARD beats shared shrinkage, which beats ML."""
    res = _run("linear_regression_ard", tmp_path)
    ex = res["ex263"]
    assert (ex["D"], ex["D_eff"]) == (700, 70)
    assert ex["ard"]["test_mse"] < ex["vb"]["test_mse"] < ex["ml"]["test_mse"]
    assert all(ex["findings"]) and all(res["ex262"]["findings"])
    assert all(len(picks) == 10 for picks in res["ex264"]["sweep"].values())


@pytest.mark.slow
def test_logistic_drugowitsch_default(tmp_path):
    """§3.6.2 at D = 500: ARD has the lowest test error and shrinks the relevant coefficients least."""
    res = _run("logistic_drugowitsch", tmp_path)
    assert res["high_dimensional"]["D"] == 500
    assert all(res["checks"].values()), res["checks"]


@pytest.mark.slow
def test_logistic_drugowitsch_full(tmp_path):
    """§3.6.2 at the paper's D = 1000, D_eff = 100, N = 2000 (about two minutes)."""
    res = _run("logistic_drugowitsch", tmp_path, "full")
    assert res["high_dimensional"]["D"] == 1000
    assert all(res["checks"].values()), res["checks"]


@pytest.mark.slow
def test_mvi_table2_default(tmp_path):
    """15 datasets: MVI-eig and MVI-lr above Laplace in median test LPD."""
    res = _run("mvi_table2", tmp_path)
    assert res["n_datasets"] == 15
    assert all(res["checks"].values()), res["median"]["lpd"]
    assert res["wins_over_laplace"]["eig"] >= 12


@pytest.mark.slow
def test_softmax_table1_default(tmp_path):
    """16 splits of Iris and Glass, one of the whole Thyroid data: the tilted and adaptive bounds beat the
    quadratic's ELBO on every split; every Iris and Glass fit converges."""
    res = _run("softmax_multinomial_table1", tmp_path)
    assert res["n_splits"] == {"Iris": 16, "Glass": 16, "Thyroid": 1}
    assert all(res["elbo_checks"].values()), res["elbo_checks"]
    for name in ("Iris", "Glass"):
        assert all(c == 16 for c in res["results"][name]["converged"].values()), name
    assert res["results"]["Thyroid"]["N"] == 7200


@pytest.mark.slow
def test_aikl_logistic_fig4_default(tmp_path):
    """4 models over the whole N_trn grid: the AI bound never below the Gaussian one, and their difference
    largest at a middle N_trn (the paper: near N_trn = D = 10), smaller at both ends."""
    res = _run("aikl_logistic_fig4", tmp_path)
    assert len({r["model"] for r in res["rows"]}) == 4
    for row in res["rows"]:
        assert row["B_AI"] >= row["B_G"] - 1e-3, row
    db = np.array([s["dB"] for s in res["summary"]])
    peak = int(np.argmax(db))
    assert res["summary"][peak]["N_trn"] in (5, 10, 20)
    assert db[0] < db[peak] and db[-1] < db[peak]


@pytest.mark.slow
def test_aikl_robust_kernel_default(tmp_path):
    """One split of N_trn = 50 per dataset: the AI bound and test log-probability above the Gaussian ones."""
    res = _run("aikl_robust_kernel", tmp_path)
    assert {r["N_trn"] for r in res["rows"]} == {50}
    for row in res["rows"]:
        assert row["B_AI"] >= row["B_G"] - 1e-3, row
    for name, sm in res["summary"].items():
        assert sm["dB"][0] > 0 and sm["dATLP"][0] > 0, name
