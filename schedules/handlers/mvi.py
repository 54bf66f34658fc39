"""Mixed variational inference (Gianniotis et al. 2016) and the diagonal-Gaussian baseline (docs/maths.md §7).

q(w) = N(μ, LLᵀ), w = μ + Lz.  The objective is the ELBO F = E_q[log p̃(w)] + log|det L| (+ const).  On a model
block, log p̃ = (Gaussian part) + (sites): the block's prior message and any Gaussian (quadratic) sites form
η₁ᵀw + wᵀη₂w + c, whose expectation η₁ᵀμ + μᵀη₂μ + tr(η₂LLᵀ) + c is taken in closed form; only the other
sites are sampled, with S standard-normal vectors z_s drawn once from the seed (common random numbers: the
same draws at every refit of the block), so

    F = η₁ᵀμ + μᵀη₂μ + tr(η₂LLᵀ) + c + (1/S) Σ_s Σ_n log f_n(x_nᵀ(μ + Lz_s)) + log|det L|,
    ∂F/∂μ = η₁ + 2η₂μ + mean_s g_s,   ∂F/∂L = 2η₂L + (1/S)Σ_s g_s z_sᵀ + L⁻ᵀ.

A block without sampled sites (an exactly Gaussian posterior) is then fitted exactly.  The parameters are
whitened by the Laplace solution N(w_LA, C Cᵀ) (the Laplace factor preconditions the problem, so a nearly
degenerate posterior is as easy as an isotropic one):

* ``MVI("mean")``: L = C fixed; μ = w_LA + C a, a moves.
* ``MVI("eig")``: CCᵀ = Q diag(r²_LA) Qᵀ, L = Q diag(r_LA ⊙ e^ρ), μ = w_LA + Q diag(r_LA) a; a and ρ move.
* ``MVI("lr")``: L = C(I + uvᵀ) = C + (Cu)vᵀ, the paper's low-rank family;
  log|det L| = log|det C| + log|1 + vᵀu|; u starts small and random, v at 0, so q starts at Laplace's.
* ``VIDiag()``: L = diag(σ₀ ⊙ e^ρ) with σ₀² = 1/diag(C⁻ᵀC⁻¹), the mean-field optimum of Laplace's Gaussian;
  μ = w_LA + C a.

A refit of the block in a later sweep starts from the previous fit's correction to its Laplace solution
(a, and u, v or ρ; for "eig" the previous covariance projected on the new eigenvectors), carried to the
new Laplace solution, which is recomputed from the block's current messages.  L-BFGS runs to a small
gradient; a fit that stops with a gradient above ``gtol`` (in the whitened coordinates: posterior
standard deviations) while the gain its model still expects, ½gᵀH̃⁻¹g, exceeds the rounding level of the
objective (``stopping``: a sum of terms of 1e10 is known to ~1e-5 nats) is retried, continuing from where
it stopped and then from Laplace's solution, and raises ``HandlerError`` if it still fails: it is never
returned as converged.

The optimised fixed-sample objective is biased upward, so the reported ELBO is re-estimated on
``fresh_factor``·S fresh draws (a second seeded stream) of the sampled sites, with its standard error
(0 when nothing is sampled: the figure is then exact).

With ``learn=`` the log-hyperparameters h (``hyper.py``) join the parameter vector, as in the paper's
objectives: they start at Laplace's optimum h_LA (``laplace_hyper``), which also gives the starting q, and
∂F/∂h = E_q[∂log p̃(w; h)/∂h] (the prior precision's part in closed form, the site scales' sampled).  The
ELBO and the block's terms are at the optimum.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np
from scipy import linalg, optimize

from distributions import MvGaussian
from factorgraph.graph import checks
from factorgraph.posterior.results import ESTIMATE, LOWER_BOUND

from .. import progress
from .hyper import Hyper, learn_names
from .laplace import LOG_2PI, BlockFit, HandlerError, find_mode, gaussian_from_hessian, laplace_hyper
from .stopping import decrement, settled, value_rounding


class _FixedSampleVI(ABC):
    """Shared machinery: fixed samples, the objective, L-BFGS with its convergence check, the fresh-sample ELBO.

    Parameters
    ----------
    n_samples
        S, the fixed standard-normal draws of the objective.
    seed
        Seeds the fixed draws (and, through a second stream, the fresh draws of the reported ELBO).
    fresh_factor
        The reported ELBO uses ``fresh_factor``·S fresh draws.
    maxiter
        L-BFGS iterations per attempt.
    gtol
        Largest gradient component (whitened coordinates: posterior standard deviations) of a converged fit,
        unless the gain L-BFGS still expects is below the objective's rounding level (``stopping.settled``);
        otherwise the fit is retried and then fails with ``HandlerError``.
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
                 learn: str | Iterable[str] = (), gtol: float = 1e-5) -> None:
        n_samples = checks.integer(n_samples, f"{self.name}: n_samples", low=2, high=checks.MAX_ELEMENTS)
        seed = checks.integer(seed, f"{self.name}: seed (an integer ≥ 0)", low=0)
        fresh_factor = checks.integer(fresh_factor, f"{self.name}: fresh_factor", low=1, high=10_000)
        maxiter = checks.integer(maxiter, f"{self.name}: maxiter", low=1)
        gtol = checks.number(gtol, f"{self.name}: gtol", low=0.0, low_open=True)
        self.n_samples, self.seed = n_samples, seed
        self.fresh_factor, self.maxiter, self.gtol = fresh_factor, maxiter, gtol
        self.learn = learn_names(learn, self.name)

    # parameterisation hooks: theta <-> (mu, L), gradient chain rule, log|det L|, warm starts
    @abstractmethod
    def init(self, mu: np.ndarray, C: np.ndarray, cov: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Starting parameters: Laplace's solution (after ``_setup``)."""

    @abstractmethod
    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(μ, L, log|det L|) from the parameter vector."""

    @abstractmethod
    def chain(self, theta: np.ndarray, g_mu: np.ndarray, G: np.ndarray) -> np.ndarray:
        """Gradient in theta from ∂F/∂μ and ∂F/∂L (G includes the entropy's L⁻ᵀ)."""

    @abstractmethod
    def transport(self, warm: dict) -> np.ndarray | None:
        """Parameters that carry a previous fit's correction to its Laplace solution (``warm["offset"]``,
        μ − w_LA, and ``warm["rel"]``, its L relative to its Laplace factor) to the current one."""

    def _setup(self, w: np.ndarray, C: np.ndarray, cov: np.ndarray) -> None:
        """Whitening reference: the Laplace mode w and the Cholesky factor C of its covariance."""
        self._w, self._C = np.asarray(w, dtype=float), np.asarray(C, dtype=float)
        self._logdet_C = float(np.log(np.abs(np.diag(C))).sum())

    def _white(self, offset: np.ndarray) -> np.ndarray:
        return linalg.solve_triangular(self._C, offset, lower=True)

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
        Z = np.random.default_rng(self.seed).standard_normal((self.n_samples, D))  # the same at every refit
        self._setup(w, C, cov)
        fresh_start = self.init(w, C, cov, np.random.default_rng([self.seed, 2]))
        starts = []
        if warm.get("kind") == self.kind and warm.get("offset") is not None and len(warm["offset"]) == D:
            moved = self.transport(warm)
            if moved is not None and np.all(np.isfinite(moved)):
                starts.append(moved)
        starts.append(fresh_start)
        if hyper is not None:  # h joins the vector, from this block's last optimum or else from h_LA
            starts = [np.concatenate([x, hyper.start(warm) if i == 0 and len(starts) == 2 else h_la])
                      for i, x in enumerate(starts)]
        res, attempts = self._minimise(self.objective(target, Z, hyper), starts, self._rounding(target, hyper))
        theta = res.x
        if hyper is not None:
            theta, h = res.x[:-hyper.size], res.x[-hyper.size:]
            target = hyper.at(h)
            info.update(hyper.info(h))
        mu, L, logdet = self.unpack(theta)
        cov_q = L @ L.T
        entropy = 0.5 * D * (LOG_2PI + 1.0) + logdet
        kind, se, site, site_se = LOWER_BOUND, 0.0, 0.0, 0.0
        if hasattr(target, "gaussian_expectation"):
            gauss = target.gaussian_expectation(mu, L)[0]
            site = target.quadratic_site_term(mu, cov_q)
            if target.mc_sites:
                fresh = np.random.default_rng([self.seed, 1]).standard_normal((self.fresh_factor * self.n_samples, D))
                sv = target.mc_site_terms(mu + fresh @ L.T, grads=False)[0]
                kind, mc, se = ESTIMATE, float(sv.mean()), float(sv.std(ddof=1) / np.sqrt(len(sv)))
                site, site_se, gauss = site + mc, se, gauss + mc
            elbo = gauss + entropy
        else:
            fresh = np.random.default_rng([self.seed, 1]).standard_normal((self.fresh_factor * self.n_samples, D))
            v = target.log_values(mu + fresh @ L.T)[0]
            kind, elbo, se = ESTIMATE, float(v.mean()) + entropy, float(v.std(ddof=1) / np.sqrt(len(v)))
        q = MvGaussian(mean=mu, cov=cov_q)
        shift = hyper.prior_shift(h, mu, q.cov()) if hyper is not None else 0.0
        info.update({"mode": mu, "theta": theta, "kind": self.kind, "offset": mu - w, "rel": self._relative(theta),
                     "objective": -float(res.fun), "iterations": int(res.nit), "attempts": attempts,
                     "gradient": float(np.max(np.abs(res.jac), initial=0.0)), "converged": True})
        return BlockFit(q, elbo, kind, se, site, site_se, entropy, info, shift)

    def _relative(self, theta: np.ndarray) -> np.ndarray:
        """The covariance part of theta (what ``transport`` reuses); empty for "mean"."""
        return np.asarray(theta[self._C.shape[0]:], dtype=float).copy()

    def _rounding(self, target, hyper: Hyper | None):
        """x ↦ the rounding level of the objective at x (``stopping.value_rounding`` of log p̃ at q's mean)."""

        def level(x: np.ndarray, value: float) -> float:
            theta = x if hyper is None else x[:-hyper.size]
            t = target if hyper is None else hyper.at(x[-hyper.size:])
            with np.errstate(all="ignore"):
                return value_rounding(t, self.unpack(theta)[0], value)

        return level

    def _minimise(self, fn, starts: list[np.ndarray], rounding):
        """L-BFGS from each start in turn (a warm start, then Laplace's), each attempt continued once from where
        it stopped, until it settles (``stopping.settled``): the largest gradient component (whitened: posterior
        sd) is at most ``gtol``, or the gain its model still expects is below the objective's rounding level
        (``rounding(x, value)``); else ``HandlerError``."""
        attempts, res = 0, None
        bar = progress.bar(f"{self.name} iterations", unit="iter")
        for x in starts:
            for _ in range(2):
                attempts += 1
                with np.errstate(over="ignore", under="ignore"):
                    res = optimize.minimize(fn, x, jac=True, method="L-BFGS-B",
                                            options={"maxiter": self.maxiter, "gtol": 1e-3 * self.gtol,
                                                     "ftol": 1e-15, "maxcor": 20}, callback=bar.callback)
                if not (np.all(np.isfinite(res.x)) and np.isfinite(res.fun)):
                    break  # diverged: try the next start
                if settled(res, self.gtol, rounding(res.x, -float(res.fun))):
                    bar.close()
                    return res, attempts
                x = res.x
        bar.close()
        grad = float(np.max(np.abs(res.jac), initial=0.0)) if res is not None else np.inf
        gain = 0.5 * decrement(res) if res is not None else np.inf
        raise HandlerError(f"{self.name}: the optimisation did not converge: L-BFGS stopped "
                           f"({res.message if res is not None else 'no start'}) with a gradient of {grad:.3g} "
                           f"(> gtol = {self.gtol:g}, in posterior sd) and a gain of {gain:.3g} nats still expected "
                           f"after {attempts} attempts, from the previous fit and from the Laplace solution; try more "
                           "samples (n_samples), a larger maxiter or a better-conditioned model")

    def objective(self, target, Z: np.ndarray, hyper: Hyper | None = None):
        """x ↦ (−F(x), −∇F(x)) on the fixed samples Z (after ``_setup`` from a Laplace solution).

        x holds q's parameters; with ``hyper`` it ends with the log-hyperparameters h, the target is
        ``hyper.at(h)`` and E_q[∂log p̃/∂h] is appended to the gradient.
        """
        split = hasattr(target, "gaussian_expectation")
        S = len(Z)

        def fn(x: np.ndarray) -> tuple[float, np.ndarray]:
            theta = x if hyper is None else x[:-hyper.size]
            h = None if hyper is None else x[-hyper.size:]
            with np.errstate(all="ignore"):  # a trial point far out gives non-finite values, rejected below
                mu, L, logdet = self.unpack(theta)
                t = target if hyper is None else hyper.at(h)
                gs = None
                if split:
                    value, g_mu, G = t.gaussian_expectation(mu, L)
                    if t.mc_sites:
                        sv, sg, gs = t.mc_site_terms(mu + Z @ L.T, scales=bool(hyper is not None and hyper.scaled))
                        value, g_mu, G = value + float(sv.mean()), g_mu + sg.mean(0), G + sg.T @ Z / S
                        gs = None if gs is None else gs.mean(0)
                else:
                    v, g = t.logp_grad(mu + Z @ L.T)
                    value, g_mu, G = float(v.mean()), g.mean(0), g.T @ Z / S
                try:
                    G = G + np.linalg.inv(L).T
                except np.linalg.LinAlgError:
                    return np.inf, np.zeros_like(x)
                grad = self.chain(theta, g_mu, G)
                if hyper is not None:
                    grad = np.concatenate([grad, hyper.expected_grad(h, mu, L @ L.T, gs)])
            value += logdet
            if not (np.isfinite(value) and np.all(np.isfinite(grad))):
                return np.inf, np.zeros_like(x)  # L-BFGS's line search backs off
            return -value, -grad

        return fn

    def _learn_repr(self) -> str:
        return f", learn={self.learn}" if self.learn else ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind!r}, n_samples={self.n_samples}, seed={self.seed}{self._learn_repr()})"


