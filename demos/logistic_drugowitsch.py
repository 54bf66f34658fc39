"""Variational Bayesian logistic regression: the examples of Drugowitsch (2014), §3.6.

3.6.1  coefficients and separating hyperplane: D = 3 (bias + 2 inputs), N = 100 training and 1000 test points
3.6.2  D = 1000 inputs of which D_eff = 100 are relevant, N = 2000, N_test = 10000: ARD vs shared shrinkage
3.6.3  polynomial order chosen by the variational bound: N = 50 points, D = 1..10 features x⁰..x^(D−1)

Every fit is ``factorgraph.models.logistic_regression`` (method "quadratic": the Jaakkola–Jordan bound and
the author's algorithm, w ~ N(0, α⁻¹I) or ARD diag(α)⁻¹, α ~ Gam(1e-2, 1e-4)), and predictions are
``models.logistic_predictive`` with the author's bound (``method="bound"``, as ``vb_logit_pred``).  Two
comparisons of the paper are also run:

* "VBiter" — the author's ``vb_logit_fit_iter`` model, without the hyper-prior: w ~ N(0, D⁻¹I).  Here it is
  the same model fitted by batch VMP with the fg API (``fg.mv_gaussian(precision=D)`` and the quadratic
  bound), not the author's one-observation-at-a-time algorithm, so its numbers need not match his;
* Fisher's linear discriminant (FLD), as in the paper's listings.

The data come from numpy's ``default_rng(seed)``, not MATLAB's ``rand``/``randn``, so the numbers differ
from the paper's (which are single realisations too); what should match are its qualitative findings,
printed beside its numbers.  Sizes of 3.6.2: by default D = 500, D_eff = 50, N = 1000, N_test = 5000 (half the
paper's in every dimension); ``--full``: the paper's D = 1000, D_eff = 100, N = 2000, N_test = 10000 (the
1000-dimensional ARD fit takes most of the time); ``--small`` (the tests'): D = 200, D_eff = 40, N = 500,
N_test = 2000.  Figures go to ``demos/out/``.  Run ``python demos/logistic_drugowitsch.py [--small | --full]
[--seed S]``.  The demo
runs BLAS on one thread unless ``OPENBLAS_NUM_THREADS`` is set: on a busy machine OpenBLAS's default threading
made the large fits about 20 times slower (threads spinning in every Cholesky factorisation).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see the module docstring

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import factorgraph as fg  # noqa: E402
from factorgraph import models  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def _rng(seed: int, example: int) -> np.random.Generator:
    return np.random.default_rng([seed, example])


def _labels(rng: np.random.Generator, X: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.where(rng.random(len(X)) < 1.0 / (1.0 + np.exp(-X @ w)), 1, -1)


def _err(p: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.where(p > 0.5, 1, -1) != y))


def fit_fixed_prior(X: np.ndarray, y: np.ndarray, precision: float) -> fg.Result:
    """"VBiter"'s model: w ~ N(0, precision⁻¹ I), Jaakkola–Jordan bound, batch VMP to convergence."""
    with fg.Model("logistic-fixed-prior") as m:
        n = fg.plate("n", X.shape[0])
        w = fg.mv_gaussian("w", mean=0.0, precision=precision, dim=X.shape[1])
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method="quadratic")
    return fg.infer(m, max_iter=500)


def fisher_ld(X: np.ndarray, y: np.ndarray, offset_column: bool) -> tuple[np.ndarray, float]:
    """Fisher's linear discriminant as in the paper's listings: returns (w, threshold) for ``X @ w > threshold``.

    With ``offset_column`` the first column of X is the constant 1: its weight becomes the offset.
    """
    Z = X[:, 1:] if offset_column else X
    a, b = Z[y == 1], Z[y != 1]
    w = np.linalg.solve(np.cov(a, rowvar=False) + np.cov(b, rowvar=False), a.mean(0) - b.mean(0))
    c = 0.5 * (a.mean(0) + b.mean(0)) @ w
    if offset_column:
        return np.r_[-c, w], 0.0
    return w, float(c)


