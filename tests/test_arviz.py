"""result.to_arviz(): the InferenceData's groups, dims and coords; ArviZ's summary, plots, LOO, WAIC and compare on
it; a netCDF round trip; and PSIS-LOO against a brute-force leave-one-out refit of a logistic regression."""

import warnings

import matplotlib
import numpy as np
import pytest

import factorgraph as fg

matplotlib.use("Agg")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


def _logistic(X, y, name="lr"):
    with fg.Model(name) as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", np.zeros(X.shape[1]), precision=np.eye(X.shape[1]))
        fg.bernoulli_logit("y", fg.inner(X, w, plates=[n]), observed=y)
    return fg.infer(m, fg.NCVMP())


def _logistic_data(N=36, seed=3):
    rng = np.random.default_rng(seed)
    X = np.c_[np.ones(N), rng.normal(size=(N, 2))]
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-X @ np.array([0.3, 1.5, -1.0])))).astype(float)
    return X, y


def _regression(seed=0, missing=False):
    rng = np.random.default_rng(seed)
    N, G = 24, 3
    g = np.arange(N) % G
    y = rng.normal(size=N) + np.array([-1.0, 0.0, 1.5])[g]
    mask = np.ones(N, bool)
    if missing:
        mask[[2, 7]] = False
    with fg.Model("hier") as m:
        n, grp = fg.plate("n", N), fg.plate("group", G)
        a = fg.gaussian("a", 0.0, precision=0.1, plates=[grp])
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("y", a[g], precision=tau, plates=[n], observed=y, mask=mask)
    return fg.infer(m), y, mask


def test_groups_dims_and_coords():
    r, y, _ = _regression()
    idata = r.to_arviz(draws=200, seed=1, prior=True)
    assert set(idata.groups()) >= {"posterior", "observed_data", "log_likelihood", "prior", "prior_predictive"}
    post = idata.posterior
    assert post["a"].dims == ("chain", "draw", "group") and post["a"].shape == (4, 50, 3)  # 4 chains by default
    assert post["tau"].dims == ("chain", "draw")
    np.testing.assert_array_equal(post["group"].values, np.arange(3))
    np.testing.assert_array_equal(post["a"].values.reshape(200, 3), r.sample(200, 1)["a"])  # q's draws, in order
    np.testing.assert_array_equal(idata.observed_data["y"].values, y)
    assert idata.log_likelihood["y"].dims == ("chain", "draw", "n")
    lp = idata.log_likelihood["y"].values.reshape(200, 24)
    d = r.sample(200, 1)
    t = d["tau"][:, None]
    ref = -0.5 * np.log(2 * np.pi / t) - 0.5 * t * (y - d["a"][:, np.arange(24) % 3]) ** 2
    np.testing.assert_allclose(lp, ref, rtol=1e-12)
    assert idata.prior["a"].shape == (4, 50, 3) and idata.prior_predictive["y"].shape == (4, 50, 24)
    assert idata.attrs["inference_library"] == "fgvmp" and idata.attrs["evidence"] == pytest.approx(r.elbo)


def test_missing_entries_are_nan_in_the_data_and_absent_from_the_log_likelihood():
    r, y, mask = _regression(missing=True)
    idata = r.to_arviz(draws=100)
    obs = idata.observed_data["y"].values
    assert np.all(np.isnan(obs[~mask])) and np.array_equal(obs[mask], y[mask])
    ll = idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "y_observed") and ll.shape == (4, 25, mask.sum())
    np.testing.assert_array_equal(ll["y_observed"].values, np.flatnonzero(mask))
    assert np.all(np.isfinite(ll.values))
    assert np.isfinite(az.loo(idata).elpd_loo)


