"""The Gibbs demos at their small size: eight schools by Gibbs against NUTS with the variational fits scored by
``fg.agreement``, and Old Faithful's two-state HMM by Gibbs (FFBS) against variational Bayes."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

pytest.importorskip("arviz")


@pytest.fixture(scope="module")
def schools():
    return importlib.import_module("demos.gibbs_eight_schools").main(small=True)


def test_eight_schools_gibbs_near_nuts_and_tables(schools):
    for label, rows in schools["moments"].items():
        means, sds = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
        ref = np.array(schools["nuts"])
        # 300 draws of a slowly mixing chain: within half a NUTS sd of NUTS's means, sds within 30 %
        assert np.all(np.abs(means - ref[:, 0]) < 0.5 * ref[:, 1]), label
        assert np.all(np.abs(sds / ref[:, 1] - 1) < 0.3), label
    tables = schools["tables"]
    assert len(tables) == 3 and all(np.isfinite(t[["z", "sd_ratio", "mcse_ref"]].to_numpy()).all()
                                    for t in tables.values())
    mf = tables["non-centred mean field (VMP)"].loc["tau", "sd_ratio"]
    sq = tables["tau integrated (ScaleQuadrature)"].loc["tau", "sd_ratio"]
    assert tables["centred mean field (NCVMP)"].loc["tau", "sd_ratio"] < 0.8  # mean field is too narrow in τ
    assert sq > mf  # integrating τ out widens q(τ) towards the sampler's


def test_faithful_hmm_gibbs_agrees_with_vb():
    out = importlib.import_module("demos.gibbs_faithful_hmm").main(small=True)
    table = out["table"]
    assert set(table["variable"]) == {"mu", "tau", "pi", "A"}
    assert out["max_z"] < 0.5
    mu = out["draws"]["mu"].reshape(-1, 2).mean(0)
    np.testing.assert_allclose(np.sort(mu), [55.6, 80.5], atol=1.5)
