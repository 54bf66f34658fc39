r"""The optimisation of the AI-KL bound (docs/maths.md §9): parameterisations of (A, b, θ) and L-BFGS.

* ``_Chol``: q = N(b, CCᵀ), C lower triangular with log-diagonal (the Gaussian KL stage);
* ``_LU``: A = LU, L unit lower triangular, U upper triangular with U_dd = e^{s_d} (log|det A| = Σ_d s_d),
  and the free base parameters; ∂B/∂L = (∂B/∂A)Uᵀ, ∂B/∂U = Lᵀ(∂B/∂A);
* ``_Whitened``: either of them in coordinates whitened by a starting Gaussian N(b₀, C₀C₀ᵀ).

``_optimise`` runs L-BFGS-B on frozen lattices (``AIKLBound.freeze``), re-freezing at the solution until a
round gains less than ``round_tol``; ``_refine`` doubles the lattice until the bound settles.  Both
tolerances are floored at the bound's rounding level (``stopping.value_rounding``), and a run converged when
its whitened gradient is below 1e-6 posterior sd or the gain it still expects is below that level.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from distributions.affine_base_density import BaseDensity

from .. import progress
from .aikl_bound import AIKLBound
from .laplace import HandlerError
from .stopping import ROUNDING, settled, value_rounding
from .target import DensityNotFinite

_GTOL = 1e-6  # largest gradient component of a converged L-BFGS run, in whitened coordinates (posterior sd)


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
                                    options={"maxiter": maxiter, "ftol": 1e-11, "gtol": _GTOL, "maxcor": 20})
        if not np.all(np.isfinite(res.x)) or not np.isfinite(res.fun):
            if why:
                raise HandlerError(f"AIKL: {why[0]}, so the bound is not finite there and its optimisation "
                                   f"diverged ({res.message})")
            raise HandlerError(f"AIKL: the bound optimisation diverged ({res.message})")
        # L-BFGS-B's own tests are an absolute gradient (whitened: posterior sd) and a relative change of the
        # bound; a line search that fails where the gain still expected is below the bound's rounding level
        # (its terms can be large and cancel) has reached the optimum too
        noise = _rounding(bound, par, res.x, -float(res.fun))
        x, converged = res.x, bool(res.success) or settled(res, _GTOL, noise)
        nit += int(res.nit)
        history.append(-float(res.fun))
        bar.update(history[-1])
        if r > 0 and -float(res.fun) - start < max(round_tol, noise):
            break  # a fresh lattice no longer lets L-BFGS improve the bound
    bar.close()
    return {"x": x, "iterations": nit, "evaluations": n_eval[0], "converged": converged, "rounds": history}


def _rounding(bound: AIKLBound, par, x: np.ndarray, value: float) -> float:
    """The rounding level of the bound at x: that of log p̃ at q's location b (``stopping.value_rounding``)."""
    with np.errstate(all="ignore"):
        b = par.unpack(x)[1]
        try:
            return value_rounding(bound.target, b, value)
        except (DensityNotFinite, FloatingPointError, ValueError):
            return ROUNDING * abs(value)


def _refine(bound: AIKLBound, A, b, theta, tol: float, max_lattice: int) -> dict:
    """Double the lattice from ``bound.lattice`` until the bound changes by less than ``tol`` (or than its
    rounding level, where that is larger)."""
    K = bound.lattice
    cur = bound.with_lattice(K)
    t = cur.terms(A, b, theta, grad=False)
    trace = [(K, t["bound"])]
    with np.errstate(all="ignore"):
        try:
            tol = max(tol, value_rounding(bound.target, b, t["bound"]))
        except (DensityNotFinite, FloatingPointError, ValueError):
            pass
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
