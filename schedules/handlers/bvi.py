r"""Boosting variational inference (Guo et al. 2016, seed 001) as a global handler (MATH.md §7).

The approximation is a Gaussian mixture grown greedily, one component per boosting iteration:

    q_t = (1 − α_t) q_{t−1} + α_t h_t,   h_t = N(x*_t, λ H_t⁻¹).

**Component step (Algorithm 2).**  With the tail-stabilised residual log density (seed eq. 23)

    r(x) = log(p̃(x)/Ẑ + ε) − log(q_{t−1}(x) + ε)        (both terms by log-sum-exp),

x* = argmax r is found by L-BFGS from ``n_starts`` draws of q_{t−1} (the highest local peak wins; a
search that fails — no finite peak, or −∇²r not positive definite there — is retried from fresh draws,
``n_retries`` times), and H = −∇²r(x*).  With σ_p = p̃/(p̃ + εẐ) and σ_q = q/(q + ε),

    ∇r = σ_p ∇log p̃ − σ_q ∇log q,
    ∇²r = σ_p[∇²log p̃ + (1 − σ_p)∇log p̃ ∇log p̃ᵀ] − σ_q[∇²log q + (1 − σ_q)∇log q ∇log qᵀ],

with ∇²log p̃ from ``target.hessian`` (analytic on a model block, finite differences on a plain
density) and ∇²log q in closed form; ``hessian="fd"`` uses central differences of ∇r instead, and
``diagonal=True`` keeps only diag(H) (the seed's option for high dimension).  The covariance λH⁻¹
(λ = ½, the first author's code) solves the regularised problem of seed eqs. (17)–(19).

Ẑ rescales p̃ to the scale of a normalised density, without which ε would be meaningless for a model
block whose p̃ is far from normalised: it is the importance-sampling estimate
log Ẑ = log (1/n)Σ_s p̃(x_s)/q_{t−1}(x_s), x_s ~ q_{t−1}, computed with the ELBO trace (≥ the ELBO
estimate, and log Z on average as q_{t−1} improves).  On a normalised target Ẑ ≈ 1.

**Weight step (Algorithm 1).**  D(α) = E_{q_α}[log q_α − log p̃] is convex in α with

    ∂D/∂α = E_h[γ_α] − E_{q_{t−1}}[γ_α],   γ_α = log((1 − α)q_{t−1} + αh) − log p̃;

both expectations are estimated with ``n_weight_samples`` fresh draws from h and from q_{t−1} at every
step, and α follows projected SGD, α ← Π_[0,1](α − c/k · ĝ_k) (Robbins–Monro steps c/k, c =
``weight_step``), stopping when |Δα| < ``weight_tol`` (or after ``max_weight_steps``).  A component
whose weight comes out below ``min_weight`` is skipped (q unchanged).

**Evidence.**  After each added component the ELBO E_q[log p̃ − log q] is estimated on
``n_elbo_samples`` fresh draws (``info["elbo_trace"]``, ``info["elbo_se_trace"]``); the reported
figure is a final estimate on ``n_final_samples`` draws from a second seeded stream, labelled
``ESTIMATE`` (a Monte Carlo estimate of a lower bound, MATH.md §9).  On a model block the claimed
sites' part E_q[Σ log f] and the entropy −E_q[log q] come from the same final draws; ``site_se`` is the
standard error of their sum (the Monte Carlo part of the block's ELBO; the engine adds the prior's
E_q[log N(w | prior)] exactly from q's moments).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from distributions import GaussianMixture, MvGaussian
from factorgraph.nodes import ModelError
from factorgraph.results import ESTIMATE

from .laplace import BlockFit, HandlerError, find_mode, gaussian_from_hessian

__all__ = ["BVI", "mc_discrepancy", "residual", "weight_gradient"]


# ---------------------------------------------------------------------------------------- kernels
def _log_density(target: Any, W: np.ndarray) -> np.ndarray:
    """log p̃ at the rows of W (values only where the target can skip its gradient); −inf stays."""
    values = getattr(target, "_values", None)  # a DensityTarget without gradient work
    with np.errstate(all="ignore"):
        v = values(W) if values is not None else target.logp_grad(W)[0]
    v = np.asarray(v, dtype=float).reshape(W.shape[0])
    return np.where(np.isnan(v), -np.inf, v)


def residual(log_p: np.ndarray, log_q: np.ndarray, eps: float) -> np.ndarray:
    r"""Tail-stabilised residual r = log(p̃ + ε) − log(q + ε) (seed eq. 23), by log-sum-exp.

    Parameters
    ----------
    log_p, log_q
        log p̃ (already rescaled to a normalised scale) and log q at the same points.
    eps
        The stabiliser ε > 0.
    """
    le = np.log(eps)
    return np.logaddexp(log_p, le) - np.logaddexp(log_q, le)


def _gamma(alpha: float, log_q: np.ndarray, log_h: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """γ_α = log((1 − α) q + α h) − log p̃ at points (finite: +1e6 where p̃ = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.logaddexp(np.log1p(-alpha) + log_q, np.log(alpha) + log_h) - log_p
    return np.nan_to_num(g, nan=1e6, posinf=1e6, neginf=-1e6)


def weight_gradient(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...]) -> float:
    r"""Monte Carlo estimate of ∂D/∂α = E_h[γ_α] − E_q[γ_α] (seed eq. 11).

    Parameters
    ----------
    alpha
        The weight α ∈ [0, 1] of the new component h.
    at_h, at_q
        (log q_{t−1}, log h, log p̃) at draws from h and from q_{t−1} respectively.

    Notes
    -----
    With the same draws (common random numbers) the derivative of ``mc_discrepancy`` is this value plus
    (1 − α)·mean_q[(h − q)/q_α] + α·mean_h[(h − q)/q_α], an importance-sampling estimate of
    ∫(h − q) = 0; the two agree up to that zero-mean term.
    """
    return float(_gamma(alpha, *at_h).mean() - _gamma(alpha, *at_q).mean())


