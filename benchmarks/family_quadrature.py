"""Accuracy and cost of the quadratures behind the count and ordinal families, against ``scipy.integrate.quad``.

Cases (worst relative error of E_q[log f] over each grid, and milliseconds per 10 000 rows):

* **zero-inflated Poisson, zeros, Gaussian log-rate**: g(x) = log(p + (1 − p)exp(−eˣ)) under N(m, v), for
  p ∈ {1e-10, 1e-4, 0.01, 0.05, 0.6, 0.999}, m ∈ {−3, …, 8}, v ∈ {1e-6, …, 100}: the sinh-substituted trapezoid
  (the library's rule) beside Gauss–Hermite with 80 nodes (the rule it replaced), which loses accuracy once √v
  is not small against the distance π/log((1 − p)/p) of g's complex singularities from the real axis;
* **ordered probit**: log(Φ(hi − x) − Φ(lo − x)) for the lowest, a middle and the highest of 4 categories;
* **negative binomial, Gamma dispersion**: shapes a ∈ {0.5, 3, 200}, mean φ ∈ {0.3, 5}, counts {0, 4, 60};
* **zero-inflated Poisson, Gamma rate**: the zeros for p ∈ {1e-4, 0.3, 0.9}, a ∈ {0.5, 3, 200}.

Run ``python -m benchmarks.family_quadrature``.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import integrate, stats

from distributions import Gamma, Gaussian, Poisson
from factors.base import point_stats
from factors.kernels import normal_rule
from factors.negative_binomial_gamma import negative_binomial_gamma_evidence
from factors.ordinal import ordered_probit_evidence
from factors.zero_inflated import _zero_expectations, zero_log_density
from factors.zero_inflated_gamma import zero_inflated_rate_evidence


def _quad_normal(g, m, v):
    sd = np.sqrt(v)
    return integrate.quad(lambda x: g(x) * stats.norm.pdf(x, m, sd), m - 12 * sd, m + 12 * sd, epsabs=1e-13,
                          epsrel=1e-13, limit=400)[0]


def _quad_log_gamma(g, a, mean):
    """E[g(λ)] for λ ~ Gam(a, rate a/mean), integrated in u = log λ."""
    lo, hi = np.log(mean) - (80 / a + 20), np.log(stats.gamma.isf(1e-17, a, scale=mean / a))
    f = lambda u: g(np.exp(u)) * np.exp(stats.gamma.logpdf(np.exp(u), a, scale=mean / a) + u)  # noqa: E731
    return integrate.quad(f, lo, hi, epsabs=1e-13, epsrel=1e-13, limit=800, points=[np.log(mean)])[0]


def _rel(got, ref):
    return abs(got - ref) / max(1.0, abs(ref))


def zip_zeros() -> None:
    z, w = normal_rule(80)
    worst_st = worst_gh = 0.0
    for p in (1e-10, 1e-4, 0.01, 0.05, 0.6, 0.999):
        for m in (-3.0, -2.0, 0.0, 2.0, 4.0, 8.0):
            for v in (1e-6, 0.01, 0.3, 1.5, 3.0, 30.0, 100.0):
                ref = _quad_normal(lambda x, p=p: zero_log_density(x, p)[0], m, v)
                worst_st = max(worst_st, _rel(_zero_expectations(np.array(m), np.array(v), p, 0.0)[0], ref))
                worst_gh = max(worst_gh, _rel(zero_log_density(m + np.sqrt(v) * z, p)[0] @ w, ref))
    rng = np.random.default_rng(0)
    m, v = rng.normal(size=10_000), rng.uniform(0.01, 1.0, 10_000)
    t0 = time.perf_counter()
    _zero_expectations(m, v, 0.2, 0.0)
    ms = 1e3 * (time.perf_counter() - t0)
    print(f"zero-inflated zeros (Gaussian log-rate): sinh trapezoid worst rel. error {worst_st:.1e}; "
          f"Gauss-Hermite (80 nodes) {worst_gh:.1e}; {ms:.0f} ms per 10 000 rows")


def ordered_probit() -> None:
    cuts = np.array([-np.inf, -1.2, 0.1, 0.9, np.inf])
    worst = 0.0
    for y in (0, 1, 3):
        for m in (-4.0, -0.5, 0.4, 3.0):
            for v in (1e-4, 0.2, 1.5, 6.0):
                lo, hi = cuts[y], cuts[y + 1]
                ref = _quad_normal(lambda x, lo=lo, hi=hi: np.log(stats.norm.cdf(hi - x) - stats.norm.cdf(lo - x))
                                   if lo - x <= 0 else np.log(stats.norm.sf(lo - x) - stats.norm.sf(hi - x)), m, v)
                got = ordered_probit_evidence({"out": point_stats(Gaussian, np.array([float(y)])),
                                               "eta": Gaussian(mean=np.array([m]), var=np.array([v])).expected_stats()},
                                              {"cuts": cuts})[0]
                worst = max(worst, _rel(got, ref))
    print(f"ordered probit: worst rel. error {worst:.1e}")


def negative_binomial_gamma() -> None:
    t, wt = normal_rule(120)
    worst = 0.0
    for a in (0.5, 3.0, 200.0):
        for mean in (0.3, 5.0):
            for y in (0, 4, 60):
                m, v = 2.0, 0.8
                q = Gamma(shape=a, rate=a / mean)
                got = negative_binomial_gamma_evidence(
                    {"out": Poisson.observed_stats(np.array([y])),
                     "log_mean": Gaussian(mean=np.array([m]), var=np.array([v])).expected_stats(),
                     "dispersion": tuple(np.atleast_1d(s) for s in q.expected_stats())}, {})[0]

                def g(phi, y=y, m=m, v=v):
                    mu = np.exp(m + np.sqrt(v) * t)
                    return stats.nbinom.logpmf(y, phi, phi / (phi + mu)) @ wt

                worst = max(worst, _rel(got, _quad_log_gamma(g, a, mean)))
    print(f"negative binomial with a Gamma dispersion: worst rel. error {worst:.1e}")


def zip_gamma_rate() -> None:
    worst = 0.0
    for p in (1e-4, 0.3, 0.9):
        for a in (0.5, 3.0, 200.0):
            for mean in (0.2, 3.0, 30.0):
                q = Gamma(shape=a, rate=a / mean)
                got = zero_inflated_rate_evidence({"out": Poisson.observed_stats(np.array([0])),
                                                   "rate": tuple(np.atleast_1d(s) for s in q.expected_stats())},
                                                  {"zero_prob": p})[0]
                ref = _quad_log_gamma(lambda lam, p=p: np.logaddexp(np.log(p), np.log1p(-p) - lam), a, mean)
                worst = max(worst, _rel(got, ref))
    print(f"zero-inflated zeros (Gamma rate): worst rel. error {worst:.1e}")


if __name__ == "__main__":
    zip_zeros()
    ordered_probit()
    negative_binomial_gamma()
    zip_gamma_rate()
