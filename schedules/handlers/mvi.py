"""Mixed variational inference (Gianniotis et al., Mixed VI) and the diagonal-Gaussian baseline (docs/maths.md §7).

q(w) = N(μ, LLᵀ), w = μ + Lz.  With S standard-normal vectors z_s drawn once from a seed, maximise the
fixed-sample objective

    F = (1/S) Σ_s log p̃(μ + Lz_s) + log|det L| (+ const),   ∂F/∂μ = ḡ,  ∂F/∂L = (1/S)Σ_s g_s z_sᵀ + L⁻ᵀ

by L-BFGS from the Laplace solution, in one of four parameterisations:

* ``MVI("mean")``: L = C_LA (the Cholesky factor of Σ_LA) fixed; only μ moves.
* ``MVI("eig")``: Σ_LA = Q diag(r²_LA) Qᵀ, L = Q diag(r); μ and r move (∂F/∂r = mean (Qᵀg_s) ⊙ z_s + 1/r).
* ``MVI("lr")``: L = C_LA + uvᵀ (u, v ~ N(0, 0.01 I) at the start); ∂F/∂u = (∂F/∂L)v, ∂F/∂v = (∂F/∂L)ᵀu,
  log|det L| = log|det C_LA| + log|1 + vᵀC_LA⁻¹u|.
* ``VIDiag()``: L = diag(σ) (σ = exp ρ for positivity).

The optimised fixed-sample objective is biased upward, so the reported ELBO is re-estimated on 10·S
fresh samples (a second seeded stream) with its standard error: a Monte Carlo estimate of a bound.

With ``learn=`` the log-hyperparameters h (``hyper.py``) join the parameter vector, as in the paper's
objectives (8), (10)–(12): they start at Laplace's optimum h_LA (``laplace_hyper``; the paper's §III-D), which also
gives the starting q, and ∂F/∂h = (1/S)Σ_s ∂log p̃(w_s; h)/∂h.  The ELBO and the block's terms are at the optimum.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np
from scipy import optimize

from distributions import MvGaussian
from factorgraph.nodes import ModelError
from factorgraph.results import ESTIMATE

from .hyper import Hyper, learn_names
from .laplace import LOG_2PI, BlockFit, HandlerError, find_mode, gaussian_from_hessian, laplace_hyper


class _FixedSampleVI(ABC):
    """Shared machinery: fixed samples, the objective, L-BFGS, and the fresh-sample ELBO.

    Parameters
    ----------
    n_samples
        S, the fixed standard-normal draws of the objective.
    seed
        Seeds the fixed draws (and, through a second stream, the fresh draws of the reported ELBO).
    fresh_factor
        The reported ELBO uses ``fresh_factor``·S fresh draws.
    maxiter
        L-BFGS iterations.
    learn
        Hyperparameters to learn jointly with q: ``"prior_precision"`` (a multiplier of the block's constant
        prior precision) and/or ``"scale"`` (the scales of its claimed Laplace, Cauchy and Student-t sites),
        started at Laplace's optimum (``hyper.py``).  Default: none.  The learned values are in
        ``BlockFit.info["hyperparameters"]`` (Laplace's starting ones in ``"laplace_hyperparameters"``) and
        ``Result.hyperparameters(name)``.
    """

    name = "VI"
    kind = ""

    def __init__(self, n_samples: int = 1000, seed: int = 0, fresh_factor: int = 10, maxiter: int = 2000,
                 learn: str | Iterable[str] = ()) -> None:
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 2:
            raise ModelError(f"{self.name}: n_samples must be an integer ≥ 2, got {n_samples!r}")
        self.n_samples, self.seed, self.fresh_factor, self.maxiter = n_samples, seed, fresh_factor, maxiter
        self.learn = learn_names(learn, self.name)

    # parameterisation hooks: theta <-> (mu, L), gradient chain rule, log|det L|
    @abstractmethod
    def init(self, mu: np.ndarray, C: np.ndarray, cov: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Starting parameters from the Laplace solution."""

    @abstractmethod
    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(μ, L, log|det L|) from the parameter vector."""

    @abstractmethod
    def chain(self, theta: np.ndarray, g_mu: np.ndarray, G: np.ndarray) -> np.ndarray:
        """Gradient in theta from ∂F/∂μ and ∂F/∂L (G includes the entropy's L⁻ᵀ)."""

    def fit(self, target, x0: np.ndarray, warm: dict | None = None) -> BlockFit:
        warm = warm or {}
        hyper, info = None, {}
        if self.learn:
            hyper = Hyper(target, self.learn, self.name)
            h_la, target, w, H, _ = laplace_hyper(hyper, hyper.start(warm, "laplace_log_hyper"),
                                                  warm.get("mode", x0), self.name)
            info = {"laplace_log_hyper": h_la, "laplace_hyperparameters": hyper.report(h_la)}
        else:
            w, H, _ = find_mode(target, warm.get("mode", x0), self.name)
        q_la, _ = gaussian_from_hessian(w, H, self.name)
        cov = q_la.cov()
        C = np.linalg.cholesky(cov)
        D = w.shape[0]
        rng = np.random.default_rng(self.seed)
        Z = rng.standard_normal((self.n_samples, D))
        self._setup(w, C, cov)
        resume = warm.get("theta") is not None and warm.get("kind") == self.kind
        x_start = warm.get("theta") if resume else self.init(w, C, cov, rng)
        if hyper is not None:  # h joins the vector, from this block's last optimum or else from h_LA
            x_start = np.concatenate([x_start, hyper.start(warm) if resume else h_la])

        res = optimize.minimize(self.objective(target, Z, hyper), x_start, jac=True, method="L-BFGS-B",
                                options={"maxiter": self.maxiter, "gtol": 1e-8})
        if not np.all(np.isfinite(res.x)):
            raise HandlerError(f"{self.name}: the optimisation diverged ({res.message})")
        theta = res.x
        if hyper is not None:
            theta, h = res.x[:-hyper.size], res.x[-hyper.size:]
            target = hyper.at(h)
            info.update(hyper.info(h))
        mu, L, logdet = self.unpack(theta)
        entropy = 0.5 * D * (LOG_2PI + 1.0) + logdet
        fresh = np.random.default_rng([self.seed, 1]).standard_normal((self.fresh_factor * self.n_samples, D))
        W = mu + fresh @ L.T
        v, sv = target.log_values(W)
        n = len(v)
        elbo = float(v.mean()) + entropy
        se = float(v.std(ddof=1) / np.sqrt(n))
        site, site_se = 0.0, 0.0
        if sv is not None:
            site, site_se = float(sv.mean()), float(sv.std(ddof=1) / np.sqrt(n))
        q = MvGaussian(mean=mu, cov=L @ L.T)
        shift = hyper.prior_shift(h, mu, q.cov()) if hyper is not None else 0.0
        info.update({"mode": mu, "theta": theta, "kind": self.kind, "objective": -float(res.fun),
                     "iterations": int(res.nit), "converged": bool(res.success)})
        return BlockFit(q, elbo, ESTIMATE, se, site, site_se, entropy, info, shift)

    def objective(self, target, Z: np.ndarray, hyper: Hyper | None = None):
        """x ↦ (−F(x), −∇F(x)) on the fixed samples Z (after ``_setup`` from a Laplace solution).

        x holds q's parameters; with ``hyper`` it ends with the log-hyperparameters h, the target is
        ``hyper.at(h)`` and ∂F/∂h = (1/S)Σ_s ∂log p̃(w_s; h)/∂h is appended to the gradient.
        """

        def fn(x: np.ndarray) -> tuple[float, np.ndarray]:
            theta = x if hyper is None else x[:-hyper.size]
            mu, L, logdet = self.unpack(theta)
            W = mu + Z @ L.T
            if hyper is None:
                v, g = target.logp_grad(W)
            else:
                h = x[-hyper.size:]
                with np.errstate(all="ignore"):  # a trial h far out (a scale of 0 or ∞): rejected below
                    v, g, gh = hyper.value_grads(hyper.at(h), W, h)
                if not (np.all(np.isfinite(v)) and np.all(np.isfinite(g)) and np.all(np.isfinite(gh))):
                    return np.inf, np.zeros_like(x)  # L-BFGS's line search backs off
            G = g.T @ Z / len(Z) + np.linalg.inv(L).T
            grad = self.chain(theta, g.mean(0), G)
            if hyper is not None:
                grad = np.concatenate([grad, gh.mean(0)])
            return -(float(v.mean()) + logdet), -grad

        return fn

    def _setup(self, w: np.ndarray, C: np.ndarray, cov: np.ndarray) -> None:
        self._C = C

    def _learn_repr(self) -> str:
        return f", learn={self.learn}" if self.learn else ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r}, n_samples={self.n_samples}, seed={self.seed}{self._learn_repr()})"


