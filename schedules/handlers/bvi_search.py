r"""The component step of boosting variational inference (Guo et al. 2016; docs/maths.md §8): the residual's peak.

**Component step (Algorithm 2).**  With the tail-stabilised residual log density (the paper's eq. 23)

    r(x) = log(p̃(x)/Ẑ + ε) − log(q_{t−1}(x) + ε)        (both terms by log-sum-exp),

x* = argmax r is found by L-BFGS from ``n_starts`` starts and H = −∇²r(x*).  With σ_p = p̃/(p̃ + εẐ)
and σ_q = q/(q + ε),

    ∇r = σ_p ∇log p̃ − σ_q ∇log q,
    ∇²r = σ_p[∇²log p̃ + (1 − σ_p)∇log p̃ ∇log p̃ᵀ] − σ_q[∇²log q + (1 − σ_q)∇log q ∇log qᵀ],

with ∇²log p̃ from ``target.hessian`` (analytic on a model block, finite differences of the gradient
on a plain density) and ∇²log q in closed form; ``hessian="fd"`` uses central differences of ∇r
instead, and ``diagonal=True`` keeps only diag(H) (the paper's option for high dimension).  The
covariance λH⁻¹ (λ = ½, the first author's code) solves the regularised problem of the paper's eqs. (17)–(19):
minimising E_h[−r] − (λ/2) log det Σ_h over h = N(μ, Σ_h) with r replaced by its quadratic expansion at
x* gives μ = x*, Σ_h = λH⁻¹.

*Starts.*  ``n_candidates`` draws from the current mixture (half from q_{t−1}, half from its components
with equal weights, so that a component of small weight such as a broad initial one still explores)
are resampled without replacement with probabilities ∝ e^r = (p̃/Ẑ + ε)/(q + ε): the starts favour
the regions q underestimates and stay diverse.  A start on the ε-plateau (p̃/Ẑ < ε, where ∇r ≈ 0: most
draws of a broad Gaussian in several dimensions) first climbs log p̃ until p̃/Ẑ ≥ ε.

*Which peak.*  A local maximum counts only if −∇²r is positive definite there (its eigenvalues within a
factor 1e8 of each other, whatever their scale), p̃/Ẑ ≥ ε there (not a peak of the ε-plateau), r(x*) > 0
(the target is underestimated there), its component is at most ``max_spread`` times wider than the target's
own local scale (−∇²log p̃(x*))⁻¹ (or, where that is not positive definite, than q), and it is not the peak
of a component skipped since the last addition.
Among the valid peaks of one search the best by ``select`` wins: ``"objective"`` (default) the value
of the regularised objective at the peak, −r* − (λ/2) log det(λH⁻¹); ``"peak"`` the highest r*;
``"gradient"`` the smallest Monte Carlo ⟨h, log q − log p̃⟩ (the first-order change of the
discrepancy as α leaves 0, the paper's eqs. 8 and 14).  When no start gives a valid peak the search is
retried from fresh starts, ``n_retries`` times; the run stops early after ``patience`` consecutive
iterations that add nothing.

``ComponentSearch`` holds this step as methods of the handler ``bvi.BVI`` (which sets the options it reads:
``eps``, ``lam``, ``hessian``, ``diagonal``, ``select``, the starts' and retries' counts and ``max_spread``);
``lbfgs`` is the small L-BFGS of the peak searches.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy.optimize import line_search

from distributions import GaussianMixture

from .bvi_estimates import _log_density, residual

__all__ = ["ComponentSearch", "lbfgs"]


def lbfgs(fun, x0: np.ndarray, m: int = 10, maxiter: int = 500, gtol: float = 1e-7,
          ftol: float = 1e-12, scale: np.ndarray | None = None) -> tuple[np.ndarray, float, bool]:
    r"""Minimise ``fun(x) -> (f, ∇f)`` by L-BFGS: the two-loop recursion over the last m pairs
    (s_k, y_k) with the initial scaling sᵀy/yᵀy, a strong-Wolfe line search (``scipy.optimize.line_search``)
    and Armijo backtracking when that fails.  Returns (x, f, converged).

    With ``scale`` (the current mixture's standard deviations, for the peak searches) the search runs in the
    coordinates z = x/scale, so that its steps and its tests do not depend on the units of x.  Converged: the
    largest |∂f/∂z_d| (the change of f across one scale) is at most ``gtol``, or f changes by less than
    ``ftol`` relative to max(1, |f|) nats.

    A small numpy implementation rather than scipy's L-BFGS-B: the peak searches are many and
    low-dimensional, where the compiled routine's per-iteration overhead dominates (and grows badly
    on a loaded multi-threaded BLAS).
    """
    if scale is not None:
        sc = np.asarray(scale, dtype=float)

        def whitened(z: np.ndarray) -> tuple[float, np.ndarray]:
            f, g = fun(z * sc)
            return f, np.asarray(g, dtype=float) * sc

        z, f, ok = lbfgs(whitened, np.asarray(x0, dtype=float) / sc, m, maxiter, gtol, ftol)
        return z * sc, f, ok
    cache: dict[bytes, tuple[float, np.ndarray]] = {}

    def ev(x: np.ndarray) -> tuple[float, np.ndarray]:
        key = x.tobytes()
        if key not in cache:
            if len(cache) > 8:
                cache.clear()
            f, g = fun(x)
            cache[key] = (float(f), np.asarray(g, dtype=float))
        return cache[key]

    x = np.array(x0, dtype=float)
    f, g = ev(x)
    if not np.isfinite(f):
        return x, f, False
    S: list[np.ndarray] = []
    Y: list[np.ndarray] = []
    f_old = None
    for _ in range(maxiter):
        if np.max(np.abs(g)) <= gtol:
            return x, f, True
        q, a = g.copy(), []
        for s, y in zip(reversed(S), reversed(Y), strict=True):
            a.append((s @ q) / (y @ s))
            q -= a[-1] * y
        r = q * ((S[-1] @ Y[-1]) / (Y[-1] @ Y[-1]) if S else 1.0 / max(1.0, float(np.linalg.norm(g))))
        for s, y, ai in zip(S, Y, reversed(a), strict=True):
            r += s * (ai - (y @ r) / (y @ s))
        p = -r
        if not g @ p < 0:
            S, Y, p = [], [], -g / max(1.0, float(np.linalg.norm(g)))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a failed line search falls back to backtracking below
            try:
                step = line_search(lambda z: ev(z)[0], lambda z: ev(z)[1], x, p, g, f, f_old)[0]
            except (FloatingPointError, ValueError, OverflowError):
                step = None
        if step is None or not np.isfinite(ev(x + step * p)[0]):
            step = 1.0  # Armijo backtracking
            while step > 1e-12 and not ev(x + step * p)[0] <= f + 1e-4 * step * (g @ p):
                step *= 0.5
            if step <= 1e-12:
                return x, f, False
        x_new = x + step * p
        f_new, g_new = ev(x_new)
        s, y = x_new - x, g_new - g
        if s @ y > 1e-12 * (y @ y):
            S.append(s)
            Y.append(y)
            if len(S) > m:
                S.pop(0)
                Y.pop(0)
        f_old, x, f, g = f, x_new, f_new, g_new
        if abs(f_old - f) <= ftol * max(1.0, abs(f)):
            return x, f, True
    return x, f, False


class ComponentSearch:
    """The residual peak search of ``BVI`` (module docstring): x* and λH⁻¹ of the next component."""

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

    def _neg_hessian(self, target: Any, q: GaussianMixture, x: np.ndarray, neg,
                     pieces) -> tuple[np.ndarray, np.ndarray | None]:
        """H = −∇²r(x) by analytic assembly (``hessian="auto"`` with ``target.hessian``) or central
        differences, and −∇²log p̃(x) when it was computed (else None)."""
        D = x.shape[0]
        Hp = None
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
        return (np.diag(np.diag(H)) if self.diagonal else H), (None if Hp is None else -0.5 * (Hp + Hp.T))

    def _starts(self, target: Any, q: GaussianMixture, log_z: float, rng: np.random.Generator) -> np.ndarray:
        """``n_starts`` L-BFGS starts drawn from the current mixture: a pool of ``n_candidates`` draws, half
        from q_{t−1} and half from its components with equal weights (so that a component of small weight,
        such as a broad initial one, still explores), covariances scaled by ``start_scale²``, resampled
        without replacement with probabilities ∝ exp r = (p̃/Ẑ + ε)/(q + ε): the starts favour the regions
        that q underestimates yet stay diverse."""
        n = max(self.n_candidates, self.n_starts)
        K = q.n_components
        covs = q.covs if self.start_scale == 1.0 else self.start_scale**2 * q.covs
        pool = [GaussianMixture(q.weights, q.means, covs).sample(n - n // 2, rng)]
        if n // 2:
            pool.append(GaussianMixture(np.full(K, 1.0 / K), q.means, covs).sample(n // 2, rng))
        X = np.concatenate(pool)
        if n == self.n_starts:
            return X
        r = residual(_log_density(target, X) - log_z, q.logpdf(X), self.eps)
        w = np.exp(np.where(np.isfinite(r), r - np.max(r[np.isfinite(r)], initial=0.0), -np.inf))
        w = np.where(np.isfinite(w), w, 0.0)
        if np.count_nonzero(w) < self.n_starts:
            w = w + 1e-300
        return X[rng.choice(n, size=self.n_starts, replace=False, p=w / w.sum())]

    def _component(self, target: Any, q: GaussianMixture, log_z: float, rng: np.random.Generator,
                   why: dict | None = None, exclude: list | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(x*, λH⁻¹) at the best residual peak found, or None when every search failed (the reasons are
        counted in ``why``).  Peaks within Mahalanobis distance 1 of an ``exclude``d component (one found
        negligible since the last added component) do not count."""
        neg, pieces = self._residual_fn(target, q, log_z)
        sd = np.sqrt(np.diag(q.cov()))  # the peak searches' gradient test is across one sd of the mixture
        why = {} if why is None else why
        z_sel = rng.standard_normal((self.n_select_samples, q.dim)) if self.select == "gradient" else None

        def note(reason: str) -> None:
            why[reason] = why.get(reason, 0) + 1

        for _ in range(self.n_retries + 1):
            best = None
            for x0 in self._starts(target, q, log_z, rng):
                x0 = self._off_plateau(target, x0, log_z, pieces, sd)
                x, fx, _ = lbfgs(neg, x0, scale=sd)
                if not (np.all(np.isfinite(x)) and np.isfinite(fx)):
                    note("search diverged")
                    continue
                try:
                    H, A = self._neg_hessian(target, q, x, neg, pieces)
                    ev = np.linalg.eigvalsh(H)
                    sp = pieces(x)[1]
                except (FloatingPointError, ValueError, np.linalg.LinAlgError):
                    note("Hessian failed")
                    continue
                if not (np.all(np.isfinite(ev)) and ev[-1] > 0.0 and ev[0] > 1e-8 * ev[-1]):
                    note("not a strict peak")  # a saddle or a ridge
                    continue
                if sp < 0.5:
                    note("peak of the ε-plateau")  # p̃/Ẑ below ε there: not a peak of the target
                    continue
                if fx >= 0.0:
                    note("target not underestimated")  # r* ≤ 0: q already has enough mass there
                    continue
                if self._too_wide(A, q, self.lam * np.linalg.inv(H)):
                    note("too wide")
                    continue
                if any((x - m) @ np.linalg.solve(c, x - m) < 1.0 for m, c in exclude or ()):
                    note("peak of a skipped component")
                    continue
                cov = self.lam * np.linalg.inv(H)
                cov = 0.5 * (cov + cov.T)
                if self.select == "objective":
                    # the regularised objective of the paper's eq. (17) at this peak, −r* + (λ/2)(D − log det λH⁻¹)
                    # up to constants (smaller is better): prefers high and broad peaks
                    score = fx - 0.5 * self.lam * float(np.log(self.lam / ev).sum())
                elif self.select == "gradient":
                    # the functional-gradient inner product ⟨h, log q − log p̃⟩ (the paper's eqs. 8, 14): the rate at
                    # which D((1 − α)q + αh) falls as α leaves 0, up to a term common to all candidates
                    W = x + z_sel @ np.linalg.cholesky(cov).T
                    score = float(np.mean(q.logpdf(W) - _log_density(target, W)))
                else:
                    score = fx
                if best is None or score < best[0]:
                    best = (score, x, cov)
            if best is not None:
                return best[1], best[2]
        return None

    def _off_plateau(self, target: Any, x0: np.ndarray, log_z: float, pieces, sd: np.ndarray) -> np.ndarray:
        """A start where p̃/Ẑ < ε lies on the ε-plateau of r, where ∇r ≈ 0 and L-BFGS cannot move (a broad
        initial Gaussian in several dimensions puts most draws there): climb log p̃ from it instead, until
        p̃/Ẑ ≥ ε (in practice to the nearest mode of p̃), and start the residual search from there."""
        try:
            if pieces(x0)[1] >= 0.5:
                return x0
        except (FloatingPointError, ValueError):
            return x0
        le = np.log(self.eps) + log_z

        def neg_logp(x: np.ndarray) -> tuple[float, np.ndarray]:
            v, g = target.logp_grad(x[None])
            return -float(v[0]), -g[0]

        try:
            x, fx, _ = lbfgs(neg_logp, x0, gtol=1e-5, scale=sd)
        except (FloatingPointError, ValueError):
            return x0
        return x if np.all(np.isfinite(x)) and -fx >= le else x0

    def _too_wide(self, A: np.ndarray | None, q: GaussianMixture, cov: np.ndarray) -> bool:
        """Whether N(·, cov) is wider than ``max_spread`` times the target's local scale A⁻¹ (A = −∇²log p̃
        at the peak, when known and positive definite; else the current mixture's covariance) in some
        direction: the largest generalised eigenvalue of (cov, A⁻¹) exceeds max_spread².  Such a peak is
        too flat to say where the missing mass is."""
        try:
            if A is not None and np.linalg.eigvalsh(A)[0] > 0:
                La = np.linalg.cholesky(A)  # A⁻¹-relative: eig(Laᵀ cov La)
                top = np.linalg.eigvalsh(La.T @ cov @ La)[-1]
            else:
                C = q.cov()
                Li = np.linalg.inv(np.linalg.cholesky(C + 1e-12 * np.trace(C) / C.shape[0] * np.eye(C.shape[0])))
                top = np.linalg.eigvalsh(Li @ cov @ Li.T)[-1]
        except np.linalg.LinAlgError:
            return False
        return not top <= self.max_spread**2
