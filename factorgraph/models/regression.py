"""Canned models, built only with the public builder API.

``linear_regression`` is Drugowitsch's variational Bayesian linear regression (Drugowitsch 2014, §2):
y_n ~ N(wᵀx_n, τ⁻¹), w | τ ~ N(0, (τA)⁻¹), τ ~ Gam(a₀, b₀), A = αI (or diag(α) with ARD),
α ~ Gam(c₀, d₀), with the joint posterior q(w, τ) and a separate q(α).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
from scipy.special import gammaln, log_ndtr, logsumexp

from distributions import Gamma
from factorgraph.graph import checks, convergence
from factorgraph.graph.builders import gamma, gaussian, gaussian_gamma, mv_gaussian, plate
from factorgraph.graph.expressions import feature_names, inner, label_features
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.graph.nonconjugate import bernoulli_logit
from factorgraph.posterior.results import Result
from factors.data_products import computed
from factors.kernels import jj_lambda, logistic_expectations
from schedules import EP, NCVMP, VMP, infer


class StudentT(NamedTuple):
    """Predictive Student-t: location ``mean``, ``precision`` (inverse squared scale), ``dof``."""

    mean: np.ndarray
    precision: np.ndarray
    dof: float

    def var(self) -> np.ndarray:
        return self.dof / (self.dof - 2.0) / self.precision

    def logpdf(self, y: np.ndarray) -> np.ndarray:
        nu, lam = self.dof, self.precision
        z = (np.asarray(y) - self.mean) ** 2 * lam / nu
        return (gammaln((nu + 1) / 2) - gammaln(nu / 2) + 0.5 * np.log(lam / (np.pi * nu))
                - (nu + 1) / 2 * np.log1p(z))


def _posterior(result: Any, name: str) -> Any:
    """The posterior ``name`` of a fitted Result (a clear error for anything else)."""
    if not isinstance(result, Result):
        raise ModelError(f"result must be the Result of a fit (fg.infer or a canned model), got "
                         f"{checks._short(result)}")
    if name not in result.posteriors:
        raise ModelError(f"result has no posterior {name!r} (it has {sorted(result.posteriors)}): was it fitted "
                         "by the matching canned model?")
    return result.posteriors[name]


def _new_inputs(X: Any, D: int, what: str = "X_new") -> np.ndarray:
    """New input rows: a vector (one row) or an (N, D) matrix with the model's D columns."""
    Xn = checks.constant(X, what)
    Xn = Xn[None, :] if Xn.ndim == 1 else Xn
    if Xn.ndim != 2 or Xn.shape[-1] != D:
        raise ModelError(f"{what} must be a vector of {D} inputs or a matrix with {D} columns, got shape "
                         f"{Xn.shape}")
    return Xn


