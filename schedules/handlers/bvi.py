r"""Boosting variational inference (Guo et al. 2016) as a global handler (docs/maths.md §8).

The approximation is a Gaussian mixture grown greedily, one component per boosting iteration:

    q_t = (1 − α_t) q_{t−1} + α_t h_t,   h_t = N(x*_t, λ H_t⁻¹).

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

*Which peak.*  A local maximum counts only if −∇²r is positive definite there, p̃/Ẑ ≥ ε there (not a
peak of the ε-plateau), r(x*) > 0 (the target is underestimated there), its component is at most
``max_spread`` times wider than the target's own local scale (−∇²log p̃(x*))⁻¹ (or, where that is not
positive definite, than q), and it is not the peak of a component skipped since the last addition.
Among the valid peaks of one search the best by ``select`` wins: ``"objective"`` (default) the value
of the regularised objective at the peak, −r* − (λ/2) log det(λH⁻¹); ``"peak"`` the highest r*;
``"gradient"`` the smallest Monte Carlo ⟨h, log q − log p̃⟩ (the first-order change of the
discrepancy as α leaves 0, the paper's eqs. 8 and 14).  When no start gives a valid peak the search is
retried from fresh starts, ``n_retries`` times; the run stops early after ``patience`` consecutive
iterations that add nothing.

Ẑ puts p̃ on the scale of a normalised density, without which ε would be meaningless for a model
block whose p̃ is far from normalised: it is the importance-sampling estimate
log Ẑ = log (1/n)Σ_s p̃(x_s)/q_{t−1}(x_s), x_s ~ q_{t−1}, computed with the ELBO trace (≥ the ELBO
estimate; log Z on average as q_{t−1} improves).  On a normalised target Ẑ ≈ 1.

**Weight step (Algorithm 1).**  D(α) = E_{q_α}[log q_α − log p̃] is convex in α with

    ∂D/∂α = E_h[γ_α] − E_{q_{t−1}}[γ_α],   γ_α = log((1 − α)q_{t−1} + αh) − log p̃;

both expectations are estimated with ``n_weight_samples`` fresh draws from h and from q_{t−1} at every
step (those of q_{t−1} stratified by component, ``GaussianMixture.sample_stratified``: a far component
of small weight, such as a broad initial one, would otherwise make the gradient heavy-tailed through the
random number of its draws), and α follows projected SGD from α₀ = 1/(K + 1), α ← Π_[0,1](α − c/k · ĝ_k)
(Robbins–Monro steps c/k, c = ``weight_step``), stopping when |Δα| < ``weight_tol`` (after at least
``min_weight_steps`` steps, at most ``max_weight_steps``). A component whose weight comes out below
``min_weight`` is skipped (q unchanged), and so is one whose ELBO gain, estimated with common random
numbers on ``n_elbo_samples`` draws (``elbo_gain``: its error shrinks with α), is below −2 standard
errors: the noisy weight step can leave a small α > 0 on a far component that lowers the ELBO
(``info["no_gain"]`` counts them); with ``revert=True`` one after which the ELBO estimate falls by
more than three standard errors is undone too.

**Evidence.** After each added component the ELBO E_q[log p̃ − log q] is estimated on ``n_elbo_samples``
fresh draws stratified by component (``elbo_estimate``; ``info["elbo_trace"]``,
``info["elbo_se_trace"]``); the reported figure is a final estimate on ``n_final_samples`` draws from a
second seeded stream, labelled ``ESTIMATE`` (a Monte Carlo estimate of a lower bound, docs/maths.md §2). On a
model block the claimed sites' part E_q[Σ log f] and the entropy −E_q[log q] come from the same final
draws; ``site_se`` is the standard error of their sum (the Monte Carlo part of the block's ELBO; the
engine adds the prior's E_q[log N(w | prior)] exactly from q's moments).

**Limits.**  The residual peak is a good proposal where q misses mass entirely (a missing mode: there
H ≈ −∇²log p̃).  Where q is already close to p̃, H = −∇²log p̃ + ∇²log q is small and the peaks move to
the edge of q's support (where q falls to ε), so the components become broad and far and their weight
comes out negligible: on a near-Gaussian, skewed posterior (logistic regression) BVI started from
the Laplace approximation adds little.  With λ = ½ each new component is half as wide as the
residual's curvature suggests, so a mode takes several components; λ = 1 fits an isolated Gaussian
mode in one.
"""

