"""Pointwise log densities of the count, ordinal and heteroscedastic families (negative binomial, zero-inflated
Poisson, ordered logistic and probit, the Gaussian with a random log sd, the log-normal) at parameter draws, for
``loglik._LOGPDF`` (LOO and WAIC)."""

from __future__ import annotations

import numpy as np

from factorgraph.posterior.samplers.forward import Forward
from factors.lognormal import lognormal_logpdf
from factors.negative_binomial import negative_binomial_logpdf
from factors.ordinal import interval, ordered_logistic_log_density, ordered_probit_log_density
from factors.zero_inflated import zero_inflated_logpdf


def _fparam(f, v, arr):
    """A per-row constant on the factor's plates → the observed variable's plates (as ``loglik._fparam``)."""
    arr = np.asarray(arr, float)
    if arr.ndim < len(f.plates):
        return arr
    return arr[tuple(slice(None) if p in v.plates else 0 for p in f.plates)]


def _negative_binomial(s: Forward, v, f, frame, y):
    x = s.arg(f.edges["log_mean"], frame, v.name)
    phi = s.arg(f.edges["dispersion"], frame, v.name) if "dispersion" in f.edges else \
        _fparam(f, v, f.params["dispersion"])
    return negative_binomial_logpdf(y, x, phi,
                                    _fparam(f, v, f.params.get("log_exposure", 0.0)))


def _zero_inflated(s: Forward, v, f, frame, y):
    x = s.arg(f.edges["log_rate"], frame, v.name)
    return zero_inflated_logpdf(y, x, _fparam(f, v, f.params["zero_prob"]),
                                _fparam(f, v, f.params.get("log_exposure", 0.0)))


def _ordered(log_density):
    def lp(s: Forward, v, f, frame, y):
        lo, hi = interval(np.nan_to_num(y), f.params["cuts"])
        return log_density(s.arg(f.edges["eta"], frame, v.name), lo, hi)[0]

    return lp


def _gaussian_log_sd(s: Forward, v, f, frame, y):
    mu = s.arg(f.edges["mean"], frame, v.name)
    ls = s.arg(f.edges["log_sd"], frame, v.name)
    return -0.5 * np.log(2.0 * np.pi) - ls - 0.5 * (y - mu) ** 2 * np.exp(-2.0 * ls)


def _gaussian_lognormal_sd(s: Forward, v, f, frame, y):
    mu = s.arg(f.edges["mean"], frame, v.name)
    sd = s.arg(f.edges["log_sd"], frame, v.name)  # the log-normal σ itself
    return -0.5 * np.log(2.0 * np.pi) - np.log(sd) - 0.5 * ((y - mu) / sd) ** 2


def _lognormal(s: Forward, v, f, frame, y):
    return lognormal_logpdf(y, s.arg(f.edges["mu"], frame, v.name), s.arg(f.edges["precision"], frame, v.name))


def _zero_inflated_beta(s: Forward, v, f, frame, y):
    x = s.arg(f.edges["log_rate"], frame, v.name)
    return zero_inflated_logpdf(y, x, s.arg(f.edges["zero_prob"], frame, v.name),
                                _fparam(f, v, f.params.get("log_exposure", 0.0)))


def _zero_inflated_rate(s: Forward, v, f, frame, y):
    with np.errstate(divide="ignore"):
        x = np.log(s.arg(f.edges["rate"], frame, v.name))
    p = s.arg(f.edges["zero_prob"], frame, v.name) if "zero_prob" in f.edges else _fparam(f, v, f.params["zero_prob"])
    return zero_inflated_logpdf(y, x, p, _fparam(f, v, f.params.get("log_exposure", 0.0)))


FAMILY_LOGPDF = {"ZeroInflatedPoissonLogBeta": _zero_inflated_beta, "ZeroInflatedPoisson": _zero_inflated_rate,
                 "ZeroInflatedPoissonBeta": _zero_inflated_rate, "NegativeBinomialLogGamma": _negative_binomial,
                 "GaussianLogSd": _gaussian_log_sd, "GaussianLogNormalSd": _gaussian_lognormal_sd,
                 "LogNormal": _lognormal,
                 "NegativeBinomialLog": _negative_binomial, "ZeroInflatedPoissonLog": _zero_inflated,
                 "OrderedLogistic": _ordered(ordered_logistic_log_density),
                 "OrderedProbit": _ordered(ordered_probit_log_density)}
