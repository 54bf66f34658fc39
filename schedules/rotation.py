"""Parameter-expanded VB: the rotation speed-up of Luttinen & Ilin (2010) for products WZ, an engine step run
between sweeps (``Model.sweep_hooks``) by Bayesian PCA (``ScoresRotation``) and linear state-space models
(``StateRotation``) alike.

In a model where the data depend on two factors only through their product, y = W z (Bayesian PCA,
factor analysis, a linear state-space model's C x_t), the likelihood is unchanged by z → R z,
W → W R⁻¹ for any invertible K×K matrix R.  Mean-field VMP moves along that direction only by slow
zig-zags, so after each sweep we apply the R that maximises the bound directly: a K×K optimisation
whose cost does not depend on the data size.  Only the terms that change with R enter:

* ``gaussian_term`` — the side rotated by R (x → R x) with a unit-Gaussian prior N(0, I), n vectors,
  second-moment sum A = Σ_n E[x_n x_nᵀ]:

      f(R) = −½ tr(R A Rᵀ) + n log|det R|,     ∂f/∂R = −R A + n R⁻ᵀ

  (the prior's expected log density plus the entropy of the rotated q; the likelihood is invariant).
* ``ard_term`` — the side rotated by R⁻ᵀ (w → R⁻ᵀ w, so that wᵀz is invariant) with prior
  w_d ~ N(0, diag(α)⁻¹), α_k ~ Gam(a₀, b₀), and q(α) re-optimised for each R.  With U = R⁻¹,
  C = Uᵀ A_W U, A_W = Σ_d E[w_d w_dᵀ] over the d vectors, b_k = b₀ + ½C_kk and a = a₀ + d/2:

      f(R) = −a Σ_k log b_k − d log|det R|,      ∂f/∂R = Uᵀ A_W U diag(a/b) Uᵀ − d R⁻ᵀ

  (the prior of w and the KL of the optimal q(α) = Gam(a, b) sum to −a Σ log b_k + const).

* ``markov_chain_term`` — the states of a linear-Gaussian chain x_1 ~ N(0, I), x_t ~ N(A x_{t−1}, I), rotated
  x_t → R x_t with the rows of A rotated a_i → R⁻ᵀa_i (A → AR⁻¹; ``ard_term`` carries A's own prior) so that
  Ax_{t−1} is unchanged.  The dynamics are not invariant (x_t itself moves) and enter exactly: with
  A_x = Σ_t E[x_tx_tᵀ] over all n steps and S₁₀ = Σ_{t≥2} E[x_tx_{t−1}ᵀ],

      f(R) = −½tr(R A_x Rᵀ) + tr(R S₁₀ Āᵀ) + n log|det R|,     ∂f/∂R = −R A_x + Ā S₁₀ᵀ + n R⁻ᵀ

  (−½Σ_t E‖Rx_t − Ax_{t−1}‖² − ½E‖Rx_1‖² up to terms free of R, plus the chain's entropy change).

* ``similarity_ard_term`` — the full symmetry of that chain, A → R A R⁻¹ (so x_t − Ax_{t−1} → R(x_t − Ax_{t−1})),
  for a q(A) = Π_i N(ā_i, Σ_i) independent over rows with the prior a_i ~ N(0, diag(α)⁻¹).  The pushed-forward q
  correlates the rows; it is replaced by the product of its row marginals (mean RĀR⁻¹, row covariances
  Σ'_i = Uᵀ K_i U with K_i = Σ_j R_ij² Σ_j), which leaves every expectation that is linear in the rows' moments
  unchanged and raises the entropy to exactly that of the product.  With M(R) = ĀᵀRᵀRĀ + Σ_j (RᵀR)_jj Σ_j,
  b_k = b₀ + ½[UᵀMU]_kk, a = a₀ + n/2, Λ = diag(a/b), P = UΛUᵀ, c_j = tr(PΣ_j) and T_ij = tr(K_i⁻¹Σ_j):

      f(R) = −a Σ_k log b_k + ½Σ_i log|K_i| − n log|det R|,
      ∂f/∂R = UᵀMUΛUᵀ − R(ĀPĀᵀ + diag(c)) + R∘T − n R⁻ᵀ.

  The dynamics term is then ``gaussian_term`` of W + E[x_1x_1ᵀ] (Q = I: −½Σ_t E‖R(x_t − Ax_{t−1})‖² − ½E‖Rx_1‖²),
  W = Σ_{t≥2} E[(x_t − Ax_{t−1})(x_t − Ax_{t−1})ᵀ].

``optimal_rotation`` maximises the sum of such terms by L-BFGS from R = I and returns R only when it
raises the bound; applying it (moments x → Rx, Σ → RΣRᵀ; w → R⁻ᵀw; then q(α) updated) therefore
never lowers the ELBO.  The terms are reusable: a state-space chain adds its own term for the rotated
dynamics, whatever rotates adds its term.

The step itself (``Rotation``): a sweep hook that finds R for the current q and moves q by it; a subclass says
which terms enter (``terms``) and how q moves (``apply``).  ``ScoresRotation`` rotates the latent scores and the
loadings of a fused factor analysis (``factors.factor_analysis``; preceded, with missing entries and an
intercept, by ``optimal_translation``); ``StateRotation`` the states, dynamics and loadings of
``models.linear_state_space``.

References: Luttinen, J. & Ilin, A. (2010), "Transformations in variational Bayesian factor analysis
to speed up learning", Neurocomputing 73.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
from scipy.optimize import minimize

from distributions import MvGaussian
from distributions.gaussian_chain import GaussianChain
from factorgraph.graph.nodes import ModelError
from factors.factor_analysis import FACTOR_ANALYSIS, moved_sums, rows_sums
from factors.gaussian_markov_chain import _sums

Term = Callable[[np.ndarray, np.ndarray, float], tuple[float, np.ndarray]]
"""A bound term: (R, R⁻¹, log|det R|) → (f(R), ∂f/∂R); the inverse and determinant are computed once for all
terms."""


def _logdet(R: np.ndarray) -> float:
    sign, ld = np.linalg.slogdet(R)
    return ld if sign != 0 else -np.inf


def evaluate(terms: Sequence[Term], R: np.ndarray) -> tuple[float, np.ndarray]:
    """Σ_t f_t(R) and its gradient (−∞ and zeros for a singular R)."""
    ld = _logdet(R)
    if not np.isfinite(ld):
        return -np.inf, np.zeros_like(R)
    U = np.linalg.inv(R)
    v, g = 0.0, np.zeros_like(R)
    for t in terms:
        tv, tg = t(R, U, ld)
        v, g = v + tv, g + tg
    return v, g


def gaussian_term(A: np.ndarray, n: float) -> Term:
    """Bound terms of n vectors x_n ~ N(0, I) rotated as x → R x: f(R) = −½tr(RARᵀ) + n log|det R|.

    Parameters
    ----------
    A
        Σ_n E[x_n x_nᵀ] (K, K) under the current q.
    n
        The number of rotated vectors (each contributes log|det R| of entropy).
    """
    A = np.asarray(A, float)

    def term(R: np.ndarray, U: np.ndarray, ld: float) -> tuple[float, np.ndarray]:
        RA = R @ A
        return -0.5 * np.sum(RA * R) + n * ld, -RA + n * U.T

    return term


def markov_chain_term(A: np.ndarray, n: float, S10: np.ndarray, Abar: np.ndarray) -> Term:
    """Bound terms of a Gaussian Markov chain (x_1 ~ N(0, I), Q = I) rotated x_t → R x_t, A → A R⁻¹:
    f(R) = −½tr(RARᵀ) + tr(R S₁₀ Āᵀ) + n log|det R|.

    Parameters
    ----------
    A
        Σ_t E[x_t x_tᵀ] over every step of every sequence (K, K).
    n
        The number of steps (each contributes log|det R| of entropy).
    S10
        Σ_{t≥2} E[x_t x_{t−1}ᵀ] (K, K).
    Abar
        E[A] (K, K), rows ā_i (before the rotation).
    """
    A, M = np.asarray(A, float), np.asarray(S10, float) @ np.asarray(Abar, float).T

    def term(R: np.ndarray, U: np.ndarray, ld: float) -> tuple[float, np.ndarray]:
        RA = R @ A
        return -0.5 * np.sum(RA * R) + np.sum(R * M.T) + n * ld, -RA + M.T + n * U.T

    return term


def ard_term(A: np.ndarray, n: float, shape: float, rate: float, shared: bool = False) -> Term:
    """Bound terms of n vectors w_d ~ N(0, diag(α)⁻¹) rotated as w → R⁻ᵀw, q(α) re-optimised.

    ``f(R) = −a Σ_k log(b₀ + ½[R⁻ᵀ A R⁻¹]_kk) − n log|det R|`` with a = a₀ + n/2; with ``shared`` (one
    precision α for all K coordinates, w_d ~ N(0, α⁻¹I)) ``f(R) = −a log(b₀ + ½tr(R⁻ᵀ A R⁻¹)) − n log|det R|``
    with a = a₀ + nK/2 and gradient (a/b) Uᵀ A U Uᵀ − n R⁻ᵀ.

    Parameters
    ----------
    A
        Σ_d E[w_d w_dᵀ] (K, K).
    n
        The number of rotated vectors d.
    shape, rate
        a₀, b₀ of the Gamma prior on each α_k.
    """
    A = np.asarray(A, float)
    a = shape + 0.5 * n * (A.shape[0] if shared else 1)

    def term(R: np.ndarray, U: np.ndarray, ld: float) -> tuple[float, np.ndarray]:
        AU = A @ U
        b = rate + 0.5 * np.einsum("ik,ik->k", U, AU)
        if shared:
            b = rate + np.sum(b - rate)
        value = -a * np.sum(np.log(b)) - n * ld
        grad = U.T @ (AU * (a / b)) @ U.T - n * U.T
        return value, grad

    return term


def similarity_ard_term(Abar: np.ndarray, Acov: np.ndarray, shape: float, rate: float) -> Term:
    """Bound terms of a K×K matrix A with independent rows a_i ~ N(0, diag(α)⁻¹), α_k ~ Gam(a₀, b₀), transformed
    A → R A R⁻¹ and projected onto independent rows, q(α) re-optimised (formula in the module docstring).

    Parameters
    ----------
    Abar
        E[A] (K, K), rows ā_i.
    Acov
        Cov(a_i) (K, K, K), one covariance per row (positive definite).
    shape, rate
        a₀, b₀ of the Gamma prior on each α_k.
    """
    Abar, Acov = np.asarray(Abar, float), np.asarray(Acov, float)
    n = Abar.shape[0]
    a = shape + 0.5 * n

    def term(R: np.ndarray, U: np.ndarray, ld: float) -> tuple[float, np.ndarray]:
        R2 = R * R
        K = np.einsum("ij,jkl->ikl", R2, Acov)  # K_i = Σ_j R_ij² Σ_j
        RA = R @ Abar
        M = RA.T @ RA + np.einsum("j,jkl->kl", R2.sum(0), Acov)
        N = U.T @ M @ U
        b = rate + 0.5 * np.diagonal(N)
        sign, ldK = np.linalg.slogdet(K)
        if np.any(sign <= 0) or np.any(b <= 0):
            return -np.inf, np.zeros_like(R)
        value = -a * np.sum(np.log(b)) + 0.5 * ldK.sum() - n * ld
        lam = a / b
        P = (U * lam) @ U.T
        c = np.einsum("kl,jlk->j", P, Acov)
        Tm = np.einsum("ikl,jlk->ij", np.linalg.inv(K), Acov)
        grad = (N * lam) @ U.T - R @ (Abar @ P @ Abar.T + np.diag(c)) + R * Tm - n * U.T
        return value, grad

    return term


def optimal_rotation(terms: Sequence[Term], K: int, max_iter: int = 300, tol: float = 1e-12
                     ) -> tuple[np.ndarray, float]:
    """The K×K matrix R maximising Σ_t f_t(R), by L-BFGS with the analytic gradient, from R = I.

    ``tol`` is L-BFGS-B's relative decrease below which it stops.  Stopping the inner optimisation early is
    safe (the bound still rises) but slows pruning a great deal: components that ARD would switch off
    survive many more sweeps.

    Returns
    -------
    R, gain
        The rotation and the bound's increase Σ f_t(R) − Σ f_t(I) ≥ 0; (I, 0.0) when the optimiser finds
        no improvement (or fails), so applying the result never lowers the bound.
    """
    eye = np.eye(K)

    def neg(r: np.ndarray) -> tuple[float, np.ndarray]:
        v, g = evaluate(terms, r.reshape(K, K))
        return -v, -g.ravel()

    f0 = neg(eye.ravel())[0]
    res = minimize(neg, eye.ravel(), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-9})
    R = res.x.reshape(K, K)
    f1 = neg(res.x)[0]
    if not np.isfinite(f1) or f1 >= f0:
        return eye, 0.0
    return R, float(f0 - f1)


def optimal_translation(z_sum: np.ndarray, n: float, A_W: np.ndarray, wmu_sum: np.ndarray, beta0: float
                        ) -> tuple[np.ndarray, float]:
    """The translation z → z + c, μ_d → μ_d − cᵀw_d (which leaves every w_dᵀz + μ_d unchanged) maximising the
    bound, in closed form, for n vectors z ~ N(0, I) and d biases μ_d ~ N(0, β₀⁻¹) (w_d unchanged):

        f(c) = −½(n cᵀc + 2cᵀΣ_n E[z_n]) − ½β₀(cᵀA_W c − 2cᵀΣ_d E[w_d μ_d]),
        c = H⁻¹g,  H = nI + β₀A_W,  g = β₀Σ_d E[w_d μ_d] − Σ_n E[z_n],  gain f(c) − f(0) = ½gᵀH⁻¹g ≥ 0

    (the entropies and the prior of w do not change).  With a model mean and data missing, the latent means
    and μ are coupled and mean-field VMP moves between them by small steps; this jump removes that slow mode.

    Parameters
    ----------
    z_sum
        Σ_n E[z_n] (K,).
    n
        The number of translated vectors.
    A_W
        Σ_d E[w_d w_dᵀ] (K, K).
    wmu_sum
        Σ_d E[w_d μ_d] (K,).
    beta0
        The precision of the prior on each μ_d.
    """
    g = beta0 * np.asarray(wmu_sum, float) - np.asarray(z_sum, float)
    H = n * np.eye(len(g)) + beta0 * np.asarray(A_W, float)
    c = np.linalg.solve(H, g)
    return c, float(0.5 * g @ c)


class Rotation(ABC):
    """The rotation speed-up as a sweep hook (``model.sweep_hooks.append(hook)``): after each sweep, ``prepare``
    (refit what the terms assume optimal), find the R maximising the sum of ``terms`` (``optimal_rotation``) and
    move q by it (``apply``); returns the bound's predicted rise (0: R = I).  ``gains`` records it per call.
    Subclasses define ``variable`` (the rotated vectors, whose last axis has length K), ``terms`` and ``apply``."""

    variable: str

    def __init__(self) -> None:
        self.gains: list[float] = []

    def __call__(self, eng: Any) -> float:
        gain = self.prepare(eng)
        R, rise = optimal_rotation(self.terms(eng), eng.q[self.variable].mean().shape[-1])
        if rise > 0.0:
            self.apply(eng, R)
        self.gains.append(gain + rise)
        return gain + rise

    def prepare(self, eng: Any) -> float:
        """What runs before the terms are formed; returns any rise of the bound it made itself."""
        return 0.0

    @abstractmethod
    def terms(self, eng: Any) -> list[Term]:
        """The bound's terms f(R) at the current q."""

    @abstractmethod
    def apply(self, eng: Any, R: np.ndarray) -> None:
        """Move q by R (any invertible R)."""