from __future__ import annotations

import hashlib
import time
import warnings
from typing import Any

import numpy as np
from scipy.optimize import line_search
from scipy.special import logsumexp

from distributions import GaussianMixture, MvGaussian
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.results import ESTIMATE, LOWER_BOUND

from .. import progress
from .laplace import BlockFit, HandlerError, find_mode, gaussian_from_hessian

__all__ = ["BVI", "elbo_estimate", "lbfgs", "mc_discrepancy", "residual", "stratified_mean", "weight_gradient"]


# ---------------------------------------------------------------------------------------- kernels
def _log_density(target: Any, W: np.ndarray) -> np.ndarray:
    """log p̃ at the rows of W (values only where the target can skip its gradient work); −inf stays."""
    values = getattr(target, "log_values", None)
    with np.errstate(all="ignore"):
        v = values(W)[0] if values is not None else target.logp_grad(W)[0]
    v = np.asarray(v, dtype=float).reshape(W.shape[0])
    return np.where(np.isnan(v), -np.inf, v)


def residual(log_p: np.ndarray, log_q: np.ndarray, eps: float) -> np.ndarray:
    r"""Tail-stabilised residual r = log(p̃ + ε) − log(q + ε) (the paper's eq. 23), by log-sum-exp.

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


def _mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    return float(values.mean() if weights is None else weights @ values)


def weight_gradient(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...],
                    q_weights: np.ndarray | None = None) -> float:
    r"""Monte Carlo estimate of ∂D/∂α = E_h[γ_α] − E_q[γ_α] (the paper's eq. 11).

    Parameters
    ----------
    alpha
        The weight α ∈ [0, 1] of the new component h.
    at_h, at_q
        (log q_{t−1}, log h, log p̃) at draws from h and from q_{t−1} respectively.
    q_weights
        Weights of the q draws when they are stratified by component (``GaussianMixture.sample_stratified``);
        plain means when None.

    Notes
    -----
    With the same draws (common random numbers) the derivative of ``mc_discrepancy`` is this value plus
    (1 − α)·Ê_q[(h − q)/q_α] + α·Ê_h[(h − q)/q_α], an importance-sampling estimate of ∫(h − q) = 0; the two
    agree up to that zero-mean term.
    """
    return _mean(_gamma(alpha, *at_h), None) - _mean(_gamma(alpha, *at_q), q_weights)


def mc_discrepancy(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...],
                   q_weights: np.ndarray | None = None) -> float:
    r"""Monte Carlo estimate of D(q_α) = E_{q_α}[γ_α] = (1 − α)E_q[γ_α] + αE_h[γ_α] (= −ELBO of q_α)
    from fixed draws of h and q_{t−1} (arguments as in ``weight_gradient``)."""
    return (1.0 - alpha) * _mean(_gamma(alpha, *at_q), q_weights) + alpha * _mean(_gamma(alpha, *at_h), None)


def elbo_gain(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...], q_idx: np.ndarray,
              q_pi: np.ndarray) -> tuple[float, float]:
    r"""ELBO((1 − α)q + αh) − ELBO(q) = D(0) − D(α) and its standard error, from one set of draws (common
    random numbers):

        D(0) − D(α) = E_q[γ₀ − (1 − α)γ_α] − α E_h[γ_α],

    with ``at_h``, ``at_q`` as in ``weight_gradient`` (the q draws stratified by component: ``q_idx``,
    ``q_pi``).  The log p̃ terms cancel in the first expectation except for a share α, so the error scales
    with α: a component of small weight is judged precisely, where two independent ELBO estimates would
    differ by their noise."""
    a = _gamma(0.0, *at_q) - (1.0 - alpha) * _gamma(alpha, *at_q)
    b = _gamma(alpha, *at_h)
    ma, sa = stratified_mean(a, q_idx, q_pi)
    return ma - alpha * float(b.mean()), float(np.hypot(sa, alpha * b.std() / np.sqrt(b.size)))


def stratified_mean(values: np.ndarray, idx: np.ndarray, pi: np.ndarray) -> tuple[float, float]:
    r"""Σ_k π_k v̄_k and its standard error √(Σ_k π_k² s_k²/n_k) from draws stratified by component
    (``idx`` the component of each value; the pooled within-component variance where n_k = 1)."""
    K = pi.shape[0]
    nk = np.bincount(idx, minlength=K)
    mk = np.bincount(idx, weights=values, minlength=K) / np.maximum(nk, 1)
    ss = np.bincount(idx, weights=(values - mk[idx]) ** 2, minlength=K)
    dof = values.size - np.count_nonzero(nk)
    pooled = float(ss.sum() / dof) if dof > 0 else 0.0
    var_k = np.where(nk > 1, ss / np.maximum(nk - 1, 1), pooled)
    live = nk > 0
    return float(pi[live] @ mk[live]), float(np.sqrt(np.sum(pi[live] ** 2 * var_k[live] / nk[live])))


def elbo_estimate(target: Any, q: GaussianMixture, n: int,
                  rng: np.random.Generator) -> tuple[float, float, float, np.ndarray, np.ndarray, np.ndarray]:
    r"""ELBO = E_q[log p̃ − log q] from about n draws stratified by component (``stratified_mean``), and
    the importance-sampling log Ẑ = log Σ_i w_i e^{d_i}, d = log p̃ − log q.

    Returns (ELBO, se, log Ẑ, draws, component indices, log q at the draws).
    """
    W, w, idx = q.sample_stratified(n, rng)
    lq = q.logpdf(W)
    d = _log_density(target, W) - lq
    if not np.any(np.isfinite(d)):
        raise HandlerError("BVI: the target is −inf (or not finite) on every draw of the current approximation")
    d = np.where(np.isfinite(d), d, -1e300)
    elbo, se = stratified_mean(d, idx, q.weights)
    return elbo, se, float(logsumexp(d, b=w)), W, idx, lq


def lbfgs(fun, x0: np.ndarray, m: int = 10, maxiter: int = 500, gtol: float = 1e-7,
          ftol: float = 1e-12) -> tuple[np.ndarray, float, bool]:
    r"""Minimise ``fun(x) -> (f, ∇f)`` by L-BFGS: the two-loop recursion over the last m pairs
    (s_k, y_k) with the initial scaling sᵀy/yᵀy, a strong-Wolfe line search (``scipy.optimize.line_search``)
    and Armijo backtracking when that fails.  Returns (x, f, converged).

    A small numpy implementation rather than scipy's L-BFGS-B: the peak searches are many and
    low-dimensional, where the compiled routine's per-iteration overhead dominates (and grows badly
    on a loaded multi-threaded BLAS).
    """
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
        The initial approximation: ``"gaussian"`` (default: the full-covariance Gaussian KL optimum,
        the best single Gaussian, computed as the first stage of ``AIKL`` — on a model block with sites,
        or a plain density of dimension ≤ 3; otherwise, or if it fails, ``"laplace"``), ``"laplace"``
        (falls back to ``"broad"`` if the Laplace approximation does not exist), ``"broad"``
        (N(0, init_scale² I), the paper's broad Gaussian), or an ``MvGaussian`` / ``GaussianMixture``.
        The boosting steps add components where q underestimates p̃; they cannot move a start's
        component, so a biased start (Laplace on a skewed posterior) keeps its bias.
    init_scale
        Standard deviation of the broad initial Gaussian (10: covariance 100 I).
    lam
        λ of the component covariance λH⁻¹ (½ in the first author's code).
    eps
        ε of the tail-stabilised residual (1e−4, the paper's eq. 23), on the scale of a normalised density.
    n_starts, n_candidates, start_scale, n_retries
        L-BFGS starts per peak search, the pool of draws they are resampled from, a factor on the
        pool's standard deviations, and how many times a search without a valid peak is retried.
    select
        How the peak of a search is chosen among the valid ones: ``"objective"``, ``"peak"`` or
        ``"gradient"`` (module docstring); ``n_select_samples`` draws per candidate for ``"gradient"``.
    max_spread
        A component wider than this many times the target's local scale is not a peak (too flat).
    hessian
        ``"auto"``: ∇²log p̃ from ``target.hessian`` (analytic on a model block); ``"fd"``: central
        differences of ∇r.
    diagonal
        Keep only the diagonal of H (cheaper in high dimension; slower convergence).
    n_weight_samples, weight_tol, min_weight_steps, max_weight_steps, weight_step
        The weight step: fresh draws from h and from q_{t−1} per SGD step (100), the stopping
        tolerance on |Δα| (1e−4), bounds on the number of steps, and c of the step size c/k.
    min_weight
        Components whose weight comes out below this are skipped.
    revert
        Undo an added component when the ELBO estimate falls by more than three standard errors (the
        stochastic weight step overshot); it then counts as skipped.  Off by default: a greedy step that
        lowers the ELBO is sometimes the start of a better mixture (on the sensor network the guard stops
        the run at two components).
    patience
        Stop after this many consecutive iterations that add no component.
    n_elbo_samples, n_final_samples
        Draws for the ELBO trace (one estimate per added component) and for the final estimate.
    seed
        One seed makes a run reproducible (every random number derives from it).

    Notes
    -----
    ``fit`` returns a ``BlockFit`` whose ``info`` holds ``elbo_trace``, ``elbo_se_trace``,
    ``log_z_trace`` (the importance-sampling log Ẑ), ``alpha_trace``, ``time_trace`` (seconds since
    the start) and ``weight_steps``, one entry per component of the mixture (entry k: after the
    (k+1)-th component), plus ``iterations``, ``skipped``, ``reverted``, ``failed_searches``, ``rejections`` (why
    peaks were not used, with counts) and ``stopped`` (why the run ended).  The mixture after k
    components is ``q.head(k, info["alpha_trace"])``.  The handler object keeps its latest fit in
    ``last_fit`` (useful under ``fg.infer``, whose result does not carry handler traces).  On a model
    block a repeated call with an unchanged block (same prior message and site moments) returns the
    cached fit.
    """

    name = "BVI"

    def __init__(self, n_components: int = 30, *, init: Any = "gaussian", init_scale: float = 10.0,
                 lam: float = 0.5, eps: float = 1e-4, n_starts: int = 4, n_retries: int = 5,
                 hessian: str = "auto", diagonal: bool = False, n_weight_samples: int = 100,
                 weight_tol: float = 1e-4, max_weight_steps: int = 1000, weight_step: float | str = 1.0,
                 min_weight: float = 1e-3, n_elbo_samples: int = 2000, n_final_samples: int = 10_000,
                 select: str = "objective", start_scale: float = 1.0, n_candidates: int = 100,
                 max_spread: float = 10.0, patience: int = 5, min_weight_steps: int = 10,
                 n_select_samples: int = 200, revert: bool = False, seed: int = 0) -> None:
        def count(name: str, v: Any, low: int) -> int:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ModelError(f"BVI: {name} must be an integer ≥ {low}, got {v!r}")
            return int(v)

        def positive(name: str, v: Any) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or not (0 < (int(v) if isinstance(v, int | np.integer) else float(v)) <= 1e300):
                raise ModelError(f"BVI: {name} must be a positive number, got {v!r}")
            return float(v)

        self.n_components = count("n_components", n_components, 1)
        if not (isinstance(init, (MvGaussian, GaussianMixture)) or (isinstance(init, str) and init in (
                "gaussian", "laplace", "broad"))):
            raise ModelError("BVI: init must be 'gaussian', 'laplace', 'broad', an MvGaussian or a GaussianMixture, "
                             f"got {init!r}")
        if hessian not in ("auto", "fd"):
            raise ModelError(f"BVI: hessian must be 'auto' or 'fd', got {hessian!r}")
        if select not in ("objective", "peak", "gradient"):
            raise ModelError(f"BVI: select must be 'gradient', 'objective' or 'peak', got {select!r}")
        self.init, self.hessian, self.diagonal, self.select = init, hessian, bool(diagonal), select
        self.init_scale, self.lam, self.eps = positive("init_scale", init_scale), positive("lam", lam), positive(
            "eps", eps)
        self.start_scale = positive("start_scale", start_scale)
        self.n_candidates = count("n_candidates", n_candidates, 1)
        self.n_select_samples = count("n_select_samples", n_select_samples, 2)
        self.max_spread, self.patience = positive("max_spread", max_spread), count("patience", patience, 1)
        self.n_starts, self.n_retries = count("n_starts", n_starts, 1), count("n_retries", n_retries, 0)
        self.n_weight_samples = count("n_weight_samples", n_weight_samples, 2)
        self.weight_tol = positive("weight_tol", weight_tol)
        self.weight_step = "auto" if weight_step == "auto" else positive("weight_step", weight_step)
        self.max_weight_steps = count("max_weight_steps", max_weight_steps, 1)
        self.min_weight_steps = count("min_weight_steps", min_weight_steps, 1)
        if not 0.0 <= float(min_weight) < 1.0:
            raise ModelError(f"BVI: min_weight must lie in [0, 1), got {min_weight!r}")
        self.min_weight = float(min_weight)
        self.revert = bool(revert)
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
        # an initial mixture of K₀ components: its weights as greedy mixing weights, traces padded with nan
        cum = np.cumsum(q.weights)
        alpha0 = np.where(cum > 0, q.weights / np.where(cum > 0, cum, 1.0), 0.0)
        alpha0[0] = 1.0
        pad = [np.nan] * (q.n_components - 1)
        trace = {"elbo_trace": pad + [elbo], "elbo_se_trace": pad + [se], "log_z_trace": pad + [log_z],
                 "alpha_trace": list(alpha0), "time_trace": pad + [time.perf_counter() - t0],
                 "weight_steps": [0] * q.n_components}
        skipped = failed = reverted = no_gain = iterations = idle = 0
        stopped = f"{self.n_components} components"
        why: dict[str, int] = {}
        skipped_comps: list[tuple[np.ndarray, np.ndarray]] = []
        bar = progress.bar("BVI components", self.n_components, unit="component")
        bar.update(elbo, n=q.n_components)
        while q.n_components < self.n_components:
            if iterations >= 2 * (self.n_components - 1) or idle >= self.patience:
                stopped = (f"{iterations} iterations" if idle < self.patience else
                           f"no useful component in {idle} consecutive iterations")
                break
            iterations += 1
            idle += 1
            comp = self._component(target, q, log_z, rng, why, skipped_comps)
            if comp is None:
                failed += 1
                continue
            h = MvGaussian(mean=comp[0], cov=comp[1])
            alpha, steps = self._weight(target, q, h, rng)
            if alpha < self.min_weight:
                skipped += 1
                skipped_comps.append(comp)
                continue
            gain, gain_se = self._gain(target, q, h, alpha, rng)
            if gain < -2.0 * gain_se:
                no_gain += 1  # the weight step's noise left α > 0 where the component lowers the ELBO
                skipped_comps.append(comp)
                continue
            q_new = q.add(alpha, comp[0], comp[1])
            elbo_new, se_new, log_z_new = self._elbo(target, q_new, rng, self.n_elbo_samples)
            if self.revert and elbo_new < elbo - 3.0 * np.hypot(se, se_new):
                reverted += 1  # the stochastic weight step overshot: keep q_{t−1}
                skipped_comps.append(comp)
                continue
            idle, skipped_comps = 0, []
            q, elbo, se, log_z = q_new, elbo_new, se_new, log_z_new
            bar.update(elbo)
            for key, v in (("elbo_trace", elbo), ("elbo_se_trace", se), ("log_z_trace", log_z),
                           ("alpha_trace", alpha), ("time_trace", time.perf_counter() - t0),
                           ("weight_steps", steps)):
                trace[key].append(v)
        bar.close()

        # final evidence on fresh draws from a second seeded stream
        elbo, se, _, W, idx, lq = elbo_estimate(target, q, self.n_final_samples, np.random.default_rng([self.seed, 1]))
        neg_entropy, entropy_se = stratified_mean(lq, idx, q.weights)
        entropy, site, site_se = -neg_entropy, 0.0, 0.0
        info: dict[str, Any] = {key: np.asarray(v) for key, v in trace.items()}
        info.update(init=init_note, iterations=iterations, skipped=skipped, failed_searches=failed,
                    reverted=reverted, no_gain=no_gain, stopped=stopped, rejections=why, n_components=q.n_components,
                    entropy_se=entropy_se,
                    time=time.perf_counter() - t0, mode=q.mean())
        if hasattr(target, "sites_value_grad"):
            sv = target.sites_value_grad(W)[0]
            site, info["site_se_alone"] = stratified_mean(sv, idx, q.weights)
            site_se = stratified_mean(sv - lq, idx, q.weights)[1]
        kind = ESTIMATE
        if q.n_components == 1 and hasattr(target, "gaussian_expectation"):
            # a single Gaussian: exact entropy and Gaussian part, only the non-quadratic sites sampled (none on an
            # exactly Gaussian block, whose figure is then exact)
            mu, cov = q.means[0], q.covs[0]
            L = np.linalg.cholesky(cov)
            entropy = 0.5 * float(np.linalg.slogdet(2.0 * np.pi * np.e * cov)[1])
            site, site_se, info["entropy_se"] = target.quadratic_site_term(mu, cov), 0.0, 0.0
            if target.mc_sites:
                z = np.random.default_rng([self.seed, 1]).standard_normal((self.n_final_samples, len(mu)))
                sv = target.mc_site_terms(mu + z @ L.T, grads=False)[0]
                site, site_se = site + float(sv.mean()), float(sv.std(ddof=1) / np.sqrt(len(sv)))
            info["site_se_alone"] = site_se
            gauss = target.gaussian_expectation(mu, L)[0] - target.quadratic_site_term(mu, cov)
            elbo, se = gauss + site + entropy, site_se
            kind = ESTIMATE if target.mc_sites else LOWER_BOUND
        if not np.isfinite(elbo):
            raise HandlerError(f"BVI: the ELBO estimate is not finite ({elbo}); the target is not finite on q's draws")
        fit = BlockFit(q, elbo, kind, se, site, site_se, entropy, info)
        if fp is not None:
            info["fingerprint"] = fp
            info["cache"] = (q, elbo, kind, se, site, site_se, entropy)
        self.last_fit = fit
        return fit

    # ------------------------------------------------------------------------------ pieces
    def _initial(self, target: Any, x0: np.ndarray) -> tuple[GaussianMixture, str]:
        D = target.dim
        if isinstance(self.init, GaussianMixture):
            return self.init, "given mixture"
        if isinstance(self.init, MvGaussian):
            return GaussianMixture.from_gaussian(self.init), "given Gaussian"
        if self.init == "gaussian":
            from .aikl import AIKL  # the Gaussian KL stage of AI-KL: lattice-exact site expectations

            try:
                return GaussianMixture.from_gaussian(AIKL().gaussian_kl(target, x0)[0]), "gaussian"
            except (HandlerError, np.linalg.LinAlgError, FloatingPointError, ValueError) as err:
                note = f"(the Gaussian KL optimum failed: {err})"
        if self.init in ("gaussian", "laplace"):
            try:
                w, H, _ = find_mode(target, x0, self.name)
                q0 = GaussianMixture.from_gaussian(gaussian_from_hessian(w, H, self.name)[0])
                return q0, "laplace" + (f" {note}" if self.init == "gaussian" else "")
            except (HandlerError, np.linalg.LinAlgError, FloatingPointError, ValueError) as err:
                note = f"broad (the Laplace approximation failed: {err})"
        else:
            note = "broad"
        return GaussianMixture(np.ones(1), np.zeros((1, D)), (self.init_scale**2 * np.eye(D))[None]), note

    def _elbo(self, target: Any, q: GaussianMixture, rng: np.random.Generator, n: int) -> tuple[float, float, float]:
        """(ELBO estimate, its standard error, importance-sampling log Ẑ) on about n fresh draws of q,
        stratified by component (``elbo_estimate``)."""
        return elbo_estimate(target, q, n, rng)[:3]

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
        why = {} if why is None else why
        z_sel = rng.standard_normal((self.n_select_samples, q.dim)) if self.select == "gradient" else None

        def note(reason: str) -> None:
            why[reason] = why.get(reason, 0) + 1

        for _ in range(self.n_retries + 1):
            best = None
            for x0 in self._starts(target, q, log_z, rng):
                x0 = self._off_plateau(target, x0, log_z, pieces)
                x, fx, _ = lbfgs(neg, x0)
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
                if not (np.all(np.isfinite(ev)) and ev[0] > 1e-8 * max(1.0, ev[-1])):
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

    def _off_plateau(self, target: Any, x0: np.ndarray, log_z: float, pieces) -> np.ndarray:
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
            x, fx, _ = lbfgs(neg_logp, x0, gtol=1e-5)
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

    def _weight(self, target: Any, q: GaussianMixture, h: MvGaussian,
                rng: np.random.Generator) -> tuple[float, int]:
        """Projected SGD on D((1 − α)q + αh) with steps c/k and fresh draws each step."""
        n = self.n_weight_samples
        alpha = 1.0 / (q.n_components + 1)
        k = 0
        for k in range(1, self.max_weight_steps + 1):
            Xh = h.sample(n, rng)
            Xq, wq, _ = q.sample_stratified(n, rng)
            X = np.concatenate([Xh, Xq])
            lp, lq, lh = _log_density(target, X), q.logpdf(X), h.logpdf(X)
            g = weight_gradient(alpha, (lq[:n], lh[:n], lp[:n]), (lq[n:], lh[n:], lp[n:]), wq)
            if k == 1:
                c = self.weight_step if self.weight_step != "auto" else 1.0 / max(1.0, abs(g))
            new = float(np.clip(alpha - c / k * g, 0.0, 1.0))
            done = abs(new - alpha) < self.weight_tol and k >= self.min_weight_steps
            alpha = new
            if done:
                break
        return alpha, k

    def _gain(self, target: Any, q: GaussianMixture, h: MvGaussian, alpha: float,
              rng: np.random.Generator) -> tuple[float, float]:
        """``elbo_gain`` of adding h with weight α, on ``n_elbo_samples`` fresh draws from h and from q."""
        n = self.n_elbo_samples
        Xh = h.sample(n, rng)
        Xq, _, idx = q.sample_stratified(n, rng)
        X = np.concatenate([Xh, Xq])
        lp, lq, lh = _log_density(target, X), q.logpdf(X), h.logpdf(X)
        return elbo_gain(alpha, (lq[:n], lh[:n], lp[:n]), (lq[n:], lh[n:], lp[n:]), idx, q.weights)

    def __repr__(self) -> str:
        init = self.init if isinstance(self.init, str) else type(self.init).__name__
        return (f"BVI(n_components={self.n_components}, init={init!r}, lam={self.lam}, "
                f"diagonal={self.diagonal}, seed={self.seed})")
