"""Binding data to a compiled model: what the data determine, derived at compilation and again at a refit.

Plate sizes, a factor's parameters (a fixed precision Λ as a matrix with its log|Λ|, a normal–gamma mean),
the statistics of constant arguments, the sufficient statistics of fused factors, the weights of missing
entries and, for a handler that learns the prior precision, the prior's natural parameters (Λ₀m₀, −½Λ₀).
``rebind`` makes a compiled model current after ``model.set_data``; the structure stays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import MvGaussian
from factorgraph.graph.gates import precision_matrices
from factorgraph.graph.nodes import FactorNode, Gate, ModelError, Variable
from factors.base import point_stats
from factors.mv_gaussian import MV_GAUSSIAN_FIXED
from factors.normal_gamma import NORMAL_GAMMA
from factors.plating import expand

from .compiled import CFactor, Compiled
from .fusion import fused_stats
from .missing import drop_missing, prune_selectors


def _check_learn(c: Compiled, v: Variable, handler: Any) -> None:
    """Check a handler's ``learn=`` against its block: "scale" needs a claimed site with a scale, and
    "prior_precision" a constant proper prior N(m₀, Λ₀⁻¹), whose natural parameters go to ``c.block_prior``."""
    learn = getattr(handler, "learn", ())
    claimed = c.claimed[v.name]
    if "scale" in learn and not any("scale" in f.params for f in claimed):
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'scale', but no factor it claims "
                         f"({[f.name for f in claimed]}) has a scale; sites with one are fg.laplace_site, "
                         "fg.cauchy_site and fg.student_t_site")
    if "prior_precision" not in learn:
        return
    prior = next(f for f in c.factors if f.node is v.prior)
    for edge, arg in prior.node.edges.items():
        if edge != "out" and not isinstance(arg, np.ndarray):
            source = arg.source if isinstance(arg, Gate) else arg
            raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', but the {edge} of "
                             f"{v.name!r}'s prior is the variable {source.name!r}, not a constant: a latent prior "
                             f"is already learned by message passing; drop 'prior_precision' or make the {edge} "
                             "a constant")
    if prior.node.ftype is not MV_GAUSSIAN_FIXED:
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', which needs an "
                         f"fg.mv_gaussian prior with a constant precision; {v.name!r} has {prior.node.ftype.name}")
    if prior.gate is not None:
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', but {v.name!r}'s prior is "
                         "gated (a mixture): there is no one precision to scale")
    if prior.params["logdet"] is None:
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', but {v.name!r} has an "
                         "improper flat prior (precision 0): there is no precision to scale")
    lam = prior.params["precision"]
    m0 = prior.const_stats["mean"][0]
    if v.plates:
        K = v.shape[0]
        c.block_prior[v.name] = ((np.broadcast_to(m0, (K, lam.shape[0])) @ lam).reshape(-1),
                                 -0.5 * np.kron(np.eye(K), lam))
    else:
        c.block_prior[v.name] = (lam @ m0, -0.5 * lam)


def _bind(cf: CFactor) -> None:
    """The parts of a compiled factor that the data determine: sizes, parameters and constants' statistics."""
    f = cf.node
    if hasattr(f, "source"):  # a fused factor: its sufficient statistics, read again from the data
        f.params = fused_stats(f)
    params = {k: (v() if callable(v) else v) for k, v in f.params.items()}
    _finalize(f, params)
    params["state"] = {}  # variational parameters a rule keeps between calls (ξ, a), fresh per run
    fplates = cf.plates
    for k, g in list(params.items()):  # constants selected by fg.select: (K, event...) onto the factor's plates
        if isinstance(g, Gate):
            params[k] = expand(g.source, (g.plate.index,), fplates, g.source.ndim - 1)
    const = {}
    for edge, arg in f.edges.items():
        if isinstance(arg, np.ndarray):
            const[edge] = _const_stats(f, edge, arg, params)
        elif isinstance(arg, Gate) and isinstance(arg.source, np.ndarray):
            const[edge] = _const_stats(f, edge, arg.source, params)
    cf.sizes, cf.params, cf.const_stats = tuple(p.size for p in f.plates), params, const
    cf.weight, cf.damping = None, cf.initial_damping


def rebind(c: Compiled) -> None:
    """Make a compiled model current with its model's data (after ``model.set_data``, or before a refit).

    The structure (rules, consumers, handlers' claims, the schedule) stays; what the data determine is
    derived again: plate sizes, parameters, fused statistics, the weights of missing entries."""
    for f in c.factors:
        _bind(f)
    c.latent = [v for v in c.model.variables.values() if v.is_latent]
    c.dropped, c.pruned, c.block_prior = set(), {}, {}
    for name, handler in c.handlers.items():
        _check_learn(c, c.model.variables[name], handler)
    drop_missing(c)
    prune_selectors(c)
    latent = {id(v) for v in c.latent}
    if any(id(v) not in latent for v in c.order) or len(c.order) != len(c.latent):
        raise ModelError("the compiled schedule no longer matches the model's latent variables")  # see infer's key


def _finalize(f: FactorNode, p: dict[str, Any]) -> None:
    """Turn build-time parameters into the arrays the rules use, now that dimensions are known."""
    if f.ftype is MV_GAUSSIAN_FIXED and isinstance(p["precision_raw"], Gate):  # one matrix per category
        D, g = p["D"], p.pop("precision_raw")
        mats = precision_matrices(g.source, D)
        if mats.shape[1:] != (D, D):
            raise ModelError(f"{f.name}: selected precisions have shape {g.source.shape}, expected (K,), (K, {D}) or "
                             f"(K, {D}, {D})")
        p["precision"] = Gate(mats, g.selector, g.plate)
        p["logdet"] = Gate(np.linalg.slogdet(mats)[1], g.selector, g.plate)
    elif f.ftype is MV_GAUSSIAN_FIXED:
        D, lam = p["D"], p.pop("precision_raw")
        mat = lam * np.eye(D) if lam.ndim == 0 else (np.diag(lam) if lam.ndim == 1 else lam)
        if mat.shape != (D, D):
            raise ModelError(f"{f.name}: precision has shape {lam.shape}, expected a scalar, ({D},) or ({D}, {D})")
        if not mat.any():
            p["precision"], p["logdet"] = mat, None
        else:
            sign, logdet = np.linalg.slogdet(mat)
            if sign <= 0 or np.any(np.linalg.eigvalsh(mat) <= 0):
                raise ModelError(f"{f.name}: precision matrix must be positive definite (or 0 for a flat prior)")
            p["precision"], p["logdet"] = mat, logdet
    if f.ftype is NORMAL_GAMMA:
        D = p["D"]
        mu0 = p.pop("mean_raw")
        if mu0.ndim and mu0.shape[-1] != D:
            raise ModelError(f"{f.name}: mean has {mu0.shape[-1]} entries, expected {D}")
        p["mean"] = np.broadcast_to(mu0, (D,)).astype(float)


def _const_stats(f: FactorNode, edge: str, value: np.ndarray, params: dict[str, Any]) -> tuple:
    family = f.ftype.edges[edge]
    if family is MvGaussian:
        D = params["D"]
        value = np.broadcast_to(value, value.shape[:-1] + (D,)) if value.ndim else np.full(D, float(value))
    return point_stats(family, value)


__all__ = ["rebind"]
