"""Bayesian PCA / factor analysis with ARD (Bishop 1999), built with the public builders and fitted by ``fg.infer``.

Model, for rows x_n ∈ R^D (n = 1..N) and K latent components::

    z_n ~ N(0, I_K),   w_d ~ N(0, diag(α)⁻¹) (row d of W, a K-vector),   μ_d ~ N(0, β₀⁻¹),
    α_k ~ Gam(a₀, b₀) (ARD; one shared α without ARD),   τ_d ~ Gam(a₀, b₀) (one τ with noise="isotropic"),
    x_nd ~ N(w_dᵀz_n + μ_d, τ_d⁻¹),

written as ``fg.gaussian("x", fg.inner(z, w, intercept=True), tau, observed=X, mask=M)`` with w̃_d = (w_d, μ_d)
one vector, ``fg.mv_gaussian("w", 0, precision=(alpha, [β₀]))`` (``pca_model``).  The factorisation is
q = Π_n q(z_n) Π_d q(w̃_d) q(α) q(τ) (q(w̃_d) a joint (K+1)-Gaussian), each block updated in closed form in the
order z, w̃, α, τ (Winn & Bishop 2005).  The engine fuses the scores' prior and the likelihood into one factor
that owns q(z) (``factors.factor_analysis``): with every entry observed one covariance serves every row, and a
sweep costs O(NDK + DK³).  Missing entries (NaN in X, ``mask=``) are marginalised exactly: only the observed
entries enter, each row gets its own Cov(z_n) (docs/maths.md §12).

With ``rotate=True`` every sweep ends with the rotation z → Rz, w → R⁻ᵀw of ``schedules.rotation``
(``ScoresRotation``, Luttinen & Ilin 2010), which never lowers the bound and lets ARD switch unused components
off in far fewer sweeps; with missing entries and a mean it is preceded by the closed-form translation
z → z + c, μ_d → μ_d − cᵀw_d, which removes the slow mode coupling z̄ and μ.

The model is stated in the units of X: with ``scale`` the Gamma priors' rates are b₀s² and μ's precision β₀/s²
(s the root mean square of X's centred entries), which is the model of X / s with rates b₀ and precision β₀
expressed in the units of X; its bound is that of X / s minus (observed entries) × log s.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from distributions import MvGaussian
from factorgraph.graph import checks, convergence
from factorgraph.graph.builders import gamma, gaussian, mv_gaussian, plate
from factorgraph.graph.convergence import ConvergenceWarning
from factorgraph.graph.expressions import inner
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.models.pca_result import PCAResult
from schedules import VMP, infer
from schedules.rotation import ScoresRotation


def _observed(X: Any, mask: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """X as a float (N, D) matrix and its mask (True = observed; None when every entry is): NaN entries, the
    entries where ``mask`` is False and those a ``numpy.ma`` array masks are missing."""
    Xa, hidden = checks.as_float_array(X, "pca: X")
    if Xa.ndim != 2:
        raise ModelError(f"pca: X must be a matrix (N, D), got shape {Xa.shape}")
    N, D = Xa.shape
    if N < 2 or D < 1:
        raise ModelError(f"pca: X must have at least 2 rows and 1 column, got shape {Xa.shape}")
    M = checks.mask_array(mask, Xa.shape, "X") & ~np.isnan(Xa)
    if hidden is not None:
        M &= ~hidden
    checks.constant(Xa if M.all() else Xa[M], "pca: X (its observed entries)")  # finite (±inf is not "missing")
    if M.all():
        return Xa, None
    empty = np.flatnonzero(~M.any(0))
    if empty.size:
        raise ModelError(f"pca: column(s) {empty[:10].tolist()} of X have no observed entry; nothing can be learnt "
                         "about their loadings and noise: drop them")
    return np.where(M, Xa, 0.0), M


def _check(X: Any, mask: Any, n_components: Any, noise: str) -> tuple[np.ndarray, np.ndarray | None, int]:
    Xa, M = _observed(X, mask)
    D = Xa.shape[1]
    if isinstance(n_components, bool) or not isinstance(n_components, int | np.integer):
        raise ModelError(f"pca: n_components must be an integer, got {n_components!r}")
    K = int(n_components)
    if not 1 <= K <= D:
        raise ModelError(f"pca: n_components must be between 1 and D = {D} (the columns of X), got {K}")
    if noise not in ("diagonal", "isotropic"):
        raise ModelError(f"pca: noise must be 'diagonal' (factor analysis) or 'isotropic' (PPCA), got {noise!r}")
    return Xa, M, K


def _start(init: Any, seed: Any, D: int, K: int, s: float) -> np.ndarray:
    """The initial loading means in the units of X: N(0, 1) draws in the units of X / s, or ``init``."""
    if isinstance(init, str):
        if init != "random":
            raise ModelError(f"pca: init must be 'random' or a (D, K) = ({D}, {K}) array of loadings, got {init!r}")
        return s * np.random.default_rng(seed).standard_normal((D, K))
    W0 = checks.constant(init, "pca: init")
    if W0.shape != (D, K):
        raise ModelError(f"pca: init loadings must have shape (D, K) = ({D}, {K}), got {W0.shape}")
    return W0


def _scale(Xa: np.ndarray, M: np.ndarray | None, mean: bool, scale: bool) -> tuple[float, float]:
    """(s, total variance): s the root mean square of the (centred, with ``mean``) observed entries (1 without
    ``scale``), the total variance the trace of the observed columns' sample covariance."""
    if M is None:
        Xc = Xa - Xa.mean(0)
        total = float(np.einsum("nd,nd->", Xc, Xc) / len(Xa))
        s = float(np.sqrt(np.mean((Xc if mean else Xa) ** 2))) if scale else 1.0
    else:
        cnt = M.sum(0)
        Xc = np.where(M, Xa - Xa.sum(0) / cnt, 0.0)
        total = float((np.einsum("nd,nd->d", Xc, Xc) / cnt).sum())
        s = float(np.sqrt(np.sum((Xc if mean else Xa) ** 2) / M.sum())) if scale else 1.0
    if s == 0.0:
        raise ModelError("pca: X is constant (every column has zero variance)")
    return s, total


