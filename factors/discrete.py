"""Conjugate discrete pairs: Beta prior, Bernoulli(p), Dirichlet prior, Categorical(p).

Beta(p | α, β):      E[log f] = (α−1)E[log p] + (β−1)E[log(1−p)] − log B(α, β).
Bernoulli(x | p):    E[log f] = E[x]E[log p] + (1 − E[x])E[log(1−p)];
                     to p: (E[x], 1 − E[x]); to x: logit E[log p] − E[log(1−p)].
Dirichlet(p | α):    E[log f] = Σ(α_k − 1)E[log p_k] − log B(α).
Categorical(z | p):  E[log f] = Σ E[z_k]E[log p_k]; to p: E[z]; to z: E[log p].
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaln

from distributions import Bernoulli, Beta, Categorical, Dirichlet

from .base import FactorType, Moments, log_mvbeta
from .contract import lazy_sum, pair_inner, plate_product

BETA = FactorType("Beta", out=Beta)
BERNOULLI = FactorType("Bernoulli", out=Bernoulli, probs=Beta)
DIRICHLET = FactorType("Dirichlet", out=Dirichlet)
CATEGORICAL = FactorType("Categorical", out=Categorical, probs=Dirichlet)


@BETA.rule("out", "vmp")
def beta_to_out(m: Moments, p: dict) -> tuple:
    return (p["alpha"] - 1.0, p["beta"] - 1.0)


@BETA.evidence(kind="exact")
def beta_evidence(m: Moments, p: dict) -> np.ndarray:
    lp, l1p = m["out"]
    return (p["alpha"] - 1.0) * lp + (p["beta"] - 1.0) * l1p - betaln(p["alpha"], p["beta"])


@BERNOULLI.rule("out", "vmp")
def bernoulli_to_out(m: Moments, p: dict) -> tuple:
    lp, l1p = m["probs"]
    return (lp - l1p,)


@BERNOULLI.rule("probs", "vmp")
def bernoulli_to_probs(m: Moments, p: dict) -> tuple:
    x = m["out"][0]
    return (x, 1.0 - x)


@BERNOULLI.evidence(kind="exact")
def bernoulli_evidence(m: Moments, p: dict) -> np.ndarray:
    x = m["out"][0]
    lp, l1p = m["probs"]
    # x (lp − l1p) + l1p: kept factored when the rows and a gate's components sit on different plates
    return lazy_sum(plate_product(x, lp - l1p), l1p)


@DIRICHLET.rule("out", "vmp")
def dirichlet_to_out(m: Moments, p: dict) -> tuple:
    return (p["concentration"] - 1.0,)


@DIRICHLET.evidence(kind="exact")
def dirichlet_evidence(m: Moments, p: dict) -> np.ndarray:
    a = p["concentration"]
    return ((a - 1.0) * m["out"][0]).sum(-1) - log_mvbeta(a)


@CATEGORICAL.rule("out", "vmp")
def categorical_to_out(m: Moments, p: dict) -> tuple:
    return (m["probs"][0],)


@CATEGORICAL.rule("probs", "vmp")
def categorical_to_probs(m: Moments, p: dict) -> tuple:
    return (m["out"][0],)


@CATEGORICAL.evidence(kind="exact")
def categorical_evidence(m: Moments, p: dict) -> np.ndarray:
    # one matrix product when the tokens and the gated components sit on different plates (LDA)
    return pair_inner(m["out"][0], m["probs"][0], 1)