class ScoresRotation(Rotation):
    """The rotation of a fused factor analysis (``factors.factor_analysis``; ``models.pca``): scores z_n → Rz_n and
    loadings w_d → R⁻ᵀw_d (the intercept μ_d of w̃_d = (w_d, μ_d) unchanged), so that every w̃_dᵀz̃_n is unchanged.

    The bound changes by ``gaussian_term`` (the N scores, prior N(0, I)) + ``ard_term`` (the D loadings under
    their ARD precisions α, or one shared α, Gam(a₀, b₀)); q(α) is refitted after the move.  q(α) must be optimal
    when the hook runs (it is when α is updated after the loadings in the sweep).  With ``translate`` (the
    loadings' intercept prior precision β₀) and missing entries, the rotation is preceded by the translation
    z_n → z_n + c, μ_d → μ_d − cᵀw_d of ``optimal_translation``, which removes the slow mode that couples the
    scores' mean and the intercepts when rows see different columns.

    Parameters
    ----------
    scores, loadings, precision
        The names of z, w (or w̃) and α in the model.
    shape, rate
        a₀, b₀ of α's Gamma prior.
    shared
        One α for all K coordinates (w_d ~ N(0, α⁻¹I)) instead of ARD.
    translate
        β₀ when w̃ carries an intercept with prior N(0, β₀⁻¹), else None.
    """

    def __init__(self, scores: str, loadings: str, precision: str, shape: float, rate: float, shared: bool = False,
                 translate: float | None = None) -> None:
        super().__init__()
        self.variable, self.loadings, self.precision = scores, loadings, precision
        self.shape, self.rate, self.shared, self.translate = float(shape), float(rate), bool(shared), translate

    def _factor(self, eng: Any) -> Any:
        f = eng.structured.get(self.variable)
        if f is None or f.node.ftype is not FACTOR_ANALYSIS:
            raise ModelError(f"ScoresRotation: {self.variable!r} is not the scores of a fused factor analysis "
                             "(a constant N(0, I) prior and fg.inner(z, w) in a Gaussian likelihood of observed data)")
        p = f.params
        if p["prior_shift"] is not None or not np.array_equal(p["prior_precision"], np.eye(p["K"])):
            raise ModelError(f"ScoresRotation: the prior of {self.variable!r} must be N(0, I)")
        return f

    def _set(self, eng: Any, qz: Any, qw: MvGaussian, T: np.ndarray) -> None:
        """Put the moved q(z), q(w̃); T (acting on z̃) moves the factor's sums over the rows with q(z)."""
        variables = eng.c.model.variables
        p = self._factor(eng).params
        moved_sums(p, eng.q[self.variable], qz, T)
        p["state"]["q"] = qz  # the factor owns q(z)
        eng.set_posterior(variables[self.variable], qz)
        eng.set_posterior(variables[self.loadings], qw)

    def prepare(self, eng: Any) -> float:
        """With missing entries and an intercept: the optimal translation (its gain ½gᵀH⁻¹g ≥ 0)."""
        f = self._factor(eng)
        if self.translate is None or f.params["mask"] is None:
            return 0.0
        qz, qw = eng.q[self.variable], eng.q[self.loadings]
        Wm, Wc = qw.mean(), qw.cov()
        K = Wm.shape[-1] - 1
        eww = eng.stats[self.loadings][1]
        c, gain = optimal_translation(rows_sums(f.params)[1][:K], qz.mean().shape[0], eww[:, :K, :K].sum(0),
                                      eww[:, :K, K].sum(0), self.translate)
        if gain <= 0.0:
            return 0.0
        V = np.eye(K + 1)  # w̃ → V w̃: μ_d → μ_d − cᵀw_d
        V[K, :K] = -c
        T = np.eye(K + 1)  # z̃ → T z̃ = (z + c, 1)
        T[:K, K] = c
        self._set(eng, qz.shifted(c), MvGaussian(mean=Wm @ V.T, cov=V @ Wc @ V.T), T)
        return gain

    def terms(self, eng: Any) -> list[Term]:
        qz = eng.q[self.variable]
        K = qz.mean().shape[-1]
        eww = eng.stats[self.loadings][1]
        return [gaussian_term(qz.second_sum(), qz.mean().shape[0]),
                ard_term(eww[:, :K, :K].sum(0), eww.shape[0], self.shape, self.rate, shared=self.shared)]

    def apply(self, eng: Any, R: np.ndarray) -> None:
        """z_n → Rz_n, w_d → R⁻ᵀw_d (any invertible R), then refit q(α)."""
        qz, qw = eng.q[self.variable], eng.q[self.loadings]
        K, J = R.shape[0], qw.mean().shape[-1]
        U = np.eye(J)  # acts on w̃ = (w, μ)
        U[:K, :K] = np.linalg.inv(R).T
        T = np.eye(J)  # acts on z̃ = (z, 1)
        T[:K, :K] = R
        self._set(eng, qz.transformed(R), MvGaussian(mean=qw.mean() @ U.T, cov=U @ qw.cov() @ U.T), T)
        eng.update(eng.c.model.variables[self.precision])