def _regression_data(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    Xa = checks.constant(X, "X")
    ya = checks.constant(y, "y").reshape(-1)
    if Xa.ndim != 2:
        raise ModelError(f"X must be a matrix (N, D), got shape {Xa.shape}")
    if Xa.shape[0] != ya.shape[0]:
        raise ModelError(f"X has {Xa.shape[0]} rows but y has {ya.shape[0]} entries")
    return Xa, ya


def linear_regression_model(X: Any, y: Any, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4,
                            c0: float = 1e-2, d0: float = 1e-4) -> Model:
    """The model of ``linear_regression``, for use with ``fg.infer`` or ``fg.compare``."""
    ard = checks.flag(ard, "ard")
    with checks.scanned_once():  # X is read once by the checks (here and in fg.inner)
        Xa, ya = _regression_data(X, y)
        N, D = Xa.shape
        with Model("linear_regression" + ("_ard" if ard else "")) as m:
            n, d = plate("n", N), plate("d", D)
            alpha = gamma("alpha", shape=c0, rate=d0, plates=[d] if ard else [])
            w = gaussian_gamma("w", mean=0.0, precision=alpha, shape=a0, rate=b0, dim=D)
            gaussian("y", mean=inner(Xa, w, plates=[n]), precision=w.tau, plates=[n], observed=ya)
    label_features(m, feature_names(X), "w_dim_0", "d")
    return m


def linear_regression(X: Any, y: Any, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4,
                      c0: float = 1e-2, d0: float = 1e-4, *, tol: float | None = None,
                      max_iter: int = 500, init: str = "auto") -> Result:
    """Variational Bayesian linear regression, as Drugowitsch (2014) §2.

    Each pass updates q(w, τ) and then q(α); by default the passes stop when the bound changes by less
    than 0.001 % (measured, as in the author's code, on the bound without its constant terms) or after
    500 passes.  Give ``tol`` to iterate instead until the relative change of the full bound is below
    ``tol`` (a converged fixed point).

    Where q(α) starts (``init``):

    * ``"reference"``: at its prior mean c₀/d₀, exactly the author's algorithm (VBLinLogit).  On inputs
      far from unit scale (X·10⁻³) this start is a trap: α ≈ c₀/d₀ shrinks w to 0, the noise precision
      explains the data, and the fit stops at w ≈ 0 with a poor bound;
    * ``"data"``: at the data's scale, E[α] = (c₀/d₀)·s with s the mean square of the entries of X (of
      each column, with ARD), the start the reference would have on inputs rescaled to unit mean square;
    * ``"auto"`` (default): the reference start and, when s ≠ 1, the data start too; the fit with the
      higher bound is returned (the reference one unless the other is higher by more than 10⁻⁴·|L| + 10⁻³,
      more than the stopping rule leaves between two fits of one fixed point), and a note says which.
      On inputs with unit mean square (standardised) this is the reference fit.

    Returns
    -------
    Result
        ``posterior("w")`` is the ``GaussianGamma`` q(w, τ): ``mean()`` is w_N,
        ``scale_matrix`` is V_N, ``shape`` a_N and ``rate`` b_N; ``posterior("alpha")`` is q(α);
        ``elbo`` is the variational bound L (Drugowitsch 2014, eq. 22, or 33 with ARD).
    """
    _start_option(init)
    m = linear_regression_model(X, y, ard, a0, b0, c0, d0)
    scale = _input_scale(None, ard, init, m)  # from the diagonal of XᵀX, computed with the model
    N, D = np.shape(X)
    n_alpha = D if ard else 1
    # the constant part of L (eq. 22/33), which the author's stopping rule leaves out
    const = (-0.5 * N * np.log(2 * np.pi) + 0.5 * D - gammaln(a0) + a0 * np.log(b0)
             + n_alpha * (-gammaln(c0) + c0 * np.log(d0)))

    def fit(alpha0: Any) -> Result:
        start = {} if alpha0 is None else {"alpha": alpha0}
        if tol is not None:
            return infer(m, schedule=["w", "alpha"], max_iter=max_iter, tol=tol, init=start)
        return infer(m, VMP(accelerate=False), schedule=["w", "alpha"], max_iter=max_iter, tol=None, param_tol=None,
                     init=start, callbacks=[_author_stop(const, False)])

    return _best_start(fit, init, scale, c0, d0, ard, D)


def linear_predictive(result: Result, X_new: Any) -> StudentT:
    """Posterior predictive of ``linear_regression`` at new inputs (Drugowitsch 2014, eq. 23):
    Student-t with mean w_Nᵀx, precision (1 + xᵀV_N x)⁻¹ a_N/b_N and 2a_N degrees of freedom."""
    q = _posterior(result, "w")
    V = q.scale_matrix
    Xn = _new_inputs(X_new, V.shape[-1])
    if Xn.shape[-1] != V.shape[-1]:
        raise ModelError(f"X_new has {Xn.shape[-1]} columns but the model has {V.shape[-1]} weights")
    quad = np.einsum("nd,de,ne->n", Xn, V, Xn)
    return StudentT(Xn @ q.mean(), q.shape / q.rate / (1.0 + quad), 2.0 * float(q.shape))


# ------------------------------------------------------------------------------------ logistic
def _signed_labels(y: Any, N: int) -> np.ndarray:
    lab = checks.bool_as_float(y)
    if not isinstance(lab, np.ndarray) or np.ma.isMaskedArray(lab):
        lab = checks.constant(lab, "y")
    if lab.shape != (N,):
        raise ModelError(f"y must have one label per row of X ({N}), got shape {lab.shape}")
    if lab.dtype == bool:
        return np.where(lab, 1.0, -1.0)
    vals = checks.constant(lab, "y")
    u = set(computed(np.unique(vals))[0].tolist())  # dask labels: the distinct values of each chunk, merged
    if u <= {0.0, 1.0}:
        return 2.0 * vals - 1.0
    if u <= {-1.0, 1.0}:
        return vals
    raise ModelError(f"y must be labels in {{-1, +1}}, {{0, 1}} or bool, got values {sorted(u)[:5]}")


def logistic_regression_model(X: Any, y: Any, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4,
                              method: str = "quadratic") -> Model:
    """The model of ``logistic_regression``: w ~ N(0, α⁻¹I) (or diag(α)⁻¹), α ~ Gam(a₀, b₀),
    y_n ~ Bernoulli(σ(x_nᵀw)); ``method="quadratic"`` starts the Jaakkola–Jordan ξ at 0."""
    ard = checks.flag(ard, "ard")
    with checks.scanned_once():  # X is read once by the checks (here and in fg.inner)
        Xa = checks.constant(X, "X")
        if Xa.ndim != 2:
            raise ModelError(f"X must be a matrix (N, D), got shape {Xa.shape}")
        N, D = Xa.shape
        s = _signed_labels(y, N)
        with Model("logistic_regression" + ("_ard" if ard else "")) as m:
            n, d = plate("n", N), plate("d", D)
            alpha = gamma("alpha", shape=a0, rate=b0, plates=[d] if ard else [])

            w = mv_gaussian("w", mean=0.0, precision=alpha, dim=D)
            bernoulli_logit("y", logit=inner(Xa, w, plates=[n]), observed=s, method=method,
                            xi0=0.0 if isinstance(method, str) and method == "quadratic" else None)
    label_features(m, feature_names(X), "w_dim_0", "d")
    return m


def logistic_regression(X: Any, y: Any, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4,
                        method: str = "quadratic", *, max_iter: int = 500, init: str = "auto",
                        **infer_options: Any) -> Result:
    """Variational Bayesian logistic regression (Drugowitsch 2014 §3).

    With ``method="quadratic"`` (the Jaakkola–Jordan bound) and ``init="reference"`` it follows the
    author's algorithm exactly: q(w)q(α); ξ starts at 0 (λ = 1/8) and α at a₀/b₀; an initial pass fits
    q(w) then q(α) and gives the initial bound; each pass then updates ξ (from the current q(w), inside
    the w update), α and w; it stops when the bound, without its constant terms, changes by less than
    0.001 % or decreases (the decreased state is returned, as in the author's code), or after 500
    passes.  With ``method="quadrature"`` or ``"tilted"`` the same model runs under NCVMP to its fixed
    point (other options go to ``fg.infer``).  With ``method="ep"`` q(w) is fitted by expectation propagation
    (``fg.EP()``: one site per row, its tilted moments by quadrature) and q(α) by its VMP update from q(w) (a
    hybrid run: ``init`` is not used; ``Result.elbo`` is then EP's log evidence approximation, not a bound).
    Labels may be {−1, +1}, {0, 1} or bool.

    ``init`` says where q(α) starts, as in ``linear_regression``: ``"reference"`` at its prior mean
    a₀/b₀ (on inputs scaled by 10⁻³ that start shrinks w to 0 and every prediction is ½), ``"data"`` at
    (a₀/b₀)·s with s the mean square of the entries of X (of each column with ARD), ``"auto"`` (default)
    both when s ≠ 1, keeping the fit with the higher bound (the reference one unless the other is
    higher by more than 10⁻⁴·|L| + 10⁻³); a note says which.
    """

    if isinstance(method, str) and method == "ep":  # expectation propagation on the exact likelihood
        with checks.scanned_once():
            m = logistic_regression_model(X, y, ard, a0, b0, "quadrature")
        return infer(m, algorithm=infer_options.pop("algorithm", EP()), max_iter=max_iter, **infer_options)
    _start_option(init)
    with checks.scanned_once():
        m = logistic_regression_model(X, y, ard, a0, b0, method)
        D = np.shape(X)[1]
        scale = _input_scale(checks.constant(X, "X"), ard, init)
    const = (D if ard else 1) * (-gammaln(a0) + a0 * np.log(b0))
    algorithm = infer_options.pop("algorithm", NCVMP())

    def fit(alpha0: Any) -> Result:
        start = {} if alpha0 is None else {"alpha": alpha0}
        if method != "quadratic":
            return infer(m, algorithm=algorithm, max_iter=max_iter, init=start, **infer_options)
        return infer(m, VMP(accelerate=False), schedule=["alpha", "w"], warmup=["w", "alpha"], max_iter=max_iter,
                     tol=None, param_tol=None, init=start, callbacks=[_author_stop(const, stop_on_decrease=True)])

    return _best_start(fit, init, scale, a0, b0, ard, D)


_STARTS = ("auto", "reference", "data")


def _start_option(init: Any) -> None:
    if not isinstance(init, str) or init not in _STARTS:
        raise ModelError(f"init must be one of {list(_STARTS)}, got {init!r}")


def _input_scale(Xa: np.ndarray | None, ard: bool, init: Any, model: Model | None = None) -> Any:
    """s: the mean square of the entries of X (per column with ARD; a zero or non-finite one counts as 1):
    diag(XᵀX)/N from the Gram matrix ``model``'s inner product has cached (no pass over X), else from ``Xa``."""
    _start_option(init)
    gram = _cached_gram(model) if model is not None else None
    with np.errstate(over="ignore"):
        ms = np.diag(gram[0]) / gram[1] if gram is not None else np.mean(np.square(Xa), axis=0)
    ms = np.where(np.isfinite(ms) & (ms > 0), ms, 1.0)
    return ms if ard else float(np.mean(ms))


def _cached_gram(model: Model) -> tuple[np.ndarray, int] | None:
    """(XᵀX, N) of the one inner product of ``model`` whose Gram matrix its build computed, else None."""
    for node in model.deterministics:
        products = node.params.get("products") if isinstance(node.params, dict) else None
        if products and "xtx" in products:
            return products["xtx"], int(np.prod(node.params["X"].shape[:-1]))
    return None


def _best_start(fit: Any, init: str, scale: Any, shape: float, rate: float, ard: bool, D: int) -> Result:
    """Fit from the start ``init`` asks for (see ``linear_regression``): ``fit(q_alpha0 or None)``."""

    same = bool(np.allclose(scale, 1.0, rtol=1e-12, atol=0.0))
    if init == "reference" or (init == "auto" and same):
        return fit(None)
    q0 = Gamma(shape=np.full(D if ard else (), shape), rate=rate / np.asarray(scale, float))
    data_note = f"q(α) started at the data's scale, E[α] = (prior mean)·s with s = {_brief(scale)}"
    if init == "data":
        r = fit(q0)
        r.notes.append(data_note)
        return r
    fits = []
    for start in (None, q0):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits.append((fit(start), caught))
    (ref, ref_w), (alt, alt_w) = fits
    better = alt.elbo > ref.elbo + 1e-4 * abs(ref.elbo) + 1e-3  # beyond the stopping rule's noise
    r, caught = (alt, alt_w) if better else (ref, ref_w)
    r.time = ref.time + alt.time
    r.notes.append((data_note + f": bound {alt.elbo:.8g}, above {ref.elbo:.8g} from the prior mean (the "
                    "reference start, init='reference'), which stopped at a worse fixed point") if better else
                   (f"q(α) started at its prior mean (the reference start); a start at the data's scale "
                    f"(s = {_brief(scale)}) reached {alt.elbo:.8g}, not higher than {ref.elbo:.8g}"))
    _reemit(caught)
    return r


def _reemit(caught: list, hint: str = "") -> None:
    """Emit again warnings recorded around a fit (a ConvergenceWarning with ``hint`` appended, at the user's
    line)."""
    for w in caught:
        if issubclass(w.category, convergence.ConvergenceWarning):
            text = str(w.message)
            convergence.warn(text + hint if "not converged" in text else text)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _brief(scale: Any) -> str:
    a = np.asarray(scale, float)
    return f"{float(a):.3g}" if a.ndim == 0 else f"[{a.min():.3g} … {a.max():.3g}] per column"


def _author_stop(const: float, stop_on_decrease: bool):
    """Drugowitsch's stopping rule: the bound without its constant terms changes by < 0.001 %
    (the logistic fits also stop when it decreases)."""

    def stop(it: int, elbo: float, engine: Any) -> bool:
        if len(engine.trace) < 2:
            return False
        prev, L = engine.trace[-2] - const, elbo - const
        return "converged" if (stop_on_decrease and prev > L) or abs(prev - L) < abs(1e-5 * L) else None

    return stop


def logistic_predictive(result: Result, X_new: Any, method: str = "quadrature") -> np.ndarray:
    """p(y = 1 | x) under q(w) of a logistic regression.

    ``"quadrature"``: E_q[σ(xᵀw)] exactly (xᵀw ~ N(xᵀμ, xᵀΣx)).  ``"bound"``: Drugowitsch's
    (2014, eq. 66 and vb_logit_pred) lower bound, from the Jaakkola–Jordan bound of the likelihood of
    (x, y = 1) added to q(w), with one ξ per row optimised from ξ = 0 under the author's stopping rule.
    """

    checks.choice(method, ("quadrature", "bound"), "method")
    q = _posterior(result, "w")
    mu, V = q.mean(), q.cov()
    Xn = _new_inputs(X_new, mu.shape[-1])
    Vx = Xn @ V
    xVx = np.einsum("nd,nd->n", Vx, Xn)
    if method == "quadrature":
        return logistic_expectations(Xn @ mu, xVx)[1]
    if method != "bound":
        raise ModelError(f"method must be 'quadrature' or 'bound', got {method!r}")
    P = q.precision
    wt = P @ mu + 0.5 * Xn  # rows: V⁻¹w + x/2
    Vwt = wt @ V
    xVwt = np.einsum("nd,nd->n", Vx, wt)

    def state(lam: np.ndarray):
        a = 2.0 * lam / (1.0 + 2.0 * lam * xVx)  # Ṽ = V − a·VxxᵀV (Sherman–Morrison)
        w_t = Vwt - (a * xVwt)[:, None] * Vx
        xw = np.einsum("nd,nd->n", w_t, Xn)
        quad = np.einsum("nd,nd->n", w_t, w_t @ P) + 2.0 * lam * xw**2  # w̃ᵀṼ⁻¹w̃
        return a, w_t, xw, quad

    def bound(xi, lam, quad):
        return 0.5 * (-np.log1p(2.0 * lam * xVx) + quad - xi) - np.log1p(np.exp(-xi)) + lam * xi**2

    xi = np.zeros(len(Xn))
    lam = jj_lambda(xi)
    a, w_t, xw, quad = state(lam)
    L_prev = float(np.sum(0.5 * (-np.log1p(2.0 * lam * xVx) + quad)) - len(Xn) * np.log(2.0))
    for _ in range(500):
        xi = np.sqrt(xVx - a * xVx**2 + xw**2)
        lam = jj_lambda(xi)
        a, w_t, xw, quad = state(lam)
        L = float(np.sum(bound(xi, lam, quad)))
        if L_prev > L or abs(L_prev - L) < abs(1e-5 * L):
            break
        L_prev = L
    wVw = float(mu @ P @ mu)
    return (np.exp(-np.log1p(np.exp(-xi)) - 0.5 * np.log1p(2.0 * lam * xVx)
                   + 0.5 * (-xi - wVw + quad) + lam * xi**2))


# ------------------------------------------------------------------------------------ predictive
def _log_lik_logistic(u: np.ndarray, y: np.ndarray) -> np.ndarray:
    s = (np.asarray(y, float) > 0).astype(float)  # {0, 1}, {−1, +1} or bool
    return s * u - np.logaddexp(0.0, u)


def _log_lik_probit(u: np.ndarray, y: np.ndarray) -> np.ndarray:

    return log_ndtr(np.where(np.asarray(y, float) > 0, 1.0, -1.0) * u)


LIKELIHOODS = {"logistic": _log_lik_logistic, "probit": _log_lik_probit}


def predictive_log_density(result: Result, X_test: Any, y_test: Any, likelihood: Any = "logistic",
                           variable: str = "w", n_samples: int = 10_000, seed: int = 0,
                           per_point: bool = False) -> float | np.ndarray:
    """Test log predictive density by sampling q(w) (Gianniotis et al., Mixed VI, eq. 13):

        log (1/S) Σ_s p(D_test | w_s),   w_s ~ q(w),   p(D_test | w) = Π_n p(y_n | x_nᵀw).

    ``likelihood`` is "logistic", "probit", or a function ``log_lik(u, y)`` of the projections
    u = Xw (shape (S, N)) and the targets; e.g. a Cauchy regression's
    ``lambda u, y: scipy.stats.cauchy.logpdf(y, loc=u, scale=γ)``.  With ``per_point=True`` the
    average over samples is taken per test point instead (Σ_n log (1/S)Σ_s p(y_n | x_n, w_s)).
    """

    log_lik = LIKELIHOODS.get(likelihood) if isinstance(likelihood, str) else likelihood
    if log_lik is None or not callable(log_lik):
        raise ModelError(f"likelihood must be one of {sorted(LIKELIHOODS)} or a function, got {likelihood!r}")
    q = _posterior(result, variable)
    Xt = _new_inputs(X_test, q.mean().shape[-1], "X_test")
    yt = checks.constant(checks.bool_as_float(y_test), "y_test").reshape(-1)
    if yt.shape[0] != Xt.shape[0]:
        raise ModelError(f"y_test has {yt.shape[0]} entries but X_test has {Xt.shape[0]} rows")
    n_samples = checks.integer(n_samples, "n_samples", low=1, high=10**7)
    seed = checks.seed(seed)
    W = q.sample(n_samples, np.random.default_rng(seed))
    try:
        ll = np.asarray(log_lik(W @ Xt.T, yt), dtype=float)  # (S, N)
    except Exception as err:  # noqa: BLE001 - the user's function failed: say so, with its own error
        raise ModelError(f"likelihood(u, y) failed on u of shape {(len(W), len(Xt))}: {type(err).__name__}: "
                         f"{err}") from err
    if ll.shape != (len(W), len(Xt)):
        raise ModelError(f"likelihood(u, y) must return an array of shape {(len(W), len(Xt))}, got {ll.shape}")
    if per_point:
        return logsumexp(ll, axis=0) - np.log(n_samples)
    return float(logsumexp(ll.sum(1)) - np.log(n_samples))
