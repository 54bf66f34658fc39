"""Independent numpy reference for Drugowitsch's variational Bayesian linear and logistic regression.

Source: J. Drugowitsch (2014), "Variational Bayesian inference for linear and logistic regression",
arXiv:1310.5438, sections 2 and 3 (see also docs/maths.md §10).

The functions below reproduce, step by step, the *algorithm* of the author's public MATLAB/Octave
library VBLinLogit (github.com/DrugowitschLab/VBLinLogit, folder ``src/``, files dated 2013-2019):
the same initialisation, the same order of updates inside an iteration, the same bound formula, the same
stopping rule and the same iteration cap. The code here was written independently from the paper's
equations and from facts read in that library; it is a test oracle, not part of the engine.

Facts this module relies on (read in ``src/vb_linear_fit.m``, ``src/vb_logit_fit.m`` and siblings):

* Stopping rule (all fit and predict routines): stop after the first iteration whose bound ``L`` satisfies
  ``|L_prev - L| < |1e-5 * L|`` (a 0.001 % relative change), where ``L`` is the bound *without* its
  data-independent constant terms. Cap: 500 iterations.
* Linear fits start from ``L_prev = -realmax``, so at least two iterations run; a decrease of the bound
  is an error. Logistic fits start from the bound of an initial pass at xi = 0 and *stop* (without error,
  keeping the decreased state) when the bound decreases.
* The returned ``L`` is the full bound: the constant terms are added once, after the loop.

All fit functions return a :class:`FitResult` (a dict with attribute access) holding the MATLAB outputs
under their MATLAB names plus diagnostics: ``n_iter`` (the MATLAB loop counter at exit), ``L_trace``
(full bound after each loop iteration), ``L_raw_trace`` (the constant-free bound the stopping rule is
applied to), ``reached_max_iter`` (MATLAB's warning condition ``iter == max_iter``) and the internal
variational parameters the MATLAB code does not return (``cn``/``dn``, ``bn``, ``xi``, ...).
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

__all__ = [
    "BoundDecreaseError",
    "FitResult",
    "MAX_ITER",
    "REL_TOL",
    "jj_lambda",
    "linear_bound_components",
    "logit_bound_components",
    "vb_linear_fit",
    "vb_linear_fit_ard",
    "vb_linear_pred",
    "vb_logit_fit",
    "vb_logit_fit_ard",
    "vb_logit_fit_iter",
    "vb_logit_pred",
    "vb_logit_pred_incr",
]

MAX_ITER = 500
"""Iteration cap used by every VBLinLogit routine."""

REL_TOL = 1e-5
"""Relative change of the (constant-free) bound below which iterations stop: 0.001 %."""

_NEG_REALMAX = -np.finfo(np.float64).max  # MATLAB's -realmax
_LOG_2PI = np.log(2.0 * np.pi)


class BoundDecreaseError(RuntimeError):
    """Raised where the MATLAB code raises ``error('Variational bound should not reduce')``."""


class FitResult(dict):
    """A dict whose keys can also be read as attributes (``res.w`` or ``res["w"]``)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as exc:  # pragma: no cover - attribute protocol
            raise AttributeError(name) from exc

    def __dir__(self):  # pragma: no cover - convenience
        return list(self.keys()) + list(super().__dir__())


# ----------------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------------