def start(Xa: np.ndarray, M: np.ndarray | None, W0: np.ndarray, mean: bool, s: float) -> MvGaussian:
    """``pca``'s q(w̃) at the start: a point mass (covariance (10⁻¹⁴s)²I, below rounding) at the loading means W0
    and, with ``mean``, the columns' observed means."""
    D = Xa.shape[1]
    if mean:
        cnt = np.full(D, float(Xa.shape[0])) if M is None else M.sum(0)
        W0 = np.concatenate([W0, (Xa.sum(0) / cnt)[:, None]], axis=1)
    J = W0.shape[1]
    return MvGaussian(W0, cov=np.broadcast_to((1e-14 * s) ** 2 * np.eye(J), (D, J, J)))


def pca_model(X: Any, n_components: int, ard: bool = True, *, noise: str = "diagonal", mask: Any = None,
              mean: bool = True, shape: float = 1e-3, rate: float = 1e-3, mean_precision: float = 1e-6,
              scale: bool = True) -> Model:
    """The model of ``pca`` (variables ``z`` (scores, N × K), ``w`` (loadings, D × K, or D × (K + 1) with the
    column's mean last), ``alpha``, ``tau``), for ``fg.infer`` or ``fg.compare``; the arguments as in ``pca``."""
    Xa, M, K = _check(X, mask, n_components, noise)
    s, _ = _scale(Xa, M, mean, scale)
    return _model(Xa, M, K, ard, noise, mean, shape, rate * s**2, mean_precision / s**2)


def _model(Xa: np.ndarray, M: np.ndarray | None, K: int, ard: bool, noise: str, mean: bool, a0: float, b0: float,
           beta0: float) -> Model:
    N, D = Xa.shape
    with Model("pca") as m:
        n, d = plate("n", N), plate("d", D)
        alpha = gamma("alpha", a0, b0, plates=[plate("k", K)] if ard else [])
        if mean:  # w̃_d = (w_d, μ_d) ~ N(0, diag(α, β₀)⁻¹)
            w = mv_gaussian("w", np.zeros(K + 1), precision=(alpha, np.array([beta0])), plates=[d])
        else:
            w = mv_gaussian("w", np.zeros(K), precision=alpha, plates=[d])
        z = mv_gaussian("z", np.zeros(K), precision=np.eye(K), plates=[n])
        tau = gamma("tau", a0, b0, plates=[d] if noise == "diagonal" else [])
        gaussian("x", inner(z, w, intercept=mean), tau, plates=[n, d], observed=Xa, mask=M)
    return m


