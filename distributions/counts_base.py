"""Shared helpers of the count distributions (Poisson, Binomial, Multinomial): validation of counts and
E[log x!] under a binomial or Poisson law, which their entropies need."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from ._checks import _describe, as_array


def counts(owner: str, name: str, value) -> np.ndarray:
    """``value`` as a float array of non-negative integers."""
    a = as_array(owner, name, value)
    bad = (a < 0) | (a != np.round(a))
    if bad.any():
        raise ValueError(f"{owner}: {name} must be non-negative integers, got {_describe(a, bad)}")
    return a


def expected_log_factorial_binomial(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """E[log x!] for x ~ Binomial(n, p), summed exactly over x = 0..max n (broadcast)."""
    from scipy.stats import binom  # scipy.stats is slow to import: only when an entropy needs it

    n, p = np.broadcast_arrays(np.asarray(n, float), np.asarray(p, float))
    top = int(n.max(initial=0))
    x = np.arange(top + 1).reshape((-1,) + (1,) * n.ndim)
    w = np.where(x <= n, binom.pmf(x, n, p), 0.0)
    return (w * gammaln(x + 1.0)).sum(0)


def expected_log_factorial_poisson(lam: np.ndarray) -> np.ndarray:
    """E[log x!] for x ~ Poisson(λ), summed over x ≤ λ + 12√λ + 40 (the mass beyond is below 1e-20)."""
    from scipy.stats import poisson  # as above

    lam = np.asarray(lam, float)
    hi = float(lam.max(initial=0.0))
    top = int(hi + 12.0 * np.sqrt(hi) + 40.0)
    x = np.arange(top + 1).reshape((-1,) + (1,) * lam.ndim)
    return (poisson.pmf(x, lam) * gammaln(x + 1.0)).sum(0)
