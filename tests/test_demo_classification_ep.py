"""The classification demo (EP, NCVMP and Laplace beside importance sampling) at its --small size."""

from __future__ import annotations

import importlib


def test_classification_demo_small():
    """EP, NCVMP and Laplace on probit and logistic classification beside importance sampling: EP's mean is close
    to the reference (within its Monte Carlo noise) and nearer than Laplace's, and so is its evidence."""
    out = importlib.import_module("demos.classification_ep").main(small=True, seed=0)
    rows = {(r["link"], r["method"]): r for r in out["rows"]}
    for link in ("probit", "logistic"):
        ep, la = rows[(link, "EP")], rows[(link, "Laplace")]
        assert ep["converged"] and ep["ess"] > 2000
        assert ep["mean_err"] < 0.03 and ep["mean_err"] < 0.5 * la["mean_err"]
        assert abs(ep["evidence_err"]) < 0.1 and abs(ep["evidence_err"]) < abs(la["evidence_err"])
        assert rows[(link, "NCVMP")]["evidence_err"] < 0.02  # a lower bound (up to the reference's noise)
