"""Non-conjugate likelihoods of a Gaussian under Gibbs sampling: their "gibbs" rule sends nothing.

A factor whose log-density is not linear in its Gaussian argument's statistics (a log-link Poisson, a
logit-link binomial, a probit, Laplace, Cauchy or Student-t site) gives that argument no conditional in its
family.  Under ``fg.Gibbs`` the argument's parents are drawn by elliptical slice sampling instead (Murray, Adams &
MacKay 2010; ``schedules.gibbs_slice``): their Gaussian prior is the sum of every other message (so these
factors' "gibbs" rule is the zero message) and the factors enter through log f at the current point (their
exact evidence under point statistics).  ``SLICED`` maps each such factor type to its Gaussian edge.
"""

from __future__ import annotations

import numpy as np

from .base import Moments
from .binomial import BINOMIAL_LOGIT
from .poisson import POISSON_LOG
from .sites import CAUCHY_SITE, LAPLACE_SITE, PROBIT, STUDENT_T_SITE

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
