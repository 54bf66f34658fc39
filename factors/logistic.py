"""Logistic factor f(s, x) = σ(x)^s (1 − σ(x))^(1−s), s ∈ {0, 1}, on a Gaussian logit x.

log f = s·x − log(1 + eˣ).  With q(x) = N(m, v), S = s·m − E[log(1 + eˣ)], and the message to x
is the gradient of S in x's mean parameters (E[x], E[x²]) (docs/maths.md §3):

    η₂ = ∂S/∂v,   η₁ = ∂S/∂m − 2m ∂S/∂v.

Methods for E[log(1 + eˣ)]:

* ``"quadrature"`` — exact (Gauss–Hermite and series kernels): NCVMP; the ELBO term is exact.
* ``"tilted"`` — Saul & Jordan's bound at its optimal a: NCVMP; the ELBO term is a lower bound.
* ``"quadratic"`` — Jaakkola & Jordan's bound, conjugate (VMP or NCVMP): message precision 2λ(ξ),
  precision·mean s − ½.  ξ is a variational parameter set to √E[x²] whenever the message is sent
  and kept in the factor's state, so the ELBO term is the bound at that ξ (as in Drugowitsch 2014
  §3); ``xi0`` in the factor parameters gives the ξ of the first message (Drugowitsch: 0).

To a latent label s the factor sends the logit E[x].
"""

from __future__ import annotations

import numpy as np

from distributions import Bernoulli, Gaussian

from .base import FactorType, Moments, same_stats
from .is_positive import ep_site_rule
from .kernels import bernoulli_logit_value_grad, jj_lambda, log1pexp, logistic_expectations, tilted_logistic_bound
from .kernels.ep_sites import SITE_LOGISTIC

BERNOULLI_LOGIT = FactorType("BernoulliLogit", conjugate=False, out=Bernoulli, logit=Gaussian)


def _mv(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    ex, ex2 = m["logit"]
    return ex, np.maximum(ex2 - ex * ex, 0.0)


def _cached(p: dict, m: Moments, kernel, tag: str):
    """Kernel output at the logit's current moments, reused while they are the same arrays: the ELBO
    after a sweep and the first message of the next sweep see the same moments."""
    stats = m["logit"]
    hit = p["state"].get(tag)
    if hit is not None and same_stats(hit[0], stats):
        return hit[1]
    mean, var = _mv(m)
    out = (mean, var, kernel(mean, var))
    p["state"][tag] = (stats, out)
    return out


def gradient_message(mean: np.ndarray, dS_dm: np.ndarray, dS_dv: np.ndarray) -> tuple:
    """Gaussian message (natural parameters) equal to ∂S/∂(E[x], E[x²])."""
    return (dS_dm - 2.0 * mean * dS_dv, dS_dv)


def _out(m: Moments, p: dict) -> tuple:
    return (m["logit"][0],)


for _method in ("quadrature", "tilted", "quadratic"):
    BERNOULLI_LOGIT.rule("out", "vmp", _method)(_out)


@BERNOULLI_LOGIT.rule("logit", "ncvmp", "quadrature")
def logit_quadrature(m: Moments, p: dict) -> tuple:
    mean, _, (_, e_sig, half_e_sig2) = _cached(p, m, logistic_expectations, "quadrature")
    return gradient_message(mean, m["out"][0] - e_sig, -half_e_sig2)


@BERNOULLI_LOGIT.evidence("quadrature", kind="exact")
def logit_quadrature_evidence(m: Moments, p: dict) -> np.ndarray:
    mean, _, (value, _, _) = _cached(p, m, logistic_expectations, "quadrature")
    return m["out"][0] * mean - value


@BERNOULLI_LOGIT.initial("logit", "quadrature")
@BERNOULLI_LOGIT.initial("logit", "tilted")
def logit_first(m: Moments, p: dict) -> tuple:
    """NCVMP's first message: the Jaakkola–Jordan bound at ξ = 0 (precision ¼, the largest σσ′ can be;
    precision·mean s − ½).  From the prior, the gradient message would need the kernel at large
    variances and overshoot on separable data; this conservative Newton step needs no kernel and
    starts the next sweeps near the posterior (N = 1e5, D = 20: 9 sweeps instead of 11, each cheap)."""
    s = m["out"][0]
    shape = np.broadcast_shapes(np.shape(s), np.shape(m["logit"][0]))
    return (np.broadcast_to(s - 0.5, shape), np.full(shape, -0.125))


@BERNOULLI_LOGIT.rule("logit", "ncvmp", "tilted")
def logit_tilted(m: Moments, p: dict) -> tuple:
    mean, _, (_, dm, dv, _) = _cached(p, m, tilted_logistic_bound, "tilted")
    return gradient_message(mean, m["out"][0] - dm, -dv)


@BERNOULLI_LOGIT.evidence("tilted", kind="bound")
def logit_tilted_evidence(m: Moments, p: dict) -> np.ndarray:
    mean, _, (value, _, _, _) = _cached(p, m, tilted_logistic_bound, "tilted")
    return m["out"][0] * mean - value


@BERNOULLI_LOGIT.rule("logit", "vmp", "quadratic")
def logit_quadratic(m: Moments, p: dict) -> tuple:
    state = p["state"]
    if "xi" in state or p.get("xi0") is None:
        xi = np.sqrt(np.maximum(m["logit"][1], 0.0))
    else:
        xi = np.broadcast_to(np.asarray(p["xi0"], dtype=float), m["logit"][0].shape)
    state["xi"] = xi
    lam = jj_lambda(xi)
    return (np.broadcast_to(m["out"][0] - 0.5, lam.shape), -lam)


@BERNOULLI_LOGIT.evidence("quadratic", kind="bound")
def logit_quadratic_evidence(m: Moments, p: dict) -> np.ndarray:
    """s·E[x] − [log(1 + e^ξ) + (E[x] − ξ)/2 + λ(ξ)(E[x²] − ξ²)] at the stored ξ."""
    ex, ex2 = m["logit"]
    xi = p["state"].get("xi")
    if xi is None:
        xi = np.sqrt(np.maximum(ex2, 0.0))
    bound = log1pexp(xi) + 0.5 * (ex - xi) + jj_lambda(xi) * (ex2 - xi * xi)
    return m["out"][0] * ex - bound


@BERNOULLI_LOGIT.point("logit")
def logit_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f = s·u − log(1 + eᵘ), (log f)′ = s − σ(u), (log f)″ = −σ(u)σ(−u)."""
    s = m["out"][0]
    if order < 2 and u.ndim == 2 and np.ndim(s) <= 1:  # many sampled weight vectors: one fused pass
        return (*bernoulli_logit_value_grad(u, s), None)
    sig = 0.5 * (1.0 + np.tanh(0.5 * u))
    return s * u - log1pexp(u), s - sig, -sig * (1.0 - sig)


def _logistic_ep_site(m: Moments, p: dict) -> tuple:
    """EP (every method): the tilted moments of σ(x)^s σ(−x)^(1−s) N(x; μ, v) by quadrature, s observed."""
    return SITE_LOGISTIC, m["out"][0], 0.0


logistic_ep = ep_site_rule(BERNOULLI_LOGIT, "logit", _logistic_ep_site, ("quadrature", "tilted", "quadratic"))
