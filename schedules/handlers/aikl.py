r"""Affine independent KL (Challis & Barber 2012; docs/maths.md §9) as a global handler.

q(w) = |det A|⁻¹ Π_d q_v([A⁻¹(w − b)]_d | θ_d) (``distributions.AffineIndependent``) and the bound

.. math::

    \mathcal B = \log|\det A| + \sum_d H[q_v(\cdot|\theta_d)] + E_q[\log N(w \mid \text{prior})]
                 + \sum_n E_q[\log f_n(x_n^\top w)] \;\le\; \log Z,

with the prior in natural parameters (E[log prior] = η₁ᵀE[w] + tr(η₂E[wwᵀ]) + const needs only
E[w] = A E[v] + b and Cov[w] = A diag(Var v) Aᵀ; an improper flat prior contributes 0), the expectations of
quadratic sites (Gaussian likelihoods) in the same closed form, and the other sites' expectations by the FFT
lattice convolution (``aikl_lattice``), vectorised over sites.

Procedure (``AIKL.fit``):

1. **Gaussian KL** (the baseline B_G): q = N(b, CCᵀ), C lower triangular with log-diagonal, the site
   expectations on the exact Gaussian marginal of each projection (no convolution needed), L-BFGS from
   the Laplace solution (or from the prior / the identity where the Laplace approximation does not
   exist, e.g. for Laplace sites under a flat prior).
2. **AI-KL**: A = LU (L unit lower triangular, U upper triangular with U_dd = e^{s_d}, so
   log|det A| = Σ_d s_d), b and θ (optionally fixed), L-BFGS started at the Gaussian KL optimum:
   L = C diag(C)⁻¹, U = diag(C), θ at the base's ``start_theta`` (its Gaussian member, except for the
   skew-normal, whose θ = 0 is a stationary point; a result below B_G triggers a restart from the exact
   Gaussian member, so B_AI ≥ B_G up to lattice error when the base contains the Gaussian and θ is
   learnt — with θ fixed away from the Gaussian member, as in the paper's §4.3, the ordering is not
   guaranteed).  We optimise L and U (the paper's parameterisation), computing ∂B/∂A first:
   ∂B/∂A = Σ_n x_n(∂E_n/∂α_n)ᵀ + (prior terms), chained to ∂B/∂L = (∂B/∂A)Uᵀ, ∂B/∂U = Lᵀ(∂B/∂A).
   The site gradients ∂E_n/∂α_n, ∂E_n/∂θ are the exact derivatives of the lattice expectation, from
   the FFT cross-correlation of g with the other components (``aikl_lattice``): the lattice form, by an
   integration by parts, of the paper's first-moment-weighted lattice (which ``first_moment_gradient``
   implements for comparison); ∂E_n/∂b uses Σ_j ρ_j g′.
   ``base="gaussian"`` runs the same code (its optimum coincides with step 1 up to lattice error).
3. **Lattices.** Each component u_d = α_d(v_d − E v_d) is point-sampled on k = −h..h (normalised; the
   generalised normal's cusp corrected; a 3-point kernel restores the exact variance of components
   narrower than Δ) and the D pmfs are convolved by rfft on a circular lattice of M = 2K points
   (``pad=None``: the paper's exact zero padding, M ≥ D·K).  During an L-BFGS run the lattice of every
   site is frozen (spacing Δ_n = H_n/h from the spread of y_n at the start of the run), so the objective
   is a fixed differentiable function and the gradients are exact (a kinked site, such as the Laplace
   site, makes it piecewise smooth in b); after a run the lattices are rebuilt at the new solution and
   L-BFGS is restarted until a round gains less than ``round_tol``.  If doubling K at the solution moves
   the bound by more than ``refine_tol``, the optimisation is repeated on 2K (``max_adapt`` times at
   most), so the optimiser cannot profit from a coarse lattice.  The final bound is then refined by
   doubling the lattice (K → 2K, …) until it changes by less than ``refine_tol`` (default 1e-3, as the
   paper); the last change is reported as ``info["lattice_error"]``.  The evidence kind is "lower bound up to
   lattice error" (``LATTICE_BOUND``).

On a plain log density (``fg.approximate``) there are no sites: for D ≤ 3 the expectation
E_q[log p̃(w)] is taken on the tensor product of the component lattices in v-space (the same
discretisation, applied to the whole density; the cost grows as (2h+1)^D), with the same two stages.
For D > 3 AI-KL needs site structure and the handler raises ``HandlerError``.

The bound on frozen lattices is ``aikl_bound.AIKLBound`` (importable from here), its parameterisations
and L-BFGS rounds are in ``aikl_optimise``, the lattice kernels in ``aikl_lattice``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distributions import MvGaussian
from distributions.affine_base_density import BaseDensity
from distributions.affine_bases import get_base
from distributions.affine_independent import AffineIndependent
from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.results import LATTICE_BOUND
from factors.sites import laplace_point

from .aikl_bound import AIKLBound
from .aikl_optimise import _LU, _Chol, _optimise, _refine, _rounding, _Whitened
from .laplace import BlockFit, HandlerError, find_mode, gaussian_from_hessian

_TENSOR_LATTICE = {1: 256, 2: 64, 3: 24}


class AIKL:
    r"""Affine independent KL (Challis & Barber 2012): a lower bound up to lattice error.

    Parameters
    ----------
    base : str
        ``"skew_normal"`` (default), ``"gen_normal"``, ``"student_t"``, ``"logistic"`` or ``"gaussian"``
        (the Gaussian KL baseline).
    lattice : int
        K, the lattice size during the optimisation (even; refined by doubling at the end).
    theta : float or array, optional
        Starting base parameter(s) (the fixed value when ``learn_theta`` is False); default the base's
        ``start_theta``: shape 2 (Gaussian), ν = 30, skewness 0.5 (θ = 0 is a stationary point of the
        bound at the Gaussian KL optimum, see ``SkewNormalBase``).  If the optimum found lies below the
        Gaussian KL bound, the stage is restarted from the Gaussian member (``info["restarted_from_gaussian"]``).
    learn_theta : bool
        Optimise θ jointly with A and b (the paper fixes θ = 1.5 for the generalised normal in §4.3).
    refine_tol : float
        Stop doubling the lattice when the bound changes by less than this (the paper: 1e-3).
    max_lattice : int
        Largest lattice of the refinement.
    pad : int or None
        FFT length M = pad·K (circular, default 2) or None for the exact zero padding M ≥ D·K + 1.
    gaussian_lattice : int
        Lattice of the Gaussian KL stage (the exact Gaussian marginal: cheap).
    gaussian_maxiter : int
        L-BFGS iterations per round of the (cheap) Gaussian KL stage.
    maxiter, rounds, round_tol
        L-BFGS iterations per round of the AI stage; at most ``rounds`` lattice re-freezings, stopping
        once a round gains less than ``round_tol``.
    max_adapt : int
        How many times the optimisation lattice may be doubled when doubling it moves the bound at the
        solution by more than ``refine_tol`` (so that the optimiser cannot exploit a coarse lattice).
    density_lattice : int, optional
        Per-axis lattice of the plain-density fallback (default 256, 64, 24 for D = 1, 2, 3).

    Notes
    -----
    ``fit`` returns a ``BlockFit`` whose ``q`` is a ``distributions.AffineIndependent``, ``log_evidence``
    the refined bound B_AI, and ``info`` holds ``gaussian_bound`` (B_G, refined the same way),
    ``gaussian`` (the Gaussian KL q), ``lattice``, ``lattice_error``, ``refinement`` (K, B) pairs,
    the optimiser's iterations and the seconds of each stage.
    """

    name = "AIKL"

    def __init__(self, base: str = "skew_normal", lattice: int = 256, theta: Any = None, learn_theta: bool = True,
                 refine_tol: float = 1e-3, max_lattice: int = 1 << 15, pad: int | None = 2,
                 gaussian_lattice: int = 1024, maxiter: int = 500, rounds: int = 30, round_tol: float = 1e-4,
                 max_adapt: int = 2, density_lattice: int | None = None, gaussian_maxiter: int = 3000) -> None:
        if not isinstance(base, str | BaseDensity):
            raise ModelError(f"AIKL: base must be the name of a base family, got {checks._short(base)}")
        try:
            self.base = get_base(base)
        except ValueError as err:
            raise ModelError(f"AIKL: {err}") from None
        lattice = checks.integer(lattice, "AIKL: lattice (an even integer ≥ 4)", low=4, high=1 << 24)
        if lattice % 2:
            raise ModelError(f"AIKL: lattice must be an even integer ≥ 4, got {lattice!r}")
        if theta is not None:
            theta = checks.constant(theta, "AIKL: theta")
            if theta.ndim > 1:
                raise ModelError(f"AIKL: theta must be a number or a vector (one per dimension), got shape "
                                 f"{theta.shape}")
            try:
                self.base.check(theta)
            except ValueError as err:
                raise ModelError(f"AIKL: {err}") from None
        learn_theta = checks.flag(learn_theta, "AIKL: learn_theta")
        refine_tol = checks.number(refine_tol, "AIKL: refine_tol", low=0.0, low_open=True)
        round_tol = checks.number(round_tol, "AIKL: round_tol", low=0.0)
        max_lattice = checks.integer(max_lattice, "AIKL: max_lattice", low=lattice, high=1 << 24)
        gaussian_lattice = checks.integer(gaussian_lattice, "AIKL: gaussian_lattice", low=4, high=1 << 24)
        if pad is not None:
            pad = checks.integer(pad, "AIKL: pad (an integer ≥ 1 or None)", low=1, high=64)
        maxiter = checks.integer(maxiter, "AIKL: maxiter", low=1)
        rounds = checks.integer(rounds, "AIKL: rounds", low=1, high=10_000)
        max_adapt = checks.integer(max_adapt, "AIKL: max_adapt", low=0, high=16)
        gaussian_maxiter = checks.integer(gaussian_maxiter, "AIKL: gaussian_maxiter", low=1)
        density_lattice = checks.integer(density_lattice, "AIKL: density_lattice", low=4, high=4096, none=True)
        self.lattice, self.theta, self.learn_theta = lattice, theta, learn_theta
        self.refine_tol, self.max_lattice, self.pad = refine_tol, max_lattice, pad
        self.gaussian_lattice, self.maxiter, self.rounds, self.round_tol = gaussian_lattice, maxiter, rounds, round_tol
        self.density_lattice, self.max_adapt, self.gaussian_maxiter = density_lattice, max_adapt, gaussian_maxiter

    # ------------------------------------------------------------------------------ stages
    def _start(self, target, x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(C, b) of a starting Gaussian: Laplace if it exists and is well conditioned (a kinked site such
        as the Laplace site has no curvature, so the Hessian can be nearly singular), else the mode (or x0)
        with the prior's covariance, or with I under a flat prior."""
        D = int(target.dim)
        b = np.asarray(x0, dtype=float)
        try:
            w, H, _ = find_mode(target, x0, self.name)
            if np.all(np.isfinite(w)):
                b = w
            ev = np.linalg.eigvalsh(-H)
            # a kinked site has no curvature: -H can be all but singular; without one an ill-conditioned -H is
            # a real feature of the posterior (a nearly collinear design), and Laplace the right start
            kinked = not hasattr(target, "sites") or any(s.point is laplace_point for s in target.sites)
            if ev[0] > (1e-6 * ev[-1] if kinked else 0.0):
                q, _ = gaussian_from_hessian(w, H, self.name)
                return np.linalg.cholesky(q.cov()), w
        except (HandlerError, np.linalg.LinAlgError, FloatingPointError, ValueError):
            pass
        if getattr(target, "proper_prior", False):
            lam = -2.0 * np.asarray(target.eta2, dtype=float)
            ev = np.linalg.eigvalsh(lam)
            if ev[0] > 1e-6 * ev[-1]:  # a nearly rank-deficient message is no start either
                return np.linalg.cholesky(np.linalg.inv(lam)), b
        return np.eye(D), b

    def _bounds(self, target) -> tuple[AIKLBound, AIKLBound]:
        if hasattr(target, "sites"):
            return (AIKLBound(target, "gaussian", self.gaussian_lattice, path="gauss"),
                    AIKLBound(target, self.base, self.lattice, self.pad))
        D = int(target.dim)
        if D > 3:
            raise HandlerError(f"AIKL: a plain log density of dimension {D} has no site structure; the "
                               "tensor-lattice fallback covers D ≤ 3 (build the problem as a model with sites)")
        K = self.density_lattice or _TENSOR_LATTICE[D]
        return AIKLBound(target, "gaussian", K, path="tensor"), AIKLBound(target, self.base, K, path="tensor")

    def _stage(self, bound: AIKLBound, par, x0: np.ndarray,
               maxiter: int | None = None) -> tuple[dict, dict, AIKLBound]:
        """Optimise on lattice K; while doubling K moves the bound at the solution by more than
        ``refine_tol`` (the optimiser may exploit a coarse lattice), re-optimise on 2K (at most
        ``max_adapt`` times); then refine the final bound by doubling."""
        maxiter = maxiter or self.maxiter
        res = _optimise(bound, par, x0, maxiter, self.rounds, self.round_tol)
        for _ in range(self.max_adapt):
            A, b, theta = par.unpack(res["x"])
            here = bound.with_lattice(bound.lattice).value(A, b, theta)
            finer = bound.with_lattice(2 * bound.lattice).value(A, b, theta)
            tol = max(self.refine_tol, _rounding(bound, par, res["x"], here))  # the bound's rounding level
            if abs(finer - here) < tol or 2 * bound.lattice > self.max_lattice:
                break
            bound = bound.with_lattice(2 * bound.lattice)
            prev = res
            res = _optimise(bound, par, res["x"], maxiter, self.rounds, self.round_tol)
            res["iterations"] += prev["iterations"]
            res["evaluations"] += prev["evaluations"]
        A, b, theta = par.unpack(res["x"])
        ref = _refine(bound, A, b, theta, self.refine_tol, self.max_lattice)
        res["opt_lattice"] = bound.lattice
        return res, ref, bound

    def _gaussian_stage(self, gbound: AIKLBound, target: Any, x0: np.ndarray, warm_x: np.ndarray | None = None):
        """The Gaussian KL stage in coordinates whitened by the starting Gaussian (``_start``); a warm start
        ``warm_x`` (a previous fit's whitened solution: its correction to its own start) is carried over to
        this start.  Returns (result, refinement, C, b, whitening)."""
        D = int(target.dim)
        C0, b0 = self._start(target, np.asarray(x0, dtype=float))
        chol = _Whitened(_Chol(D), C0, b0)
        if warm_x is not None and len(warm_x) == D + D * (D + 1) // 2:
            xg0 = np.asarray(warm_x, dtype=float)
        else:
            xg0 = chol.par.pack(np.eye(D), np.zeros(D))
        gres, gref, _ = self._stage(gbound, chol, xg0, self.gaussian_maxiter)
        C, bg, _ = chol.unpack(gres["x"])
        return gres, gref, C, bg, chol

    def gaussian_kl(self, target: Any, x0: np.ndarray) -> tuple[MvGaussian, float, float]:
        """The first stage alone: the full-covariance Gaussian maximising the bound (the Gaussian KL
        optimum, site expectations on the exact Gaussian marginals), its bound and lattice error."""
        gbound = self._bounds(target)[0]
        _, gref, C, b, _ = self._gaussian_stage(gbound, target, x0)
        return MvGaussian(mean=b, cov=C @ C.T), float(gref["terms"]["bound"]), float(gref["error"])

    def fit(self, target: Any, x0: np.ndarray, warm: dict | None = None) -> BlockFit:
        """Gaussian KL, then AI-KL from its optimum (module docstring); ``warm`` is a previous ``info``."""
        warm = warm or {}
        D = int(target.dim)
        if self.theta is not None and self.theta.ndim == 1 and self.theta.shape[0] not in (1, D):
            raise ModelError(f"AIKL: theta has {self.theta.shape[0]} entries but the block has dimension {D}")
        t0 = time.perf_counter()
        gbound, abound = self._bounds(target)
        gres, gref, C, bg, white = self._gaussian_stage(gbound, target, x0, warm.get("gauss_x"))
        t1 = time.perf_counter()

        fixed = None
        if not self.learn_theta or self.base.n_params == 0:
            th = self.base.default_theta if self.theta is None else self.theta
            fixed = np.broadcast_to(np.asarray(th, dtype=float), (D,)).copy()
        lu = _Whitened(_LU(D, self.base, fixed), white.C0, white.b0)  # the Gaussian stage's whitening
        abound.learn_theta = lu.par.learn
        Cw, bw = white.white(C, bg)
        dC = np.diag(Cw)
        gauss_theta = self.base.gaussian_theta if self.base.gaussian_theta is not None else self.base.start_theta
        x_from_g = lu.par.pack(Cw / dC, np.diag(dC), bw, fixed if fixed is not None else np.full(D, gauss_theta))
        key = (self.base.name, self.learn_theta, D)
        if warm.get("ai_key") == key and warm.get("ai_x") is not None:
            xa0 = np.asarray(warm["ai_x"], dtype=float)
        else:
            theta0 = fixed if fixed is not None else np.broadcast_to(np.asarray(
                self.base.start_theta if self.theta is None else self.theta, dtype=float), (D,)).copy()
            xa0 = lu.par.pack(Cw / dC, np.diag(dC), bw, theta0)
        ares, aref, _ = self._stage(abound, lu, xa0)
        fallback = False
        if aref["terms"]["bound"] < gref["terms"]["bound"] - max(aref["error"], gref["error"]) and not np.array_equal(
                xa0, x_from_g):
            # a local optimum below the Gaussian KL bound: restart at the Gaussian member of the family
            ares2, aref2, _ = self._stage(abound, lu, x_from_g)
            if aref2["terms"]["bound"] > aref["terms"]["bound"]:
                ares2["iterations"] += ares["iterations"]
                ares, aref, fallback = ares2, aref2, True
        A, b, theta = lu.unpack(ares["x"])
        t2 = time.perf_counter()

        q = AffineIndependent(A, b, self.base, theta)
        ta = aref["terms"]
        info = {"gauss_x": gres["x"], "ai_x": ares["x"], "ai_key": key, "mode": q.mean(),
                "A": A, "b": b, "theta": theta, "base": self.base.name,
                "gaussian": MvGaussian(mean=bg, cov=C @ C.T), "gaussian_bound": gref["terms"]["bound"],
                "gaussian_lattice_error": gref["error"], "gaussian_refinement": gref["trace"],
                "bound": ta["bound"], "lattice": aref["lattice"], "lattice_error": aref["error"],
                "refinement": aref["trace"], "opt_lattice": ares["opt_lattice"], "site_terms": ta.get("site_n"),
                "prior_term": ta["prior"], "iterations": ares["iterations"],
                "gaussian_iterations": gres["iterations"], "evaluations": ares["evaluations"],
                "converged": ares["converged"] and gres["converged"], "rounds": ares["rounds"],
                "restarted_from_gaussian": fallback, "time_gaussian": t1 - t0, "time_ai": t2 - t1}
        return BlockFit(q, float(ta["bound"]), LATTICE_BOUND, 0.0, float(ta["site"]), 0.0, float(ta["entropy"]), info)

    def __repr__(self) -> str:
        fixed = "" if self.learn_theta else f", theta={self.theta!r}, learn_theta=False"
        return f"AIKL(base={self.base.name!r}, lattice={self.lattice}{fixed})"


