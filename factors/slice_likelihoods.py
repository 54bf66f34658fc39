"""Non-conjugate likelihoods of a Gaussian under Gibbs sampling: their "gibbs" rule sends nothing.

A factor whose log-density is not linear in its Gaussian argument's statistics (a log-link Poisson, a
logit-link binomial, a probit, Laplace, Cauchy or Student-t site) gives that argument no conditional in its
family.  Under ``fg.Gibbs`` the argument's parents are drawn by elliptical slice sampling instead (Murray, Adams &
MacKay 2010; ``schedules.gibbs_slice``): their Gaussian prior is the sum of every other message (so these
factors' "gibbs" rule is the zero message) and the factors enter through log f at the current point (their
exact evidence under point statistics).  ``SLICED`` maps each such factor type to its Gaussian edge.

Likewise a scale's prior (``SCALE_PRIORS``: ``fg.half_normal``, ``fg.half_cauchy``, ``fg.half_student_t``,
``fg.exponential``, ``fg.uniform_scale``) sends nothing under Gibbs sampling: the scale is drawn by slice sampling
in log σ with the prior's density evaluated there (``schedules.gibbs_scale``).
"""

from __future__ import annotations

import numpy as np

from .base import Moments
from .binomial import BINOMIAL_LOGIT
from .poisson import POISSON_LOG
from .scale_priors import SCALE_PRIOR
from .scale_sigma import SCALE_SIGMA
from .sites import CAUCHY_SITE, LAPLACE_SITE, PROBIT, STUDENT_T_SITE
from .uniform_scale import UNIFORM_SCALE

SLICED = {POISSON_LOG: "log_rate", BINOMIAL_LOGIT: "logit", LAPLACE_SITE: "x", CAUCHY_SITE: "x",
          STUDENT_T_SITE: "x", PROBIT: "x"}


def no_message(edge: str):
    """The zero Gaussian message along ``edge`` (the likelihood is sampled, not sent)."""

    def rule(m: Moments, p: dict) -> tuple:
        shape = np.broadcast_shapes(np.shape(m[edge][0]), np.shape(m["out"][0]))
        return (np.zeros(shape), np.zeros(shape))

    rule.__name__ = rule.__qualname__ = f"no_message_{edge}"
    return rule


for _ftype, _edge in SLICED.items():
    for _method in sorted({k[2] for k in _ftype.rules() if k[0] == _edge}):
        _ftype.rule(_edge, "gibbs", _method)(no_message(_edge))


SCALE_PRIORS = (SCALE_PRIOR, UNIFORM_SCALE, SCALE_SIGMA)  # a scale's prior factor: over σ⁻², truncated σ⁻², or σ


def _no_scale_message(m: Moments, p: dict) -> tuple:
    """The zero message to a scale over σ⁻² (its prior is evaluated by the slice sampler, not sent)."""
    z = np.zeros(np.shape(p["upper"] if "upper" in p else p["p0"]))
    return (z, z)


for _ftype in (SCALE_PRIOR, UNIFORM_SCALE):
    _ftype.rule("out", "gibbs")(_no_scale_message)


def scale_base(params: dict, shape: tuple) -> dict:
    """A scale prior's density h(σ) in the form of ``distributions.TiltedScale``'s base measure
    ({"prior", "p0", "p1", "const"}) from its factor's parameters, broadcast to the variable's ``shape``."""
    if "base" in params:  # already on σ (fg.half_cauchy used as a term of a product)
        base = params["base"]
    elif "upper" in params:  # fg.uniform_scale: h(σ) = 1/U on (0, U)
        u = np.asarray(params["upper"], float)
        base = {"prior": "uniform", "p0": u, "p1": np.zeros_like(u), "const": -np.log(u)}
    else:
        base = params
    return {"prior": base["prior"], **{k: np.broadcast_to(np.asarray(base[k], float), shape)
                                       for k in ("p0", "p1", "const")}}
