"""Builders for the non-conjugate factors: logistic, softmax and sites (run them with ``fg.NCVMP``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical, Gaussian
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _finish, _plates
from factorgraph.graph.gates import is_random, source_plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import Deterministic, Gate, ModelError, Plate, Variable
from factors.is_positive import IS_POSITIVE
from factors.logistic import BERNOULLI_LOGIT
from factors.sites import CAUCHY_SITE, LAPLACE_SITE, PROBIT, STUDENT_T_SITE
from factors.softmax import BOUNDS, CATEGORICAL_SOFTMAX

LOGISTIC_METHODS = ("quadrature", "tilted", "quadratic")


def _gaussian_node(model, x: Any, name: str, edge: str) -> Variable | Deterministic | Gate:
    """A Gaussian variable or expression, or a gate over one (``fg.inner(X, W)[z]``: a mixture of experts,
    whose E[log f] and messages are weighted by q(z = k))."""
    if not is_random(x):
        raise ModelError(f"{name!r}: {edge} must be a Gaussian variable or expression (e.g. fg.inner), got {x!r}")
    _check_parent(model, x, name, edge, (Gaussian,))
    return x


def bernoulli_logit(name: str, logit: Any, *, observed: Any = None, mask: Any = None,
                    method: str = "quadrature", plates: Sequence[Plate] = (),
                    xi0: float | None = None) -> Variable:
    """A binary label s with P(s = 1) = σ(logit), the logit a Gaussian variable or expression.

    Parameters
    ----------
    observed
        Labels as bool, {0, 1} or {−1, +1}.
    method
        ``"quadrature"`` (exact E[log(1 + eˣ)], NCVMP), ``"tilted"`` (Saul–Jordan bound, NCVMP) or
        ``"quadratic"`` (Jaakkola–Jordan bound, conjugate: VMP or NCVMP).
    xi0
        ``"quadratic"`` only: the variational parameter ξ of the first message (default: √E[x²]
        from the starting posterior; Drugowitsch 2014 starts from 0).
    """
    model = current_model(f"bernoulli_logit {name!r}")
    model.check_name(name)
    checks.choice(method, LOGISTIC_METHODS, f"{name!r}: method")
    logit = _gaussian_node(model, logit, name, "logit")
    vplates = model.sorted_plates([*_plates(model, plates, name), *source_plates(logit)])
    var = Variable(model, name, Bernoulli, vplates)
    if observed is not None:
        observed, mask = checks.binary_labels(observed, mask, name)
    params = {} if xi0 is None else {"xi0": checks.number(xi0, f"{name!r}: xi0", low=0.0, high=checks.MAX_ABS)}
    var = _finish(model, var, BERNOULLI_LOGIT, {"logit": logit}, params, observed, mask)
    var.prior.method = method
    return var


def categorical_softmax(name: str, logits: Any, over: Plate, *, observed: Any = None, mask: Any = None,
                        counts: bool = False, method: str = "tilted") -> Variable:
    """A class label y ∈ {0..K−1} with P(y = k) = softmax(logits)_k over the plate ``over`` (size K).

    ``logits`` is a Gaussian variable or expression plated over ``over`` (e.g. ``fg.inner(X, W) + b``
    with one weight vector per class).  With ``counts=True`` the observations are count vectors
    (N, K) instead of labels (the d_k form of Knowles & Minka §5.2).  ``method``: ``"tilted"``,
    ``"log"``, ``"quadratic"``, ``"bohning"``, ``"adaptive"`` (bounds) or ``"taylor"`` (an
    approximation, not a bound).  Run with ``fg.NCVMP``.
    """
    model = current_model(f"categorical_softmax {name!r}")
    model.check_name(name)
    checks.choice(method, BOUNDS, f"{name!r}: method")
    counts = checks.flag(counts, f"{name!r}: counts")
    logits = _gaussian_node(model, logits, name, "logits")
    if not isinstance(over, Plate) or over not in source_plates(logits):
        raise ModelError(f"{name!r}: over must be a plate of the logits {[p.name for p in source_plates(logits)]}, "
                         f"got {over!r}")
    K = over.size
    if K < 2:
        raise ModelError(f"{name!r}: a softmax needs at least 2 classes, plate {over.name!r} has {K}")
    vplates = model.sorted_plates([p for p in source_plates(logits) if p is not over])
    var = Variable(model, name, Categorical, vplates, (K,))
    var.category_plate = over
    obs = None
    if observed is not None:
        shape = tuple(p.size for p in vplates)
        if counts:
            obs, mask = checks.counts(observed, mask, shape + (K,), name, event_ndim=1)
        elif checks.is_dask(observed):  # one-hot per chunk, checked when computed
            if mask is not None or isinstance(getattr(observed, "_meta", None), np.ma.MaskedArray):
                raise ModelError(f"labels of {name!r} are a dask array: missing labels (mask= or a masked array) "
                                 "are not supported with dask data here; give them in memory")
            checks.observed_array(observed, mask, shape, name)
            obs, mask = checks.one_hot_labels(observed, K, name)
        else:
            lab, m = checks.integer_labels(observed, mask, shape, K, name)
            obs = np.where(m[..., None], lab[..., None] == np.arange(K), np.nan)
            mask = m
    var = _finish(model, var, CATEGORICAL_SOFTMAX, {"logits": logits}, {}, obs, mask, {"logits": over})
    var.prior.method = method
    return var


def _site(name: str, ftype, x: Any, location: Any, params: dict, what: str) -> Variable:
    model = current_model(f"{what} {name!r}")
    model.check_name(name)
    x = _gaussian_node(model, x, name, "x")
    var = Variable(model, name, Gaussian, model.sorted_plates(source_plates(x)))
    loc = checks.constant(location, f"{name!r}: location")
    checks.fits(loc.shape, var.shape, f"{name!r}: location")
    loc = np.broadcast_to(loc, var.shape).astype(float)
    var = _finish(model, var, ftype, {"x": x}, params, loc, None)
    var.prior.method = "default"
    return var


def laplace_site(name: str, x: Any, location: Any = 0.0, scale: float = 1.0) -> Variable:
    """Laplace potential (2τ)⁻¹exp(−|x − location|/τ) on a Gaussian x (a robust likelihood with
    ``location`` the observations, or a sparsity prior with location 0).  Closed form; run with NCVMP."""
    tau = checks.positive_number(scale, f"{name!r}: scale")
    return _site(name, LAPLACE_SITE, x, location, {"scale": tau}, "laplace_site")


def cauchy_site(name: str, x: Any, location: Any = 0.0, scale: float = 1.0) -> Variable:
    """Cauchy potential (πγ[1 + ((x − location)/γ)²])⁻¹ on a Gaussian x, by quadrature."""
    gam = checks.positive_number(scale, f"{name!r}: scale")
    return _site(name, CAUCHY_SITE, x, location, {"scale": gam}, "cauchy_site")


def student_t_site(name: str, x: Any, location: Any = 0.0, scale: float = 1.0, dof: float = 3.0) -> Variable:
    """Student-t potential with ``dof`` degrees of freedom and ``scale`` on a Gaussian x, by quadrature."""
    sc = checks.positive_number(scale, f"{name!r}: scale")
    nu = checks.positive_number(dof, f"{name!r}: dof")
    return _site(name, STUDENT_T_SITE, x, location, {"scale": sc, "dof": nu}, "student_t_site")


def probit(name: str, x: Any, *, observed: Any, mask: Any = None) -> Variable:
    """Binary labels with P(s = 1) = Φ(x) on a Gaussian x, by quadrature.  Labels as bool, 0/1 or ±1."""
    model = current_model(f"probit {name!r}")
    model.check_name(name)
    x = _gaussian_node(model, x, name, "x")
    s01, mask = checks.binary_labels(observed, mask, name)
    xplates = model.sorted_plates(source_plates(x))
    if s01.shape != tuple(p.size for p in xplates):
        raise ModelError(f"labels of {name!r} have shape {s01.shape}, expected {tuple(p.size for p in xplates)}")
    var = Variable(model, name, Gaussian, xplates)
    return _finish(model, var, PROBIT, {"x": x}, {}, 2.0 * s01 - 1.0, mask)


def is_positive(name: str, x: Any, *, observed: Any = None, mask: Any = None) -> Variable:
    """A binary b = 1[x > 0] of a Gaussian variable or expression x (Infer.NET's IsPositive).

    Observed b (bool, 0/1 or ±1; −1 is 0) truncates x's posterior to the positive (b true) or the negative half
    line.  Only expectation propagation runs it: ``fg.infer(model, algorithm=fg.EP())`` (E_q[log 1[x > 0]] is −∞
    under a Gaussian q, so VMP has no message).  A TrueSkill game won by player i over j is
    ``fg.is_positive("win", perf[i] - perf[j], observed=True)``.
    """
    model = current_model(f"is_positive {name!r}")
    model.check_name(name)
    x = _gaussian_node(model, x, name, "x")
    if isinstance(x, Gate):
        raise ModelError(f"{name!r}: is_positive takes a Gaussian variable or expression, not a gate x[z]")
    xplates = model.sorted_plates(source_plates(x))
    var = Variable(model, name, Bernoulli, xplates)
    if observed is not None:
        if np.ndim(observed) == 0 and var.shape:  # one outcome for every instance
            observed = np.full(var.shape, observed)
        observed, mask = checks.binary_labels(observed, mask, name, var.shape)
    return _finish(model, var, IS_POSITIVE, {"x": x}, {}, observed, mask)
