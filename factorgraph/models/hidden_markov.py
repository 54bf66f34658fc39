"""The canned hidden Markov model, ``models.hmm`` (re-exported from ``factorgraph.models``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.builders import gamma, gaussian, plate
from factorgraph.graph.counts import poisson
from factorgraph.graph.discrete import categorical, dirichlet
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.graph.sequences import markov_chain
from factorgraph.models.starts import best_of_starts
from factorgraph.posterior.results import Result
from factors.data_products import computed, is_lazy

EMISSIONS = ("gaussian", "poisson", "categorical")


def _sequences(y: Any) -> tuple[np.ndarray, np.ndarray]:
    """One sequence (1-D), equal-length sequences (2-D rows) or a list of 1-D sequences of any lengths ->
    (N, T) padded with 0 and the lengths."""
    if isinstance(y, list | tuple) and y and np.ndim(y[0]) == 1:
        seqs = [checks.constant(s, f"hmm: sequence {i}") for i, s in enumerate(y)]
    else:
        arr = checks.constant(y, "hmm: y")
        if arr.ndim not in (1, 2):
            raise ModelError(f"hmm: y must be a sequence, a 2-D array of sequences (rows) or a list of sequences, "
                             f"got shape {arr.shape}")
        if arr.ndim == 2:  # equal lengths: checked at once, no loop over the sequences
            bad = ~np.isfinite(arr).all(axis=1)
            if bad.any():
                raise ModelError(f"hmm: sequence {int(np.argmax(bad))} has a non-finite value")
            if arr.shape[1] < 1:
                raise ModelError("hmm: sequence 0 is empty")
            return arr.astype(float), np.full(arr.shape[0], arr.shape[1])
        seqs = [arr]
    lengths = np.array([len(s) for s in seqs])
    if np.any(lengths < 1):
        raise ModelError(f"hmm: sequence {int(np.argmin(lengths))} is empty")
    out = np.zeros((len(seqs), lengths.max()))
    for i, s in enumerate(seqs):
        if not np.all(np.isfinite(s)):
            raise ModelError(f"hmm: sequence {i} has a non-finite value")
        out[i, :len(s)] = s
    return out, lengths


def _lazy_sequences(y: Any) -> tuple[Any, None, dict]:
    """Dask sequences, (N, T) rows of equal length: the array kept lazy (cast to float) and the summaries the
    priors and checks need (mean, variance, min, max, whether all are integers) from one pass over the chunks;
    a non-finite value is named by its sequence."""
    if y.ndim != 2:
        raise ModelError(f"hmm: dask sequences must be a 2-D array (sequences × steps, of equal length), got shape "
                         f"{y.shape}")
    Y = y.astype(float)
    finite, mean, var, lo, hi, whole = computed(np.isfinite(Y).all(), Y.mean(), Y.var(), Y.min(), Y.max(),
                                                (Y == np.round(Y)).all())
    if not finite:
        bad = int(computed(np.argmin(np.isfinite(Y).all(axis=1)))[0])
        raise ModelError(f"hmm: sequence {bad} has a non-finite value")
    return Y, None, {"mean": float(mean), "var": float(var), "min": float(lo), "max": float(hi),
                     "integer": bool(whole)}


def hmm_model(y: Any, K: int, emission: str = "gaussian", concentration: float = 1.0) -> Model:
    """The model of ``hmm``, for ``fg.infer`` or ``fg.compare``."""
    K = checks.positive_int(K, "hmm: K")
    if emission not in EMISSIONS:
        raise ModelError(f"hmm: emission must be one of {EMISSIONS}, got {emission!r}")
    if is_lazy(y):  # dask sequences stay in their chunks: the fit is sharded over them (docs/design.md §10)
        Y, lengths, stats = _lazy_sequences(y)
    else:
        Y, lengths = _sequences(y)
        valid = np.arange(Y.shape[1]) < lengths[:, None]
        data = Y[valid]
        stats = {"mean": float(data.mean()), "var": float(data.var()), "min": float(data.min()),
                 "max": float(data.max()), "integer": bool(np.all(data == np.round(data)))}
    N, T = Y.shape
    with Model(f"hmm_{emission}_K{K}") as m:
        n, t = plate("n", N), plate("t", T)
        k = plate("k", K) if K > 1 else None
        kp = [k] if K > 1 else []  # K = 1: one set of emission parameters, no chain
        pi = dirichlet("pi", np.full(K, concentration)) if K > 1 else np.ones(1)
        A = dirichlet("A", np.full(K, concentration), plates=[k]) if K > 1 else np.ones((1, 1))
        z = markov_chain("z", initial=pi, transition=A, plates=[n, t], lengths=lengths) if K > 1 else None
        if emission == "gaussian":
            mean, var = stats["mean"], stats["var"] or 1.0
            mu = gaussian("mu", mean, precision=1.0 / (10.0 * var), plates=kp)
            tau = gamma("tau", 1.0, var, plates=kp)
            gaussian("y", mean=mu[z] if z is not None else mu, precision=tau[z] if z is not None else tau,
                     plates=[n, t], observed=Y)
        elif emission == "poisson":
            if stats["min"] < 0 or not stats["integer"]:
                raise ModelError("hmm: Poisson emissions need non-negative integer counts")
            lam = gamma("lam", 1.0, 1.0 / max(stats["mean"], 1e-3), plates=kp)
            poisson("y", rate=lam[z] if z is not None else lam, plates=[n, t], observed=Y)
        else:
            if stats["min"] < 0 or not stats["integer"]:
                raise ModelError("hmm: categorical emissions need integer symbols 0..M-1")
            M = max(int(stats["max"]) + 1, 2)
            B = dirichlet("B", np.full(M, concentration), plates=kp)
            categorical("y", probs=B[z] if z is not None else B, plates=[n, t], observed=Y)
    return m


def hmm(y: Any, K: int, emission: str = "gaussian", *, concentration: float = 1.0, max_iter: int = 500,
        tol: float = 1e-8, seed: int | None = 0, n_init: int = 4) -> Result:
    """A variational Bayesian hidden Markov model with K states (MacKay 1997; Beal 2003, ch. 3).

    z_1 ~ Cat(π), z_t | z_{t−1} ~ Cat(A[z_{t−1}]), π and the rows of A ~ Dirichlet(concentration), and
    emissions y_t | z_t = k:

    - ``"gaussian"``: N(μ_k, τ_k⁻¹), μ_k ~ N(ȳ, (10·s²)), τ_k ~ Gam(1, s²) (s² the data variance);
    - ``"poisson"``: Poisson(λ_k), λ_k ~ Gam(1, 1/ȳ) (prior mean the data mean);
    - ``"categorical"``: Cat(B_k) over symbols 0..M−1, B_k ~ Dirichlet(concentration).

    ``y`` is one sequence, a 2-D array of equal-length sequences (rows) or a list of sequences of any
    lengths.  q(z) is the exact chain posterior given the other factors (forward–backward); q(π), q(A)
    and the emission parameters are mean-field.  ``result.elbo`` bounds log p(y) and can compare K
    (``fg.compare``); ``result.posterior("z").mean()`` holds the smoothed marginals (sequences × steps × K).
    K = 1 is the model without a chain (i.i.d. emissions).

    The states are exchangeable (the same prior for each), so VB has local optima that differ in where q(z)
    starts: the fit is run from ``n_init`` starts of q(z) (k-means++ on the data, seeds ``seed``,
    ``seed + 1``, …) and the one with the highest bound is returned, with a note in ``Result.notes`` giving
    every start's bound (``factorgraph.models.starts``); ``n_init=1`` runs the single start ``seed``.
    Comparing K by the bound needs each K's best.
    """

    model = hmm_model(y, K, emission, concentration)
    return best_of_starts(model, n_init, seed, "hmm", max_iter=max_iter, tol=tol)
