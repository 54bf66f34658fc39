"""Missing observations (``mask=``) of the count, ordinal and heteroscedastic families drop out: a fit with rows
masked equals the fit to the other rows alone (posterior and ELBO)."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg

RNG = np.random.default_rng(0)
N = 60
X = np.c_[np.ones(N), RNG.normal(size=N)]
COUNTS = RNG.negative_binomial(2.0, 2.0 / (2.0 + np.exp(X @ [1.0, 0.5]))).astype(float)
CUTS = np.array([-1.0, 0.0, 1.2])
LABELS = np.searchsorted(CUTS, X[:, 1] + RNG.logistic(size=N))


def _fit(kind, rows, mask=None):
    Xs = X[rows]
    with fg.Model(kind) as model:
        n = fg.plate("n", len(Xs))
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=np.eye(2))
        eta = fg.inner(Xs, w, plates=[n])
        if kind == "negative_binomial":
            fg.negative_binomial("y", log_mean=eta, dispersion=2.0, observed=COUNTS[rows], mask=mask)
        elif kind == "zero_inflated_poisson":
            fg.zero_inflated_poisson("y", log_rate=eta, zero_prob=0.2, observed=COUNTS[rows], mask=mask)
        elif kind == "heteroscedastic":
            v = fg.mv_gaussian("v", np.zeros(2), np.eye(2))
            fg.gaussian("y", mean=eta, log_sd=fg.inner(Xs, v, plates=[n]), observed=np.log1p(COUNTS[rows]), mask=mask)
        else:
            getattr(fg, kind)("y", eta, cutpoints=CUTS, observed=LABELS[rows], mask=mask)
    r = fg.infer(model, tol=1e-13)
    return r.posterior("w").mean(), r.elbo


@pytest.mark.parametrize("kind", ["negative_binomial", "zero_inflated_poisson", "heteroscedastic",
                                  "ordered_logistic", "ordered_probit"])
def test_masked_rows_drop_out(kind):
    mask = np.ones(N, bool)
    mask[:8] = False
    w_masked, elbo_masked = _fit(kind, np.arange(N), mask)
    w_rest, elbo_rest = _fit(kind, np.arange(8, N))
    np.testing.assert_allclose(w_masked, w_rest, atol=1e-10)
    assert elbo_masked == pytest.approx(elbo_rest, abs=1e-9)
