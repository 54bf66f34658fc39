"""Seeding mixture selectors: starting responsibilities that break a mixture's symmetry.

When the components a selector chooses between are told apart by their starting posteriors (distinct,
informative priors: ``prior_led``), the selector starts from its update given them (the engine makes it), so
the labels agree with the priors whatever the seed; if that start leaves a component without a single row
(the data lie far from every prior), the drawn start below is used with its clusters named after the priors
(``prior_names``).  Otherwise the components are exchangeable and the start is drawn: k-means++ (D² sampling)
on the observed outputs of the factors a selector gates, a missing entry at its column's observed mean; for
LDA-like models, where each label gates one observed word, the labels' update from random near-uniform
topics.  The sharded engine draws the same starts chunk by chunk from these pieces.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import Gate, Indexed, Variable
from factors.discrete import CATEGORICAL
from factors.index import segment_sum
from factors.onehot import OneHot

from .compiled import CFactor


def categorical_init(v: Variable, factors: list[CFactor], rng: np.random.Generator) -> np.ndarray:
    """Starting responsibilities that break a mixture's symmetry.

    When a factor gated by ``v`` has an observed output (fully or partly: a missing entry stands at its
    column's observed mean), seed K prototypes among the data by k-means++ (D² sampling) and assign each
    data point mostly to its nearest prototype; otherwise draw Dirichlet(1) rows.  When each label gates one
    observed word of a Categorical (LDA's topic per token), k-means++ says nothing (every one-hot token is
    equally far from every prototype but its own word): the labels start from their update given random
    near-uniform topics, q(φ_k) = Dirichlet(λ_k), λ_kv ~ Gamma(100, 0.01) (``token_responsibilities``).  Random soft
    responsibilities make every component start at the data mean, from where VMP often merges clusters;
    data-driven seeding avoids most such optima.
    """
    K = v.event_shape[0] if v.event_shape else 2  # a Bernoulli selector has two categories
    tokens = gated_rows(v, factors) if token_selector(v, factors) else None
    data = None if tokens is not None else _gated_data(v, factors)
    if tokens is not None:  # one word per label (LDA): k-means++ on one-hot rows says nothing; random topics
        r = token_responsibilities(tokens, token_topics(rng, K, tokens.shape[1])).reshape(v.shape + (K,))
    elif data is None:
        r = rng.dirichlet(np.ones(K), size=v.shape)
    else:
        centres = [data[rng.integers(len(data))]]
        for _ in range(1, K):
            d2 = np.min([((data - c) ** 2).sum(-1) for c in centres], axis=0)
            total = d2.sum()
            idx = rng.choice(len(data), p=d2 / total) if total > 0 else rng.integers(len(data))
            centres.append(data[idx])
        d2 = np.stack([((data - c) ** 2).sum(-1) for c in centres], axis=-1)
        # ties (one-hot data such as word tokens: every non-prototype is equally far) go to a random nearest
        d2 = d2 + rng.random(d2.shape) * 1e-9 * (1.0 + d2.max())
        r = np.full(d2.shape, 0.1 / K)
        r[np.arange(len(data)), d2.argmin(-1)] += 0.9
        r = r.reshape(v.shape + (K,))
    if v.mask is not None:
        obs = np.nan_to_num(v.value)
        if not v.event_shape:  # Bernoulli: observed 0/1 as (q(False), q(True))
            obs = np.stack([1.0 - obs, obs], axis=-1)
        if v.mask.any():  # name the seeded clusters after the observed labels they hold most of
            from scipy.optimize import linear_sum_assignment

            agree = np.where(v.mask[..., None], r, 0.0).reshape(-1, K).T @ obs.reshape(-1, K)
            r = r[..., linear_sum_assignment(-agree)[1].argsort()]
        r = np.where(v.mask[..., None], obs, r)
    return r


def prior_led(v: Variable, factors: list[CFactor], q: dict[str, Any]) -> bool:
    """Whether every two components that ``v`` selects are told apart by their starting posteriors.

    The parameters gated by ``v`` in ``factors`` (``theta[z]``: a latent variable at its start ``q``, or a
    constant) give each component k the means m_k and standard deviations s_k of their elements (a constant:
    s_k = 0).  Components j and k are distinct when some element has |m_j − m_k| > s_j + s_k: their
    one-standard-deviation intervals do not overlap.  When every pair is distinct (the priors are informative
    and not exchangeable: ``mu[1] ~ N(3, 1)``, ``mu[2] ~ N(10, 1)``) the labels have a meaning the data cannot
    swap, and the selector starts from its update given the components' starting posteriors: each row goes
    mostly to the component whose prior explains it best.  Exchangeable priors (the same for every
    component) give False: the start is then drawn (``categorical_init``).
    """
    K = v.event_shape[0] if v.event_shape else 2
    apart = np.zeros((K, K), bool)
    for mean, sd in _component_moments(v, factors, q):
        if mean.shape[0] != K:
            continue
        gap = np.abs(mean[:, None] - mean[None, :])
        with np.errstate(invalid="ignore"):
            apart |= np.any(gap > sd[:, None] + sd[None, :], axis=-1)
    return K > 1 and bool(apart[np.triu_indices(K, 1)].all())


def supported(r: np.ndarray) -> bool:
    """Whether every component is the most probable label of some element of responsibilities ``r``
    (elements × K; an all-zero row, a step past a sequence's end, counts for none)."""
    r = np.asarray(r).reshape(-1, np.shape(r)[-1])
    return bool(np.all(np.bincount(r[r.sum(-1) > 0].argmax(-1), minlength=r.shape[-1]) > 0))


def prior_names(agree: np.ndarray) -> np.ndarray:
    """The order of a drawn start's clusters that names them after the components' priors: ``r[..., order]``
    for ``agree[c, k]`` = Σ_n r_nc·s_nk, the agreement of cluster c with component k's prior scores
    s_nk = E[log p(x_n | θ_k)] under the priors; the matching maximises Σ_c agree[c, k(c)] (Hungarian)."""
    from scipy.optimize import linear_sum_assignment

    return np.argsort(linear_sum_assignment(-np.asarray(agree))[1])


def agreement(r: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``agree[c, k]`` = Σ_n r_nc·s_nk over the elements of responsibilities ``r`` and prior scores ``scores``
    (each row's scores shifted to a maximum of 0, which changes no matching), for ``prior_names``."""
    K = np.shape(r)[-1]
    s = np.broadcast_to(scores, np.shape(r)).reshape(-1, K)
    return np.asarray(r).reshape(-1, K).T @ (s - s.max(-1, keepdims=True))


def _component_moments(v: Variable, factors: list[CFactor], q: dict[str, Any]):
    """(means, standard deviations), each (K, elements), of every parameter gated by ``v`` in ``factors``: a
    latent variable at its posterior in ``q``, a constant with no spread; an expression (``(a + b)[z]``), an
    observed variable or one with no start yet gives none."""
    seen = set()
    for f in factors:
        for a in f.node.edges.values():
            if not isinstance(a, Gate) or _selector_source(a.selector) is not v or id(a) in seen:
                continue
            seen.add(id(a))
            src = a.source
            if isinstance(src, Variable):
                if src.name not in q or a.plate not in src.plates:
                    continue
                try:
                    mean = np.asarray(q[src.name].mean(), dtype=float)
                    var = np.asarray(q[src.name].var(), dtype=float)
                except NotImplementedError:  # a posterior without moments tells nothing apart
                    continue
                axis = src.plates.index(a.plate)
                if var.shape != mean.shape:
                    continue
            elif isinstance(src, np.ndarray | float | int):
                mean = np.asarray(src, dtype=float)
                axis = a.value_plates().index(a.plate)
                var = np.zeros_like(mean)
            else:
                continue
            K = mean.shape[axis]
            yield (np.moveaxis(mean, axis, 0).reshape(K, -1),
                   np.sqrt(np.maximum(np.moveaxis(var, axis, 0), 0.0)).reshape(K, -1))


def token_selector(v: Variable, factors: list[CFactor]) -> bool:
    """Whether the factor ``gated_rows`` reads is a Categorical whose every observation has its own label (one
    token per row of ``gated_rows``: no plate of the output beyond the selector's, save size-1 ones)."""
    f = _gated_source(v, factors)
    return f is not None and f.node.ftype is CATEGORICAL and all(
        p in v.plates or p.size == 1 for p in f.node.edges["out"].plates)


def token_topics(rng: np.random.Generator, K: int, V: int) -> np.ndarray:
    """Random near-uniform topics for a start, Dirichlet(λ_k) with λ_kv ~ Gamma(100, 0.01) (scikit-learn's start
    for its batch LDA)."""
    return rng.gamma(100.0, 0.01, (K, V))


def token_responsibilities(tokens: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """q(z_n = k) ∝ exp E[log φ_k,w_n] under q(φ_k) = Dirichlet(λ_k), for one-hot token rows (a missing row: uniform):
    the selector's update from random topics alone."""
    from scipy.special import digamma, softmax

    elog = digamma(lam) - digamma(lam.sum(-1, keepdims=True))
    if isinstance(tokens, OneHot):  # a gather E[log φ_k,w_n], not a product with one-hot rows
        return softmax(tokens.zeroed().reshape(-1, 1, tokens.K).inner(elog[None]), axis=-1)
    return softmax(np.nan_to_num(tokens) @ elog.T, axis=-1)


def _gated_source(v: Variable, factors: list[CFactor]) -> CFactor | None:
    """The first factor gated by v with an observed output that ``gated_rows`` reads."""
    for f in factors:
        out = f.node.edges.get("out")
        sel = None if f.gate is None else f.gate.selector
        if sel is None or _selector_source(sel) is not v or not isinstance(out, Variable) or out.value is None:
            continue
        if not isinstance(out.mask, np.ndarray) or checks.is_dask(out.value):
            continue
        if set(p.index for p in sel.plates) <= set(p.index for p in out.plates):
            return f
    return None


def gathered_selectors(model) -> list[str]:
    """The selectors gathered by labels (``mu[z[g]]``) among the model's gates, as "'z' (gathered onto 'n')"."""
    return sorted({f"{a.selector.source.name!r} (gathered by labels onto {a.selector.plate.name!r})"
                   for f in model.factors for a in (*f.edges.values(), *f.params.values())
                   if isinstance(a, Gate) and isinstance(a.selector, Indexed)})


def _selector_source(sel: Any) -> Any:
    """The selector variable of a gate: z itself, or z of a selector gathered by labels (z[g])."""
    return sel.source if isinstance(sel, Indexed) else sel


def gated_rows(v: Variable, factors: list[CFactor]) -> np.ndarray | None:
    """The outputs of a factor gated by v, one row per element of v's plates, NaN where an entry is missing
    (the output's mask, or an mv_gaussian's coordinate mask); None when no gated factor has observed outputs."""
    f = _gated_source(v, factors)
    if f is None:
        return None
    out = f.node.edges["out"]
    sel = f.gate.selector
    zp = [p.index for p in sel.plates]
    op = [p.index for p in out.plates]
    if isinstance(out.value, OneHot) and not isinstance(sel, Indexed):  # word tokens: keep them as labels
        first = [op.index(i) for i in zp]
        rest = [i for i in range(len(op)) if i not in first]
        lab = np.transpose(out.value.labels, first + rest).reshape(int(np.prod(v.shape, dtype=int)), -1)
        if lab.shape[1] == 1:  # one token per label (``token_selector``)
            return OneHot(lab[:, 0], out.value.K)
    value = np.asarray(out.value, dtype=float)
    seen = out.mask.reshape(out.mask.shape + (1,) * (value.ndim - out.mask.ndim))
    coords = getattr(out, "coord_mask", None)
    if coords is not None and np.shape(coords) == value.shape:
        seen = seen & coords
    value = np.where(np.broadcast_to(seen, value.shape), value, np.nan)
    first = [op.index(i) for i in zp]
    rest = [i for i in range(value.ndim) if i not in first]
    rows = np.transpose(value, first + rest)
    if isinstance(sel, Indexed):  # z[g]: each element of z stands for the mean of its rows (NaN: none observed)
        ax = sel.plates.index(sel.plate)
        front = np.moveaxis(rows, ax, 0)
        flat = front.reshape(front.shape[0], -1)
        have = ~np.isnan(flat)
        sums = segment_sum(sel.labels, np.where(have, flat, 0.0), sel.along.size)
        counts = segment_sum(sel.labels, have.astype(float), sel.along.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (sums / counts).reshape((sel.along.size,) + front.shape[1:])
        rows = np.moveaxis(means, 0, sel.source.plates.index(sel.along))  # z's own plate order
    return rows.reshape(int(np.prod(v.shape, dtype=int)), -1)


def observed_centre(counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Each column's mean over its observed entries (0 for a column with none): where missing entries stand
    for the seeding."""
    return np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), 0.0)


def _gated_data(v: Variable, factors: list[CFactor]) -> np.ndarray | None:
    """``gated_rows`` with each missing entry at its column's observed mean (a row with nothing observed sits at
    the centre), each column scaled to unit spread."""
    data = gated_rows(v, factors)
    if data is None:
        return None
    missing = np.isnan(data)
    if missing.any():
        data = np.where(missing, observed_centre((~missing).sum(0), np.where(missing, 0.0, data).sum(0)), data)
    scale = data.std(0)
    return data / np.where(scale > 0, scale, 1.0)


__all__ = ["agreement", "categorical_init", "gated_rows", "gathered_selectors", "observed_centre", "prior_led",
           "prior_names", "supported", "token_responsibilities", "token_selector", "token_topics"]