def pca(X: Any, n_components: int, ard: bool = True, *, rotate: bool = True, noise: str = "diagonal",
        mask: Any = None, mean: bool = True, max_iter: int = 1000, tol: float = 1e-7, shape: float = 1e-3,
        rate: float = 1e-3, mean_precision: float = 1e-6, init: Any = "random", seed: int | None = 0,
        scale: bool = True) -> PCAResult:
    """Bayesian PCA (Bishop 1999): x_n ~ N(W z_n + μ, diag(τ)⁻¹), ARD on W's columns, fitted by VMP (``fg.infer``).

    Parameters
    ----------
    X
        Data (N, D), one row per observation.  NaN marks a missing entry (so do a ``numpy.ma`` array's mask
        and ``mask``); missing entries are marginalised exactly: every update and the bound use only the
        observed entries, and each row gets its own Cov(z_n).  A row with no observed entry keeps
        q(z_n) = N(0, I); a column with none is refused.
    n_components
        K, the number of latent components (1 ≤ K ≤ D); with ARD an upper bound, unneeded ones are switched off.
    ard
        One precision α_k per column of W (Bishop's ARD); False: one shared α.
    rotate
        End each sweep with the bound-maximising rotation of the latent space (Luttinen & Ilin 2010); with
        missing entries and ``mean``, preceded by the bound-maximising translation of z and μ.
    noise
        "diagonal" (τ_d per column: factor analysis) or "isotropic" (one τ: probabilistic PCA).
    mask
        Optional (N, D) bool array, True = observed (combined with the NaNs of X).
    mean
        Learn a mean μ_d per column (prior N(0, ``mean_precision``⁻¹)), jointly with w_d.
    max_iter, tol
        At most ``max_iter`` sweeps; stop when the bound changes by less than ``tol`` × (1 + |L|) (L the bound
        of X / s, see ``scale``).  ``tol=None``: run ``max_iter`` sweeps (converged if the last moved no natural
        parameter by more than 1e-8, as in ``fg.infer``).
    shape, rate
        a₀, b₀ of the Gamma priors on α and τ.
    init, seed
        "random" (loadings' means N(0, 1) in the units of X / s, drawn with ``seed``) or a (D, K) array of
        initial loading means (in the units of X); q(W) starts as a point mass (with μ at the columns' observed
        means), q(α) and q(τ) at their priors, and the first update is q(z).
    scale
        State the priors for X / s with s the root mean square of the (centred, with ``mean``) entries of X, so
        that the Gamma priors (their rates b₀ carry the units of w² and x²) act alike whatever the units of X;
        the model, its posteriors and its bound are in the units of X (``pca_model``).  ``False``: the priors
        apply to X as given (as in BayesPy; tests/test_pca.py compares the two this way).

    Returns
    -------
    PCAResult
        A ``fg.Result`` (posteriors ``z``, ``w``, ``alpha``, ``tau``; ``summary``, ``to_arviz``, ``fg.predict``,
        ``fg.compare``) with PCA's accessors (``loadings``, ``scores``, ``mean``, ``impute``, ...).
    """

    Xa, M, K = _check(X, mask, n_components, noise)
    s, total = _scale(Xa, M, mean, scale)
    W0 = _start(init, seed, Xa.shape[1], K, s)
    tol = None if tol is None else checks.number(tol, "pca: tol (a number ≥ 0 or None)", low=0.0)
    b0, beta0 = rate * s**2, mean_precision / s**2
    model = _model(Xa, M, K, ard, noise, mean, shape, b0, beta0)
    if rotate:
        model.sweep_hooks.append(ScoresRotation("z", "w", "alpha", shape, b0, shared=not ard,
                                                translate=beta0 if mean else None))
    point = start(Xa, M, W0, mean, s)
    jac = (Xa.size if M is None else M.sum()) * np.log(s)  # the bound of X / s is the bound of X plus jac
    stopped: list[bool] = []

    def stop(it: int, L: float, eng: Any) -> str | None:
        tr = eng.trace
        if tol is not None and len(tr) > 1 and abs(tr[-1] - tr[-2]) <= tol * (1.0 + abs(L + jac)):
            stopped.append(True)
            return "converged"
        return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # this function's own stopping rule decides (below)
        r = infer(model, VMP(accelerate=False), schedule=["z", "w", "alpha", "tau"], init={"w": point},
                  max_iter=max_iter, tol=None, param_tol=None, callbacks=[stop])
    if tol is not None:
        r.converged = bool(stopped)
        r.warnings = [w for w in r.warnings if "not converged" not in w]
        if not stopped:
            tr = r.elbo_trace
            r.warnings.append(f"pca: not converged after {max_iter} sweeps (last bound change "
                              f"{tr[-1] - tr[-2] if len(tr) > 1 else float('nan'):.3g}); raise max_iter")
    for text in r.warnings:
        if "not converged" in text:
            convergence.warn(text)
    return PCAResult.of(r, K=K, has_mean=mean, total_variance=total, rotate=rotate, observed=M, data=Xa)


__all__ = ["PCAResult", "pca", "pca_model"]
