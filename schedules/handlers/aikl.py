r"""Affine independent KL (Challis & Barber 2012; docs/maths.md §9) as a global handler.

q(w) = |det A|⁻¹ Π_d q_v([A⁻¹(w − b)]_d | θ_d) (``distributions.AffineIndependent``) and the bound

.. math::

    \mathcal B = \log|\det A| + \sum_d H[q_v(\cdot|\theta_d)] + E_q[\log N(w \mid \text{prior})]
                 + \sum_n E_q[\log f_n(x_n^\top w)] \;\le\; \log Z,

with the prior in natural parameters (E[log prior] = η₁ᵀE[w] + tr(η₂E[wwᵀ]) + const needs only
E[w] = A E[v] + b and Cov[w] = A diag(Var v) Aᵀ; an improper flat prior contributes 0) and the site
expectations by the FFT lattice convolution (``aikl_lattice``), vectorised over sites.

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
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy import optimize

from distributions import MvGaussian
from distributions.affine_independent import (
    AffineIndependent,
    BaseDensity,
    GaussianBase,
    component_support,
    fft_length,
    get_base,
    lattice_step,
)
from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.results import LATTICE_BOUND
from factors.sites import laplace_point

from .. import progress
from .aikl_lattice import SiteGroup, fft_terms, gauss_terms, tensor_terms
from .laplace import BlockFit, HandlerError, find_mode, gaussian_from_hessian
from .target import DensityNotFinite

_GAUSS = GaussianBase()
_TENSOR_LATTICE = {1: 256, 2: 64, 3: 24}
# how far a projection's lattice step may move (as a ratio) from the frozen one before the lattice is
# rebuilt: 1.25 keeps ≥ 5.2 sd of every projection on its lattice, 0.25 keeps ≥ h/4 points across it
_COVERAGE = (0.25, 1.25)


# ============================================================================ the bound
class AIKLBound:
    r"""The AI-KL bound of a target as a function of (A, b, θ) on frozen lattices.

    Parameters
    ----------
    target
        A ``BlockTarget`` (prior η₁, η₂ and sites) or a ``DensityTarget`` (a plain log density, D ≤ 3).
    base
        Base family (name or instance).
    lattice
        K = 2h, the number of lattice intervals across a component's span.
    pad
        FFT length M = pad·K (circular) or None for the paper's exact zero padding (M ≥ D·K + 1).
    path
        "fft" (any base), "gauss" (Gaussian base: the marginal of y is Gaussian, no convolution) or
        "tensor" (plain densities).  Default: "tensor" for densities, else "fft".

    Notes
    -----
    ``freeze(A, b, θ)`` fixes the lattices; ``terms(A, b, θ)`` then returns the bound's parts and the
    gradients ∂B/∂A (without the log|det A| term, which the parameterisation adds), ∂B/∂b, ∂B/∂θ.
    """

    def __init__(self, target: Any, base: str | BaseDensity, lattice: int = 256, pad: int | None = 2,
                 path: str | None = None) -> None:
        self.target = target
        self.base = get_base(base)
        self.dim = int(target.dim)
        self.density = not hasattr(target, "sites")
        self.path = path or ("tensor" if self.density else "fft")
        if self.path == "gauss" and self.base.name != "gaussian":
            raise ValueError("the 'gauss' path needs the Gaussian base")
        if self.density and self.path != "tensor":
            raise ValueError("a plain log density is handled on the tensor lattice only")
        if lattice < 2 or lattice % 2:
            raise ModelError(f"AIKL: lattice must be an even integer ≥ 2, got {lattice!r}")
        self.lattice, self.pad = int(lattice), pad
        self.learn_theta = self.base.n_params > 0  # set False to skip ∂/∂θ when θ is fixed
        if not self.density:
            self.groups = [SiteGroup.from_site(s) for s in target.sites]
            self.eta1 = np.asarray(target.eta1, dtype=float)
            self.eta2 = np.asarray(target.eta2, dtype=float)
            self.proper = bool(target.has_prior)  # a Gaussian part to take expectations of
            self.const = float(target.prior_const)
        self.steps: list[np.ndarray] | None = None

    @property
    def half(self) -> int:
        return self.lattice // 2

    def with_lattice(self, lattice: int) -> AIKLBound:
        """A copy on another lattice size (not frozen)."""
        new = object.__new__(AIKLBound)
        new.__dict__.update(self.__dict__)
        new.lattice, new.steps = int(lattice), None
        return new

    def freeze(self, A: np.ndarray, b: np.ndarray, theta: np.ndarray) -> None:
        """Fix every site's lattice spacing from the spread of its projection under (A, θ)."""
        h = self.half
        if self.path == "tensor":
            sd = np.sqrt(self.base.var(theta))
            self.steps = [sd * self.base.half_width(theta) / h]
        else:
            base = _GAUSS if self.path == "gauss" else self.base
            th = np.zeros(self.dim) if self.path == "gauss" else theta
            self.steps = [lattice_step(base, gr.X @ A, th, h) for gr in self.groups]
            self.supports = [component_support(base, gr.X @ A, th, st, h) for gr, st in zip(self.groups, self.steps,
                                                                                            strict=True)]

    def covers(self, A: np.ndarray, theta: np.ndarray) -> bool:
        """Whether the frozen lattices still represent every projection under (A, θ).

        A frozen lattice spans a fixed window: were a projection's spread to outgrow it, the truncated
        pmf would cap the variance the sites see while log|det A| kept growing, and the frozen objective
        would be unbounded above (the optimiser then runs off to a useless q).  ``terms`` re-freezes
        wherever this fails, so the objective is accurate everywhere and exact-gradient within a piece."""
        if self.path == "tensor":
            return True
        base = _GAUSS if self.path == "gauss" else self.base
        th = np.zeros(self.dim) if self.path == "gauss" else theta
        for gr, step, sup in zip(self.groups, self.steps, self.supports, strict=True):
            alpha = gr.X @ A
            ratio = lattice_step(base, alpha, th, self.half) / step
            if not np.all((ratio <= _COVERAGE[1]) & (ratio >= _COVERAGE[0])):
                return False
            if np.any(component_support(base, alpha, th, step, self.half, margin=1.0) > sup):
                return False
        return True

    def terms(self, A: np.ndarray, b: np.ndarray, theta: np.ndarray, grad: bool = True) -> dict:
        r"""Bound parts (``site``, ``prior``, ``entropy``, ``bound``) and, with ``grad``, ``dA``, ``db``,
        ``dtheta`` (``dA`` without the ∂log|det A|/∂A = A⁻ᵀ term)."""
        if self.steps is None or not self.covers(A, theta):
            self.freeze(A, b, theta)
        D = self.dim
        theta = np.asarray(theta, dtype=float)
        out = {"entropy": float(np.linalg.slogdet(A)[1] + self.base.entropy(theta).sum())}
        dA, db = np.zeros((D, D)), np.zeros(D)
        dth = self.base.dentropy(theta).astype(float) if grad else None
        if self.path == "tensor":
            t = tensor_terms(self.base, self.target.logp_grad, A, b, theta, self.steps[0], self.half, grad)
            out["site"], out["prior"] = 0.0, t["E"]  # the whole density is "prior" (no sites)
            if grad:
                dA += t["dA"]
                db += t["db"]
                dth = dth + t["dtheta"]
        else:
            site = 0.0
            site_n = []
            for gr, step, sup in zip(self.groups, self.steps, self.supports, strict=True):
                if self.path == "gauss":
                    t = gauss_terms(gr.X, gr.g, A, b, step, self.half, grad, gr.kink)
                else:
                    M = fft_length(D, self.half, self.pad)
                    t = fft_terms(self.base, gr.X, gr.g, A, b, theta, step, self.half, M, grad, self.learn_theta,
                                  sup, gr.kink)
                site += float(t["E"].sum())
                site_n.append(t["E"])
                if grad:
                    dA += gr.X.T @ t["dalpha"]
                    db += gr.X.T @ t["dbeta"]
                    if "dtheta" in t:
                        dth = dth + t["dtheta"].sum(0)
            out["site"], out["site_n"] = site, site_n
            out["prior"] = 0.0
            if self.proper:
                m, var = self.base.mean(theta), self.base.var(theta)
                mu = A @ m + b
                ew2 = (A * var) @ A.T + np.outer(mu, mu)
                out["prior"] = float(self.eta1 @ mu + np.sum(self.eta2 * ew2) + self.const)
                if grad:
                    gmu = self.eta1 + 2.0 * self.eta2 @ mu
                    dA += np.outer(gmu, m) + 2.0 * (self.eta2 @ A) * var
                    db += gmu
                    dth = dth + (A.T @ gmu) * self.base.dmean(theta) + np.einsum(
                        "id,ij,jd->d", A, self.eta2, A) * self.base.dvar(theta)
        out["bound"] = out["entropy"] + out["prior"] + out["site"]
        if grad:
            out["dA"], out["db"], out["dtheta"] = dA, db, dth
        return out

    def value(self, A, b, theta) -> float:
        return self.terms(A, b, theta, grad=False)["bound"]