class MVI(_FixedSampleVI):
    """Mixed variational inference with ``kind`` "mean", "eig" or "lr" (see the module docstring)."""

    name = "MVI"

    def __init__(self, kind: str = "lr", n_samples: int = 1000, seed: int = 0, **options) -> None:
        """``options``: ``fresh_factor``, ``maxiter`` and ``learn`` (see ``_FixedSampleVI``)."""
        if kind not in ("mean", "eig", "lr"):
            raise ModelError(f"MVI: kind must be 'mean', 'eig' or 'lr', got {kind!r}")
        self.kind = kind
        super().__init__(n_samples, seed, **options)

    def _setup(self, w: np.ndarray, C: np.ndarray, cov: np.ndarray) -> None:
        self._C = C
        self._logdet_C = float(np.log(np.abs(np.diag(C))).sum())
        if self.kind == "eig":
            r2, self._Q = np.linalg.eigh(cov)
            self._r0 = np.sqrt(np.maximum(r2, 1e-300))

    def init(self, mu, C, cov, rng) -> np.ndarray:
        D = mu.shape[0]
        if self.kind == "mean":
            return mu.copy()
        if self.kind == "eig":
            return np.concatenate([mu, self._r0])
        return np.concatenate([mu, 0.1 * rng.standard_normal(D), 0.1 * rng.standard_normal(D)])

    def unpack(self, theta):
        D = self._C.shape[0]
        mu = theta[:D]
        if self.kind == "mean":
            return mu, self._C, self._logdet_C
        if self.kind == "eig":
            r = theta[D:]
            return mu, self._Q * r, float(np.log(np.abs(r)).sum())
        u, v = theta[D:2 * D], theta[2 * D:]
        L = self._C + np.outer(u, v)
        det_factor = 1.0 + v @ np.linalg.solve(self._C, u)
        return mu, L, self._logdet_C + float(np.log(np.abs(det_factor)))

    def chain(self, theta, g_mu, G):
        D = self._C.shape[0]
        if self.kind == "mean":
            return g_mu
        if self.kind == "eig":
            return np.concatenate([g_mu, np.einsum("ij,ij->j", self._Q, G)])
        u, v = theta[D:2 * D], theta[2 * D:]
        return np.concatenate([g_mu, G @ v, G.T @ u])


class VIDiag(_FixedSampleVI):
    """Mean-field Gaussian VI, L = diag(σ): the baseline of the MVI paper."""

    name = "VIDiag"
    kind = "diag"

    def init(self, mu, C, cov, rng) -> np.ndarray:
        return np.concatenate([mu, 0.5 * np.log(np.diag(cov))])

    def unpack(self, theta):
        D = theta.shape[0] // 2
        rho = theta[D:]
        return theta[:D], np.diag(np.exp(rho)), float(rho.sum())

    def chain(self, theta, g_mu, G):
        D = theta.shape[0] // 2
        return np.concatenate([g_mu, np.exp(theta[D:]) * np.diag(G)])

    def __repr__(self) -> str:
        return f"VIDiag(n_samples={self.n_samples}, seed={self.seed}{self._learn_repr()})"
