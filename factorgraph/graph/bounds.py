"""The softmax factor's bounds on E[log Σ_k exp x_k] as plain functions, and a Monte Carlo reference.

For x_k ~ N(m_k, v_k) independent, ``fg.softmax_bound(m, v, method)`` gives the value that the softmax factor
(``fg.categorical_softmax(..., method=...)``) uses for E[lse(x)], lse(x) = log Σ_k e^{x_k}; every method but
``"taylor"`` is an upper bound (Knowles & Minka 2011, §4 and Fig. 2; Blei & Lafferty 2007; Bouchard 2007;
Böhning 1992).  ``fg.expected_log_sum_exp`` estimates the exact value to compare with.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError
from factors.kernels import (
    adaptive_softmax_bound,
    bohning_softmax_bound,
    bouchard_softmax_bound,
    log_softmax_bound,
    lse_expectation_mc,
    taylor_softmax_approx,
    tilted_softmax_bound,
)

_METHODS = {"tilted": tilted_softmax_bound, "log": log_softmax_bound, "quadratic": bouchard_softmax_bound,
            "bohning": bohning_softmax_bound, "taylor": taylor_softmax_approx, "adaptive": adaptive_softmax_bound}


def _mean_var(mean: Any, var: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    m = checks.constant(mean, f"{what}: mean")
    v = checks.nonnegative(var, f"{what}: var")
    try:
        m, v = np.broadcast_arrays(np.atleast_1d(m), v)
    except ValueError:
        raise ModelError(f"{what}: mean of shape {np.shape(mean)} and var of shape {np.shape(var)} do not "
                         "broadcast") from None
    if m.shape[-1] < 2:
        raise ModelError(f"{what}: the last axis holds the K ≥ 2 classes, got shape {m.shape}")
    return np.ascontiguousarray(m, dtype=float), np.ascontiguousarray(v, dtype=float)


def softmax_bound(mean: Any, var: Any, method: str = "tilted") -> np.ndarray:
    r"""The softmax factor's value for E[lse(x)], x_k ~ N(m_k, v_k), over the last axis (K classes).

    Methods (upper bounds unless said otherwise):

    * ``"tilted"``: min_a ½Σ_k a_k²v_k + log Σ_k exp(m_k + (1 − 2a_k)v_k/2) (Knowles & Minka 2011, eq. 12);
    * ``"log"``: log Σ_k exp(m_k + v_k/2) (Blei & Lafferty 2007), the tilted bound at a = 0;
    * ``"quadratic"``: Bouchard's bound (2007) at its optimal α and ξ;
    * ``"bohning"``: lse(m) + ¼(1 − 1/K)Σ_k v_k (Böhning 1992);
    * ``"adaptive"``: per row the smaller of the quadratic and the tilted bounds;
    * ``"taylor"``: lse(m) + ½Σ_k v_k s_k(1 − s_k), s = softmax(m): **not a bound**.

    Parameters
    ----------
    mean, var : array_like, shape (..., K)
        Means and variances (≥ 0), broadcast against each other; leading axes are batch axes.
    method : str

    Returns
    -------
    ndarray, shape (...)
    """
    if method not in _METHODS:
        raise ModelError(f"softmax_bound: method must be one of {sorted(_METHODS)}, got {method!r}")
    m, v = _mean_var(mean, var, "softmax_bound")
    return np.asarray(_METHODS[method](m, v)[0])


def expected_log_sum_exp(mean: Any, var: Any, n_samples: int = 100_000, seed: Any = 0
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo estimate of E[lse(x)], x_k ~ N(m_k, v_k), and its standard error, per row.

    ``n_samples`` evaluations of lse per row, as antithetic pairs m ± √v⊙ε with the second-order Taylor
    polynomial at m as a control variate (its expectation is known), so the error shrinks like v² rather than
    √v; the same draws ε serve every row (common random numbers).  ``seed``: an int or a numpy Generator.

    Parameters
    ----------
    mean, var : array_like, shape (Q, K) (or (K,))

    Returns
    -------
    estimate, standard_error : ndarray, shape (Q,) (or scalars' 0-d arrays for one row)
    """
    m, v = _mean_var(mean, var, "expected_log_sum_exp")
    n = checks.positive_int(n_samples, "expected_log_sum_exp: n_samples")
    if n < 4:
        raise ModelError(f"expected_log_sum_exp: n_samples must be at least 4, got {n_samples!r}")
    if isinstance(seed, np.random.Generator):
        rng = seed
    elif isinstance(seed, int | np.integer) and not isinstance(seed, bool) and seed >= 0:
        rng = np.random.default_rng(int(seed))
    else:
        raise ModelError(f"expected_log_sum_exp: seed must be a non-negative int or a numpy Generator, got {seed!r}")
    lead = m.shape[:-1]
    est, se = lse_expectation_mc(m.reshape(-1, m.shape[-1]), v.reshape(-1, m.shape[-1]), n, rng)
    return est.reshape(lead), se.reshape(lead)
