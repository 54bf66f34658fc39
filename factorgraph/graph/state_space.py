"""``fg.gaussian_markov_chain``: linear-Gaussian state dynamics with an exact (Kalman-smoothed) posterior."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Gamma, MvGaussian, Wishart
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import FactorNode, Indexed, ModelError, Plate, Variable
from factors.gaussian_markov_chain import GAUSSIAN_MARKOV_CHAIN, GAUSSIAN_MARKOV_CHAIN_DIAG


def _precision_constant(value: Any, what: str, dims: dict[str, int], key: str) -> np.ndarray:
    """A positive scalar (λI), a positive vector (diag) or an SPD matrix; its D recorded in ``dims``."""
    lam = checks.constant(value, what)
    if lam.ndim == 2:
        if not lam.any():
            raise ModelError(f"{what} must be positive definite, got all zeros")
        checks.precision_matrix(lam, what)
        dims[key] = lam.shape[0]
    elif lam.ndim == 1:
        checks.positive(lam, what)
        dims[key] = lam.shape[0]
    elif lam.ndim == 0:
        checks.positive(lam, what)
    else:
        raise ModelError(f"{what} must be a scalar, vector or D×D matrix, got shape {lam.shape}")
    return lam


def _as_matrix(lam: np.ndarray, D: int) -> np.ndarray:
    if lam.ndim == 2:
        return lam
    return np.diag(np.broadcast_to(lam, (D,)).astype(float))


def gaussian_markov_chain(name: str, initial_mean: Any = 0.0, initial_precision: Any = 1.0, transition: Any = 1.0,
                          noise_precision: Any = 1.0, *, plates: Sequence[Plate], lengths: Any = None,
                          dim: int | None = None) -> Variable:
    """A state sequence x_1..x_T ∈ R^D that is a linear-Gaussian Markov chain:
    x_1 ~ N(m₀, P₀⁻¹), x_t | x_{t−1} ~ N(A x_{t−1}, Q⁻¹).

    Parameters
    ----------
    initial_mean
        m₀: a constant (scalar or D-vector) or an ``fg.mv_gaussian`` variable (unplated).
    initial_precision
        P₀: a positive scalar (P₀ = λI), a positive vector (diagonal), an SPD matrix, or an ``fg.wishart``
        variable (unplated).
    transition
        A: a constant D×D matrix (a scalar a means aI), or an ``fg.mv_gaussian`` variable of dimension D
        plated over one plate of size D (row i is a_i, so (A x)_i = a_iᵀx; mean field across rows).
    noise_precision
        Q: a positive scalar, positive vector (diagonal) or SPD matrix; an ``fg.wishart`` variable (unplated);
        or Gamma precisions (Beal 2003, ch. 5): an unplated ``fg.gamma`` τ (Q = τI) or one plated over one
        plate of size D (Q = diag(τ)).
    plates
        The time plate last; any plates before it run over independent sequences (which share the
        parameters).  The time plate must be declared after the sequence plates.
    lengths
        Integer lengths 1 ≤ L_n ≤ T per sequence for sequences shorter than the time plate (steps past L_n do
        not exist; observations there should be masked out).
    dim
        D, when no argument gives it.

    Notes
    -----
    The posterior q(x) is the exact Gaussian chain given the other messages into x (observations such as
    ``fg.gaussian("y", mean=fg.inner(c, x), precision=r, plates=[t], observed=y)``): the square-root Kalman
    filter and Rauch–Tung–Striebel smoother, O(T·D³), exact to rounding also for nearly deterministic
    dynamics.  ``result.posterior(name)`` is a ``GaussianChain`` with the
    smoothed means ``mean()``, covariances ``cov()`` and lag-one covariances ``lag_one_cov()``.  With every
    parameter a constant the ELBO is the exact log-likelihood (the prediction-error decomposition).
    """
    model = current_model(f"gaussian_markov_chain {name!r}")
    model.check_name(name)
    vplates = _plates(model, plates, name)
    if not vplates:
        raise ModelError(f"{name!r}: a Gaussian Markov chain needs plates=[..., time], got none")
    if model.sorted_plates(vplates)[-1] is not vplates[-1]:
        raise ModelError(f"{name!r}: the time plate {vplates[-1].name!r} must be declared after the sequence "
                         f"plates {[p.name for p in vplates[:-1]]}")
    vplates = model.sorted_plates(vplates)
    time = vplates[-1]
    dims: dict[str, int] = {} if dim is None else {"dim": checks.positive_int(dim, f"{name!r}: dim")}
    consumed: dict[str, Plate] = {"out": time}

    def unplated(x: Any, edge: str) -> None:
        if x.plates:
            raise ModelError(f"{name!r}: {edge} {x.name!r} must be unplated (shared by every step), it has plates "
                             f"{[p.name for p in x.plates]}")

    if isinstance(initial_mean, Variable | Indexed):
        _check_parent(model, initial_mean, name, "initial_mean", (MvGaussian,))
        unplated(initial_mean, "initial_mean")
        if initial_mean.event_shape[0] is not None:
            dims["initial_mean"] = initial_mean.event_shape[0]
    else:
        initial_mean = checks.constant(initial_mean, f"{name!r}: initial_mean")
        if initial_mean.ndim > 1:
            raise ModelError(f"{name!r}: initial_mean must be a scalar or a D-vector, got shape {initial_mean.shape}")
        if initial_mean.ndim == 1:
            dims["initial_mean"] = initial_mean.shape[0]
    if isinstance(initial_precision, Variable | Indexed):
        _check_parent(model, initial_precision, name, "initial_precision", (Wishart,))
        unplated(initial_precision, "initial_precision")
        dims["initial_precision"] = initial_precision.event_shape[0]
    else:
        initial_precision = _precision_constant(initial_precision, f"{name!r}: initial_precision", dims,
                                                "initial_precision")
    if isinstance(transition, Variable | Indexed):
        _check_parent(model, transition, name, "transition", (MvGaussian,))
        if len(transition.plates) != 1:
            raise ModelError(f"{name!r}: transition {transition.name!r} must be plated over one plate (its rows), "
                             f"it has plates {[p.name for p in transition.plates]}")
        row = transition.plates[0]
        if row in vplates:
            raise ModelError(f"{name!r}: transition {transition.name!r} is plated over {name!r}'s own plate "
                             f"{row.name!r}")
        if transition.event_shape[0] is not None and transition.event_shape[0] != row.size:
            raise ModelError(f"{name!r}: transition {transition.name!r} has rows of dimension "
                             f"{transition.event_shape[0]} over a plate {row.name!r} of size {row.size}; A must be "
                             "square")
        consumed["transition"] = row
        dims["transition"] = row.size
    else:
        A = checks.constant(transition, f"{name!r}: transition")
        if A.ndim not in (0, 2) or (A.ndim == 2 and A.shape[0] != A.shape[1]):
            raise ModelError(f"{name!r}: transition must be a D×D matrix, a scalar or a plated mv_gaussian, got "
                             f"shape {A.shape}")
        if A.ndim == 2:
            dims["transition"] = A.shape[0]
        transition = A
    noise = "full"
    if isinstance(noise_precision, Variable | Indexed):
        _check_parent(model, noise_precision, name, "noise_precision", (Wishart, Gamma))
        if noise_precision.family is Wishart:
            unplated(noise_precision, "noise_precision")
            dims["noise_precision"] = noise_precision.event_shape[0]
        elif noise_precision.plates:
            if len(noise_precision.plates) != 1 or noise_precision.plates[0] in vplates:
                raise ModelError(f"{name!r}: Gamma noise_precision {noise_precision.name!r} must be unplated (Q = τI) "
                                 "or plated over one plate of size D (Q = diag(τ)), it has plates "
                                 f"{[p.name for p in noise_precision.plates]}")
            consumed["noise_precision"] = noise_precision.plates[0]
            dims["noise_precision"] = noise_precision.plates[0].size
            noise = "diag"
        else:
            noise = "shared"
    else:
        noise_precision = _precision_constant(noise_precision, f"{name!r}: noise_precision", dims, "noise_precision")
    if len(set(dims.values())) > 1:
        raise ModelError(f"{name!r}: mismatched state dimensions {dims}")
    D = dims.popitem()[1] if dims else 1
    for parent in (initial_mean, transition):  # an mv_gaussian declared without its dimension gets the chain's
        if isinstance(parent, Variable) and parent.event_shape == (None,):
            parent.event_shape = (D,)
    if isinstance(initial_mean, np.ndarray):
        initial_mean = np.broadcast_to(initial_mean, (D,)).astype(float)
    if isinstance(initial_precision, np.ndarray):
        initial_precision = _as_matrix(initial_precision, D)
    if isinstance(noise_precision, np.ndarray):
        noise_precision = _as_matrix(noise_precision, D)
    if isinstance(transition, np.ndarray) and transition.ndim == 0:
        transition = float(transition) * np.eye(D)
    seq = vplates[:-1]
    seq_shape = tuple(p.size for p in seq)
    lens = checks.sequence_lengths(lengths, seq_shape, time, name)
    var = Variable(model, name, MvGaussian, vplates, (D,))
    edges = {"out": var, "initial_mean": initial_mean, "initial_precision": initial_precision,
             "transition": transition, "noise_precision": noise_precision}
    ftype = GAUSSIAN_MARKOV_CHAIN if noise == "full" else GAUSSIAN_MARKOV_CHAIN_DIAG  # a Wishart or constant Q: full
    params = {"lengths": lens, "D": D, "noise": noise, "shape": tuple(p.size for p in vplates)}
    factor = FactorNode(ftype, f"GaussianMarkovChain({name})", edges, seq, "default", params, consumed)
    var.prior = factor
    model.add_variable(var)
    model.add_factor(factor)
    return var
