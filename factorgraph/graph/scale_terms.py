"""A scale variable as a term of a sum or product (the non-centred ``theta = mu + tau * eta``): its q over σ itself.

A scale made by ``fg.half_normal``, ``fg.half_cauchy``, ``fg.half_student_t``, ``fg.exponential`` or
``fg.uniform_scale`` (``scales.py``) is a Gamma over the precision σ⁻² while it serves as an ``sd=``.  The first
expression that takes it as an operand (``expressions.py``) turns it into a variable over σ, whose posterior is
its prior tilted by the Gaussian messages of the terms, q(σ) ∝ p(σ) exp(η₁σ + η₂σ²) (``distributions.TiltedScale``).
"""

from __future__ import annotations

import numpy as np

from distributions import Gaussian
from factorgraph.graph.nodes import Gate, ModelError, Variable
from factors.scale_sigma import SCALE_SIGMA


def on_sigma(var: Variable, what: str) -> Variable:
    """Make a scale variable a variable over σ itself, for use in a sum or product (θ = μ + τ·η).

    Until then it is a Gamma over σ⁻² (the ``sd=`` of Gaussian terms).  Here its posterior becomes the prior
    tilted by the Gaussian messages of the terms it enters, q(σ) ∝ p(σ) exp(η₁σ + η₂σ²)
    (``distributions.TiltedScale``), and its prior factor sends nothing (``factors.scale_sigma``).  A scale
    can be one or the other, not both: refused when it is already some factor's ``sd=``.
    """
    if var.base is not None:
        return var
    users = [f.name for f in var.model.factors if f is not var.prior and any(
        (e.source if isinstance(e, Gate) else getattr(e, "source", e)) is var for e in f.edges.values())]
    if users:
        raise ModelError(f"{what}: {var.name!r} is already the sd= of {users[0]!r}; a scale variable is either an "
                         "sd= (inference works with its precision) or a term of a sum or product (inference works "
                         "with σ itself), not both")
    p = var.prior.params
    shape = var.shape
    if var.scale_prior == "uniform":
        upper = np.broadcast_to(p["upper"], shape)
        base = {"prior": "uniform", "p0": upper, "p1": np.zeros(shape), "const": -np.log(upper)}
        s0 = upper
    else:
        base = {"prior": p["prior"], **{k: np.broadcast_to(np.asarray(p[k], float), shape).copy()
                                         for k in ("p0", "p1", "const")}}
        s0 = np.broadcast_to(np.asarray(p["s0"], float), shape)
    var.family, var.lower, var.base = Gaussian, None, base
    var.prior.ftype = SCALE_SIGMA
    var.prior.name = f"{SCALE_SIGMA.name}({var.name})"
    var.prior.params = {"base": base, "s0": np.array(s0, float), "kind": var.scale_prior}
    return var
