"""Checks of a scale argument: ``sd=`` (a positive constant, or a scale variable σ made by ``fg.half_normal`` and
the like, possibly gated or indexed) and a ``precision=`` or rate that must not be such a σ (``not_a_scale``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.checks.arrays import _describe, positive
from factorgraph.graph.nodes import Gate, Indexed, ModelError, Node


def sd_as_precision(sd: Any, precision: Any, variance: Any, name: str, variance_name: str = "variance") -> Any:
    """The precision that ``sd=`` stands for: 1/sd² for a positive constant, the variable itself for a
    scale made by fg.half_normal, fg.half_cauchy, fg.half_student_t or fg.exponential (which is a Gamma over
    the precision σ⁻²), or such a scale gated (``sigma[z]``) or indexed by labels (``sigma[g]``)."""
    if precision is not None or variance is not None:
        other = "precision" if precision is not None else variance_name
        given = precision if precision is not None else variance
        raise ModelError(f"{name!r}: give sd= or {other}=, not both (got sd={_describe(sd)} and "
                         f"{other}={_describe(given)})")
    if isinstance(sd, Gate) and isinstance(sd.source, np.ndarray):  # fg.select(sds, z): precisions 1/sd²
        return Gate(1.0 / positive(sd.source, f"{name!r}: sd (selected by {sd.selector.name!r})") ** 2, sd.selector,
                    sd.plate)
    node = sd.source if isinstance(sd, Gate | Indexed) else sd
    if isinstance(node, Node):
        if getattr(node, "base", None) is not None:
            raise ModelError(f"{name!r}: sd={node.name} — {node.name!r} is already a term of a sum or product "
                             "(inference works with σ itself there); a scale variable is either an sd= or such a "
                             "term, not both")
        if getattr(node, "scale_prior", None) is None:
            fam = getattr(node, "family", None)
            # the argument as the user wrote it: tau, tau[z] or tau[labels]
            written = (f"{node.name}[labels]" if isinstance(sd, Indexed) else
                       f"{node.name}[{sd.selector.name}]" if isinstance(sd, Gate) else node.name)
            hint = (f"; {node.name!r} is a Gamma variable over a precision: pass precision={written}"
                    if fam is not None and fam.__name__ == "Gamma" else "")
            raise ModelError(f"{name!r}: sd must be a positive constant or a scale variable made by fg.half_normal, "
                             "fg.half_cauchy, fg.half_student_t, fg.exponential or fg.uniform_scale, "
                             f"got {node!r}{hint}")
        return sd
    return 1.0 / positive(sd, f"{name!r}: sd") ** 2


def not_a_scale(precision: Any, name: str, role: str = "precision") -> None:
    """Refuse a scale variable σ (fg.half_normal, fg.half_cauchy, ...) given as ``precision=`` (or as a Gamma's or
    a Poisson's rate): it is a standard deviation, so it belongs in ``sd=``; its q is over σ⁻², so taking it
    for a precision or a rate would silently mean σ⁻²."""
    node = precision.source if isinstance(precision, Gate | Indexed) else precision
    kind = getattr(node, "scale_prior", None) if isinstance(node, Node) else None
    if kind is not None:
        kind = "uniform_scale" if kind == "uniform" else kind
        hint = f"pass sd={node.name}" if role == "precision" else "a scale can only be an sd= (or a term of a sum)"
        raise ModelError(f"{name!r}: {role}={node.name} is a scale σ (fg.{kind}), a standard deviation, not a "
                         f"{role}; {hint}")
