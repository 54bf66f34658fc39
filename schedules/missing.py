"""Missing values: an observed variable's missing entries drop out of its likelihood.

A partly observed variable that nothing else uses (no child factor, no deterministic node, not a
selector) is a leaf: integrating a missing entry out of its own factor gives 1, so the entry is
marginalised exactly by weighting that factor instance by 0 in its messages and in E[log f], and the
entry has no posterior and no entropy term.  Imputing it as a latent variable under mean field
instead would lower the bound (for a gated factor, q(x_n) would be one Gaussian fitted to a
mixture).  A partly observed variable that is a parent (e.g. a semi-supervised selector) keeps its
missing entries as latent variables: they are not marginalised out of anything.

An ``mv_gaussian`` observed with a coordinate mask (D-vector per row) keeps, per row, the marginal
density of its observed coordinates: for Λ = αI or diag(α) the observed coordinates' terms, for a
constant Λ the marginal precision (Σ_oo)⁻¹ with Σ = Λ⁻¹ (the Schur complement), embedded in D × D
with zeros at the missing coordinates; under a Wishart Λ (or a normal–Wishart block) the marginal
density's expectation and its NCVMP message, per missingness pattern
(``factors.mv_gaussian_wishart_missing``).

A selector entry whose every gated factor instance is missing has no observed descendant: summed
over its categories it contributes exactly 1, so it too drops out (its prior factor's messages to
its parents and its E[log f] are weighted by 0 there, and it has no entropy term).  Keeping it under
mean field would cost log Σ_k exp(E[log π_k]) < 0 per entry.  BayesPy prunes such nodes the same way.
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import Gate, ModelError
from factors.mv_gaussian import MV_GAUSSIAN, MV_GAUSSIAN_FIXED
from factors.mv_gaussian_wishart_missing import (
    MV_GAUSSIAN_NORMAL_WISHART_MISSING,
    MV_GAUSSIAN_WISHART_MISSING,
    missing_patterns,
)
from factors.plating import expand, reduce


def drop_missing(c) -> None:
    """Mark the partly observed leaves of compiled model ``c`` as dropped (not latent) and give their
    factors instance weights (0 at missing entries) or per-coordinate masks."""
    for v in c.model.variables.values():
        coords = getattr(v, "coord_mask", None)
        if coords is not None and coords.all():
            coords = None
        if v.mask is None or (v.mask.all() and coords is None):
            continue
        # (a fused factor that replaced the prior, ``schedules.fusion``, stands for it and marginalises the entries)
        prior = next((f for f in c.factors if f.node is v.prior or getattr(f.node, "source", None) is v.prior), None)
        uses = [x for x in c.consumers.get(id(v), []) if not (x.factor is prior and x.edge == "out")]
        if prior is not None and "out" not in prior.rules and prior.node.edges.get("out") is v and (
                uses or id(v) in c.selector_factors):
            raise ModelError(f"{v.name!r}: its missing entries would be latent variables (something else uses "
                             f"{v.name!r}), but {prior.node.ftype.name} sends no message to them")
        if uses or id(v) in c.selector_factors or v.name in c.handlers or prior is None:
            if coords is not None and not coords.all():
                raise ModelError(f"{v.name!r}: rows with some coordinates missing are supported only when nothing "
                                 "else uses the variable (its missing coordinates are then marginalised out)")
            continue  # a parent: missing entries stay latent variables
        if v in c.latent:
            c.latent.remove(v)
            c.dropped.add(v.name)
        if prior.node.edges.get("out") is not v:
            continue  # the factor already left the missing rows out (a normal-gamma regression)
        plates = [p.index for p in v.plates]
        if coords is not None:
            _coordinate_mask(prior, expand(coords.astype(float), plates, prior.plates, 1), v.name)
        else:
            prior.weight = expand(v.mask.astype(float), plates, prior.plates, 0)


def prune_selectors(c) -> None:
    """Drop the latent selector entries all of whose gated factor instances are missing (see above)."""

    for v in c.latent:
        factors = c.selector_factors.get(id(v), [])
        others = [x for x in c.consumers.get(id(v), []) if not (x.factor is not None and x.factor.node is v.prior)]
        if not factors or others or any(f.weight is None or f.gate.selector is not v for f in factors):
            continue  # (a selector gathered by labels, z[g], keeps every element: its rows are counted by label)
        plates = [p.index for p in v.plates]
        used = np.zeros(v.shape, bool)
        for f in factors:
            w = np.broadcast_to(f.weight, f.sizes) > 0
            used |= np.broadcast_to(reduce(w.astype(float), f.plates, plates, f.sizes, 0), v.shape) > 0
        if v.mask is not None:
            used |= v.mask
        if used.all():
            continue
        prior = next(f for f in c.factors if f.node is v.prior)
        prior.weight = expand(used.astype(float), plates, prior.plates, 0)
        c.pruned[v.name] = used


def _coordinate_mask(f, m: np.ndarray, name: str) -> None:
    p = f.params
    D = p["D"]
    if f.node.ftype is MV_GAUSSIAN:
        p["observed_coords"] = m
        return
    if f.node.ftype in (MV_GAUSSIAN_WISHART_MISSING, MV_GAUSSIAN_NORMAL_WISHART_MISSING):
        p.update(missing_patterns(m))  # the observed coordinates' marginal density, per missingness pattern
        return
    if f.node.ftype is not MV_GAUSSIAN_FIXED:
        raise ModelError(f"{name!r}: missing coordinates are not supported for factor {f.node.ftype.name}")
    if p["logdet"] is None:
        raise ModelError(f"{name!r}: missing coordinates under a flat (precision 0) density are not supported")
    if isinstance(p["precision"], Gate):
        raise ModelError(f"{name!r}: missing coordinates under precisions selected by fg.select are not supported; "
                         "mask whole rows, or use a gated Gamma or Wishart precision")
    rows = m.reshape(-1, D).astype(bool)
    patterns, inverse = np.unique(rows, axis=0, return_inverse=True)
    cov = np.linalg.inv(p["precision"])
    lam = np.zeros((len(patterns), D, D))
    logdet = np.zeros(len(patterns))
    for i, o in enumerate(patterns):  # one Schur complement per missingness pattern (few patterns)
        if o.any():
            so = cov[np.ix_(o, o)]
            lam[i][np.ix_(o, o)] = np.linalg.inv(so)
            logdet[i] = -np.linalg.slogdet(so)[1]
    inverse = inverse.reshape(-1)
    p["precision"] = lam[inverse].reshape(m.shape[:-1] + (D, D))
    p["logdet"] = logdet[inverse].reshape(m.shape[:-1])
    p["n_obs"] = m.sum(-1)