def test_arviz_summary_plot_and_netcdf_round_trip(tmp_path):
    r, _, _ = _regression()
    idata = r.to_arviz(draws=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = az.summary(idata, var_names=["a", "tau"])
    assert list(s.index) == ["a[0]", "a[1]", "a[2]", "tau"]
    np.testing.assert_allclose(s["mean"].values[:3], r.posterior("a").mean(), atol=4 * r.posterior("a").std().max()
                               / np.sqrt(300))
    axes = az.plot_posterior(idata, var_names=["tau"])
    assert np.ravel(axes)[0].get_title() == "tau"
    path = tmp_path / "fit.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    for group in ("posterior", "observed_data", "log_likelihood"):
        assert back[group].equals(idata[group]), group
    assert back.attrs["evidence_kind"] == r.evidence_kind


def test_mixture_log_likelihood_is_per_row_and_named_by_plates():
    rng = np.random.default_rng(2)
    x = np.r_[rng.normal(-3, 1, 30), rng.normal(3, 1, 30)]
    with fg.Model("mix") as m:
        n, k = fg.plate("n", 60), fg.plate("k", 2)
        pi = fg.dirichlet("pi", np.ones(2))
        mus = fg.gaussian("mus", 0.0, precision=0.01, plates=[k])
        z = fg.categorical("z", pi, plates=[n], categories=k)
        fg.gaussian("x", mus[z], precision=1.0, plates=[n], observed=x)
    idata = fg.infer(m).to_arviz(draws=200)
    assert idata.posterior["pi"].dims == ("chain", "draw", "k")
    assert idata.posterior["z"].dims == ("chain", "draw", "n")
    assert idata.log_likelihood["x"].dims == ("chain", "draw", "n")
    loo = az.loo(idata)
    assert loo.elpd_loo < 0 and np.all(loo.pareto_k.values < 0.7)


def test_az_compare_and_fg_compare_loo_column():
    X, y = _logistic_data()
    good, bad = _logistic(X, y, "full"), _logistic(X[:, :1], y, "intercept")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = az.compare({"full": good.to_arviz(chains=1), "intercept": bad.to_arviz(chains=1)})
    assert table.index[0] == "full"
    c = fg.compare({"full": good, "intercept": bad}, loo=True)
    assert c.elpd_loo is not None and c.elpd_loo_se is not None
    np.testing.assert_allclose(c.elpd_loo, table.loc[["full", "intercept"], "elpd_loo"].values, rtol=1e-10)
    assert "elpd_loo" in str(c)
    plain = fg.compare({"full": good, "intercept": bad})
    assert plain.elpd_loo is None and "elpd_loo" not in str(plain)


def _log_mean_sigmoid(mean, var, nodes=60):
    """log E[σ(a)] for a ~ N(mean, var), by Gauss–Hermite quadrature."""
    t, wts = np.polynomial.hermite_e.hermegauss(nodes)
    a = mean + np.sqrt(var) * t
    return np.log(np.sum(wts / (1.0 + np.exp(-a))) / np.sqrt(2 * np.pi))


def test_psis_loo_agrees_with_a_brute_force_leave_one_out_refit():
    X, y = _logistic_data()
    N = len(y)
    idata = _logistic(X, y).to_arviz(draws=4000, seed=5)
    loo = az.loo(idata, pointwise=True)
    brute = np.empty(N)
    for i in range(N):  # refit without row i; log p(y_i | y_−i) = log E_{q−i}[σ(±x_iᵀw)]
        keep = np.arange(N) != i
        q = _logistic(X[keep], y[keep], f"lr-{i}").posterior("w")
        s = 2.0 * y[i] - 1.0
        brute[i] = _log_mean_sigmoid(s * X[i] @ q.mean(), X[i] @ q.cov() @ X[i])
    assert abs(loo.elpd_loo - brute.sum()) < loo.se, (loo.elpd_loo, brute.sum(), loo.se)
    assert abs(loo.elpd_loo - brute.sum()) < 0.1 * loo.se  # one run: −19.574 against −19.550, se 2.54
    # the pointwise terms agree too (each to well within a tenth of a nat)
    np.testing.assert_allclose(loo.loo_i.values, brute, atol=0.1)


def test_compare_loo_needs_the_variable_when_a_model_has_several():
    rng = np.random.default_rng(4)
    with fg.Model("two") as m:
        n = fg.plate("n", 12)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        fg.gaussian("y1", mu, precision=1.0, plates=[n], observed=rng.normal(size=12))
        fg.gaussian("y2", mu, precision=4.0, plates=[n], observed=rng.normal(size=12))
    r = fg.infer(m)
    with pytest.raises(fg.ModelError, match=r"several observed variables \['y1', 'y2'\].*loo='y1'"):
        fg.compare({"two": r}, loo=True)
    with pytest.raises(fg.ModelError, match="no observed variable 'y3'"):
        fg.compare({"two": r}, loo="y3")
    c = fg.compare({"two": r}, loo="y2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = az.loo(r.to_arviz(), var_name="y2")
    assert c.elpd_loo[0] == pytest.approx(ref.elpd_loo) and c.elpd_diff_se[0] == 0.0


def test_hmm_to_arviz_scores_sequences():
    from factorgraph import models

    y = np.random.default_rng(5).poisson(np.repeat([2.0, 9.0, 2.0], 15)).astype(float)
    idata = models.hmm(y, 2, "poisson").to_arviz(draws=200)
    ll = idata.log_likelihood["y"]
    assert ll.dims == ("chain", "draw", "n") and ll.shape == (4, 50, 1)  # one entry per sequence (here one)
    assert np.all(np.isfinite(idata.log_likelihood["y"].values))


def test_student_t_missing_rows_are_missing_in_the_data_and_the_log_likelihood():
    rng = np.random.default_rng(6)
    y = rng.standard_t(3, size=15)
    mask = np.ones(15, bool)
    mask[[0, 9]] = False
    with fg.Model("robust") as m:
        n = fg.plate("n", 15)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        fg.student_t("y", mu, 1.0, dof=3.0, plates=[n], observed=y, mask=mask)
    idata = fg.infer(m).to_arviz(draws=100)
    obs = idata.observed_data["y"].values
    assert np.all(np.isnan(obs[~mask])) and np.array_equal(obs[mask], y[mask])
    np.testing.assert_array_equal(idata.log_likelihood["y_observed"].values, np.flatnonzero(mask))
    mu_draws = idata.posterior["mu"].values.ravel()
    from scipy import stats

    ref = stats.t.logpdf(y[mask], 3.0, mu_draws[:, None], 1.0)
    np.testing.assert_allclose(idata.log_likelihood["y"].values.reshape(100, -1), ref, rtol=1e-12)


def test_a_learned_student_t_dof_is_used():
    from scipy import stats

    y = np.random.default_rng(8).standard_t(2, size=60)
    with fg.Model("robust-learn") as m:
        n = fg.plate("n", 60)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        fg.student_t("y", mu, 1.0, dof="learn", plates=[n], observed=y)
    r = fg.infer(m)
    nu = r.hyperparameters("y")["dof"]
    assert nu != pytest.approx(4.0, abs=0.05)  # moved from its start
    idata = r.to_arviz(draws=50, chains=1)
    ref = stats.t.logpdf(y, nu, idata.posterior["mu"].values[0][:, None], 1.0)
    np.testing.assert_allclose(idata.log_likelihood["y"].values[0], ref, rtol=1e-12)


def test_posterior_predictive_group_replicates_the_data_and_plot_ppc_runs():
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    rng = np.random.default_rng(5)
    X = np.c_[np.ones(50), rng.normal(size=50)]
    y = X @ [1.0, 2.0] + 0.5 * rng.normal(size=50)
    with fg.Model("ppc") as m:
        n = fg.plate("n", 50)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=1e-2)
        fg.gaussian("y", mean=fg.inner(X, w, [n]), precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
    r = fg.infer(m)
    idata = r.to_arviz(draws=3000, seed=2, posterior_predictive=True)
    rep = idata.posterior_predictive["y"]
    assert rep.dims == ("chain", "draw", "n") and rep.shape == (4, 750, 50)
    # E[y_rep_i] = x_iᵀE[w]; Var = x_iᵀΣx_i + E[1/τ]: the replicates' mean and variance per row, to MC error
    q_w, q_tau = r.posterior("w"), r.posterior("tau")
    mean = X @ q_w.mean()
    var = np.einsum("nd,de,ne->n", X, q_w.cov(), X) + q_tau.rate / (q_tau.shape - 1)
    draws = rep.values.reshape(3000, 50)
    se = np.sqrt(var / 3000)
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se)
    assert np.all(np.abs(draws.var(0) / var - 1) < 5 * np.sqrt(2 / 3000) + 0.02)
    az.plot_ppc(idata, num_pp_samples=50)


def test_draws_split_into_chains_so_arviz_diagnostics_are_meaningful():
    """Independent draws of q in 4 chains: az.summary checks them (R-hat ≈ 1, ESS ≈ S) without warning that one
    chain cannot be checked; the split must be even."""
    r, _, _ = _regression()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Shape validation failed" of one chain would be raised here
        table = az.summary(r.to_arviz(draws=2000, seed=3))
    assert np.all(np.abs(table["r_hat"] - 1.0) < 0.01)
    assert np.all(table["ess_bulk"] > 1000)
    one = r.to_arviz(draws=30, chains=1)
    assert one.posterior["tau"].shape == (1, 30) and one.attrs["draws_from"].endswith("split into 1 chains)")
    assert r.to_arviz(draws=30, chains=3).posterior["a"].shape == (3, 10, 3)
    with pytest.raises(fg.ModelError, match=r"to_arviz: 30 draws do not split into 4 chains of equal length; pass "
                                            r"draws=32 or 28 \(a multiple of chains=4\), or chains=1"):
        r.to_arviz(draws=30)
    with pytest.raises(fg.ModelError, match=r"to_arviz: draws must be a positive integer, got 3\.0"):
        r.to_arviz(draws=3.0)
    with pytest.raises(fg.ModelError, match=r"to_arviz: chains must be an integer ≥ 1, got 0"):
        r.to_arviz(draws=4, chains=0)
