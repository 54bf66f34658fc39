"""Forward samplers of the count families beyond the Poisson:

* ``NegativeBinomialLog``: y ~ Poisson(λ), λ ~ Gamma(φ, rate φ/μ), μ = e·exp(x) (NB2: mean μ, variance μ + μ²/φ);
* ``ZeroInflatedPoissonLog``: y = 0 with probability p, else y ~ Poisson(e·exp(x)).
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, sampler


def _param(f: FactorNode, key: str, full: tuple[int, ...], default: float = 0.0) -> np.ndarray:
    return np.broadcast_to(np.asarray(f.params.get(key, default), float), full)


@sampler("NegativeBinomialLog")
def _negative_binomial(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                       full: tuple[int, ...]) -> None:
    mu = np.broadcast_to(np.exp(s.arg(f.edges["log_mean"], frame, v.name) + _param(f, "log_exposure", full)), full)
    phi = _param(f, "dispersion", full)
    lam = s.rng.gamma(phi, mu / phi)
    s.put(v, s.rng.poisson(lam).astype(float), full)


@sampler("ZeroInflatedPoissonLog")
def _zero_inflated(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    mu = np.broadcast_to(np.exp(s.arg(f.edges["log_rate"], frame, v.name) + _param(f, "log_exposure", full)), full)
    zero = s.rng.random(full) < _param(f, "zero_prob", full)
    s.put(v, np.where(zero, 0.0, s.rng.poisson(mu)).astype(float), full)
