"""Builders of ordered outcomes: ``fg.ordered_logistic`` and ``fg.ordered_probit`` (run them with ``fg.NCVMP``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Gaussian
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _finish, _plates
from factorgraph.graph.counts import _gaussian_node
from factorgraph.graph.gates import source_plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import ModelError, Plate, Variable
from factors.ordinal import ORDERED_LOGISTIC, ORDERED_PROBIT


def cutpoints_array(cutpoints: Any, name: str) -> np.ndarray:
    """The cutpoints c₁ < … < c_{K−1} as a finite, strictly increasing float vector (else a ModelError naming the
    first value out of order)."""
    c = checks.constant(cutpoints, f"{name!r}: cutpoints")
    if c.ndim != 1 or c.size < 1:
        raise ModelError(f"{name!r}: cutpoints must be a vector of at least one value (K − 1 for K categories), "
                         f"got shape {c.shape}")
    bad = np.flatnonzero(np.diff(c) <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise ModelError(f"{name!r}: cutpoints must be strictly increasing, but cutpoints[{i}] = "
                         f"{checks._item(c[i])!r} does not exceed cutpoints[{i - 1}] = {checks._item(c[i - 1])!r}")
    return np.asarray(c, dtype=float)


def _ordered(what: str, ftype, name: str, eta: Any, cutpoints: Any, plates: Sequence[Plate], observed: Any,
             mask: Any) -> Variable:
    model = current_model(f"{what} {name!r}")
    model.check_name(name)
    eta = _gaussian_node(model, eta, name, "eta")
    c = cutpoints_array(cutpoints, name)
    K = c.size + 1
    var = Variable(model, name, Gaussian, model.sorted_plates([*_plates(model, plates, name), *source_plates(eta)]))
    if observed is None:
        raise ModelError(f"{name!r}: ordered outcomes must be observed (observed=...); latent ones are not supported")
    labels, m = checks.integer_labels(observed, mask, var.shape, K, name)
    var = _finish(model, var, ftype, {"eta": eta}, {"cuts": np.r_[-np.inf, c, np.inf]},
                  labels.astype(float), None if m.all() else m)
    var.prior.method = "default"
    var.n_categories = K
    return var


def ordered_logistic(name: str, eta: Any, cutpoints: Any, *, plates: Sequence[Plate] = (), observed: Any = None,
                     mask: Any = None) -> Variable:
    """Observed categories y ∈ {0, …, K−1} with P(y ≤ k) = σ(c_{k+1} − η), ``eta`` a Gaussian variable or
    expression (e.g. ``fg.inner(X, w)``, with no intercept: the cutpoints are the intercepts) and ``cutpoints``
    the K − 1 strictly increasing constants c₁ < … < c_{K−1}.

    log f = −softplus(η − c_{y+1}) − softplus(c_y − η) + log(1 − e^(c_y − c_{y+1})) (c₀ = −∞, c_K = ∞), so
    E[log f] under q(η) = N(m, v) is two exact logistic expectations: exact evidence, closed-form NCVMP messages.
    """
    return _ordered("ordered_logistic", ORDERED_LOGISTIC, name, eta, cutpoints, plates, observed, mask)


def ordered_probit(name: str, eta: Any, cutpoints: Any, *, plates: Sequence[Plate] = (), observed: Any = None,
                   mask: Any = None) -> Variable:
    """Observed categories y ∈ {0, …, K−1} with P(y ≤ k) = Φ(c_{k+1} − η) (the latent η + ε, ε ~ N(0, 1),
    falls between c_y and c_{y+1}); arguments as ``fg.ordered_logistic``.

    E[log(Φ(c_{y+1} − η) − Φ(c_y − η))] and its gradient by quadrature exact to rounding; run with ``fg.NCVMP``.
    """
    return _ordered("ordered_probit", ORDERED_PROBIT, name, eta, cutpoints, plates, observed, mask)