def mc_discrepancy(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...]) -> float:
    r"""Monte Carlo estimate of D(q_α) = E_{q_α}[γ_α] = (1 − α)E_q[γ_α] + αE_h[γ_α] (= −ELBO of q_α)
    from fixed draws of h and q_{t−1} (arguments as in ``weight_gradient``)."""
    return float((1.0 - alpha) * _gamma(alpha, *at_q).mean() + alpha * _gamma(alpha, *at_h).mean())


def _fingerprint(target: Any) -> str | None:
    """A hash of a model block's inputs (prior message, projections, moments of the other edges)."""
    if not hasattr(target, "eta1") or not hasattr(target, "sites"):
        return None
    h = hashlib.sha1()

    def feed(a: Any) -> None:
        if isinstance(a, (tuple, list)):
            for b in a:
                feed(b)
        elif isinstance(a, dict):
            for k in sorted(a, key=str):
                h.update(str(k).encode())
                feed(a[k])
        else:
            arr = np.asarray(a)
            if arr.dtype.kind in "biuf":
                h.update(np.ascontiguousarray(arr, dtype=float).tobytes())

    feed([target.eta1, target.eta2])
    for s in target.sites:
        feed([s.X, s.moments])
    return h.hexdigest()


# ---------------------------------------------------------------------------------------- handler
class BVI:
    r"""Boosting variational inference: a Gaussian mixture grown one component at a time.

    Parameters
    ----------
    n_components
        Largest number of mixture components, the initial one included (so ``n_components − 1``
        components are added; at most ``2(n_components − 1)`` boosting iterations are run, since
        iterations whose component is negligible or whose peak search fails add nothing).
    init
        The initial approximation: ``"laplace"`` (default; falls back to ``"broad"`` if the Laplace
        approximation does not exist), ``"broad"`` (N(0, init_scale² I), the seed's broad Gaussian),
        or an ``MvGaussian`` / ``GaussianMixture``.
    init_scale
        Standard deviation of the broad initial Gaussian (10: covariance 100 I).
    lam
        λ of the component covariance λH⁻¹ (½ in the first author's code).
    eps
        ε of the tail-stabilised residual (1e−4, seed eq. 23).
    n_starts, n_retries
        L-BFGS starts per peak search (drawn from q_{t−1}) and how many times a failed search is
        retried from fresh draws.
    hessian
        ``"auto"``: ∇²log p̃ from ``target.hessian`` (analytic on a model block); ``"fd"``: central
        differences of ∇r.
    diagonal
        Keep only the diagonal of H (cheaper in high dimension; slower convergence).
    n_weight_samples, weight_tol, max_weight_steps, weight_step
        The weight step: fresh draws from h and from q_{t−1} per SGD step (100), the stopping
        tolerance on |Δα| (1e−4), a cap on the number of steps, and c of the step size c/k.
    min_weight
        Components whose weight comes out below this are skipped.
    n_elbo_samples, n_final_samples
        Draws for the ELBO trace (one estimate per added component) and for the final estimate.
    seed
        One seed makes a run reproducible (every random number derives from it).

    Notes
    -----
    ``fit`` returns a ``BlockFit`` whose ``info`` holds ``elbo_trace``, ``elbo_se_trace``,
    ``log_z_trace`` (the importance-sampling log Ẑ), ``alpha_trace`` and ``time_trace`` (seconds since
    the start), one entry per component of the mixture (entry k: after the (k+1)-th component), plus
    counts of skipped components and failed peak searches.  The mixture after k components is
    ``q.head(k)``.  The handler object keeps its latest fit in ``last_fit`` (useful under ``fg.infer``,
    whose result does not carry handler traces).  On a model block a repeated call with an unchanged
    block (same prior message and site moments) returns the cached fit.
    """

    name = "BVI"

    def __init__(self, n_components: int = 30, *, init: Any = "laplace", init_scale: float = 10.0,
                 lam: float = 0.5, eps: float = 1e-4, n_starts: int = 4, n_retries: int = 5,
                 hessian: str = "auto", diagonal: bool = False, n_weight_samples: int = 100,
                 weight_tol: float = 1e-4, max_weight_steps: int = 1000, weight_step: float = 1.0,
                 min_weight: float = 1e-3, n_elbo_samples: int = 2000, n_final_samples: int = 10_000,
                 seed: int = 0) -> None:
        def count(name: str, v: Any, low: int) -> int:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ModelError(f"BVI: {name} must be an integer ≥ {low}, got {v!r}")
            return int(v)

        def positive(name: str, v: Any) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not np.isfinite(v) or v <= 0:
                raise ModelError(f"BVI: {name} must be a positive number, got {v!r}")
            return float(v)

        self.n_components = count("n_components", n_components, 1)
        if not (isinstance(init, (MvGaussian, GaussianMixture)) or init in ("laplace", "broad")):
            raise ModelError(f"BVI: init must be 'laplace', 'broad', an MvGaussian or a GaussianMixture, got {init!r}")
        if hessian not in ("auto", "fd"):
            raise ModelError(f"BVI: hessian must be 'auto' or 'fd', got {hessian!r}")
        self.init, self.hessian, self.diagonal = init, hessian, bool(diagonal)
        self.init_scale, self.lam, self.eps = positive("init_scale", init_scale), positive("lam", lam), positive(
            "eps", eps)
        self.n_starts, self.n_retries = count("n_starts", n_starts, 1), count("n_retries", n_retries, 0)
        self.n_weight_samples = count("n_weight_samples", n_weight_samples, 2)
        self.weight_tol, self.weight_step = positive("weight_tol", weight_tol), positive("weight_step", weight_step)
        self.max_weight_steps = count("max_weight_steps", max_weight_steps, 1)
        if not 0.0 <= float(min_weight) < 1.0:
            raise ModelError(f"BVI: min_weight must lie in [0, 1), got {min_weight!r}")
        self.min_weight = float(min_weight)
        self.n_elbo_samples = count("n_elbo_samples", n_elbo_samples, 2)
        self.n_final_samples = count("n_final_samples", n_final_samples, 2)
        self.seed = count("seed", seed, 0)
        self.last_fit: BlockFit | None = None

    # ------------------------------------------------------------------------------ the run
    def fit(self, target: Any, x0: np.ndarray, warm: dict | None = None) -> BlockFit:
        """Grow the mixture on ``target`` (a model block or a plain density) from ``x0``."""
        fp = _fingerprint(target)
        if warm and fp is not None and warm.get("fingerprint") == fp and warm.get("cache") is not None:
            self.last_fit = BlockFit(*warm["cache"], info=warm)
            return self.last_fit
        t0 = time.perf_counter()
        rng = np.random.default_rng(self.seed)
        q, init_note = self._initial(target, np.asarray(x0, dtype=float))
        elbo, se, log_z = self._elbo(target, q, rng, self.n_elbo_samples)
        trace = {"elbo_trace": [elbo], "elbo_se_trace": [se], "log_z_trace": [log_z], "alpha_trace": [1.0],
                 "time_trace": [time.perf_counter() - t0], "weight_steps": [0]}
        skipped = failed = iterations = 0
        while q.n_components < self.n_components and iterations < 2 * (self.n_components - 1):
            iterations += 1
            comp = self._component(target, q, log_z, rng)
            if comp is None:
                failed += 1
                continue
            h = MvGaussian(mean=comp[0], cov=comp[1])
            alpha, steps = self._weight(target, q, h, rng)
            if alpha < self.min_weight:
                skipped += 1
                continue
            q = q.add(alpha, comp[0], comp[1])
            elbo, se, log_z = self._elbo(target, q, rng, self.n_elbo_samples)
            for key, v in (("elbo_trace", elbo), ("elbo_se_trace", se), ("log_z_trace", log_z),
                           ("alpha_trace", alpha), ("time_trace", time.perf_counter() - t0),
                           ("weight_steps", steps)):
                trace[key].append(v)

        # final evidence on fresh draws from a second seeded stream
        n = self.n_final_samples
        W = q.sample(n, np.random.default_rng([self.seed, 1]))
        lp = _log_density(target, W)
        lq = q.logpdf(W)
        d = lp - lq
        elbo, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(n))
        entropy, site, site_se = float(-lq.mean()), 0.0, 0.0
        info: dict[str, Any] = {key: np.asarray(v) for key, v in trace.items()}
        info.update(init=init_note, iterations=iterations, skipped=skipped, failed_searches=failed,
                    n_components=q.n_components, entropy_se=float(lq.std(ddof=1) / np.sqrt(n)),
                    time=time.perf_counter() - t0, mode=q.mean())
        if hasattr(target, "sites_value_grad"):
            sv = target.sites_value_grad(W)[0]
            site = float(sv.mean())
            site_se = float((sv - lq).std(ddof=1) / np.sqrt(n))
            info["site_se_alone"] = float(sv.std(ddof=1) / np.sqrt(n))
        if not np.isfinite(elbo):
            raise HandlerError(f"BVI: the ELBO estimate is not finite ({elbo}); the target is not finite on q's draws")
        fit = BlockFit(q, elbo, ESTIMATE, se, site, site_se, entropy, info)
        if fp is not None:
            info["fingerprint"] = fp
            info["cache"] = (q, elbo, ESTIMATE, se, site, site_se, entropy)
        self.last_fit = fit
        return fit

    # ------------------------------------------------------------------------------ pieces
    def _initial(self, target: Any, x0: np.ndarray) -> tuple[GaussianMixture, str]:
        D = target.dim
        if isinstance(self.init, GaussianMixture):
            return self.init, "given mixture"
        if isinstance(self.init, MvGaussian):
            return GaussianMixture.from_gaussian(self.init), "given Gaussian"
        if self.init == "laplace":
            try:
                w, H, _ = find_mode(target, x0, self.name)
                return GaussianMixture.from_gaussian(gaussian_from_hessian(w, H, self.name)[0]), "laplace"
            except (HandlerError, np.linalg.LinAlgError, FloatingPointError, ValueError) as err:
                note = f"broad (the Laplace approximation failed: {err})"
        else:
            note = "broad"
        return GaussianMixture(np.ones(1), np.zeros((1, D)), (self.init_scale**2 * np.eye(D))[None]), note

    def _elbo(self, target: Any, q: GaussianMixture, rng: np.random.Generator, n: int) -> tuple[float, float, float]:
        """(ELBO estimate, its standard error, importance-sampling log Ẑ) on n fresh draws of q."""
        W = q.sample(n, rng)
        d = _log_density(target, W) - q.logpdf(W)
        if not np.any(np.isfinite(d)):
            raise HandlerError("BVI: the target is −inf (or not finite) on every draw of the current approximation")
        with np.errstate(invalid="ignore"):
            elbo, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(n))
        return elbo, se, float(logsumexp(d) - np.log(n))

    def _residual_fn(self, target: Any, q: GaussianMixture, log_z: float):
        """x ↦ (−r(x), −∇r(x)) and x ↦ the pieces (σ_p, ∇log p̃, σ_q, ∇log q) at x."""
        le = np.log(self.eps)

        def pieces(x: np.ndarray):
            v, g = target.logp_grad(x[None])
            lp, gp = float(v[0]) - log_z, g[0]
            lq, gq = q.logpdf_and_grad(x[None])
            lq, gq = float(lq[0]), gq[0]
            a, b = np.logaddexp(lp, le), np.logaddexp(lq, le)
            return a - b, np.exp(lp - a), gp, np.exp(lq - b), gq

        def neg(x: np.ndarray) -> tuple[float, np.ndarray]:
            try:
                r, sp, gp, sq, gq = pieces(x)
            except (FloatingPointError, ValueError):
                return np.inf, np.zeros_like(x)
            grad = sp * gp - sq * gq
            if not (np.isfinite(r) and np.all(np.isfinite(grad))):
                return np.inf, np.zeros_like(x)
            return -float(r), -grad

        return neg, pieces

    def _neg_hessian(self, target: Any, q: GaussianMixture, x: np.ndarray, neg, pieces) -> np.ndarray:
        """H = −∇²r(x): analytic assembly (``hessian="auto"`` with ``target.hessian``) or central differences."""
        D = x.shape[0]
        if self.hessian == "auto" and hasattr(target, "hessian"):
            _, sp, gp, sq, gq = pieces(x)
            Hp = np.asarray(target.hessian(x), dtype=float)
            Hq = q.logpdf_hessian(x)
            Hr = sp * (Hp + (1.0 - sp) * np.outer(gp, gp)) - sq * (Hq + (1.0 - sq) * np.outer(gq, gq))
            H = -Hr
        else:
            h = 1e-5 * np.maximum(1.0, np.abs(x))
            H = np.empty((D, D))
            for d in range(D):  # 2D gradient evaluations: a loop over dimensions, not samples
                e = np.zeros(D)
                e[d] = h[d]
                H[:, d] = (neg(x + e)[1] - neg(x - e)[1]) / (2.0 * h[d])
        H = 0.5 * (H + H.T)
        return np.diag(np.diag(H)) if self.diagonal else H

    def _component(self, target: Any, q: GaussianMixture, log_z: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """(x*, λH⁻¹) of the highest residual peak found, or None when every search failed."""
        neg, pieces = self._residual_fn(target, q, log_z)
        for _ in range(self.n_retries + 1):
            best = None
            for x0 in q.sample(self.n_starts, rng):
                try:
                    res = optimize.minimize(neg, x0, jac=True, method="L-BFGS-B",
                                            options={"maxiter": 500, "gtol": 1e-7})
                except (FloatingPointError, ValueError, np.linalg.LinAlgError):
                    continue
                if not (np.all(np.isfinite(res.x)) and np.isfinite(res.fun)):
                    continue
                try:
                    H = self._neg_hessian(target, q, res.x, neg, pieces)
                    ev = np.linalg.eigvalsh(H)
                except (FloatingPointError, ValueError, np.linalg.LinAlgError):
                    continue
                if not (np.all(np.isfinite(ev)) and ev[0] > 1e-8 * max(1.0, ev[-1])):
                    continue  # not a strict local peak (saddle, ridge, or a flat tail where r ≈ 0)
                if best is None or res.fun < best[0]:
                    best = (res.fun, res.x, H)
            if best is not None:
                cov = self.lam * np.linalg.inv(best[2])
                return best[1], 0.5 * (cov + cov.T)
        return None

    def _weight(self, target: Any, q: GaussianMixture, h: MvGaussian,
                rng: np.random.Generator) -> tuple[float, int]:
        """Projected SGD on D((1 − α)q + αh) with steps c/k and fresh draws each step."""
        n = self.n_weight_samples
        alpha = 1.0 / (q.n_components + 1)
        k = 0
        for k in range(1, self.max_weight_steps + 1):
            Xh, Xq = h.sample(n, rng), q.sample(n, rng)
            X = np.concatenate([Xh, Xq])
            lp, lq, lh = _log_density(target, X), q.logpdf(X), h.logpdf(X)
            g = weight_gradient(alpha, (lq[:n], lh[:n], lp[:n]), (lq[n:], lh[n:], lp[n:]))
            new = float(np.clip(alpha - self.weight_step / k * g, 0.0, 1.0))
            done = abs(new - alpha) < self.weight_tol
            alpha = new
            if done:
                break
        return alpha, k

    def __repr__(self) -> str:
        init = self.init if isinstance(self.init, str) else type(self.init).__name__
        return (f"BVI(n_components={self.n_components}, init={init!r}, lam={self.lam}, "
                f"diagonal={self.diagonal}, seed={self.seed})")