class MVI(_FixedSampleVI):
    """Mixed variational inference with ``kind`` "mean", "eig" or "lr" (see the module docstring)."""

    name = "MVI"

    def __init__(self, kind: str = "lr", n_samples: int = 1000, seed: int = 0, **options) -> None:
        """``options``: ``fresh_factor``, ``maxiter``, ``gtol`` and ``learn`` (see ``_FixedSampleVI``)."""
        checks.choice(kind, ("mean", "eig", "lr"), "MVI: kind")
        self.kind = kind
        super().__init__(n_samples, seed, **options)

    def _setup(self, w: np.ndarray, C: np.ndarray, cov: np.ndarray) -> None:
        super()._setup(w, C, cov)
        if self.kind == "eig":
            r2, self._Q = np.linalg.eigh(cov)
            self._r0 = np.sqrt(np.maximum(r2, 1e-300))

    def init(self, mu, C, cov, rng) -> np.ndarray:
        D = mu.shape[0]
        if self.kind == "mean":
            return np.zeros(D)
        if self.kind == "eig":
            return np.zeros(2 * D)
        # v = 0: q starts at Laplace's solution, and ∂F/∂v = Gᵀ(Cu) moves v as soon as the sites disagree with it
        return np.concatenate([np.zeros(D), 0.1 * rng.standard_normal(D), np.zeros(D)])

    def transport(self, warm: dict) -> np.ndarray | None:
        D = self._C.shape[0]
        offset, rel = np.asarray(warm["offset"], dtype=float), np.asarray(warm["rel"], dtype=float)
        if self.kind == "eig":
            # the previous covariance relative to its Laplace factor, C_new R Rᵀ C_newᵀ, on the new eigenvectors
            R = warm.get("rel_factor")
            if R is None or R.shape != (D, D):
                return None
            P = self._Q.T @ (self._C @ R)
            rho = 0.5 * np.log(np.maximum(np.einsum("ij,ij->i", P, P), 1e-300) / self._r0**2)
            return np.concatenate([(self._Q.T @ offset) / self._r0, rho])
        return np.concatenate([self._white(offset), rel])

    def fit(self, target, x0: np.ndarray, warm: dict | None = None) -> BlockFit:
        fit = super().fit(target, x0, warm)
        if self.kind == "eig":  # C⁻¹L: the covariance relative to the Laplace factor, for the next warm start
            L = self.unpack(fit.info["theta"])[1]
            fit.info["rel_factor"] = linalg.solve_triangular(self._C, L, lower=True)
        return fit

    def unpack(self, theta):
        D = self._C.shape[0]
        if self.kind == "mean":
            return self._w + self._C @ theta, self._C, self._logdet_C
        if self.kind == "eig":
            a, rho = theta[:D], theta[D:]
            r = self._r0 * np.exp(rho)
            return self._w + self._Q @ (self._r0 * a), self._Q * r, float(np.log(self._r0).sum() + rho.sum())
        a, u, v = theta[:D], theta[D:2 * D], theta[2 * D:]
        Cu = self._C @ u
        L = self._C + np.outer(Cu, v)
        return self._w + self._C @ a, L, self._logdet_C + float(np.log(np.abs(1.0 + v @ u)))

    def chain(self, theta, g_mu, G):
        D = self._C.shape[0]
        if self.kind == "mean":
            return self._C.T @ g_mu
        if self.kind == "eig":
            r = self._r0 * np.exp(theta[D:])
            return np.concatenate([self._r0 * (self._Q.T @ g_mu), np.einsum("ij,ij->j", self._Q, G) * r])
        u, v = theta[D:2 * D], theta[2 * D:]
        return np.concatenate([self._C.T @ g_mu, self._C.T @ (G @ v), G.T @ (self._C @ u)])


