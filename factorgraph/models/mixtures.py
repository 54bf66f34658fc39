"""Canned mixture models: ``models.mixture(family, K, data)``.

Every family is a gated factor: z_n ~ Categorical(π), π ~ Dirichlet(α·1_K), and the observation's
parameters are selected by z_n (``theta[z]``).  The fit is the mean-field VMP bound (Attias 1999; Bishop
2006 §10.2); the ELBO includes the entropy of every q(z_n).  Missing entries (``mask``) drop out of the
likelihood.  For comparing K by the evidence, ``log K!`` may be added to the bound: q picks one of the K!
equivalent labellings (Bishop 2006 §10.2.4).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.builders import gamma, gaussian, mv_gaussian, plate
from factorgraph.graph.discrete import bernoulli, beta, categorical, dirichlet
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.models.starts import best_of_starts
from factorgraph.posterior.results import Result
from factors.data_products import computed, is_lazy

FAMILIES = ("gaussian", "mv_gaussian", "bernoulli", "categorical")


def mixture_model(family: str, K: int, data: Any, *, mask: Any = None, concentration: float = 1.0,
                  prior: dict[str, Any] | None = None) -> Model:
    """The model of ``mixture``, for ``fg.infer`` or ``fg.compare``.

    Parameters
    ----------
    family
        ``"gaussian"``: x_nd ~ N(μ_kd, τ_kd⁻¹) per coordinate, μ_kd ~ N(m0, 1/l0), τ_kd ~ Gam(a0, b0);
        ``"mv_gaussian"``: x_n ~ N(μ_k, diag(α_k)⁻¹) with a full-covariance q(μ_k), μ_k ~ N(m0, I/l0),
        α_kd ~ Gam(a0, b0) (``prior={"shared": True}``: Λ_k = α_k I);
        ``"bernoulli"``: x_nd ~ Bernoulli(p_kd), p_kd ~ Beta(a, b);
        ``"categorical"``: x_nl ~ Categorical(φ_k) (integer labels, one row of L tokens per n, V = ``prior["V"]``
        or max + 1), φ_k ~ Dirichlet(beta·1_V).
    K
        Number of components; K = 1 is the single component (π is the point mass 1, q(z_n = 0) = 1), the
        baseline when K is chosen by the evidence.
    data
        (N,) or (N, D) observations (for ``"categorical"``, (N,) or (N, L) labels).
    mask
        True where observed, the shape of ``data``; missing entries drop out of the likelihood.
    concentration
        α of the Dirichlet prior on the weights π.
    prior
        Overrides of the hyperparameters named above.
    """
    if family not in FAMILIES:
        raise ModelError(f"mixture: family must be one of {FAMILIES}, got {family!r}")
    K = checks.positive_int(K, "mixture: K")
    x = data.astype(float) if is_lazy(data) else np.asarray(data, dtype=float)  # dask data stay in their chunks
    if x.ndim not in (1, 2) or x.shape[0] == 0:
        raise ModelError(f"mixture: data must be an (N,) or (N, D) array, got shape {x.shape}")
    if family == "mv_gaussian" and x.ndim != 2:
        raise ModelError(f"mixture: mv_gaussian needs (N, D) data, got shape {x.shape}")
    hp = {"m0": 0.0, "l0": 1e-2, "a0": 1.0, "b0": 1.0, "a": 1.0, "b": 1.0, "beta": 0.5, "shared": False}
    hp.update(prior or {})
    N = x.shape[0]
    m = None if mask is None else mask if is_lazy(mask) else np.asarray(mask, bool)
    obs = x if m is None else np.where(m, x, np.nan)
    with Model(f"{family}_mixture_K{K}") as model:
        k, n = plate("k", K), plate("n", N)
        pi = dirichlet("pi", np.full(K, float(concentration)))
        z = categorical("z", pi, plates=[n], categories=k)
        if family == "mv_gaussian":
            D = x.shape[1]
            d = plate("d", D)
            mu = mv_gaussian("mu", np.full(D, float(hp["m0"])), precision=float(hp["l0"]), plates=[k])
            a = gamma("alpha", hp["a0"], hp["b0"], plates=[k] if hp["shared"] else [k, d])
            mv_gaussian("x", mu[z], precision=a[z], plates=[n], observed=obs, mask=m)
            return model
        rows = [n] if x.ndim == 1 else [n, plate("d", x.shape[1])]
        cols = rows[1:]
        if family == "gaussian":
            mu = gaussian("mu", hp["m0"], precision=hp["l0"], plates=[k, *cols])
            tau = gamma("tau", hp["a0"], hp["b0"], plates=[k, *cols])
            gaussian("x", mu[z], precision=tau[z], plates=rows, observed=obs, mask=m)
        elif family == "bernoulli":
            p = beta("p", hp["a"], hp["b"], plates=[k, *cols])
            bernoulli("x", p[z], plates=rows, observed=obs, mask=m)
        else:
            V = int(hp["V"]) if "V" in hp else int(computed(np.nanmax(x))[0] + 1)  # dask: a max over the chunks
            phi = dirichlet("phi", np.full(V, float(hp["beta"])), plates=[k])
            categorical("x", phi[z], plates=rows, observed=obs, mask=m)
    return model


def mixture(family: str, K: int, data: Any, *, mask: Any = None, concentration: float = 1.0,
            prior: dict[str, Any] | None = None, seed: int | None = 0, max_iter: int = 500,
            tol: float = 1e-10, n_init: int = 4) -> Result:
    """Fit a K-component mixture of ``family`` to ``data`` by VMP (see ``mixture_model`` for the model).

    Returns the ``Result``: posteriors ``"pi"``, ``"z"`` (responsibilities) and the component parameters
    (``"mu"``, ``"tau"``/``"alpha"``, ``"p"`` or ``"phi"``), and the evidence lower bound.

    With the same prior for every component the labels are exchangeable and VB has local optima that differ
    in where q(z) starts: the fit is run from ``n_init`` starts (k-means++ on the data, seeds ``seed``,
    ``seed + 1``, …) and the one with the highest bound is returned, with a note in ``Result.notes`` giving
    every start's bound (``factorgraph.models.starts``); ``n_init=1`` runs the single start ``seed``.  Priors
    that tell the components apart (``prior={"m0": [-5.0, 0.0, 5.0]}`` with a small enough ``1/l0``) start
    q(z) from them instead, the same for every seed, so one start is run.
    """

    model = mixture_model(family, K, data, mask=mask, concentration=concentration, prior=prior)
    return best_of_starts(model, n_init, seed, "mixture", max_iter=max_iter, tol=tol)


__all__ = ["FAMILIES", "mixture", "mixture_model"]
