"""Named deterministic quantities: ``fg.deterministic(name, expression)`` and their posteriors under q.

A deterministic node y = g(parents) built from sums, products, scalings and inner products of Gaussian
variables (``mu + tau * eta``, ``a[g] + b[g] * x``, ``fg.inner(X, w)``) has, under the factorised q, exact first
and second moments: the same forward pass the engine uses for messages (Winn & Bishop 2005, §4.3):

    y = a + b:  E[y] = E[a] + E[b],   E[y²] = E[a²] + 2E[a]E[b] + E[b²]
    y = a·b:    E[y] = E[a]E[b],      E[y²] = E[a²]E[b²]
    y = xᵀw:    E[y] = xᵀE[w],        E[y²] = xᵀE[wwᵀ]x

so ``result.posterior(name)`` gives its mean and variance to rounding (``DerivedPosterior``).  Its
distribution is not Gaussian in general (a product of independent Gaussians is not), so draws come jointly:
``result.sample`` evaluates the expression on joint draws of q, which ``result.summary()`` (intervals) and
``result.to_arviz()`` (a variable of the posterior group, dims named after the node's plates) use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.context import current_model
from factorgraph.graph.nodes import Deterministic, Gate, ModelError, Node, gated_arithmetic_error


class DerivedPosterior:
    """The posterior moments of a named deterministic node under q (``fg.deterministic``).

    Parameters
    ----------
    name : str
        The node's name.
    mean, var : numpy.ndarray
        E_q[y] and Var_q[y] = E_q[y²] − E_q[y]², over the node's plates.
    plates : tuple of str
        The names of the node's plates (the axes of ``mean``).

    Notes
    -----
    Only the moments are held: y's distribution under q is that of a function of independent factors
    (not Gaussian in general).  Intervals and draws come from joint draws of q: ``result.sample`` (which
    includes y), ``result.summary()``, ``result.to_arviz()``.
    """

    def __init__(self, name: str, mean: np.ndarray, var: np.ndarray, plates: tuple[str, ...]) -> None:
        self.name = name
        self._mean = np.asarray(mean, dtype=float)
        self._var = np.maximum(np.asarray(var, dtype=float), 0.0)  # E[y²] − E[y]² loses ~1e-16 relative
        self.plates = tuple(plates)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self._mean.shape

    def mean(self) -> np.ndarray:
        """E_q[y]."""
        return self._mean

    def var(self) -> np.ndarray:
        """Var_q[y] = E_q[y²] − E_q[y]²."""
        return self._var

    def std(self) -> np.ndarray:
        """The posterior standard deviation √Var_q[y]."""
        return np.sqrt(self._var)

    def __repr__(self) -> str:
        return f"DerivedPosterior({self.name!r}, plates={list(self.plates)}, shape={self.batch_shape})"


def deterministic(name: str, expression: Any) -> Deterministic:
    """Name a deterministic expression so the fit reports its posterior.

    Parameters
    ----------
    name : str
        The name: ``result.posterior(name)``, ``result.sample()[name]``, a row block of ``result.summary()`` and a
        variable of ``result.to_arviz().posterior``.
    expression
        A deterministic Gaussian expression of the model's variables: a sum, product, scaling or inner
        product (``mu + tau * eta``, ``a[g] + b[g] * x``, ``fg.inner(X, w, [n])``).

    Returns
    -------
    Deterministic
        The same node (now named ``name``), to be used wherever the expression would be, e.g.
        ``theta = fg.deterministic("theta", mu + tau * eta)`` then ``fg.gaussian("y", mean=theta, ...)``.

    Notes
    -----
    Under the factorised q the moments are exact: E[a + b] = E[a] + E[b], E[(ab)²] = E[a²]E[b²], and so on
    (``factorgraph/graph/derived.py``).  A fit by VMP or NCVMP in memory, with or without global handlers or
    ``fg.ScaleQuadrature``, reports them and their draws; a sharded (Dask) or SVI fit, whose ``Result`` carries no
    model, reports neither.
    """
    model = current_model(f"deterministic {name!r}")
    model.check_name(name)
    if isinstance(expression, Gate):
        raise gated_arithmetic_error(expression, f"deterministic {name!r}")
    if not isinstance(expression, Deterministic):
        what = (f"the {type(expression).__name__.lower()} {expression.name!r}" if isinstance(expression, Node)
                else f"the constant {expression!r}")
        raise ModelError(f"deterministic {name!r}: give a deterministic expression of the model's variables (a sum, "
                         f"product or inner product), got {what}; a variable already has a posterior by its own name")
    if expression.model is not model:
        raise ModelError(f"deterministic {name!r}: the expression belongs to model {expression.model.name!r}, not to "
                         f"the active model {model.name!r}")
    if expression.name in model.tracked:
        raise ModelError(f"deterministic {name!r}: the expression is already named {expression.name!r}")
    model.claim_name(name)
    expression.name = name
    model.tracked[name] = expression
    return expression


def derived_moments(node_stats: Any, model: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(E[y], Var[y]) of every named deterministic node, from an engine's ``node_stats`` at the fitted q."""
    out = {}
    for name, d in getattr(model, "tracked", {}).items():
        m1, m2 = node_stats(d)
        shape = tuple(p.size for p in d.plates)
        m1, m2 = np.broadcast_to(m1, shape).copy(), np.broadcast_to(m2, shape)
        out[name] = (m1, m2 - m1 * m1)
    return out


def mixture_moments(weights: np.ndarray, parts: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The moments of each named node under a mixture Σ_g w_g q_g of fits (``fg.ScaleQuadrature``)."""
    out = {}
    for name in parts[0]:
        m = sum(w * p[name][0] for w, p in zip(weights, parts, strict=True))
        m2 = sum(w * (p[name][1] + p[name][0] ** 2) for w, p in zip(weights, parts, strict=True))
        out[name] = (m, m2 - m * m)
    return out


__all__ = ["DerivedPosterior", "deterministic"]
