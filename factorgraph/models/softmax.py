"""Multinomial (softmax) regression: a canned model over ``fg.categorical_softmax``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.builders import gaussian, mv_gaussian, plate
from factorgraph.graph.expressions import feature_names, inner, label_features
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.graph.nonconjugate import categorical_softmax
from factorgraph.models.regression import _input_scale, _new_inputs, _posterior, _reemit
from factorgraph.posterior.results import Result
from factors.kernels import softmax
from schedules import NCVMP, infer
from schedules.shift import ClassShift


def softmax_regression_model(X: Any, y: Any, n_classes: int, method: str = "tilted",
                             prior_precision: float = 1.0) -> Model:
    """Multinomial regression (Knowles & Minka 2011 §5): g_kn = w_kᵀx_n + m_k with W_kd ~ N(0, 1),
    m_k ~ N(0, 1) (precision ``prior_precision``), y_n ~ Categorical(softmax(g_:n)).

    The softmax is unchanged by adding one vector v to every w_k and one number c to every m_k, so the sweeps
    alone move that common part only by the prior's pull, slower the more rows there are; every sweep ends with
    the shift that maximises the bound, v = −(1/K) Σ_k E[w_k], c = −(1/K) Σ_k E[m_k] (``schedules.shift``), which
    leaves the fixed point where it was.  Dask X and y shard the rows (the shift runs on the driver)."""

    Xa = checks.constant(X, "X")
    if Xa.ndim != 2:
        raise ModelError(f"X must be a matrix (N, D), got shape {Xa.shape}")
    N, D = Xa.shape
    if isinstance(n_classes, bool) or not isinstance(n_classes, int | np.integer) or n_classes < 2:
        raise ModelError(f"n_classes must be an integer ≥ 2, got {n_classes!r}")
    with Model("softmax_regression") as m:
        n, k = plate("n", N), plate("k", int(n_classes))
        W = mv_gaussian("W", mean=0.0, precision=prior_precision, plates=[k], dim=D)
        b = gaussian("b", mean=0.0, precision=prior_precision, plates=[k])
        categorical_softmax("y", logits=inner(Xa, W, plates=[n]) + b, over=k, observed=y, method=method)
    m.sweep_hooks.append(ClassShift(("W", "b")))  # the softmax's common shift, moved to its optimum each sweep
    label_features(m, feature_names(X), "W_dim_0")
    return m


def softmax_regression(X: Any, y: Any, n_classes: int, method: str = "tilted", prior_precision: float = 1.0,
                       **infer_options: Any) -> Result:
    """Fit ``softmax_regression_model`` with NCVMP (options go to ``fg.infer``)."""

    m = softmax_regression_model(X, y, n_classes, method, prior_precision)
    infer_options.setdefault("algorithm", NCVMP(damping=0.5 if method == "taylor" else 0.0))
    infer_options.setdefault("max_iter", 500)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = infer(m, **infer_options)
    hint = ""
    if not r.converged:
        s = _input_scale(checks.constant(X, "X"), False, "auto")
        if not 1e-2 <= s <= 1e2:
            hint = (f"; the inputs are far from unit scale (mean square {s:.3g}), which makes NCVMP take tiny "
                    "damped steps: standardise X (zero mean, unit variance) and it usually converges quickly")
            r.warnings = [w + hint if w.startswith(f"{m.name}: not converged") else w for w in r.warnings]
    _reemit(caught, hint)
    return r


def softmax_predictive(result: Result, X_new: Any, n_samples: int = 2000, seed: int = 0) -> np.ndarray:
    """p(y = k | x) under q(W)q(b), by Monte Carlo over the Gaussian scores (seeded)."""

    W, b = _posterior(result, "W"), _posterior(result, "b")
    Xn = _new_inputs(X_new, W.mean().shape[-1])
    n_samples = checks.integer(n_samples, "n_samples", low=1, high=10**7)
    seed = checks.seed(seed)
    mean = Xn @ W.mean().T + b.mean()
    var = np.einsum("nd,kde,ne->nk", Xn, W.cov(), Xn) + b.var()
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n_samples,) + mean.shape)
    return softmax(mean + np.sqrt(var) * z).mean(0)