def _design(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError("X must be an N x D matrix")
    return X


def _column(y, n: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} elements, X has {n} rows")
    return y


def _logdet_pd(A: np.ndarray) -> float:
    """log det of a positive definite matrix via Cholesky, reading (like MATLAB's chol) the upper triangle."""
    upper = np.triu(A)
    sym = upper + np.triu(A, 1).T
    L = np.linalg.cholesky(sym)
    return float(2.0 * np.sum(np.log(np.diag(L))))


def _is_converged(L_prev: float, L: float) -> bool:
    return abs(L_prev - L) < abs(REL_TOL * L)


def jj_lambda(xi) -> np.ndarray:
    """Jaakkola-Jordan lambda(xi) = tanh(xi/2) / (4 xi), with the xi = 0 limit 1/8 (as VBLinLogit does)."""
    xi = np.asarray(xi, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.tanh(xi / 2.0) / (4.0 * xi)
    out = np.where(np.isnan(out), 0.125, out)
    return out


def _softplus_neg(xi: np.ndarray) -> np.ndarray:
    """log(1 + exp(-xi)) evaluated the way the MATLAB code writes it (xi >= 0 there, so no overflow)."""
    return np.log(1.0 + np.exp(-xi))


# ----------------------------------------------------------------------------------------------------
# linear regression (the paper's §2): q(w, tau) q(alpha), normal-gamma block
# ----------------------------------------------------------------------------------------------------


def _linear_fit(X, y, a0, b0, c0, d0, ard: bool, max_iter: int, on_decrease: str) -> FitResult:
    if on_decrease not in ("raise", "ignore"):
        raise ValueError("on_decrease must be 'raise' (MATLAB behaviour) or 'ignore'")
    X = _design(X)
    N, D = X.shape
    y = _column(y, N)

    XtX = X.T @ X
    Xty = X.T @ y
    an = a0 + N / 2.0
    cn = c0 + (0.5 if ard else D / 2.0)
    gammaln_an = gammaln(an)
    # the alpha-part of the constant-free bound: K copies of lnGamma(cn) (K = D with ARD, 1 without)
    n_alpha = D if ard else 1
    K_gammaln_cn = n_alpha * gammaln(cn)

    # initial shrinkage: the hyper-prior mean c0/d0 (a vector of them with ARD)
    E_a = np.full(D, c0 / d0) if ard else c0 / d0

    L_prev = _NEG_REALMAX
    L_raw_trace: list[float] = []
    it = 0
    for it in range(1, max_iter + 1):
        E_a_used = E_a
        # q(w, tau): V^{-1} = E[A] + X'X, w = V X'y, an fixed, bn from eq. (10)/(30) (2nd form)
        prior_prec = np.diag(E_a) if ard else E_a * np.eye(D)
        invV = prior_prec + XtX
        V = np.linalg.inv(invV)
        logdetV = -_logdet_pd(invV)
        w = V @ Xty
        resid = X @ w - y
        sse = float(np.sum(resid**2))
        if ard:
            bn = b0 + 0.5 * (sse + float(np.sum(w**2 * E_a)))
        else:
            bn = b0 + 0.5 * (sse + E_a * float(w @ w))
        E_t = an / bn

        # q(alpha): cn fixed, dn from eq. (13)-(14) / (32), using the q(w, tau) just computed
        if ard:
            dn = d0 + 0.5 * (E_t * w**2 + np.diag(V))
        else:
            dn = d0 + 0.5 * (E_t * float(w @ w) + float(np.trace(V)))
        E_a = cn / dn

        # bound without constants: eq. (22)/(33) minus the data-independent terms
        xVx_sum = float(np.sum(X * (X @ V)))
        L_raw = (
            -0.5 * (E_t * sse + xVx_sum)
            + 0.5 * logdetV
            - b0 * E_t
            + gammaln_an
            - an * np.log(bn)
            + an
            + K_gammaln_cn
            - cn * float(np.sum(np.log(dn)))
        )
        L_raw_trace.append(L_raw)

        if L_prev > L_raw and on_decrease == "raise":
            raise BoundDecreaseError(
                f"variational bound decreased at iteration {it}: {L_prev!r} -> {L_raw!r}"
            )
        if _is_converged(L_prev, L_raw):
            break
        L_prev = L_raw

    const = (
        -0.5 * (N * _LOG_2PI - D) - gammaln(a0) + a0 * np.log(b0) + n_alpha * (-gammaln(c0) + c0 * np.log(d0))
    )
    L_trace = [v + const for v in L_raw_trace]
    return FitResult(
        w=w,
        V=V,
        invV=invV,
        logdetV=logdetV,
        an=an,
        bn=bn,
        E_a=E_a,
        L=L_raw_trace[-1] + const,
        n_iter=it,
        reached_max_iter=(it == max_iter),
        L_trace=L_trace,
        L_raw_trace=L_raw_trace,
        L_const=const,
        cn=cn,
        dn=dn,
        E_a_used=E_a_used,
        E_t=E_t,
    )


def vb_linear_fit(X, y, a0=1e-2, b0=1e-4, c0=1e-2, d0=1e-4, *, max_iter=MAX_ITER, on_decrease="raise"):
    """VB linear regression with one shared shrinkage alpha (VBLinLogit ``vb_linear_fit.m``).

    Model: y_n ~ N(w'x_n, 1/tau), w | tau, alpha ~ N(0, (tau alpha)^-1 I), tau ~ Gam(a0, b0),
    alpha ~ Gam(c0, d0); q(w, tau) q(alpha).

    Returns w, V (so that q(w | tau) = N(w, V / tau)), invV, logdetV, an, bn, E_a and L as MATLAB does.
    Note: the returned ``invV`` was built with ``E_a_used`` (the alpha mean *before* the last q(alpha)
    update); the returned ``E_a`` is the mean *after* it (= cn/dn), exactly as in MATLAB.
    """
    return _linear_fit(X, y, a0, b0, c0, d0, ard=False, max_iter=max_iter, on_decrease=on_decrease)


def vb_linear_fit_ard(X, y, a0=1e-2, b0=1e-4, c0=1e-2, d0=1e-4, *, max_iter=MAX_ITER, on_decrease="raise"):
    """VB linear regression with ARD, one alpha_i per weight (VBLinLogit ``vb_linear_fit_ard.m``).

    Same as :func:`vb_linear_fit` except cn = c0 + 1/2, dn and E_a are D-vectors, V^{-1} = diag(E_a) + X'X
    and the bound's alpha terms are summed over the D hyper-posteriors (eq. 33).
    """
    return _linear_fit(X, y, a0, b0, c0, d0, ard=True, max_iter=max_iter, on_decrease=on_decrease)


def vb_linear_pred(X, w, V, an, bn):
    """Student-t predictive (eq. 23), as ``vb_linear_pred.m``: returns (mu, lambda, nu).

    mu = X w, lambda = (an/bn) / (1 + x'Vx) per row (a precision), nu = 2 an.
    """
    X = _design(X)
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    V = np.asarray(V, dtype=np.float64)
    mu = X @ w
    lam = (an / bn) / (1.0 + np.sum(X * (X @ V), axis=1))
    nu = 2.0 * an
    return mu, lam, nu


def linear_bound_components(X, y, w, V, an, bn, cn, dn, a0=1e-2, b0=1e-4, c0=1e-2, d0=1e-4):
    """The full variational bound of the linear model, term by term, from first principles (eqs. 16-21, 33).

    q(w, tau) = N(w | w_N, V_N / tau) Gam(tau | an, bn); q(alpha) = prod_k Gam(alpha_k | cn, dn_k), with
    ``dn`` a scalar (one shared alpha) or a D-vector (ARD). Valid for *any* such q: no optimality of the
    parameters is assumed, so comparing ``total`` with a fit's ``L`` checks the simplification (22)/(33).
    Returns a dict with the five terms of eq. (16) and their sum ``total``.
    """
    X = _design(X)
    N, D = X.shape
    y = _column(y, N)
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    V = np.asarray(V, dtype=np.float64)
    dn = np.atleast_1d(np.asarray(dn, dtype=np.float64))
    ard = dn.size > 1  # with D = 1 the shared and ARD forms coincide

    E_tau = an / bn
    E_log_tau = digamma(an) - np.log(bn)
    E_alpha = cn / dn
    E_log_alpha = digamma(cn) - np.log(dn)

    # E[ln p(y | X, w, tau)]: E[tau (y - w'x)^2] = E[tau] (y - w_N'x)^2 + x'V x
    resid = y - X @ w
    xVx = np.einsum("nd,de,ne->n", X, V, X)
    E_loglik = 0.5 * N * (E_log_tau - _LOG_2PI) - 0.5 * float(np.sum(E_tau * resid**2 + xVx))

    # E[ln p(w, tau | alpha)] = E[ln N(w | 0, (tau A)^-1)] + E[ln Gam(tau | a0, b0)]
    E_tau_w2 = E_tau * w**2 + np.diag(V)  # E[tau w_i^2]
    if ard:
        E_log_N = 0.5 * float(np.sum(E_log_tau + E_log_alpha - _LOG_2PI)) - 0.5 * float(
            np.sum(E_alpha * E_tau_w2)
        )
    else:
        E_log_N = 0.5 * D * (E_log_tau + E_log_alpha[0] - _LOG_2PI) - 0.5 * E_alpha[0] * float(
            np.sum(E_tau_w2)
        )
    E_log_gam_tau = a0 * np.log(b0) - gammaln(a0) + (a0 - 1.0) * E_log_tau - b0 * E_tau
    E_logprior_wtau = E_log_N + E_log_gam_tau

    # E[ln p(alpha)]
    E_logprior_alpha = float(np.sum(c0 * np.log(d0) - gammaln(c0) + (c0 - 1.0) * E_log_alpha - d0 * E_alpha))

    # entropies: H[q(w, tau)] = H[Gam(an, bn)] + E_tau H[N(w_N, V/tau)]
    sign, logdet_V = np.linalg.slogdet(V)
    if sign <= 0:
        raise ValueError("V is not positive definite")
    H_tau = an - np.log(bn) + gammaln(an) + (1.0 - an) * digamma(an)
    H_w_given_tau = 0.5 * D * (1.0 + _LOG_2PI) + 0.5 * logdet_V - 0.5 * D * E_log_tau
    H_wtau = H_tau + H_w_given_tau
    H_alpha = float(np.sum(cn - np.log(dn) + gammaln(cn) + (1.0 - cn) * digamma(cn)))

    total = E_loglik + E_logprior_wtau + E_logprior_alpha + H_wtau + H_alpha
    return {
        "E_loglik": E_loglik,
        "E_logprior_wtau": E_logprior_wtau,
        "E_logprior_alpha": E_logprior_alpha,
        "entropy_wtau": H_wtau,
        "entropy_alpha": H_alpha,
        "total": total,
    }


# ----------------------------------------------------------------------------------------------------
# logistic regression (the paper's §3): Jaakkola-Jordan bound, q(w) q(alpha)
# ----------------------------------------------------------------------------------------------------


def _logit_fit(X, y, a0, b0, ard: bool, max_iter: int) -> FitResult:
    X = _design(X)
    N, D = X.shape
    y = _column(y, N)  # VBLinLogit expects labels in {-1, +1}; they are used as given

    an = a0 + (0.5 if ard else 0.5 * D)
    n_alpha = D if ard else 1
    K_gammaln_an_an = n_alpha * (gammaln(an) + an)
    t_w = 0.5 * np.sum(X * y[:, None], axis=0)  # sum_n y_n x_n / 2

    def precision(E_a, lam):
        prior_prec = np.diag(E_a) if ard else E_a * np.eye(D)
        return prior_prec + 2.0 * (X.T @ (X * lam[:, None]))

    def alpha_rate(w, V):
        if ard:
            return b0 + 0.5 * (w**2 + np.diag(V))
        return b0 + 0.5 * (float(w @ w) + float(np.trace(V)))

    # pass 0 (before the loop): xi = 0 (lambda = 1/8), E[alpha] = prior mean a0/b0
    lam = np.full(N, 0.125)
    E_a = np.full(D, a0 / b0) if ard else a0 / b0
    invV = precision(E_a, lam)
    V = np.linalg.inv(invV)
    w = V @ t_w
    bn = alpha_rate(w, V)
    # bound at xi = 0 with q(alpha) = Gam(an, bn): sum_n(ln sigma(0)) = -N ln 2
    L0_raw = (
        -N * np.log(2.0)
        + 0.5 * (float(w @ invV @ w) - _logdet_pd(invV))
        - float(np.sum(b0 * an / np.atleast_1d(bn)))
        - float(np.sum(an * np.log(bn)))
        + K_gammaln_an_an
    )

    L_prev = L0_raw
    L_raw_trace: list[float] = []
    stopped_by = "max_iter"
    xi = np.zeros(N)
    for _ in range(max_iter):
        # 1) xi from the previous q(w) (eq. 63)
        xi = np.sqrt(np.sum(X * (X @ (V + np.outer(w, w))), axis=1))
        lam = jj_lambda(xi)
        # 2) q(alpha) from the previous q(w) (eqs. 52-55)
        bn = alpha_rate(w, V)
        E_a = an / bn
        # 3) q(w) from the new xi and E[alpha] (eqs. 49-50)
        invV = precision(E_a, lam)
        V = np.linalg.inv(invV)
        logdetV = -_logdet_pd(invV)
        w = V @ t_w

        # bound without the constant -ln Gamma(a0) + a0 ln b0 (per alpha): eq. (62)
        L_raw = (
            -float(np.sum(_softplus_neg(xi)))
            + float(np.sum(lam * xi**2))
            + 0.5 * (float(w @ invV @ w) + logdetV - float(np.sum(xi)))
            - float(np.sum(b0 * np.atleast_1d(E_a)))
            - float(np.sum(an * np.log(bn)))
            + K_gammaln_an_an
        )
        L_raw_trace.append(L_raw)

        if L_prev > L_raw:
            stopped_by = "bound_decrease"
            break
        if _is_converged(L_prev, L_raw):
            stopped_by = "converged"
            break
        L_prev = L_raw

    const = -n_alpha * (gammaln(a0) - a0 * np.log(b0))
    return FitResult(
        w=w,
        V=V,
        invV=invV,
        logdetV=logdetV,
        E_a=E_a,
        L=L_raw_trace[-1] + const,
        n_iter=len(L_raw_trace),
        reached_max_iter=(len(L_raw_trace) == max_iter),
        stopped_by=stopped_by,
        L_trace=[v + const for v in L_raw_trace],
        L_raw_trace=L_raw_trace,
        L0=L0_raw + const,
        L0_raw=L0_raw,
        L_const=const,
        an=an,
        bn=bn,
        xi=xi,
        lam_xi=lam,
    )


def vb_logit_fit(X, y, a0=1e-2, b0=1e-4, *, max_iter=MAX_ITER):
    """VB logistic regression with a shared shrinkage prior (VBLinLogit ``vb_logit_fit.m``).

    Model: p(y_n | x_n, w) = sigma(y_n w'x_n) with y_n in {-1, +1}; w ~ N(0, alpha^-1 I), alpha ~ Gam(a0, b0);
    q(w) = N(w, V), q(alpha) = Gam(an, bn), JJ bound with one xi per datum.
    Returns w, V, invV, logdetV, E_a (= an/bn, the value used in invV) and L as MATLAB does, plus
    diagnostics (``xi`` used for the returned q(w), ``bn``, traces, ``stopped_by``).
    """
    return _logit_fit(X, y, a0, b0, ard=False, max_iter=max_iter)


def vb_logit_fit_ard(X, y, a0=1e-2, b0=1e-4, *, max_iter=MAX_ITER):
    """VB logistic regression with ARD (VBLinLogit ``vb_logit_fit_ard.m``).

    As :func:`vb_logit_fit` but one alpha_i per weight: an = a0 + 1/2, bn and E_a are D-vectors.
    """
    return _logit_fit(X, y, a0, b0, ard=True, max_iter=max_iter)


def logit_bound_components(X, y, w, V, an, bn, xi, a0=1e-2, b0=1e-4):
    """The JJ variational bound L~(Q, xi) of the logistic model, term by term (eqs. 46, 56-61).

    q(w) = N(w, V); q(alpha) = prod_k Gam(alpha_k | an, bn_k) with ``bn`` a scalar (shared) or a D-vector
    (ARD); labels y in {-1, +1}. No optimality of q or xi is assumed.
    """
    X = _design(X)
    N, D = X.shape
    y = _column(y, N)
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    V = np.asarray(V, dtype=np.float64)
    xi = np.asarray(xi, dtype=np.float64).reshape(-1)
    bn = np.atleast_1d(np.asarray(bn, dtype=np.float64))
    ard = bn.size > 1

    lam = jj_lambda(xi)
    m = X @ w
    E_z2 = np.einsum("nd,de,ne->n", X, V, X) + m**2  # E[(w'x_n)^2]
    log_sig_xi = -np.logaddexp(0.0, -xi)
    E_log_h = float(np.sum(0.5 * y * m - lam * E_z2 + log_sig_xi - 0.5 * xi + lam * xi**2))

    E_alpha = an / bn
    E_log_alpha = digamma(an) - np.log(bn)
    E_w2 = w**2 + np.diag(V)
    if ard:
        E_logprior_w = 0.5 * float(np.sum(E_log_alpha - _LOG_2PI)) - 0.5 * float(np.sum(E_alpha * E_w2))
    else:
        E_logprior_w = 0.5 * D * (E_log_alpha[0] - _LOG_2PI) - 0.5 * E_alpha[0] * float(np.sum(E_w2))
    E_logprior_alpha = float(np.sum(a0 * np.log(b0) - gammaln(a0) + (a0 - 1.0) * E_log_alpha - b0 * E_alpha))
    sign, logdet_V = np.linalg.slogdet(V)
    if sign <= 0:
        raise ValueError("V is not positive definite")
    H_w = 0.5 * D * (1.0 + _LOG_2PI) + 0.5 * logdet_V
    H_alpha = float(np.sum(an - np.log(bn) + gammaln(an) + (1.0 - an) * digamma(an)))
    total = E_log_h + E_logprior_w + E_logprior_alpha + H_w + H_alpha
    return {
        "E_log_h": E_log_h,
        "E_logprior_w": E_logprior_w,
        "E_logprior_alpha": E_logprior_alpha,
        "entropy_w": H_w,
        "entropy_alpha": H_alpha,
        "total": total,
    }


def vb_logit_fit_iter(X, y, *, max_iter=MAX_ITER):
    """Sequential (one datum at a time) VB logistic regression without hyper-prior (``vb_logit_fit_iter.m``).

    Prior w ~ N(0, I/D). For each datum in order, xi_n is iterated (from xi = 0) with rank-one updates of the
    current posterior; the inner stopping rule is the same 0.001 % rule on the per-datum bound
    0.5 (ln|V_xi| + w'V_xi^-1 w - xi) - ln(1 + e^-xi) + lambda xi^2 (which includes ln|V_xi|); a decrease
    raises. Returns w, V, invV, logdetV (MATLAB returns only these) and ``n_iter`` per datum.
    """
    X = _design(X)
    N, D = X.shape
    y = _column(y, N)

    V = np.eye(D) / D
    invV = np.eye(D) * D
    logdetV = -D * np.log(D)
    w = np.zeros(D)
    n_iters = []
    for n in range(N):
        x = X[n]
        Vx = V @ x
        VxVx = np.outer(Vx, Vx)
        c = float(x @ Vx)
        xx = np.outer(x, x)
        t_w = invV @ w + 0.5 * y[n] * x

        # xi = 0 start
        V_xi = V - VxVx / (4.0 + c)
        invV_xi = invV + xx / 4.0
        logdetV_xi = logdetV - np.log(1.0 + c / 4.0)
        w = V_xi @ t_w
        L_prev = 0.5 * (logdetV_xi + float(w @ invV_xi @ w)) - np.log(2.0)

        it = 0
        for it in range(1, max_iter + 1):
            xi = np.sqrt(float(x @ (V_xi + np.outer(w, w)) @ x))
            lam = float(jj_lambda(xi))
            V_xi = V - (2.0 * lam / (1.0 + 2.0 * lam * c)) * VxVx
            invV_xi = invV + 2.0 * lam * xx
            logdetV_xi = logdetV - np.log(1.0 + 2.0 * lam * c)
            w = V_xi @ t_w
            L = 0.5 * (logdetV_xi + float(w @ invV_xi @ w) - xi) - np.log(1.0 + np.exp(-xi)) + lam * xi**2
            if L_prev > L:
                raise BoundDecreaseError(f"bound decreased for datum {n} at iteration {it}")
            if _is_converged(L_prev, L):
                break
            L_prev = L
        n_iters.append(it)
        V, invV, logdetV = V_xi, invV_xi, logdetV_xi
    return FitResult(w=w, V=V, invV=invV, logdetV=logdetV, n_iter=n_iters)


def vb_logit_pred(X, w, V, invV, *, max_iter=MAX_ITER, full=False):
    """Predictive p(y = 1 | x) for each row of X (``vb_logit_pred.m``, eqs. 65-68), vectorised.

    One xi per row, all rows iterated *together*: the stopping rule is applied to the sum over rows of
    0.5 (ln|V~|/|V| + w~'V~^-1 w~ - xi) - ln(1 + e^-xi) + lambda xi^2 (the -w'V^-1 w/2 constant excluded),
    from the xi = 0 start; a decrease raises. With ``full=True`` returns a FitResult with ``out``, ``xi``
    and ``n_iter``; otherwise the probability vector.
    """
    X = _design(X)
    N, Dx = X.shape
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    V = np.asarray(V, dtype=np.float64)
    invV = np.asarray(invV, dtype=np.float64)

    w_t = (w @ invV)[None, :] + 0.5 * X  # rows: (V^-1 w + x/2)'
    Vx = X @ V  # rows: x'V
    VxxVwt = Vx * np.sum(w_t * Vx, axis=1)[:, None]  # rows: (V x x'V w_t)'
    Vwt = w_t @ V  # rows: (V w_t)'
    xVx = np.sum(Vx * X, axis=1)
    xVx2 = xVx**2
    proj = lambda wx: np.sum(wx * X, axis=1)  # noqa: E731

    xi = np.zeros(N)
    lam = jj_lambda(xi)
    a_xi = 1.0 / (4.0 + xVx)
    w_xi = Vwt - a_xi[:, None] * VxxVwt
    logdetV_xi = -np.log(1.0 + xVx / 4.0)
    wVw_xi = np.sum(w_xi * (w_xi @ invV), axis=1) + proj(w_xi) ** 2 / 4.0
    L_prev = 0.5 * (float(np.sum(logdetV_xi)) + float(np.sum(wVw_xi))) - N * np.log(2.0)

    it = 0
    for it in range(1, max_iter + 1):
        xi = np.sqrt(xVx - a_xi * xVx2 + proj(w_xi) ** 2)
        lam = jj_lambda(xi)
        a_xi = 2.0 * lam / (1.0 + 2.0 * lam * xVx)
        w_xi = Vwt - a_xi[:, None] * VxxVwt
        logdetV_xi = -np.log(1.0 + 2.0 * lam * xVx)
        wVw_xi = np.sum(w_xi * (w_xi @ invV), axis=1) + 2.0 * lam * proj(w_xi) ** 2
        L = float(np.sum(0.5 * (logdetV_xi + wVw_xi - xi) - _softplus_neg(xi) + lam * xi**2))
        if L_prev > L:
            raise BoundDecreaseError(f"predictive bound decreased at iteration {it}")
        if _is_converged(L_prev, L):
            break
        L_prev = L

    wVw = float(w @ invV @ w)
    out = (
        1.0
        / (1.0 + np.exp(-xi))
        / np.sqrt(1.0 + 2.0 * lam * xVx)
        * np.exp(0.5 * (-xi - wVw + wVw_xi) + lam * xi**2)
    )
    if full:
        return FitResult(out=out, xi=xi, n_iter=it)
    return out


def vb_logit_pred_incr(X, w, V, invV, *, max_iter=MAX_ITER, full=False):
    """Predictive p(y = 1 | x), one row at a time (``vb_logit_pred_incr.m``).

    Same fixed point as :func:`vb_logit_pred`, but each row's xi has its own stopping test, applied to
    0.5 (ln|V~|/|V| + w~'V~^-1 w~ - xi) - ln(1 + e^-xi) + lambda xi^2 for that row.
    """
    X = _design(X)
    N = X.shape[0]
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    V = np.asarray(V, dtype=np.float64)
    invV = np.asarray(invV, dtype=np.float64)
    wVw = float(w @ invV @ w)
    out = np.zeros(N)
    xis = np.zeros(N)
    n_iters = []
    for n in range(N):
        x = X[n]
        Vx = V @ x
        VxVx = np.outer(Vx, Vx)
        c = float(x @ Vx)
        xx = np.outer(x, x)
        t_w = invV @ w + 0.5 * x

        V_xi = V - VxVx / (4.0 + c)
        invV_xi = invV + xx / 4.0
        logdetV_xi = -np.log(1.0 + c / 4.0)
        w_xi = V_xi @ t_w
        L_prev = 0.5 * (logdetV_xi + float(w_xi @ invV_xi @ w_xi)) - np.log(2.0)

        xi, lam, it = 0.0, 0.125, 0
        for it in range(1, max_iter + 1):
            xi = np.sqrt(float(x @ (V_xi + np.outer(w_xi, w_xi)) @ x))
            lam = float(jj_lambda(xi))
            V_xi = V - (2.0 * lam / (1.0 + 2.0 * lam * c)) * VxVx
            invV_xi = invV + 2.0 * lam * xx
            logdetV_xi = -np.log(1.0 + 2.0 * lam * c)
            w_xi = V_xi @ t_w
            L = (
                0.5 * (logdetV_xi + float(w_xi @ invV_xi @ w_xi) - xi)
                - np.log(1.0 + np.exp(-xi))
                + lam * xi**2
            )
            if L_prev > L:
                raise BoundDecreaseError(f"predictive bound decreased for row {n} at iteration {it}")
            if _is_converged(L_prev, L):
                break
            L_prev = L
        out[n] = (
            1.0
            / (1.0 + np.exp(-xi))
            / np.sqrt(1.0 + 2.0 * lam * c)
            * np.exp(-0.5 * xi + lam * xi**2 - 0.5 * wVw + 0.5 * float(w_xi @ invV_xi @ w_xi))
        )
        xis[n] = xi
        n_iters.append(it)
    if full:
        return FitResult(out=out, xi=xis, n_iter=n_iters)
    return out
