"""Builders of discrete variables and their conjugate priors: ``fg.beta``, ``fg.bernoulli``, ``fg.dirichlet`` and
``fg.categorical``.

A Bernoulli or a Categorical variable may select (``v[z]``: category k of ``v`` where z = k; a Bernoulli's
False, True are categories 0, 1).  Observed labels are checked here and held as labels (``factors.onehot``),
never as rows × K one-hot arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Bernoulli, Beta, Categorical, Dirichlet
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _finish, _var_plates
from factorgraph.graph.gates import constant_param, is_random, param_gates, select_constant
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import Gate, ModelError, Plate, Variable
from factors.discrete import BERNOULLI, BETA, CATEGORICAL, DIRICHLET
from factors.onehot import OneHot


def beta(name: str, alpha: Any = 1.0, beta: Any = 1.0, *, plates: Sequence[Plate] = ()) -> Variable:
    """A Beta variable p ~ Beta(alpha, beta) with constant parameters."""
    model = current_model(f"beta {name!r}")
    model.check_name(name)
    a = constant_param(alpha, name, "alpha", checks.positive)
    b = constant_param(beta, name, "beta", checks.positive)
    var = Variable(model, name, Beta, _var_plates(model, plates, name, param_gates({"a": a, "b": b})))
    for x, what in ((a, "alpha"), (b, "beta")):
        if not isinstance(x, Gate):
            checks.fits(x.shape, var.shape, f"{name!r}: {what}")
    return _finish(model, var, BETA, {}, {"alpha": a, "beta": b}, None, None)


def bernoulli(name: str, probs: Any = 0.5, *, plates: Sequence[Plate] = (), observed: Any = None,
              mask: Any = None, categories: Plate | None = None) -> Variable:
    """A binary variable x ~ Bernoulli(probs), ``probs`` a constant in (0, 1) or a Beta variable.

    Observed values as bool, 0/1 or ±1 (−1 is 0), as ``fg.bernoulli_logit`` and ``fg.probit`` take them.

    As a selector (``v[x]``: category 0 where x is False, 1 where True) it picks the plate of size 2 of ``v``;
    ``categories`` names that plate when ``v`` has more than one of size 2."""
    model = current_model(f"bernoulli {name!r}")
    model.check_name(name)
    if categories is not None and (not isinstance(categories, Plate) or categories.size != 2):
        raise ModelError(f"{name!r}: categories must be a plate of size 2 (False, True), got {categories!r}")
    if isinstance(probs, Gate) and isinstance(probs.source, np.ndarray):
        probs = select_constant(probs, name, "probs", checks.open_unit, 0, True)
    elif not is_random(probs):
        probs = checks.open_unit(probs, f"{name!r}: probs")
    else:
        _check_parent(model, probs, name, "probs", (Beta,))
    var = Variable(model, name, Bernoulli, _var_plates(model, plates, name, [probs]))
    var.category_plate = categories
    if observed is not None:
        observed, mask = checks.binary_labels(observed, mask, name, var.shape)
    return _finish(model, var, BERNOULLI, {"probs": probs}, {}, observed, mask)


def dirichlet(name: str, concentration: Any, *, plates: Sequence[Plate] = ()) -> Variable:
    """A probability vector p ~ Dirichlet(concentration) (K = len(concentration))."""
    model = current_model(f"dirichlet {name!r}")
    model.check_name(name)
    a = constant_param(concentration, name, "concentration", checks.positive, 1)
    vals = a.source if isinstance(a, Gate) else a
    if vals.ndim < 1:
        raise ModelError(f"{name!r}: concentration must be a vector (one entry per category), got {concentration!r}")
    var = Variable(model, name, Dirichlet, _var_plates(model, plates, name, param_gates({"a": a})),
                   (vals.shape[-1],))
    if not isinstance(a, Gate):
        checks.fits(a.shape[:-1], var.shape, f"{name!r}: concentration (without its category axis)")
    return _finish(model, var, DIRICHLET, {}, {"concentration": a}, None, None)


def categorical(name: str, probs: Any, *, plates: Sequence[Plate] = (), observed: Any = None,
                mask: Any = None, categories: Plate | None = None) -> Variable:
    """A label z ∈ {0, …, K−1} ~ Categorical(probs); ``probs`` a constant probability vector or a
    Dirichlet variable.  ``categories`` optionally names the plate its values index (for gates)."""
    model = current_model(f"categorical {name!r}")
    model.check_name(name)
    def simplex(x: Any, what: str) -> np.ndarray:
        pr = checks.nonnegative(x, what)
        if pr.ndim < 1 or not np.allclose(pr.sum(-1), 1.0, atol=1e-9):
            sums = pr.sum(-1).ravel() if pr.ndim else pr.ravel()
            raise ModelError(f"{what} must be a probability vector (entries summing to 1), got "
                             f"{checks._show(pr)} (sum {sums[np.argmax(np.abs(sums - 1.0))].item():.6g})")
        return pr

    if isinstance(probs, Gate) and isinstance(probs.source, np.ndarray):
        probs = select_constant(probs, name, "probs", simplex, 1, True)
        K = probs.source.shape[-1]
    elif is_random(probs):
        _check_parent(model, probs, name, "probs", (Dirichlet,))
        K = (probs.source if isinstance(probs, Gate) else probs).event_shape[0]
    else:
        probs = simplex(probs, f"{name!r}: probs")
        K = probs.shape[-1]
    if categories is not None:
        if not isinstance(categories, Plate) or categories.size != K:
            raise ModelError(f"{name!r}: categories must be a plate of size {K}, got {categories!r}")
    var = Variable(model, name, Categorical, _var_plates(model, plates, name, [probs]), (K,))
    var.category_plate = categories
    onehot = None
    if observed is not None and checks.is_dask(observed):  # one-hot per chunk, checked when computed
        if mask is not None or isinstance(getattr(observed, "_meta", None), np.ma.MaskedArray):
            raise ModelError(f"labels of {name!r} are a dask array: missing labels (mask= or a masked array) "
                             "are not supported with dask data here; give them in memory")
        checks.observed_array(observed, mask, var.shape, name)
        onehot, mask = checks.one_hot_labels(observed, K, name)
    elif observed is not None:
        lab, m = checks.integer_labels(observed, mask, var.shape, K, name)
        onehot = OneHot(np.where(m, lab, -1), K)  # the labels, never formed as rows × K (factors.onehot)
        mask = m
    return _finish(model, var, CATEGORICAL, {"probs": probs}, {}, onehot, mask)
