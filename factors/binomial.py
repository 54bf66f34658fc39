"""Binomial factors on observed counts y of n trials (n a factor parameter, aligned to its plates):

``Binomial`` — conjugate, with a Beta (or constant, or gated) probability p:
    E[log f] = log C(n, y) + y E[log p] + (n − y) E[log(1 − p)];  to p: (y, n − y).

``BinomialLogit`` — a Gaussian logit x (p = σ(x)), non-conjugate:
    log f = log C(n, y) + y·x − n log(1 + eˣ),
so with q(x) = N(m, v), S = y·m − n·E[log(1 + eˣ)] + log C(n, y), the logistic factor's expectation
scaled by n.  The three methods of ``BernoulliLogit`` carry over: ``"quadrature"`` (exact, NCVMP),
``"tilted"`` (Saul & Jordan's bound, NCVMP) and ``"quadratic"`` (Jaakkola & Jordan's bound, conjugate:
message precision 2nλ(ξ), precision·mean y − n/2, ξ = √E[x²] set when the message is sent).
"""

from __future__ import annotations

import numpy as np

from distributions import Beta, Binomial, Gaussian

from .base import FactorType, Moments, same_stats
from .contract import lazy_sum, plate_product
from .kernels import jj_lambda, log1pexp, logistic_expectations, tilted_logistic_bound
from .logistic import gradient_message

BINOMIAL = FactorType("Binomial", out=Binomial, probs=Beta)
BINOMIAL_LOGIT = FactorType("BinomialLogit", conjugate=False, out=Binomial, logit=Gaussian)


@BINOMIAL.rule("probs", "vmp")
def binomial_to_probs(m: Moments, p: dict) -> tuple:
    y = m["out"][0]
    n = p["trials"]
    # not broadcast to the probabilities' plates (a singleton axis stands for a repeated value)
    return (np.asarray(y, dtype=float), np.asarray(n - y, dtype=float))


@BINOMIAL.evidence(kind="exact")
def binomial_evidence(m: Moments, p: dict) -> np.ndarray:
    y = m["out"][0]
    lp, l1p = m["probs"]
    # y (lp − l1p) + n l1p, kept factored where rows and a gate's components are on different plates
    return lazy_sum(plate_product(y, lp - l1p), plate_product(p["trials"], l1p), p["log_coef"])


def _mv(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    ex, ex2 = m["logit"]
    return ex, np.maximum(ex2 - ex * ex, 0.0)


def _cached(p: dict, m: Moments, kernel, tag: str):
    stats = m["logit"]
    state = p.setdefault("state", {})
    hit = state.get(tag)
    if hit is not None and same_stats(hit[0], stats):
        return hit[1]
    mean, var = _mv(m)
    out = (mean, var, kernel(mean, var))
    state[tag] = (stats, out)
    return out


@BINOMIAL_LOGIT.rule("logit", "ncvmp", "quadrature")
def binomial_logit_quadrature(m: Moments, p: dict) -> tuple:
    mean, _, (_, e_sig, half_e_sig2) = _cached(p, m, logistic_expectations, "quadrature")
    n = p["trials"]
    return gradient_message(mean, m["out"][0] - n * e_sig, -n * half_e_sig2)


@BINOMIAL_LOGIT.evidence("quadrature", kind="exact")
def binomial_logit_quadrature_evidence(m: Moments, p: dict) -> np.ndarray:
    mean, _, (value, _, _) = _cached(p, m, logistic_expectations, "quadrature")
    return p["log_coef"] + m["out"][0] * mean - p["trials"] * value


@BINOMIAL_LOGIT.initial("logit", "quadrature")
@BINOMIAL_LOGIT.initial("logit", "tilted")
def binomial_logit_first(m: Moments, p: dict) -> tuple:
    """NCVMP's first message: the Jaakkola–Jordan bound at ξ = 0 (precision n/4, precision·mean y − n/2),
    as for the Bernoulli logit."""
    y, n = m["out"][0], p["trials"]
    shape = np.broadcast_shapes(np.shape(y), np.shape(n), np.shape(m["logit"][0]))
    return (np.broadcast_to(y - 0.5 * n, shape), np.broadcast_to(-0.125 * n, shape))


@BINOMIAL_LOGIT.rule("logit", "ncvmp", "tilted")
def binomial_logit_tilted(m: Moments, p: dict) -> tuple:
    mean, _, (_, dm, dv, _) = _cached(p, m, tilted_logistic_bound, "tilted")
    n = p["trials"]
    return gradient_message(mean, m["out"][0] - n * dm, -n * dv)


@BINOMIAL_LOGIT.evidence("tilted", kind="bound")
def binomial_logit_tilted_evidence(m: Moments, p: dict) -> np.ndarray:
    mean, _, (value, _, _, _) = _cached(p, m, tilted_logistic_bound, "tilted")
    return p["log_coef"] + m["out"][0] * mean - p["trials"] * value


@BINOMIAL_LOGIT.rule("logit", "vmp", "quadratic")
def binomial_logit_quadratic(m: Moments, p: dict) -> tuple:
    state = p.setdefault("state", {})
    if "xi" in state or p.get("xi0") is None:
        xi = np.sqrt(np.maximum(m["logit"][1], 0.0))
    else:
        xi = np.broadcast_to(np.asarray(p["xi0"], dtype=float), m["logit"][0].shape)
    state["xi"] = xi
    n = p["trials"]
    lam = n * jj_lambda(xi)
    shape = np.broadcast_shapes(lam.shape, np.shape(m["out"][0]))
    return (np.broadcast_to(m["out"][0] - 0.5 * n, shape), np.broadcast_to(-lam, shape))


@BINOMIAL_LOGIT.evidence("quadratic", kind="bound")
def binomial_logit_quadratic_evidence(m: Moments, p: dict) -> np.ndarray:
    """log C(n, y) + y·E[x] − n[log(1 + e^ξ) + (E[x] − ξ)/2 + λ(ξ)(E[x²] − ξ²)] at the stored ξ."""
    ex, ex2 = m["logit"]
    xi = p.get("state", {}).get("xi")
    if xi is None:
        xi = np.sqrt(np.maximum(ex2, 0.0))
    bound = log1pexp(xi) + 0.5 * (ex - xi) + jj_lambda(xi) * (ex2 - xi * xi)
    return p["log_coef"] + m["out"][0] * ex - p["trials"] * bound


def _rows(a, u: np.ndarray):
    a = np.asarray(a)
    if a.ndim and a.size == u.shape[-1] and a.shape[-1] != u.shape[-1]:
        return a.reshape(-1)
    return a


@BINOMIAL_LOGIT.point("logit")
def binomial_logit_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f = log C(n, y) + y·u − n log(1 + eᵘ), (log f)′ = y − nσ(u), (log f)″ = −nσ(u)σ(−u)."""
    y = m["out"][0]
    n, lc = _rows(p["trials"], u), _rows(p["log_coef"], u)
    sig = 0.5 * (1.0 + np.tanh(0.5 * u))
    return lc + y * u - n * log1pexp(u), y - n * sig, -n * sig * (1.0 - sig)