def _rotated_draws(sampler, R: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Draws of the chain pushed forward by R: R x_t for each draw x of the chain before the rotation."""
    return sampler(draws, rng) @ R.T


class StateRotation(Rotation):
    """The rotation speed-up (Luttinen & Ilin 2010) for ``linear_state_space``: a sweep hook (``Model.sweep_hooks``)
    that moves q along x_t → R x_t, C → C R⁻¹, A → R A R⁻¹ with the R maximising the bound.

    q(x) becomes the chain pushed forward by R (means Rμ_t, moments R E[x_tx_tᵀ] Rᵀ and R E[x_tx_{t−1}ᵀ] Rᵀ,
    entropy + L log|det R|); each row of q(C) is pushed forward by R⁻ᵀ (C x_t is unchanged); q(A) is pushed
    forward by A → RAR⁻¹ and replaced by the product of its row marginals (q(A) keeps its rows independent;
    ``similarity_ard_term``); q(α), q(γ) are refitted.  The likelihood of y is invariant; the change of the bound
    is ``gaussian_term`` (the initial state and the dynamics, Q = I fixed, exactly) + ``similarity_ard_term``
    (A) + ``ard_term`` (C), all exact.  q(α), q(γ) are refitted before the terms are formed (the ARD terms assume
    the optimal q) and R = I unless the bound rises: the ELBO never falls.

    ``full=False`` rotates A → AR⁻¹ only (rows a_i → R⁻ᵀa_i, ``ard_term``; the dynamics then enter through
    ``markov_chain_term``): also exact and monotone, a smaller move (benchmarks/state_space_rotation.py).
    ``gains`` records the bound's predicted rise at each call.
    """

    variable = "x"

    def __init__(self, a0: float, full: bool = True) -> None:
        super().__init__()
        self.a0 = float(a0)
        self.full = bool(full)

    def prepare(self, eng: Any) -> float:
        """Refit q(α), q(γ) (the ARD terms assume them optimal)."""
        variables = eng.c.model.variables
        eng.update(variables["alpha"])
        eng.update(variables["gamma"])
        return 0.0

    def terms(self, eng: Any) -> list[Term]:
        """The bound terms f(R) of the current q; they assume q(α), q(γ) optimal."""
        qx, qA, qC = eng.q["x"], eng.q["A"], eng.q["C"]
        mA, cA, mC = qA.mean(), qA.cov(), qC.mean()
        CC = (qC.cov() + mC[:, :, None] * mC[:, None, :]).sum(0)
        c_term = ard_term(CC, mC.shape[0], self.a0, self.a0)
        _, xx1, s11, s00, s10, L = (np.asarray(a) for a in _sums(qx, eng.structured["x"].params["lengths"]))
        D = mA.shape[-1]
        xx1, s11, s00, s10 = (a.reshape(-1, D, D).sum(0) for a in (xx1, s11, s00, s10))
        n = float(L.sum())
        if not self.full:
            AA = (cA + mA[:, :, None] * mA[:, None, :]).sum(0)
            return [markov_chain_term(xx1 + s11, n, s10, mA), ard_term(AA, mA.shape[0], self.a0, self.a0), c_term]
        cross = mA @ s10.T
        W = s11 - cross - cross.T + mA @ s00 @ mA.T + np.diag(np.einsum("kl,ilk->i", s00, cA))
        return [gaussian_term(W + xx1, n), similarity_ard_term(mA, cA, self.a0, self.a0), c_term]

    def apply(self, eng: Any, R: np.ndarray) -> None:
        """Transform q by R (any invertible R) and refit q(α), q(γ)."""
        variables = eng.c.model.variables
        qx, qA, qC = eng.q["x"], eng.q["A"], eng.q["C"]
        U = np.linalg.inv(R)
        ld = np.linalg.slogdet(R)[1]
        chain = eng.structured["x"]
        sampler = qx._sampler
        q = GaussianChain(
            qx.mean() @ R.T, R @ qx.second @ R.T, R @ qx.pair @ R.T, qx.log_normalizer,
            qx.joint_entropy + np.asarray(chain.params["lengths"], dtype=float) * ld,
            sampler=None if sampler is None else partial(_rotated_draws, sampler, R.copy()))
        chain.params["state"]["q"] = q
        eng.set_posterior(variables["x"], q)
        if self.full:
            A = MvGaussian(mean=R @ qA.mean() @ U, cov=U.T @ np.einsum("ij,jkl->ikl", R * R, qA.cov()) @ U)
        else:
            A = MvGaussian(mean=qA.mean() @ U, cov=U.T @ qA.cov() @ U)
        eng.set_posterior(variables["A"], A)
        eng.set_posterior(variables["C"], MvGaussian(mean=qC.mean() @ U, cov=U.T @ qC.cov() @ U))
        eng.update(variables["alpha"])
        eng.update(variables["gamma"])


__all__ = ["Rotation", "ScoresRotation", "StateRotation", "Term", "ard_term", "evaluate", "gaussian_term",
           "markov_chain_term", "optimal_rotation", "optimal_translation", "similarity_ard_term"]
