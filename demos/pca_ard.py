"""Bayesian PCA with ARD on the UCI wine table (178 wines × 13 chemical measurements): how many components?

The 13 columns are standardised and ``models.pca`` fits x_n ~ N(W z_n + μ, diag(τ)⁻¹) with K = 12 components
and one ARD precision α_k per column of W (Bishop 1999).  ARD switches off the components the data do not
support: their loadings shrink to zero and α_k grows without bound.  Printed:

* per component, E[α_k], the share of the squared loadings and whether it is kept, with the rotation
  speed-up (Luttinen & Ilin 2010) on and off, and the sweeps each needed;
* the variance the kept components explain, beside classical PCA's leading eigenvalues (Bayesian factor
  analysis leaves each column its own noise, so the kept components explain less than classical PCA's);
* the noise variance per column (the factor-analysis uniquenesses);
* the fit with 20 % of the entries hidden at random (``models.pca`` marginalises missing entries): the
  components kept and the error of the imputed entries (``PCAResult.impute``) beside the column means.

Figure in ``demos/out/pca_ard.png``: the loadings' Hinton-style map and the ELBO traces.
Run ``python demos/pca_ard.py [--small]`` (``--small``: at most 300 sweeps).
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import factorgraph as fg  # noqa: E402
from factorgraph import models  # noqa: E402

try:
    from ._data import data_dir
except ImportError:  # run as a script: python demos/pca_ard.py
    from _data import data_dir

OUT = Path(__file__).resolve().parent / "out"


def load() -> tuple[np.ndarray, list[str]]:
    """The wine table standardised column by column, and its column names."""
    path = data_dir("wine") / "X.csv"
    names = path.read_text(encoding="utf-8").splitlines()[0].split(",")
    X = np.genfromtxt(path, delimiter=",", skip_header=1)
    return (X - X.mean(0)) / X.std(0), names


def main(small: bool = False, seed: int = 0, K: int = 12, plot: bool = True) -> dict:
    X, names = load()
    N, D = X.shape
    max_iter = 300 if small else 5000
    fits = {}
    for rotate in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)  # reported below instead
            fits[rotate] = models.pca(X, K, rotate=rotate, max_iter=max_iter, tol=1e-9, seed=seed)
    r = fits[True]
    print(f"wine: N = {N}, D = {D}, standardised; Bayesian PCA with ARD, K = {K}")
    for rotate, f in fits.items():
        print(f"  rotation {'on ' if rotate else 'off'}: {f.n_iter} sweeps "
              f"({'converged' if f.converged else 'not converged'}), {f.active().sum()} components kept, "
              f"bound {f.elbo:.4f}, {f.time:.2f} s")
    order = np.argsort(-r.relevance)
    print("\n  component   E[alpha]   share of squared loadings   kept")
    for k in order:
        print(f"  {k:>9d} {r.ard_precision[k]:10.3g} {r.relevance[k]:27.4f}   {'yes' if r.active()[k] else 'no'}")
    kept = int(r.active().sum())
    classical = np.sort(np.linalg.eigvalsh(np.cov(X.T, bias=True)))[::-1]
    print(f"\n  variance explained by the {kept} kept components: {r.explained_variance_ratio[:kept].sum():.3f} "
          f"(classical PCA's first {kept}: {classical[:kept].sum() / classical.sum():.3f})")
    print("  noise variance per column (uniquenesses):")
    for name, v in zip(names, r.noise_variance, strict=True):
        print(f"    {name:>22s} {v:.3f}")
    # the same fit with 20 % of the entries hidden at random: marginalised exactly, then imputed
    hide = np.random.default_rng(seed).random(X.shape) < 0.2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        rm = models.pca(np.where(hide, np.nan, X), K, max_iter=max_iter, tol=1e-9, seed=seed)
    filled, var = rm.impute()
    colmean = np.where(hide, 0.0, X).sum(0) / (~hide).sum(0)
    rmse = float(np.sqrt(np.mean((filled - X)[hide] ** 2)))
    rmse_mean = float(np.sqrt(np.mean((colmean - X)[hide] ** 2)))
    zsd = float(((filled - X)[hide] / np.sqrt(var[hide])).std())
    print(f"\n  20% of the entries hidden: {rm.n_iter} sweeps, {rm.active().sum()} components kept; the hidden "
          f"entries imputed with RMSE {rmse:.3f} (column means: {rmse_mean:.3f}; standardised errors' sd {zsd:.2f})")
    if plot:
        OUT.mkdir(exist_ok=True)
        fig, ax = plt.subplots(1, 3, figsize=(14, 4.5))
        for a, rotate in zip(ax[:2], (True, False), strict=True):
            W = fits[rotate].loadings
            a.imshow(W, cmap="RdBu", vmin=-np.abs(W).max(), vmax=np.abs(W).max(), aspect="auto")
            a.set_yticks(range(D), names, fontsize=7)
            a.set_xlabel("component")
            a.set_title(f"E[W], rotation {'on' if rotate else 'off'} ({fits[rotate].n_iter} sweeps)")
        for rotate, f in fits.items():
            ax[2].plot(np.arange(1, f.n_iter + 1), f.elbo_trace, label=f"rotation {'on' if rotate else 'off'}")
        ax[2].set_xscale("log")
        ax[2].set_ylim(r.elbo - 200, r.elbo + 20)
        ax[2].set_xlabel("sweep")
        ax[2].set_ylabel("ELBO")
        ax[2].legend()
        fig.tight_layout()
        fig.savefig(OUT / "pca_ard.png", dpi=120)
        plt.close(fig)
    return {"fits": fits, "kept": kept, "classical": classical, "names": names, "missing_fit": rm,
            "impute_rmse": rmse, "impute_rmse_colmean": rmse_mean}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    main(small=a.small, seed=a.seed)
