"""Builders for count data: ``fg.poisson``, ``fg.poisson_log``, ``fg.binomial``, ``fg.binomial_logit``,
``fg.multinomial`` and ``fg.multinomial_softmax``.

Counts are always observed (they are the data).  Per-observation constants (trials, exposures) are
validated against the observed counts here and stored as factor parameters aligned with the factor's
plates, so they follow the data through gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Beta, Binomial, Dirichlet, Gamma, Gaussian, Multinomial, Poisson
from distributions.binomial import log_binom
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _finish, _plates, _var_plates
from factorgraph.graph.gates import is_random, select_constant, source_plates
from factorgraph.graph.model import Model, current_model
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Plate, Variable
from factors.binomial import BINOMIAL, BINOMIAL_LOGIT
from factors.multinomial import MULTINOMIAL, MULTINOMIAL_SOFTMAX
from factors.plating import expand
from factors.poisson import POISSON, POISSON_LOG
from factors.softmax import BOUNDS

LOGISTIC_METHODS = ("quadrature", "tilted", "quadratic")


# ------------------------------------------------------------------------------------ validation
def _counts_block(block: np.ndarray, mask: np.ndarray | None, name: str, event_ndim: int) -> np.ndarray:
    return _counts(block, mask, block.shape, name, event_ndim)


def _observed_counts(observed: Any, mask: Any, shape: tuple[int, ...], name: str,
                     event_ndim: int = 0) -> tuple[Any, Any]:
    """The checked counts and the mask to build with: the mask of a numpy masked array joins ``mask``
    (its masked entries are missing, as in every builder)."""
    y = _counts(observed, mask, shape, name, event_ndim)
    if checks.is_dask(y):
        return y, mask
    m = checks.mask_array(mask, shape[: len(shape) - event_ndim], name)
    if np.ma.isMaskedArray(observed):
        hidden = np.ma.getmaskarray(observed)
        m = m & ~(hidden.any(axis=tuple(range(hidden.ndim - event_ndim, hidden.ndim))) if event_ndim else hidden)
    return y, (mask if m.all() else m)


def _counts(observed: Any, mask: Any, shape: tuple[int, ...], name: str, event_ndim: int = 0) -> np.ndarray:
    if observed is None:
        raise ModelError(f"{name!r}: counts must be observed (observed=...); latent counts are not supported")
    if checks.is_dask(observed):  # each chunk is checked when it is computed (missing entries: 0, as below)
        y, m = checks.lazy_observed(observed, mask, shape, name, event_ndim, _counts_block, (name, event_ndim))
        if mask is None and checks.is_dask(m):  # a masked array's own mask: the values carry it on to _finish
            import dask.array as da

            y = da.ma.masked_array(y, mask=da.broadcast_to(~m[(...,) + (None,) * event_ndim], y.shape))
        return y
    y, m = checks.observed_array(observed, mask, shape, name, event_ndim)  # refuses booleans, ragged lists
    # missing entries (mask False) drop out of the likelihood; 0 stands in for them
    y = np.where(m.reshape(m.shape + (1,) * event_ndim), y, 0.0)
    bad = (y < 0) | (y != np.round(y))
    if np.any(bad):
        raise ModelError(f"observed counts of {name!r} must be non-negative integers, got "
                         f"{checks._item(y[bad].ravel()[0])!r}{checks._where(y)}")
    return y


def _per_row(value: Any, shape: tuple[int, ...], name: str, what: str) -> np.ndarray:
    """A constant that broadcasts to the variable's plate shape, broadcast to it."""
    arr = checks.constant(value, f"{name!r}: {what}")
    checks.fits(arr.shape, shape, f"{name!r}: {what}")
    return np.broadcast_to(arr, shape)