# ============================================================================ parameterisations
class _Chol:
    """q = N(b, CCᵀ): x = [b, strictly lower C, log diag C] (the Gaussian KL baseline)."""

    def __init__(self, D: int) -> None:
        self.D = D
        self.il = np.tril_indices(D, -1)

    def pack(self, C: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([b, C[self.il], np.log(np.diag(C))])

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        D = self.D
        C = np.zeros((D, D))
        C[self.il] = x[D:D + len(self.il[0])]
        s = x[D + len(self.il[0]):]
        C[np.diag_indices(D)] = np.exp(s)
        return C, x[:D], np.zeros(D)

    def box(self) -> None:
        return None

    def chain(self, x: np.ndarray, t: dict) -> np.ndarray:
        C, _, _ = self.unpack(x)
        return np.concatenate([t["db"], t["dA"][self.il], np.diag(t["dA"]) * np.diag(C) + 1.0])


class _LU:
    """A = LU: x = [b, strictly lower L (unit diagonal), strictly upper U, log diag U, free θ]."""

    def __init__(self, D: int, base: BaseDensity, theta_fixed: np.ndarray | None) -> None:
        self.D, self.base, self.fixed = D, base, theta_fixed
        self.il, self.iu = np.tril_indices(D, -1), np.triu_indices(D, 1)
        self.n_tri = len(self.il[0])
        self.learn = theta_fixed is None and base.n_params > 0

    def pack(self, L: np.ndarray, U: np.ndarray, b: np.ndarray, theta: np.ndarray) -> np.ndarray:
        parts = [b, L[self.il], U[self.iu], np.log(np.diag(U))]
        if self.learn:
            parts.append(self.base.to_free(theta))
        return np.concatenate(parts)

    def box(self) -> list | None:
        """L-BFGS-B bounds: only the free base parameters are boxed."""
        if not self.learn:
            return None
        return [(None, None)] * (2 * self.D + 2 * self.n_tri) + [self.base.free_bounds] * self.D

    def split(self, x: np.ndarray):
        D, n = self.D, self.n_tri
        L = np.eye(D)
        L[self.il] = x[D:D + n]
        U = np.zeros((D, D))
        U[self.iu] = x[D + n:D + 2 * n]
        U[np.diag_indices(D)] = np.exp(x[D + 2 * n:2 * D + 2 * n])
        if self.learn:
            theta = self.base.from_free(x[2 * D + 2 * n:])
        elif self.fixed is not None:
            theta = self.fixed
        else:
            theta = np.full(D, self.base.default_theta)
        return L, U, x[:D], theta

    def unpack(self, x: np.ndarray):
        L, U, b, theta = self.split(x)
        return L @ U, b, theta

    def chain(self, x: np.ndarray, t: dict) -> np.ndarray:
        L, U, _, _ = self.split(x)
        gL = t["dA"] @ U.T
        gU = L.T @ t["dA"]
        parts = [t["db"], gL[self.il], gU[self.iu], np.diag(gU) * np.diag(U) + 1.0]
        if self.learn:
            parts.append(t["dtheta"] * self.base.dtheta_dfree(x[2 * self.D + 2 * self.n_tri:]))
        return np.concatenate(parts)


class _Whitened:
    """A parameterisation (``_Chol`` or ``_LU``) of (A', b') with A = C₀A', b = b₀ + C₀b': whitened by a starting
    Gaussian N(b₀, C₀C₀ᵀ) (Laplace's), so that a nearly degenerate posterior is as well conditioned for L-BFGS as
    an isotropic one.  ∂B/∂A' = C₀ᵀ∂B/∂A, ∂B/∂b' = C₀ᵀ∂B/∂b; log|det A| = log|det C₀| + log|det A'|."""

    def __init__(self, par, C0: np.ndarray, b0: np.ndarray) -> None:
        self.par, self.C0, self.b0 = par, np.asarray(C0, dtype=float), np.asarray(b0, dtype=float)

    def white(self, C: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(C₀⁻¹C, C₀⁻¹(b − b₀)): absolute (A, b) in the whitened coordinates (lower triangular stays so)."""
        from scipy.linalg import solve_triangular

        return (solve_triangular(self.C0, C, lower=True),
                solve_triangular(self.C0, np.asarray(b, dtype=float) - self.b0, lower=True))

    def box(self):
        return self.par.box()

    def unpack(self, x: np.ndarray):
        A, b, theta = self.par.unpack(x)
        return self.C0 @ A, self.b0 + self.C0 @ b, theta

    def chain(self, x: np.ndarray, t: dict) -> np.ndarray:
        return self.par.chain(x, {**t, "dA": self.C0.T @ t["dA"], "db": self.C0.T @ t["db"]})


# ============================================================================ optimisation
def _optimise(bound: AIKLBound, par, x0: np.ndarray, maxiter: int, rounds: int, round_tol: float) -> dict:
    """L-BFGS on frozen lattices, re-freezing at the solution until the bound is stable."""
    x = np.asarray(x0, dtype=float).copy()
    n_eval = [0]
    why: list[str] = []  # the last reason a trial point was rejected, to name it if the optimisation fails

    def fn(z):
        n_eval[0] += 1
        try:
            with np.errstate(all="ignore"):
                A, b, theta = par.unpack(z)
                t = bound.terms(A, b, theta)
                g = par.chain(z, t)
        except (np.linalg.LinAlgError, FloatingPointError, ValueError) as err:
            why[:] = [str(err) if isinstance(err, DensityNotFinite) or not why else why[0]]
            return np.inf, np.zeros_like(z)
        val = t["bound"]
        if not (np.isfinite(val) and np.all(np.isfinite(g))):
            why[:] = why or [f"the bound or its gradient is not finite (bound {val!r})"]
            return np.inf, np.zeros_like(z)
        return -val, -g

    converged, nit, history = False, 0, []
    bar = progress.bar("AIKL lattice rounds", rounds, label="bound", unit="round")
    for r in range(rounds):
        with np.errstate(all="ignore"):
            bound.freeze(*par.unpack(x))
        start = -fn(x)[0]
        with np.errstate(over="ignore", under="ignore"):
            res = optimize.minimize(fn, x, jac=True, method="L-BFGS-B", bounds=par.box(),
                                    options={"maxiter": maxiter, "ftol": 1e-11, "gtol": 1e-6, "maxcor": 20})
        if not np.all(np.isfinite(res.x)) or not np.isfinite(res.fun):
            if why:
                raise HandlerError(f"AIKL: {why[0]}, so the bound is not finite there and its optimisation "
                                   f"diverged ({res.message})")
            raise HandlerError(f"AIKL: the bound optimisation diverged ({res.message})")
        x, converged = res.x, bool(res.success)
        nit += int(res.nit)
        history.append(-float(res.fun))
        bar.update(history[-1])
        if r > 0 and -float(res.fun) - start < round_tol:
            break  # a fresh lattice no longer lets L-BFGS improve the bound
    bar.close()
    return {"x": x, "iterations": nit, "evaluations": n_eval[0], "converged": converged, "rounds": history}


def _refine(bound: AIKLBound, A, b, theta, tol: float, max_lattice: int) -> dict:
    """Double the lattice from ``bound.lattice`` until the bound changes by less than ``tol``."""
    K = bound.lattice
    cur = bound.with_lattice(K)
    t = cur.terms(A, b, theta, grad=False)
    trace = [(K, t["bound"])]
    err = np.inf
    while 2 * K <= max_lattice:
        K *= 2
        nxt = bound.with_lattice(K).terms(A, b, theta, grad=False)
        err = abs(nxt["bound"] - t["bound"])
        t = nxt
        trace.append((K, t["bound"]))
        if err < tol:
            break
    return {"terms": t, "lattice": K, "error": float(err), "trace": trace}


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
            if abs(finer - here) < self.refine_tol or 2 * bound.lattice > self.max_lattice:
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