# ============================================================================ predictive helpers
def projection_log_expectation(q: Any, X: np.ndarray, log_f, n_lattice: int = 256, pad: int | None = 2) -> np.ndarray:
    r"""log E_q[f(x_nᵀw)] per row of X, on the lattice marginals of the projections (stable log-sum-exp).

    ``q`` an ``AffineIndependent`` (FFT lattice) or anything with ``mean()`` and ``cov()`` (treated as
    Gaussian: the exact Gaussian marginal on its lattice).  ``log_f(y)`` maps lattice points (N, M)
    to log f, row n belonging to x_n.  Used for test log-probabilities (ATLP).
    """
    X = np.atleast_2d(np.asarray(X, dtype=float))
    if isinstance(q, AffineIndependent):
        y, rho = q.projection_lattice(X, n_lattice, pad)
    else:
        m, S = q.mean(), q.cov()
        sig = np.sqrt(np.maximum(np.einsum("nd,de,ne->n", X, S, X), 1e-300))
        h = n_lattice // 2
        step = 6.5 * sig / h
        lk = step[:, None] * np.arange(-h, h + 1)
        y = (X @ m)[:, None] + lk
        lr = -0.5 * (lk / sig[:, None]) ** 2
        rho = np.exp(lr - lr.max(-1, keepdims=True))
        rho /= rho.sum(-1, keepdims=True)
    lf = log_f(y)
    with np.errstate(divide="ignore"):
        lw = np.log(np.maximum(rho, 0.0)) + lf
    mx = lw.max(-1, keepdims=True)
    return (mx + np.log(np.exp(lw - mx).sum(-1, keepdims=True)))[:, 0]