def _trials(trials: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    n = _per_row(trials, shape, name, "trials")
    bad = (n < 0) | (n != np.round(n))
    if np.any(bad):
        raise ModelError(f"{name!r}: trials must be non-negative integers, got {checks._item(n[bad].ravel()[0])!r}")
    return n


def _check_trials(y: np.ndarray, n: np.ndarray, name: str) -> None:
    bad = y > n
    if np.any(bad):
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        raise ModelError(f"observed counts of {name!r} exceed the trials: y = {checks._item(y[i])!r} > "
                         f"trials = {checks._item(n[i])!r} at index {i}")


def _exposure(exposure: Any, shape: tuple[int, ...], name: str) -> np.ndarray | None:
    if exposure is None:
        return None
    e = _per_row(exposure, shape, name, "exposure")
    if np.any(e <= 0):
        raise ModelError(f"{name!r}: exposure must be positive, got {checks._item(e[e <= 0].ravel()[0])!r}")
    return e


def _to_factor(var: Variable, arr: np.ndarray) -> np.ndarray:
    """A variable-shaped array in the plate space of its factor (singleton axes for the factor's other plates)."""
    return expand(arr, [p.index for p in var.plates], [p.index for p in var.prior.plates], 0)


def _gaussian_node(model: Model, x: Any, name: str, edge: str) -> Variable | Deterministic | Gate:
    if not is_random(x):  # a gate over an expression (fg.inner(X, W)[z]) is a mixture of regressions
        raise ModelError(f"{name!r}: {edge} must be a Gaussian variable or expression (e.g. fg.inner(X, w) + b), "
                         f"got {x!r}")
    _check_parent(model, x, name, edge, (Gaussian,))
    return x


def _random_or_const(model: Model, x: Any, name: str, edge: str, family: type,
                     check: Any = None, event_ndim: int = 0) -> Any:
    """``x`` checked to be of ``family`` when it is a node (a variable, an indexed view ``x[g]`` or a gate
    ``x[z]``), ``fg.select(values, z)`` with its values checked by ``check`` (one row of ``event_ndim`` axes
    per category), or None when it is a constant (validated by the caller)."""
    if isinstance(x, Gate) and isinstance(x.source, np.ndarray) and check is not None:
        return select_constant(x, name, edge, check, event_ndim, True)
    if isinstance(x, Variable | Deterministic | Gate | Indexed):
        _check_parent(model, x, name, edge, (family,))
        return x
    return None


# ------------------------------------------------------------------------------------ Poisson
def poisson(name: str, rate: Any, *, exposure: Any = None, plates: Sequence[Plate] = (),
            observed: Any = None, mask: Any = None) -> Variable:
    """Observed counts y ~ Poisson(exposure · rate).

    ``rate`` is a Gamma variable (conjugate: q(rate) stays Gamma and the evidence is exact), one indexed
    by group labels ``lam[g]`` (a rate per group), a gated Gamma ``lam[z]`` (a Poisson mixture) or a
    positive constant.  ``exposure`` (default 1) is a positive
    constant per observation (e.g. time at risk).

    E[log f] = y(log e + E[log λ]) − e·E[λ] − log y!.
    """
    model = current_model(f"poisson {name!r}")
    model.check_name(name)
    checks.not_a_scale(rate, name, "rate")
    r = _random_or_const(model, rate, name, "rate", Gamma, checks.positive)
    if r is None:
        rate = checks.positive(rate, f"{name!r}: rate")
    else:
        rate = r
    vplates = _var_plates(model, plates, name, [rate])
    var = Variable(model, name, Poisson, vplates)
    y, mask = _observed_counts(observed, mask, var.shape, name)
    e = _exposure(exposure, var.shape, name)
    params: dict[str, Any] = {}
    var = _finish(model, var, POISSON, {"rate": rate}, params, y, mask)
    if e is not None:
        params["log_exposure"] = _to_factor(var, np.log(e))
    return var


def poisson_log(name: str, log_rate: Any, exposure: Any = None, *, plates: Sequence[Plate] = (),
                observed: Any = None, mask: Any = None) -> Variable:
    """Observed counts y ~ Poisson(exposure · exp(log_rate)), ``log_rate`` a Gaussian variable or
    expression (e.g. ``fg.inner(X, w) + offset``).  Run with ``fg.NCVMP`` (or a global handler on the
    weights, ``fg.Laplace``/``fg.MVI``).

    With q(log_rate) = N(m, v) the expected log-likelihood is closed-form,
    E[log f] = y·m − e·exp(m + v/2) − log y! + y log e, and its messages are its exact gradients
    (Knowles & Minka 2011), with no quadrature.
    """
    model = current_model(f"poisson_log {name!r}")
    model.check_name(name)
    log_rate = _gaussian_node(model, log_rate, name, "log_rate")
    vplates = model.sorted_plates([*_plates(model, plates, name), *source_plates(log_rate)])
    var = Variable(model, name, Poisson, vplates)
    y, mask = _observed_counts(observed, mask, var.shape, name)
    e = _exposure(exposure, var.shape, name)
    params: dict[str, Any] = {}
    var = _finish(model, var, POISSON_LOG, {"log_rate": log_rate}, params, y, mask)
    if e is not None:
        params["log_exposure"] = _to_factor(var, np.log(e))
    var.prior.method = "default"
    return var


# ------------------------------------------------------------------------------------ Binomial
def binomial(name: str, trials: Any, probs: Any, *, plates: Sequence[Plate] = (), observed: Any = None,
             mask: Any = None) -> Variable:
    """Observed successes y ~ Binomial(trials, probs).

    ``probs`` is a Beta variable (conjugate: exact evidence), one indexed by group labels ``p[g]``, a
    gated Beta ``p[z]`` or a constant in (0, 1); ``trials`` non-negative integers per observation (a scalar
    or broadcasting to the plates).

    E[log f] = log C(n, y) + y E[log p] + (n − y) E[log(1 − p)].
    """
    model = current_model(f"binomial {name!r}")
    model.check_name(name)
    r = _random_or_const(model, probs, name, "probs", Beta, checks.open_unit)
    probs = checks.open_unit(probs, f"{name!r}: probs") if r is None else r
    var = Variable(model, name, Binomial, _var_plates(model, plates, name, [probs]))
    y, mask = _observed_counts(observed, mask, var.shape, name)
    n = _trials(trials, var.shape, name)
    _check_trials(y, n, name)
    params: dict[str, Any] = {}
    var = _finish(model, var, BINOMIAL, {"probs": probs}, params, y, mask)
    params["trials"] = _to_factor(var, np.array(n, dtype=float))
    params["log_coef"] = _to_factor(var, log_binom(n, y))
    return var


def binomial_logit(name: str, trials: Any, logit: Any, *, plates: Sequence[Plate] = (), observed: Any = None,
                   mask: Any = None, method: str = "quadrature", xi0: float | None = None) -> Variable:
    """Observed successes y ~ Binomial(trials, σ(logit)), ``logit`` a Gaussian variable or expression.

    log f = log C(n, y) + y·x − n log(1 + eˣ).  ``method`` as for ``fg.bernoulli_logit``:
    ``"quadrature"`` (exact E[log(1 + eˣ)], NCVMP), ``"tilted"`` (Saul–Jordan bound, NCVMP) or
    ``"quadratic"`` (Jaakkola–Jordan bound, conjugate: VMP or NCVMP; ``xi0`` its first ξ).
    """
    model = current_model(f"binomial_logit {name!r}")
    model.check_name(name)
    if method not in LOGISTIC_METHODS:
        raise ModelError(f"{name!r}: method must be one of {LOGISTIC_METHODS}, got {method!r}")
    logit = _gaussian_node(model, logit, name, "logit")
    vplates = model.sorted_plates([*_plates(model, plates, name), *source_plates(logit)])
    var = Variable(model, name, Binomial, vplates)
    y, mask = _observed_counts(observed, mask, var.shape, name)
    n = _trials(trials, var.shape, name)
    _check_trials(y, n, name)
    params: dict[str, Any] = {} if xi0 is None else {"xi0": float(checks.nonnegative(xi0, f"{name!r}: xi0"))}
    var = _finish(model, var, BINOMIAL_LOGIT, {"logit": logit}, params, y, mask)
    params["trials"] = _to_factor(var, np.array(n, dtype=float))
    params["log_coef"] = _to_factor(var, log_binom(n, y))
    var.prior.method = method
    return var


# ------------------------------------------------------------------------------------ Multinomial
def _check_totals(y: np.ndarray, trials: Any, shape: tuple[int, ...], name: str,
                  mask: Any = None) -> np.ndarray | None:
    """The trials (``None`` if not given), checked to be each observed row's total."""
    if trials is None:
        return None
    n = _trials(trials, shape, name)
    tot = y.sum(-1)
    bad = tot != n
    if mask is not None:  # missing rows (0 stands in for them) are not checked
        bad &= np.broadcast_to(np.asarray(mask, bool), bad.shape)
    if np.any(bad):
        i = tuple(int(j) for j in np.argwhere(bad)[0])
        raise ModelError(f"observed counts of {name!r} must sum to the trials: they sum to "
                         f"{checks._item(tot[i])!r} but trials = {checks._item(n[i])!r} at index {i}")
    return n


def multinomial(name: str, trials: Any, probs: Any, *, plates: Sequence[Plate] = (), observed: Any = None,
                mask: Any = None) -> Variable:
    """Observed count vectors y (…, K) ~ Multinomial(trials, probs), Σ_k y_k = trials.

    ``probs`` is a Dirichlet variable (conjugate: exact evidence), one indexed by group labels ``pi[g]``,
    a gated Dirichlet ``pi[z]`` or a constant probability vector.  ``trials`` (a scalar or per observation)
    must equal each row's total; ``None`` takes the totals as given.

    E[log f] = log n! − Σ_k log y_k! + Σ_k y_k E[log π_k].
    """
    model = current_model(f"multinomial {name!r}")
    model.check_name(name)
    def simplex(x: Any, what: str) -> np.ndarray:
        pr = checks.constant(x, what)
        if pr.ndim < 1 or pr.shape[-1] < 2 or np.any(pr <= 0) or not np.allclose(pr.sum(-1), 1.0, atol=1e-9):
            raise ModelError(f"{what} must be a probability vector (≥ 2 positive entries summing to 1), "
                             f"got {checks._show(pr)}")
        return pr

    r = _random_or_const(model, probs, name, "probs", Dirichlet, simplex, 1)
    if r is not None:
        probs = r
        src = probs.source if isinstance(probs, Gate | Indexed) else probs
        K = src.shape[-1] if isinstance(src, np.ndarray) else src.event_shape[0]
    else:
        probs = simplex(probs, f"{name!r}: probs")
        K = probs.shape[-1]
    var = Variable(model, name, Multinomial, _var_plates(model, plates, name, [probs]), (K,))
    y, mask = _observed_counts(observed, mask, var.shape + (K,), name, event_ndim=1)
    n = _check_totals(y, trials, var.shape, name, mask)
    params: dict[str, Any] = {}
    var = _finish(model, var, MULTINOMIAL, {"probs": probs}, params, y, mask)
    if n is not None:  # the draws of fg.predict (without them, the observed totals)
        params["trials"] = _to_factor(var, np.array(n, dtype=float))
    return var


def multinomial_softmax(name: str, trials: Any, logits: Any, over: Plate, *, observed: Any = None,
                        mask: Any = None, method: str = "tilted") -> Variable:
    """Observed count vectors y (…, K) ~ Multinomial(trials, softmax(logits)) over the plate ``over``
    (size K), ``logits`` a Gaussian variable or expression plated over ``over``.

    log f = log n! − Σ_k log y_k! + Σ_k y_k x_k − n·lse(x): the count form of ``fg.categorical_softmax``
    (whose bounds ``method`` selects) plus the multinomial coefficient.  Run with ``fg.NCVMP``.
    """
    model = current_model(f"multinomial_softmax {name!r}")
    model.check_name(name)
    if method not in BOUNDS:
        raise ModelError(f"{name!r}: method must be one of {tuple(BOUNDS)}, got {method!r}")
    logits = _gaussian_node(model, logits, name, "logits")
    if not isinstance(over, Plate) or over not in logits.plates:
        raise ModelError(f"{name!r}: over must be a plate of the logits {[p.name for p in logits.plates]}, "
                         f"got {over!r}")
    K = over.size
    if K < 2:
        raise ModelError(f"{name!r}: a softmax needs at least 2 classes, plate {over.name!r} has {K}")
    vplates = tuple(p for p in logits.plates if p is not over)
    var = Variable(model, name, Multinomial, vplates, (K,))
    var.category_plate = over
    y, mask = _observed_counts(observed, mask, var.shape + (K,), name, event_ndim=1)
    n = _check_totals(y, trials, var.shape, name, mask)
    params: dict[str, Any] = {}
    var = _finish(model, var, MULTINOMIAL_SOFTMAX, {"logits": logits}, params, y, None, {"logits": over})
    if n is not None:
        params["trials"] = _to_factor(var, np.array(n, dtype=float))
    var.prior.method = method
    return var
