"""The Bayesian Gaussian mixture with full or diagonal covariances (Bishop 2006 §10.2): ``models.gaussian_mixture``.

``covariance="full"``: π ~ Dirichlet(α₀), z_n ~ Categorical(π), (μ_k, Λ_k) ~ NormalWishart(m₀, β₀, ν₀,
V₀) jointly (μ_k | Λ_k ~ N(m₀, (β₀Λ_k)⁻¹)), x_n ~ N(μ_{z_n}, Λ_{z_n}⁻¹).  This is the variational
model of scikit-learn's ``BayesianGaussianMixture(weight_concentration_prior_type=
"dirichlet_distribution")``, whose defaults are used here too: m₀ the data mean, β₀ = 1, ν₀ = D and
V₀ (the Wishart's inverse scale, scikit-learn's ``covariance_prior``) the data covariance.

``covariance="diag"``: the same with per-axis means μ_kd ~ N(m₀_d, s_d²/β₀) and precisions
τ_kd ~ Gamma(ν₀/2, ν₀ s_d²/2) (s_d² the data variance of axis d), mean field in (μ, τ).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp
from scipy.stats import gamma as gamma_dist

from factorgraph.graph import checks
from factorgraph.graph.builders import gamma, gaussian, mv_gaussian, plate
from factorgraph.graph.covariance import gaussian_wishart
from factorgraph.graph.discrete import categorical, dirichlet
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.models.starts import best_of_starts
from factorgraph.posterior.results import Result
from factors.data_products import computed

_LOG_PI = float(np.log(np.pi))
_LOG_2PI = float(np.log(2.0 * np.pi))


def _data(X: Any, mask: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """X as an (N, D) float matrix (0 at missing entries) and the per-entry mask (True = observed; None:
    all observed).  ``mask`` is (N,) for whole rows or (N, D) for single entries."""
    if mask is None:
        Xa = checks.constant(X, "X")
        if Xa.ndim != 2 or Xa.shape[0] < 2:
            raise ModelError(f"X must be a matrix (N, D) with N ≥ 2 rows, got shape {Xa.shape}")
        return Xa, None
    shape = np.shape(X)
    if len(shape) != 2 or shape[0] < 2:
        raise ModelError(f"X must be a matrix (N, D) with N ≥ 2 rows, got shape {shape}")
    m = checks.mask_array(mask, shape if np.ndim(mask) == 2 else shape[:1], "X")
    m = np.broadcast_to(m if m.ndim == 2 else m[:, None], shape)
    Xa = checks.constant(np.where(m, np.ma.getdata(X), 0.0), "the observed entries of X")
    few = np.flatnonzero(m.sum(0) < 2)
    if few.size:
        raise ModelError(f"X: column {int(few[0])} has {int(m[:, few[0]].sum())} observed entries under mask=; "
                         "the default priors need at least 2 per column")
    return Xa, m


def _observed_covariance(Xa: np.ndarray, seen: np.ndarray, covariance: str) -> np.ndarray:
    """The default V₀ under missing data: each column's variance over its observed entries on the diagonal
    ("diag"); for "full" the pairwise-complete covariance (entry (i, j) over the rows where both columns are
    observed, about their observed means), or its diagonal when that matrix is not positive definite (few
    rows observed together).  Divisors are (number of rows used) − 1.  With whole rows missing both are the
    covariance of the observed rows."""
    m = seen.astype(float)
    n = m.sum(0)
    centred = np.where(seen, Xa - Xa.sum(0) / n, 0.0)
    if covariance == "diag":
        return np.diag((centred**2).sum(0) / (n - 1))
    pairs = m.T @ m
    if (pairs < 2).any():
        i, j = (int(a) for a in np.argwhere(pairs < 2)[0])
        raise ModelError(f"X: columns {i} and {j} are observed together in {int(pairs[i, j])} rows under mask=; the "
                         "default scale (their covariance) needs at least 2: pass scale=")
    cov = (centred.T @ centred) / (pairs - 1)
    if np.linalg.eigvalsh(cov)[0] > 1e-12 * np.abs(np.diagonal(cov)).max():
        return cov
    return np.diag(np.diagonal(cov))


def gaussian_mixture_model(X: Any, K: int, covariance: str = "full", *, concentration: float = 1.0,
                           mean_prior: Any = None, beta: float = 1.0, dof: float | None = None,
                           scale: Any = None, mask: Any = None) -> Model:
    """The model of ``gaussian_mixture``, for use with ``fg.infer`` or ``fg.compare``.

    Variables: ``pi`` (Dirichlet weights), ``z`` (labels, plate ``n``), and ``theta`` (normal–Wishart
    blocks, plate ``k``) for ``covariance="full"`` or ``mu``/``tau`` (plates ``k``, ``d``) for "diag";
    the data are ``x``.  With K = 1 there are no labels.  ``scale`` is the Wishart's inverse scale V₀
    (default: the data covariance); for "diag" its diagonal (or a vector) is used.

    ``mask`` (True = observed) marks missing data, (N,) for whole rows or (N, D) for single entries;
    missing entries drop out of the likelihood (marginalised exactly, so a missing row gives the fit
    without it).  Under ``covariance="full"`` a row with some entries missing keeps the marginal density of
    its observed entries, whose message to the normal–Wishart block is non-conjugate: the fit then runs
    NCVMP (``factors.mv_gaussian_wishart_missing``).  The default m₀ and V₀ are then the mean and
    covariance of the observed data: each column's observed mean, and for V₀ the pairwise-complete
    covariance (its diagonal when that is not positive definite; "diag": each column's observed variance).
    """
    Xa, seen = _data(X, mask)
    N, D = Xa.shape
    K = checks.positive_int(K, "K")
    if covariance not in ("full", "diag"):
        raise ModelError(f"covariance must be 'full' or 'diag', got {covariance!r}")
    if seen is None:
        m0 = Xa.mean(0) if mean_prior is None else checks.constant(mean_prior, "mean_prior")
        v0 = np.atleast_2d(np.cov(Xa.T)) if scale is None else checks.constant(scale, "scale")
        m0, v0 = computed(m0, v0)  # dask data: the column means and covariance in one pass over the chunks
    else:
        m0 = (Xa.sum(0) / seen.sum(0)) if mean_prior is None else checks.constant(mean_prior, "mean_prior")
        v0 = _observed_covariance(Xa, seen, covariance) if scale is None else checks.constant(scale, "scale")
    nu0 = float(D) if dof is None else float(dof)
    if scale is None:
        lo = float(np.linalg.eigvalsh(v0)[0]) if covariance == "full" else float(np.diagonal(v0).min())
        if not lo > 0:
            raise ModelError(f"'X': the default scale (V₀ = the data covariance of X, {N} rows × {D} features) is "
                             f"singular (smallest {'eigenvalue' if covariance == 'full' else 'variance'} {lo!r}): "
                             "collinear or constant features, or fewer rows than features; pass scale= (for "
                             "example the data covariance plus a small multiple of the identity)")
    if (covariance == "diag" and v0.ndim == 1 and v0.shape != (D,)) or (v0.ndim == 2 and v0.shape != (D, D)):
        want = f"a ({D},) vector or a ({D}, {D}) matrix" if covariance == "diag" else f"a ({D}, {D}) matrix"
        raise ModelError(f"'scale' must be {want} for X with {D} features, got shape {v0.shape}")
    with Model(f"gaussian_mixture_{covariance}_K{K}") as m:
        n = plate("n", N)
        k = plate("k", K)
        z = None
        if K > 1:
            pi = dirichlet("pi", np.full(K, float(concentration)))
            z = categorical("z", pi, plates=[n], categories=k)
        if covariance == "full":
            theta = gaussian_wishart("theta", mean=m0, beta=beta, dof=nu0, scale=v0, plates=[k])
            mv_gaussian("x", theta[z] if z is not None else theta, plates=[n],
                        observed=Xa if z is not None else Xa[:, None, :],
                        mask=seen if z is not None or seen is None else seen[:, None, :])
        else:
            d = plate("d", D)
            s2 = np.diagonal(v0) if v0.ndim == 2 else np.broadcast_to(v0, (D,))
            mu = gaussian("mu", mean=m0, precision=beta / s2, plates=[k, d])
            tau = gamma("tau", shape=0.5 * nu0, rate=0.5 * nu0 * s2, plates=[k, d])
            if z is not None:
                gaussian("x", mean=mu[z], precision=tau[z], plates=[n, d], observed=Xa, mask=seen)
            else:
                gaussian("x", mean=mu, precision=tau, plates=[n, k, d], observed=Xa[:, None, :],
                         mask=None if seen is None else seen[:, None, :])
    return m


def gaussian_mixture(X: Any, K: int, covariance: str = "full", *, n_init: int = 4, seed: int | None = 0,
                     max_iter: int = 500, tol: float = 1e-9, mask: Any = None, **priors: Any) -> Result:
    """Fit a Bayesian Gaussian mixture with K components by variational message passing.

    The components share one prior, so the labels are exchangeable and VB finds local optima that differ in
    where the responsibilities start (a k-means++ seeding of the data; a missing entry stands at its column's
    observed mean): the fit is run from ``n_init`` starts (seeds ``seed``, ``seed + 1``, …) and the one with
    the highest ELBO is returned, with a note in ``Result.notes`` giving every start's bound
    (``factorgraph.models.starts``); ``n_init=1`` runs the single start ``seed``.  ``mask`` (True = observed;
    (N,) rows or (N, D) entries) marks missing data, and ``priors`` go to ``gaussian_mixture_model``.  Use
    ``mixture_predictive`` for the posterior predictive density.
    """

    model = gaussian_mixture_model(X, K, covariance, mask=mask, **priors)
    return best_of_starts(model, n_init, seed, "gaussian_mixture", max_iter=max_iter, tol=tol)


class MixturePredictive:
    """The posterior predictive density p(x* | X) = Σ_k E[π_k] p_k(x*) of a fitted Gaussian mixture.

    Full covariance: p_k is the multivariate Student-t St(x | m_k, L_k, ν_k + 1 − D) with
    L_k = (ν_k + 1 − D)β_k/(1 + β_k)·V_k⁻¹ (Bishop 2006, eq. 10.81–10.82), exact under q.  Diagonal:
    p_k = Π_d E_q[N(x_d | μ_kd, τ_kd⁻¹)] = Π_d E_{q(τ)}[N(x_d | m_kd, s_kd² + τ_kd⁻¹)], the expectation
    over the Gamma q(τ_kd) by Gauss–Legendre quadrature on its quantiles (64 nodes).
    """

    def __init__(self, result: Result, covariance: str) -> None:
        self.covariance = covariance
        self.weights = np.asarray(result.posterior("pi").mean()) if "pi" in result.posteriors else np.ones(1)
        if covariance == "full":
            q = result.posterior("theta")
            D = q.dim
            self.dof = q.dof + 1.0 - D
            self.location = q.location
            w = np.linalg.inv(q.scale)
            self.scale_precision = (self.dof * q.beta / (1.0 + q.beta))[..., None, None] * w
        else:
            self.mu, self.tau = result.posterior("mu"), result.posterior("tau")

    def component_logpdf(self, x: Any) -> np.ndarray:
        """log p_k(x*), shape (M, K) for x of shape (M, D).  NaN entries are missing: a row's density is then the
        marginal of its observed coordinates o (for "full" a Student-t with the same dof, location m_o and the
        o-block of the scale matrix; for "diag" the product over the observed axes); a row with nothing observed
        has density 1."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        seen = ~np.isnan(x)
        if self.covariance == "full":
            if seen.all():
                return self._t_logpdf(x, np.linalg.slogdet(self.scale_precision)[1], self.scale_precision,
                                      x.shape[-1])
            return self._t_marginal_logpdf(x, seen)

        u, w = np.polynomial.legendre.leggauss(64)
        u, w = 0.5 * (u + 1.0), 0.5 * w
        a, b = self.tau.shape, self.tau.rate
        taus = gamma_dist.ppf(u[:, None, None], a, scale=1.0 / b)  # (Q, K, D)
        m, s2 = self.mu.mean(), self.mu.var()
        var = s2 + 1.0 / taus
        xs = np.where(seen, x, 0.0)
        # log Σ_q w_q N(x | m, s² + 1/τ_q) in log space: far from a component the density underflows to 0
        log_dens = -0.5 * (xs[:, None, None, :] - m) ** 2 / var - 0.5 * np.log(var) - 0.5 * _LOG_2PI
        log_mix = logsumexp(log_dens + np.log(w)[:, None, None], axis=1)  # (M, K, D)
        return np.where(seen[:, None, :], log_mix, 0.0).sum(-1)

    def _t_logpdf(self, x: np.ndarray, logdet: np.ndarray, L: np.ndarray, D) -> np.ndarray:
        """log St(x | m_k, L_k, ν_k) of complete rows, (M, K)."""
        nu = self.dof
        r = x[:, None, :] - self.location
        quad = np.einsum("mki,kij,mkj->mk", r, L, r)
        return (gammaln(0.5 * (nu + D)) - gammaln(0.5 * nu) - 0.5 * D * (np.log(nu) + _LOG_PI)
                + 0.5 * logdet - 0.5 * (nu + D) * np.log1p(quad / nu))

    def _t_marginal_logpdf(self, x: np.ndarray, seen: np.ndarray) -> np.ndarray:
        """log St(x_o | m_k,o, ((L_k⁻¹)_oo)⁻¹, ν_k) per row, over each row's observed coordinates o, (M, K).

        One batched inverse per (missingness pattern, component): with O = diag(o) and S = L⁻¹ (the scale
        matrix's inverse), M = O S O + (I − O) has inverse ((S_oo)⁻¹ ⊕ I) and log|M| = log|S_oo|, so the
        quadratic form and log-determinant of the o-block come out in D × D with no per-row loop."""
        patterns, index = np.unique(seen, axis=0, return_inverse=True)
        index = index.reshape(-1)
        D = x.shape[-1]
        O = patterns.astype(float)[:, None, :]  # (P, 1, D)
        S = np.linalg.inv(self.scale_precision)  # (K, D, D)
        M = O[..., :, None] * S[None] * O[..., None, :] + np.eye(D) * (1.0 - O[..., None, :])  # (P, K, D, D)
        A = O[..., :, None] * np.linalg.inv(M) * O[..., None, :]  # (S_oo)⁻¹ embedded
        ld = -np.linalg.slogdet(M)[1]  # log|(S_oo)⁻¹|
        r_dim = patterns.sum(-1)[index][:, None].astype(float)  # (M, 1) observed coordinates per row
        nu = self.dof
        res = np.where(seen[:, None, :], x[:, None, :] - self.location, 0.0)  # (M, K, D)
        quad = np.einsum("mki,mkij,mkj->mk", res, A[index], res)
        out = (gammaln(0.5 * (nu + r_dim)) - gammaln(0.5 * nu) - 0.5 * r_dim * (np.log(nu) + _LOG_PI)
               + 0.5 * ld[index] - 0.5 * (nu + r_dim) * np.log1p(quad / nu))
        return np.where(r_dim > 0, out, 0.0)

    def logpdf(self, x: Any) -> np.ndarray:
        """log p(x* | X), shape (M,)."""
        lc = self.component_logpdf(x) + np.log(self.weights)
        top = lc.max(-1, keepdims=True)
        return (top + np.log(np.exp(lc - top).sum(-1, keepdims=True)))[..., 0]

    def pdf(self, x: Any) -> np.ndarray:
        return np.exp(self.logpdf(x))


def mixture_predictive(result: Result, covariance: str = "full") -> MixturePredictive:
    """The posterior predictive density of a ``gaussian_mixture`` fit (see ``MixturePredictive``)."""
    return MixturePredictive(result, covariance)


__all__ = ["MixturePredictive", "gaussian_mixture", "gaussian_mixture_model", "mixture_predictive"]
