"""Forward samplers of counts: Poisson, binomial and multinomial, with their log and logit links.

* ``Poisson``: y ~ Poisson(λ e^o) with the log exposure o (0 without); ``PoissonLog`` at λ = exp(x).
* ``Binomial``: y ~ Bin(n, p) with the factor's numbers of trials n; ``BinomialLogit`` at p = σ(x).
* ``Multinomial``: y ~ Mult(n, p / Σ_k p_k), the trials n the factor's (``trials=``) or else the row sums
  of the observed counts;
  ``MultinomialSoftmax`` at p_k = exp(x_k) / Σ_j exp(x_j).
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, ModelError, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, sampler, softmax_logits


def _poisson_rate(s: Forward, v: Variable, f: FactorNode, rate: np.ndarray, full: tuple[int, ...]) -> None:
    le = np.asarray(f.params.get("log_exposure", 0.0), float)
    s.put(v, s.rng.poisson(np.broadcast_to(rate * np.exp(le), full)).astype(float), full)


@sampler("Poisson")
def _poisson(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    _poisson_rate(s, v, f, s.arg(f.edges["rate"], frame, v.name), full)


@sampler("PoissonLog")
def _poisson_log(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    _poisson_rate(s, v, f, np.exp(s.arg(f.edges["log_rate"], frame, v.name)), full)


def _binomial_p(s: Forward, v: Variable, f: FactorNode, p: np.ndarray, full: tuple[int, ...]) -> None:
    n = np.broadcast_to(np.asarray(f.params["trials"]).astype(np.int64), full)
    s.put(v, s.rng.binomial(n, np.broadcast_to(p, full)).astype(float), full)


@sampler("Binomial")
def _binomial(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    _binomial_p(s, v, f, s.arg(f.edges["probs"], frame, v.name), full)


@sampler("BinomialLogit")
def _binomial_logit(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    x = s.arg(f.edges["logit"], frame, v.name)
    _binomial_p(s, v, f, 0.5 * (1.0 + np.tanh(0.5 * x)), full)


def _multinomial_p(s: Forward, v: Variable, f: FactorNode, p: np.ndarray, full: tuple[int, ...]) -> None:
    p = np.broadcast_to(p, full + p.shape[-1:])
    p = p / p.sum(-1, keepdims=True)
    if "trials" in f.params:
        n = np.broadcast_to(np.asarray(f.params["trials"]).astype(np.int64), full)
        s.put(v, s.rng.multinomial(n, p).astype(float), full)
        return
    if v.value is None:
        raise ModelError(f"sampling: the numbers of trials of {v.name!r} come from its observed counts, which it lacks")
    if v.mask is not None and not np.all(v.mask):  # a missing row has no number of trials
        raise ModelError(f"sampling: the numbers of trials of {v.name!r} come from its observed counts (their row "
                         f"sums), but {int(np.size(v.mask) - np.count_nonzero(v.mask))} of its rows are missing: give "
                         "counts for every row (at new rows, in fg.predict's data), or declare trials=")
    n = np.nansum(v.value, axis=-1).astype(np.int64)
    if n.shape != full[1:]:  # fg.predict at a new number of rows without new counts
        raise ModelError(f"sampling: the numbers of trials of {v.name!r} come from its observed counts, of shape "
                         f"{v.value.shape}; at plates of sizes {full[1:]} give counts of that shape (their row "
                         "sums are the trials)")
    n = np.broadcast_to(n, full)
    s.put(v, s.rng.multinomial(n, p).astype(float), full)


@sampler("Multinomial")
def _multinomial(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    _multinomial_p(s, v, f, s.arg(f.edges["probs"], frame, v.name), full)


@sampler("MultinomialSoftmax")
def _multinomial_softmax(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                         full: tuple[int, ...]) -> None:
    x = softmax_logits(s, v, f, frame, "logits")
    e = np.exp(x - x.max(-1, keepdims=True))
    _multinomial_p(s, v, f, e / e.sum(-1, keepdims=True), full)
