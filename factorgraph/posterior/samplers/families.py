"""Forward samplers of the count, ordinal and heteroscedastic families:

* ``NegativeBinomialLog`` (and ``…Gamma``, φ a draw): y ~ Poisson(λ), λ ~ Gamma(φ, rate φ/μ), μ = e·exp(x)
  (NB2: mean μ, variance μ + μ²/φ);
* ``ZeroInflatedPoissonLog`` (and ``…Beta``, p a draw; ``ZeroInflatedPoisson[Beta]`` at λ = the Gamma rate): y = 0
  with probability p, else y ~ Poisson(e·exp(x));
* ``OrderedLogistic``, ``OrderedProbit``: y = the number of cutpoints below η + ε, ε logistic or standard normal;
* ``GaussianLogSd``: y ~ N(μ, e^(2s)); ``GaussianLogNormalSd``: y ~ N(μ, σ²), σ a log-normal draw;
* ``LogNormal``: x = exp(μ + τ^(−½)ε), ε ~ N(0, 1).
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, sampler


def _param(f: FactorNode, key: str, full: tuple[int, ...], default: float = 0.0) -> np.ndarray:
    return np.broadcast_to(np.asarray(f.params.get(key, default), float), full)


@sampler("NegativeBinomialLog", "NegativeBinomialLogGamma")
def _negative_binomial(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                       full: tuple[int, ...]) -> None:
    mu = np.broadcast_to(np.exp(s.arg(f.edges["log_mean"], frame, v.name) + _param(f, "log_exposure", full)), full)
    phi = (np.broadcast_to(s.arg(f.edges["dispersion"], frame, v.name), full) if "dispersion" in f.edges
           else _param(f, "dispersion", full))
    lam = s.rng.gamma(phi, mu / phi)
    s.put(v, s.rng.poisson(lam).astype(float), full)


@sampler("ZeroInflatedPoissonLog", "ZeroInflatedPoissonLogBeta", "ZeroInflatedPoisson", "ZeroInflatedPoissonBeta")
def _zero_inflated(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    rate = (np.exp(s.arg(f.edges["log_rate"], frame, v.name)) if "log_rate" in f.edges
            else s.arg(f.edges["rate"], frame, v.name))
    mu = np.broadcast_to(rate * np.exp(_param(f, "log_exposure", full)), full)
    p = s.arg(f.edges["zero_prob"], frame, v.name) if "zero_prob" in f.edges else _param(f, "zero_prob", full)
    zero = s.rng.random(full) < np.broadcast_to(p, full)
    s.put(v, np.where(zero, 0.0, s.rng.poisson(mu)).astype(float), full)


def _ordered(noise: str):
    def draw(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
        eta = np.broadcast_to(s.arg(f.edges["eta"], frame, v.name), full)
        eps = s.rng.logistic(size=full) if noise == "logistic" else s.rng.standard_normal(full)
        cuts = np.asarray(f.params["cuts"])[1:-1]
        s.put(v, np.searchsorted(cuts, eta + eps).astype(float), full)

    return draw


sampler("OrderedLogistic")(_ordered("logistic"))
sampler("OrderedProbit")(_ordered("normal"))


@sampler("GaussianLogSd")
def _gaussian_log_sd(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    mu = s.arg(f.edges["mean"], frame, v.name)
    sd = np.exp(s.arg(f.edges["log_sd"], frame, v.name))
    s.put(v, np.broadcast_to(mu + sd * s.rng.standard_normal(full), full), full)


@sampler("GaussianLogNormalSd")
def _gaussian_lognormal_sd(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                           full: tuple[int, ...]) -> None:
    mu = s.arg(f.edges["mean"], frame, v.name)
    sd = s.arg(f.edges["log_sd"], frame, v.name)
    s.put(v, np.broadcast_to(mu + sd * s.rng.standard_normal(full), full), full)


@sampler("LogNormal")
def _lognormal(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    mu = s.arg(f.edges["mu"], frame, v.name)
    tau = s.arg(f.edges["precision"], frame, v.name)
    s.put(v, np.broadcast_to(np.exp(mu + s.rng.standard_normal(full) / np.sqrt(tau)), full), full)
