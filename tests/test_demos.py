"""The demos run as tests: each demo's ``main(small=True)`` and its key numbers.

The larger runs (the paper's size of the linear regression demo, ``main(full=True)``: two minutes for the
1000-dimensional regression) are marked slow: the default ``pytest`` run deselects them and ``.ci/run`` runs
them as a separate job (``pytest -m slow``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")



def _load(name: str):
    return importlib.import_module(f"demos.{name}")  # the repository root is on sys.path (tests is a package)


def _non_decreasing(trace, rel: float = 1e-9) -> bool:
    trace = np.asarray(trace, dtype=float)
    return trace.size < 2 or bool(np.min(np.diff(trace)) >= -rel * max(1.0, abs(trace[-1])))


@pytest.fixture(scope="module")
def quickstart():
    return _load("quickstart").main(small=True, seed=0)


@pytest.fixture(scope="module")
def linreg():
    return _load("linear_regression_ard").main(small=True, seed=0)


@pytest.fixture(scope="module")
def pca_wine():
    return _load("pca_ard").main(small=True, seed=0)


@pytest.fixture(scope="module")
def mixture():
    return _load("gaussian_mixture").main(small=True, seed=0)


# ------------------------------------------------------------------------------------------ quickstart
def test_quickstart_gaussian_posterior(quickstart):
    assert abs(quickstart["mu_mean"] - 2.5) < 4 * quickstart["mu_sd"] + 0.05
    assert 0.5 < quickstart["tau_mean"] / (1 / 0.8**2) < 2.0
    assert _non_decreasing(quickstart["gaussian_elbo_trace"])


def test_quickstart_regression_and_comparison(quickstart):
    assert np.max(np.abs(quickstart["w_mean"] - quickstart["true_w"])) < 0.3
    assert np.all(np.abs(quickstart["pred_mean"] - quickstart["pred_truth"]) < 3 * quickstart["pred_sd"])
    # the three irrelevant inputs get larger ARD precisions than the relevant ones
    assert np.min(quickstart["ard_alpha"][3:]) > np.max(quickstart["ard_alpha"][:3])
    ev = quickstart["evidence"]
    assert set(ev) == {"shared alpha", "ARD"} and all(np.isfinite(v) for v in ev.values())
    assert quickstart["best_model"] == max(ev, key=ev.get)


# ------------------------------------------------------------------------------ linear regression (§2.6)
def test_linreg_261_coefficients(linreg):
    ex = linreg["ex261"]
    assert np.max(np.abs(ex["w_vb"] - ex["w_true"])) < 0.3
    assert np.max(np.abs(ex["w_ard"] - ex["w_true"])) < 0.3


def test_linreg_262_vb_beats_ml_on_test(linreg):
    ex = linreg["ex262"]
    assert ex["ml"]["train_mse"] < ex["vb"]["train_mse"]  # ML over-fits ...
    assert ex["vb"]["test_mse"] < ex["ml"]["test_mse"]  # ... and predicts worse
    assert ex["vb"]["test_loglik"] > ex["ml"]["test_loglik"]


def test_linreg_263_ard_beats_shared_on_sparse(linreg):
    ex = linreg["ex263"]
    assert ex["ard"]["test_mse"] < ex["vb"]["test_mse"]


def test_linreg_264_bound_picks_order(linreg):
    ex = linreg["ex264"]
    for name, true_order in ex["true_orders"].items():
        assert abs(ex["best_orders"][name] - true_order) <= 1, name
        case = ex["cases"][name]
        assert case["best"] == int(case["orders"][np.argmax(case["bounds"])])
    assert all(Path(f).is_file() for f in linreg["figures"])


# ------------------------------------------------------------------------------------------- mixture
def test_pca_wine_ard_switches_components_off(pca_wine):
    on, off = pca_wine["fits"][True], pca_wine["fits"][False]
    assert on.converged and on.n_iter < 300
    assert 2 <= pca_wine["kept"] <= 6 and on.active().sum() == pca_wine["kept"]
    assert on.elbo > off.elbo and off.active().sum() >= on.active().sum()
    assert _non_decreasing(on.elbo_trace) and _non_decreasing(off.elbo_trace)
    assert (Path(__file__).resolve().parents[1] / "demos" / "out" / "pca_ard.png").exists()
    miss = pca_wine["missing_fit"]  # 20 % of the entries hidden
    assert miss.converged and 2 <= miss.active().sum() <= 6 and _non_decreasing(miss.elbo_trace)
    assert pca_wine["impute_rmse"] < 0.85 * pca_wine["impute_rmse_colmean"]


def test_mixture_recovers_clusters(mixture):
    assert mixture["ari"] >= 0.95
    assert mixture["converged"]
    assert np.isclose(np.sum(mixture["weights"]), 1.0)
    assert Path(mixture["figure"]).is_file()


def test_mixture_elbo_non_decreasing(mixture):
    assert mixture["elbo_monotone"]
    assert _non_decreasing(mixture["elbo_trace"])
    assert mixture["all_monotone"]


def test_adjusted_rand_index():
    ari = _load("gaussian_mixture").adjusted_rand_index
    a = np.array([0, 0, 1, 1, 2, 2])
    assert ari(a, a) == pytest.approx(1.0)
    assert ari(a, np.array([5, 5, 3, 3, 9, 9])) == pytest.approx(1.0)  # invariant to relabelling
    # contingency [[2, 1], [0, 3]]: index pairs 1 + 3, row pairs 3 + 3, column pairs 1 + 6, 15 in all
    assert ari(np.array([0, 0, 0, 1, 1, 1]), np.array([0, 0, 1, 1, 1, 1])) == pytest.approx(
        (4.0 - 6 * 7 / 15) / (0.5 * (6 + 7) - 6 * 7 / 15))
    rng = np.random.default_rng(0)
    assert abs(ari(rng.integers(0, 4, 2000), rng.integers(0, 4, 2000))) < 0.02  # ~0 for random labels


# ------------------------------------------------------------------------------------------ full size
@pytest.mark.slow
def test_mixture_full_size():
    res = _load("gaussian_mixture").main(small=False, seed=0)
    assert res["ari"] >= 0.95 and res["all_monotone"]


@pytest.mark.slow
def test_linreg_full_size_paper_findings():
    res = _load("linear_regression_ard").main(full=True, seed=0)
    assert res["ex263"]["D"] == 1000  # the paper's size
    assert np.max(np.abs(res["ex261"]["w_vb"] - res["ex261"]["w_true"])) < 0.3
    ex = res["ex263"]
    assert ex["ard"]["test_mse"] < ex["vb"]["test_mse"] < ex["ml"]["test_mse"]
    for name, true_order in res["ex264"]["true_orders"].items():
        assert abs(res["ex264"]["best_orders"][name] - true_order) <= 1, name