class VIDiag(_FixedSampleVI):
    """Mean-field Gaussian VI, L = diag(σ): the baseline of the MVI paper (module docstring)."""

    name = "VIDiag"
    kind = "diag"

    def _setup(self, w: np.ndarray, C: np.ndarray, cov: np.ndarray) -> None:
        super()._setup(w, C, cov)
        Ci = linalg.solve_triangular(C, np.eye(len(w)), lower=True)
        self._s0 = 1.0 / np.sqrt(np.einsum("ij,ij->j", Ci, Ci))  # 1/√diag(Λ), Λ = C⁻ᵀC⁻¹

    def init(self, mu, C, cov, rng) -> np.ndarray:
        return np.zeros(2 * mu.shape[0])

    def transport(self, warm: dict) -> np.ndarray | None:
        return np.concatenate([self._white(np.asarray(warm["offset"], dtype=float)), np.asarray(warm["rel"], float)])

    def unpack(self, theta):
        D = theta.shape[0] // 2
        rho = theta[D:]
        return self._w + self._C @ theta[:D], np.diag(self._s0 * np.exp(rho)), float(np.log(self._s0).sum() + rho.sum())

    def chain(self, theta, g_mu, G):
        D = theta.shape[0] // 2
        return np.concatenate([self._C.T @ g_mu, self._s0 * np.exp(theta[D:]) * np.diag(G)])

    def __repr__(self) -> str:
        return f"VIDiag(n_samples={self.n_samples}, seed={self.seed}{self._learn_repr()})"
