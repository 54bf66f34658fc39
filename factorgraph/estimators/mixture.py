"""scikit-learn estimator around ``models.gaussian_mixture``: ``VariationalGaussianMixture``.

It follows scikit-learn's conventions (``fit`` / ``predict`` / ``predict_proba`` / ``score`` /
``score_samples``), so it works in a ``Pipeline`` and in ``GridSearchCV`` (whose default score is the
mean log predictive density of the held-out rows)::

    from factorgraph.estimators import VariationalGaussianMixture

    gm = VariationalGaussianMixture(n_components=3, covariance_type="full").fit(X)
    labels, log_density = gm.predict(X_new), gm.score_samples(X_new)

scikit-learn is an optional dependency: ``pip install "fgvmp[sklearn]"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from factorgraph.estimators.regression import _Fitted, _run
from factorgraph.models import gaussian_mixtures as _gm


class VariationalGaussianMixture(DensityMixin, _Fitted, BaseEstimator):
    """The variational Bayesian Gaussian mixture (Bishop 2006 §10.2), fitted by variational message passing
    (``models.gaussian_mixture``).

    π ~ Dirichlet(α₀), z_n ~ Categorical(π), and per component either a normal–Wishart block
    (μ_k, Λ_k) with μ_k | Λ_k ~ N(m₀, (β₀Λ_k)⁻¹), Λ_k ~ Wishart(ν₀, V₀) (``covariance_type="full"``; the
    model of scikit-learn's ``BayesianGaussianMixture(weight_concentration_prior_type=
    "dirichlet_distribution")``), or per axis μ_kd ~ N(m₀_d, s_d²/β₀), τ_kd ~ Gamma(ν₀/2, ν₀s_d²/2)
    (``"diag"``).  x_n ~ N(μ_{z_n}, Λ_{z_n}⁻¹).

    ``predict_proba`` gives ``p(z = k | x*, X) ∝ E[π_k] p_k(x* | X)`` and ``score_samples`` the log posterior
    predictive density ``log p(x* | X) = log Σ_k E[π_k] p_k(x* | X)``, with p_k the component's predictive
    (a multivariate Student-t for "full"; see ``models.MixturePredictive``).

    NaN entries of X are missing values, in ``fit`` and in prediction alike: a row keeps the exact marginal
    density of its observed entries (integrated out, not imputed; for "full" the fit then runs NCVMP, see
    ``models.gaussian_mixture``), and the default V₀ is the pairwise-complete covariance.  scikit-learn's
    own ``BayesianGaussianMixture`` refuses NaN.

    Parameters
    ----------
    n_components
        The number of components K.
    covariance_type
        "full" or "diag".
    weight_concentration_prior
        α₀ of the symmetric Dirichlet on the weights.
    mean_precision_prior
        β₀.
    mean_prior
        m₀ (default: the data mean).
    degrees_of_freedom_prior
        ν₀ (default: the number of features D).
    covariance_prior
        V₀, the Wishart's inverse scale (default: the data covariance plus ``reg_covar``·I); for "diag" its
        diagonal is used.
    reg_covar
        Added to the diagonal of the default V₀, so that it is positive definite when the data covariance
        is singular (fewer rows than features, collinear or constant features).  Not used with an explicit
        ``covariance_prior``.
    n_init
        Fits from different k-means++ starts; the one with the highest ELBO is kept.
    max_iter, tol
        At most ``max_iter`` sweeps; stop when the ELBO changes by less than ``tol``·|ELBO|.
    random_state
        Seed of the k-means++ starts (an integer).

    Attributes
    ----------
    weights_ (K,), means_ (K, D)
        Posterior means of π and of the component means.
    precisions_, covariances_
        E[Λ_k] and its inverse: (K, D, D) for "full", (K, D) for "diag" (E[τ_kd] and 1/E[τ_kd]).
    evidence_, evidence_kind_
        The ELBO, a lower bound on log p(X) (``evidence_kind_`` says so).
    n_iter_, converged_, result_
        Sweeps run, whether the stopping rule was met, the full ``fg.Result``.
    """

    def __init__(self, n_components: int = 1, covariance_type: str = "full", *,
                 weight_concentration_prior: float = 1.0, mean_precision_prior: float = 1.0,
                 mean_prior: Any = None, degrees_of_freedom_prior: float | None = None,
                 covariance_prior: Any = None, reg_covar: float = 1e-6, n_init: int = 1, max_iter: int = 500,
                 tol: float = 1e-9,
                 random_state: int = 0):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.weight_concentration_prior = weight_concentration_prior
        self.mean_precision_prior = mean_precision_prior
        self.mean_prior = mean_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.covariance_prior = covariance_prior
        self.reg_covar = reg_covar
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(self, X: Any, y: Any = None) -> VariationalGaussianMixture:
        """Fit the mixture to the rows of X (``y`` is ignored)."""
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2, ensure_all_finite="allow-nan")
        seen = ~np.isnan(X)
        mask = None if seen.all() else seen
        if self.covariance_type not in ("full", "diag"):
            raise ValueError(f"covariance_type must be 'full' or 'diag', got {self.covariance_type!r}")
        K = int(self.n_components)
        if K < 1 or K > X.shape[0]:
            raise ValueError(f"n_components must be between 1 and n_samples = {X.shape[0]}, got {self.n_components}")
        scale = self.covariance_prior
        if scale is None:  # the data covariance (pairwise-complete with missing entries) plus reg_covar·I
            cov = np.atleast_2d(np.cov(X.T)) if mask is None else _gm._observed_covariance(
                np.where(seen, X, 0.0), seen, "full")
            scale = cov + float(self.reg_covar) * np.eye(X.shape[1])
        seed = self.random_state if self.random_state is not None else 0
        if not isinstance(seed, int | np.integer):
            raise ValueError(f"random_state must be an integer seed, got {seed!r}")
        r = _run(lambda: _gm.gaussian_mixture(
            X, K, self.covariance_type, n_init=self.n_init, seed=int(seed), max_iter=self.max_iter, tol=self.tol,
            concentration=self.weight_concentration_prior, mean_prior=self.mean_prior,
            beta=self.mean_precision_prior, dof=self.degrees_of_freedom_prior, scale=scale,
            mask=mask))
        self._store(r)
        self.weights_ = np.asarray(r.posterior("pi").mean()) if K > 1 else np.ones(1)
        if self.covariance_type == "full":
            q = r.posterior("theta")
            self.means_ = np.asarray(q.location).reshape(K, -1)
            self.precisions_ = (np.asarray(q.dof).reshape(K)[:, None, None]
                                * np.linalg.inv(np.asarray(q.scale).reshape(K, X.shape[1], X.shape[1])))
            self.covariances_ = np.linalg.inv(self.precisions_)
        else:
            self.means_ = np.asarray(r.posterior("mu").mean()).reshape(K, -1)
            self.precisions_ = np.asarray(r.posterior("tau").mean()).reshape(K, -1)
            self.covariances_ = 1.0 / self.precisions_
        return self

    def _component_log_density(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite="allow-nan")
        pred = _gm.mixture_predictive(self.result_, self.covariance_type)
        return pred.component_logpdf(X).reshape(X.shape[0], -1) + np.log(self.weights_)

    def score_samples(self, X: Any) -> np.ndarray:
        """log p(x* | X) of each row: the log posterior predictive density (of its observed entries, when some
        are NaN)."""
        from scipy.special import logsumexp

        return logsumexp(self._component_log_density(X), axis=1)  # −inf (not NaN) where every p_k underflows

    def score(self, X: Any, y: Any = None) -> float:
        """The mean log posterior predictive density of the rows of X."""
        return float(np.mean(self.score_samples(X)))

    def predict_proba(self, X: Any) -> np.ndarray:
        """``p(z = k | x*, X) ∝ E[π_k] p_k(x* | X)``, shape (n_samples, n_components)."""
        lc = self._component_log_density(X)
        p = np.exp(lc - lc.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """The most probable component of each row."""
        return np.argmax(self.predict_proba(X), axis=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN entries are missing values, marginalised exactly
        return tags

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X)`` then ``predict(X)``."""
        return self.fit(X).predict(X)


__all__ = ["VariationalGaussianMixture"]