# ------------------------------------------------------------------------------------- 3.6.1
def example_coefficients(seed: int, small: bool) -> dict:
    rng = _rng(seed, 1)
    D, N, N_test, scale = 3, 100, 1000, 5.0
    w = rng.standard_normal(D)

    def inputs(n: int) -> np.ndarray:
        x2 = scale * (rng.random(n) - 0.5)
        x3 = scale * (rng.random(n) - 0.5) - (w[0] + x2 * w[1]) / w[2]
        return np.column_stack([np.ones(n), x2, x3])

    X = inputs(N)
    X_test = inputs(N_test)
    y, y_test = _labels(rng, X, w), _labels(rng, X_test, w)
    r = models.logistic_regression(X, y)
    r1 = fit_fixed_prior(X, y, precision=float(D))
    w_ld, _ = fisher_ld(X, y, offset_column=True)
    fits = {"VB": r, "VBiter": r1}
    out = {"w_true": w, "w_LD": w_ld, "train": {}, "test": {}}
    for name, res in fits.items():
        q = res.posterior("w")
        out[name] = {"mean": q.mean(), "sd": np.sqrt(np.diag(q.cov())), "elbo": res.elbo, "n_iter": res.n_iter}
        out["train"][name] = _err(models.logistic_predictive(res, X, method="bound"), y)
        out["test"][name] = _err(models.logistic_predictive(res, X_test, method="bound"), y_test)
    out["train"]["FLD"] = float(np.mean(np.where(X @ w_ld > 0, 1, -1) != y))
    out["test"]["FLD"] = float(np.mean(np.where(X_test @ w_ld > 0, 1, -1) != y_test))

    print("3.6.1  coefficients and separating hyperplane (D = 3, N = 100, N_test = 1000)")
    print(f"{'':>6}  {'true':>8}  {'VB mean ± 1.96 sd':>22}  {'VBiter mean ± 1.96 sd':>24}  {'FLD':>8}")
    for d in range(D):
        print(f"{'w' + str(d + 1):>6}  {w[d]:8.3f}  {out['VB']['mean'][d]:10.3f} ± {1.96 * out['VB']['sd'][d]:9.3f}  "
              f"{out['VBiter']['mean'][d]:12.3f} ± {1.96 * out['VBiter']['sd'][d]:9.3f}  {w_ld[d]:8.3f}")
    print("0-1 loss      " + "   ".join(f"{k}: train {out['train'][k]:.3f} test {out['test'][k]:.3f}"
                                        for k in ("FLD", "VB", "VBiter")))
    print("paper (its realisation): training FLD 0.140, VB 0.140, VBiter 0.160; test FLD 0.142, VB 0.143, "
          "VBiter 0.149 — 'all classifiers perform roughly equally well'")

    fig, ax = plt.subplots(1, 2, figsize=(11, 4.5))
    idx = np.arange(D)
    ax[0].plot(idx, w, "ko", label="true")
    ax[0].errorbar(idx - 0.1, out["VB"]["mean"], 1.96 * out["VB"]["sd"], fmt="o", color="C3", label="VB")
    ax[0].errorbar(idx + 0.1, out["VBiter"]["mean"], 1.96 * out["VBiter"]["sd"], fmt="D", color="C4",
                   label="VB, prior N(0, I/D)")
    ax[0].plot(idx + 0.2, w_ld, "s", color="C0", label="FLD")
    ax[0].set_xticks(idx, [f"w{d + 1}" for d in idx])
    ax[0].legend()
    ax[0].set_title("A: coefficients (mean ± 95% CI)")
    pos = y == 1
    ax[1].scatter(X[pos, 1], X[pos, 2], marker="o", facecolors="none", edgecolors="k", label="y = 1")
    ax[1].scatter(X[~pos, 1], X[~pos, 2], marker="x", color="k", label="y = −1")
    x2 = np.linspace(X[:, 1].min(), X[:, 1].max(), 2)
    for coef, style, lab in ((w, "k-", "generative"), (out["VB"]["mean"], "C3-", "VB"),
                             (out["VBiter"]["mean"], "C4--", "VB, prior N(0, I/D)"), (w_ld, "C0:", "FLD")):
        ax[1].plot(x2, -(coef[0] + coef[1] * x2) / coef[2], style, label=lab)
    ax[1].set_ylim(X[:, 2].min() - 0.5, X[:, 2].max() + 0.5)
    ax[1].set_xlabel("x2")
    ax[1].set_ylabel("x3")
    ax[1].legend(fontsize=8)
    ax[1].set_title("B: separating hyperplanes w1 + w2 x2 + w3 x3 = 0")
    fig.tight_layout()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / ("logistic_drugowitsch_3_6_1" + ("_small" if small else "") + ".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    out["figure"] = str(path)
    return out


# ------------------------------------------------------------------------------------- 3.6.2
SIZES = {"small": (200, 40, 500, 2000), "default": (500, 50, 1000, 5000), "full": (1000, 100, 2000, 10000)}


def example_high_dimensional(seed: int, size: str) -> dict:
    """3.6.2 at ``SIZES[size]`` = (D, D_eff, N, N_test)."""
    rng = _rng(seed, 2)
    D, D_eff, N, N_test = SIZES[size]
    w = np.r_[rng.standard_normal(D_eff), np.zeros(D - D_eff)]
    X = rng.random((N, D)) - 0.5
    X_test = rng.random((N_test, D)) - 0.5
    y, y_test = _labels(rng, X, w), _labels(rng, X_test, w)
    times = {}
    t = time.perf_counter()
    r = models.logistic_regression(X, y)
    times["VB"] = time.perf_counter() - t
    t = time.perf_counter()
    r_ard = models.logistic_regression(X, y, ard=True)
    times["VB ARD"] = time.perf_counter() - t
    t = time.perf_counter()
    r_iter = fit_fixed_prior(X, y, precision=float(D))
    times["VBiter"] = time.perf_counter() - t
    fits = {"VB": r, "VBiter": r_iter, "VB ARD": r_ard}
    w_ld, c_ld = fisher_ld(X, y, offset_column=False)
    out = {"D": D, "D_eff": D_eff, "N": N, "N_test": N_test, "train": {}, "test": {}, "times": times, "n_iter": {},
           "converged": {}}
    out["train"]["FLD"] = float(np.mean(np.where(X @ w_ld > c_ld, 1, -1) != y))
    out["test"]["FLD"] = float(np.mean(np.where(X_test @ w_ld > c_ld, 1, -1) != y_test))
    coef_rmse = {}
    for name, res in fits.items():
        out["train"][name] = _err(models.logistic_predictive(res, X, method="bound"), y)
        out["test"][name] = _err(models.logistic_predictive(res, X_test, method="bound"), y_test)
        out["n_iter"][name] = res.n_iter
        out["converged"][name] = res.converged
        mean = res.posterior("w").mean()
        coef_rmse[name] = (float(np.sqrt(np.mean((mean[:D_eff] - w[:D_eff]) ** 2))),
                           float(np.sqrt(np.mean(mean[D_eff:] ** 2))))
        # shrinkage of the relevant coefficients: slope of the estimate on the truth
        coef_rmse[name] += (float(mean[:D_eff] @ w[:D_eff] / (w[:D_eff] @ w[:D_eff])),)
    out["coef"] = coef_rmse
    print(f"\n3.6.2  high-dimensional inputs: D = {D}, D_eff = {D_eff}, N = {N}, N_test = {N_test}")
    print(f"{'':>8}  {'train 0-1':>9}  {'test 0-1':>8}  {'RMSE relevant w':>15}  {'RMS irrelevant w':>16}  "
          f"{'slope est/true':>14}  {'iters':>5}  {'seconds':>7}")
    for name in ("FLD", "VB", "VBiter", "VB ARD"):
        c = coef_rmse.get(name, (np.nan,) * 3)
        it = out["n_iter"].get(name, "")
        sec = f"{times[name]:7.1f}" if name in times else ""
        print(f"{name:>8}  {out['train'][name]:9.4f}  {out['test'][name]:8.4f}  {c[0]:15.3f}  {c[1]:16.3f}  "
              f"{c[2]:14.3f}  {it!s:>5}  {sec:>7}")
    print("paper (D = 1000, its realisation): training FLD 0.0415, VB 0.0655, VBiter 0.1125, VB w/ ARD 0.0660; "
          "test FLD 0.2826, VB 0.2603, VBiter 0.2802, VB w/ ARD 0.2035 — ARD best on the test set; the non-ARD "
          "fits shrink the relevant coefficients too much")
    if size != "full":
        print("(a smaller problem than the paper's; --full runs its size)")
    return out


# ------------------------------------------------------------------------------------- 3.6.3
def example_model_selection(seed: int, small: bool) -> dict:
    rng = _rng(seed, 3)
    D_true, N, Ds = 3, 50, np.arange(1, 11)
    w = rng.standard_normal(D_true)
    x = rng.uniform(-5.0, 5.0, N)
    x_test = np.linspace(-5.0, 5.0, 300)

    def gen(z: np.ndarray, d: int) -> np.ndarray:
        return z[:, None] ** np.arange(d)

    y = _labels(rng, gen(x, D_true), w)
    y_test = _labels(rng, gen(x_test, D_true), w)
    L = np.empty(len(Ds))
    loss = np.empty((len(Ds), 2))
    for i, d in enumerate(Ds):
        r = models.logistic_regression(gen(x, d), y)
        L[i] = r.elbo
        loss[i] = (_err(models.logistic_predictive(r, gen(x, d), method="bound"), y),
                   _err(models.logistic_predictive(r, gen(x_test, d), method="bound"), y_test))
    best = int(Ds[np.argmax(L)])
    r_best = models.logistic_regression(gen(x, best), y)
    p_best = models.logistic_predictive(r_best, gen(x_test, best), method="bound")
    p_true = 1.0 / (1.0 + np.exp(-gen(x_test, D_true) @ w))
    print(f"\n3.6.3  model selection by the variational bound: N = {N}, true D = {D_true} (polynomial order 2)")
    print(f"{'D':>3}  {'order':>5}  {'bound':>9}  {'train 0-1':>9}  {'test 0-1':>8}")
    for i, d in enumerate(Ds):
        mark = "  <- max" if d == best else ""
        print(f"{d:3d}  {d - 1:5d}  {L[i]:9.3f}  {loss[i, 0]:9.3f}  {loss[i, 1]:8.3f}{mark}")
    print(f"chosen D = {best} (paper: D_best = 3, i.e. the true order 2; its training/test 0-1 loss 0.100 / 0.183 "
          f"for VB). Here at D = {best}: train {loss[best - 1, 0]:.3f}, test {loss[best - 1, 1]:.3f}")

    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    ax[0].plot(Ds, L, "k-o")
    ax[0].axvline(D_true, color="k", ls="--")
    ax[0].set_xlabel("D (polynomial order + 1)")
    ax[0].set_ylabel("variational bound")
    a2 = ax[0].twinx()
    a2.plot(Ds, loss[:, 0], "r-", label="training")
    a2.plot(Ds, loss[:, 1], "r--", label="test")
    a2.set_ylabel("0-1 loss", color="r")
    a2.legend(loc="lower right")
    ax[0].set_title("A: bound and loss per model")
    ax[1].plot(x_test, p_true, "k-", label="true p(y = 1)")
    ax[1].plot(x_test, p_best, "r--", label=f"VB, D = {best}")
    ax[1].plot(x, np.where(y == 1, 1.02, -0.02), "|", color="C1", label="training data")
    ax[1].set_xlabel("x")
    ax[1].legend(fontsize=8)
    ax[1].set_title("B: predicted class probability")
    fig.tight_layout()
    path = OUT / ("logistic_drugowitsch_3_6_3" + ("_small" if small else "") + ".png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"Ds": Ds, "bound": L, "loss": loss, "best": best, "D_true": D_true, "figure": str(path)}


def main(small: bool = False, seed: int = 0, full: bool = False) -> dict:
    """§3.6 with 3.6.2 at the default size, ``small`` (the tests') or ``full`` (the paper's)."""
    if small and full:
        raise ValueError("small=True and full=True: choose one size (--small or --full)")
    t0 = time.perf_counter()
    a = example_coefficients(seed, small)
    b = example_high_dimensional(seed, "small" if small else "full" if full else "default")
    c = example_model_selection(seed, small)
    checks = {
        "3.6.1: VB, VBiter and FLD have similar test error (within 0.05)":
            max(a["test"].values()) - min(a["test"].values()) < 0.05,
        "3.6.2: ARD has the lowest test error":
            b["test"]["VB ARD"] < min(b["test"][k] for k in ("FLD", "VB", "VBiter")),
        "3.6.2: ARD shrinks the relevant coefficients least": b["coef"]["VB ARD"][2] > max(
            b["coef"][k][2] for k in ("VB", "VBiter")),
        "3.6.2: FLD over-fits (lowest training error, test error above VB's)":
            b["train"]["FLD"] < min(b["train"][k] for k in ("VB", "VB ARD")) and b["test"]["FLD"] > b["test"]["VB"],
        "3.6.3: the bound picks the true model (D = 3)": c["best"] == c["D_true"],
    }
    print("\nthe paper's findings, and whether this run shows them:")
    for text, ok in checks.items():
        print(f"  {'yes' if ok else 'no':3s}  {text}")
    elapsed = time.perf_counter() - t0
    print(f"\nfigures: {a['figure']}, {c['figure']}\nruntime {elapsed:.1f} s")
    return {"coefficients": a, "high_dimensional": b, "model_selection": c, "checks": checks, "runtime": elapsed}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--small", action="store_true", help="3.6.2 with D = 200 (the tests' size)")
    which.add_argument("--full", action="store_true", help="3.6.2 at the paper's size, D = 1000")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    main(small=a.small, seed=a.seed, full=a.full)
