"""fg.predict: posterior predictive draws checked against analytic and quadrature predictives.

Tolerances are Monte Carlo standard errors (4 SE) of the predictive draws; the reference values are
computed independently of the sampler (closed forms, Gauss–Hermite quadrature).
"""

import pickle

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import ModelError, models

S = 20000  # draws


def _regression_data(N, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    return X, X @ np.array([1.0, -2.0, 0.5]) + 0.5 * rng.normal(size=N)


def _sigmoid(u):
    return 0.5 * (1.0 + np.tanh(0.5 * u))


def _gauss_hermite_mean(f, mean, var, n=80):
    """E[f(u)], u ~ N(mean, var), by Gauss–Hermite quadrature."""
    x, wq = np.polynomial.hermite_e.hermegauss(n)
    u = mean[:, None] + np.sqrt(var)[:, None] * x[None, :]
    return (f(u) * wq).sum(-1) / wq.sum()


def test_linear_regression_predictive_matches_the_student_t():
    X, y = _regression_data(40)
    with fg.Model("linear_regression") as m:  # the canned model, with data nodes
        n = fg.plate("n", 40)
        alpha = fg.gamma("alpha", shape=1e-2, rate=1e-4)
        w = fg.gaussian_gamma("w", mean=0.0, precision=alpha, shape=1e-2, rate=1e-4, dim=3)
        fg.gaussian("y", mean=fg.inner(fg.data("X", X), w, plates=[n]), precision=w.tau, plates=[n],
                    observed=fg.data("y", y))
    opts = {"schedule": ["w", "alpha"], "tol": 1e-12, "max_iter": 500}
    r = fg.infer(m, **opts)
    canned = fg.infer(models.linear_regression_model(X, y), **opts)
    np.testing.assert_allclose(r.posterior("w").mean(), canned.posterior("w").mean(), rtol=1e-12)
    X_new = np.random.default_rng(9).normal(size=(6, 3)) * 2.0
    st = models.linear_predictive(canned, X_new)  # Student-t (Drugowitsch 2014, eq. 23)
    draws = fg.predict(r, data={"X": X_new}, draws=S, seed=1)["y"]
    assert draws.shape == (S, 6)
    nu = st.dof
    var = st.var()
    se_mean = np.sqrt(var / S)
    se_var = var * np.sqrt((2.0 + 6.0 / (nu - 4.0)) / S)  # var of a sample variance: (m4 − σ⁴)/S
    assert np.all(np.abs(draws.mean(0) - st.mean) < 4 * se_mean)
    assert np.all(np.abs(draws.var(0) - var) < 4 * se_var)
    assert m.plates["n"].size == 40 and m.data["X"].value is X  # the model keeps its data


def _logistic_data(N=60, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, 2))])
    y = (rng.random(N) < _sigmoid(X @ np.array([0.3, 1.5, -1.0]))).astype(float)
    return X, y


def _logistic(X, y):
    with fg.Model("logit") as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=3)
        fg.bernoulli_logit("y", logit=fg.inner(fg.data("X", X), w, plates=[n]), observed=fg.data("y", y))
    return m


@pytest.mark.parametrize("handlers", [None, {"w": fg.Laplace()}], ids=["ncvmp", "laplace"])
def test_logistic_predictive_probabilities_match_quadrature(handlers):
    X, y = _logistic_data()
    r = fg.infer(_logistic(X, y), handlers=handlers)
    q = r.posterior("w")
    X_new = np.column_stack([np.ones(7), np.linspace(-3, 3, 7), np.linspace(2, -2, 7)])
    mean = X_new @ q.mean()
    var = np.einsum("nd,de,ne->n", X_new, q.cov(), X_new)
    p = _gauss_hermite_mean(_sigmoid, mean, var)  # E_q[σ(xᵀw)]
    draws = fg.predict(r, data={"X": X_new}, draws=S, seed=2)["y"]
    assert draws.shape == (S, 7) and set(np.unique(draws)) <= {0.0, 1.0}
    se = np.sqrt(p * (1 - p) / S)
    assert np.all(np.abs(draws.mean(0) - p) < 4 * se)


def test_poisson_log_predictive_mean_matches_the_lognormal_moment():
    rng = np.random.default_rng(3)
    X = np.column_stack([np.ones(80), rng.normal(size=80)])
    y = rng.poisson(np.exp(X @ np.array([0.5, 0.8]))).astype(float)
    with fg.Model("pois") as m:
        n = fg.plate("n", 80)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        fg.poisson_log("y", log_rate=fg.inner(fg.data("X", X), w, plates=[n]), observed=fg.data("y", y))
    r = fg.infer(m)
    q = r.posterior("w")
    X_new = np.column_stack([np.ones(4), np.array([-1.0, 0.0, 1.0, 1.5])])
    mu, v = X_new @ q.mean(), np.einsum("nd,de,ne->n", X_new, q.cov(), X_new)
    mean = np.exp(mu + v / 2)  # E[y*] = E_q[exp(xᵀw)]
    var = mean + np.exp(2 * mu + 2 * v) - mean**2  # Poisson noise plus the variance of the rate
    draws = fg.predict(r, data={"X": X_new}, draws=S, seed=4)["y"]
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * np.sqrt(var / S))


def _mixture(y):
    with fg.Model("mix") as m:
        n, k = fg.plate("n", len(y)), fg.plate("k", 2)
        pi = fg.dirichlet("pi", np.ones(2))
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("y", mean=mu[z], precision=4.0, plates=[n], observed=fg.data("y", y))
    return m


def test_mixture_predictive_at_new_rows_draws_new_labels():
    rng = np.random.default_rng(5)
    lab = rng.random(100) < 0.7
    y = np.where(lab, 4.0, -4.0) + 0.5 * rng.normal(size=100)
    r = fg.infer(_mixture(y))
    high = int(np.argmax(r.posterior("mu").mean()))
    w_high = r.posterior("pi").mean()[high]  # E_q[π] of the component at +4
    new = fg.predict(r, data={"y": np.zeros(5)}, draws=S, seed=6)["y"]  # 5 new rows
    assert new.shape == (S, 5)
    frac = (new > 0).mean(0)
    # draws are independent (π⁽ˢ⁾ ~ q, z ~ π⁽ˢ⁾), so a row's fraction above 0 is binomial with mean E_q[π_high]
    # (the components at ±4 with sd 0.5 do not overlap)
    se = np.sqrt(w_high * (1 - w_high) / S)
    assert np.all(np.abs(frac - w_high) < 4 * se)
    # replication at the fitted rows keeps each row's own component (labels from q of that row)
    rep = fg.predict(r, draws=2000, seed=7)["y"]
    assert rep.shape == (2000, 100)
    own = ((rep > 0).mean(0) > 0.5) == lab
    assert own.all()


def test_replication_after_set_data_uses_the_data_of_the_fit():
    X, y = _regression_data(30)
    with fg.Model("lr") as m:
        n = fg.plate("n", 30)
        w = fg.mv_gaussian("w", 0.0, precision=1e-2, dim=3)
        fg.gaussian("y", mean=fg.inner(fg.data("X", X), w, plates=[n]), precision=4.0, plates=[n],
                    observed=fg.data("y", y))
    r = fg.infer(m)
    rep = fg.predict(r, draws=4000, seed=0)["y"]
    q = r.posterior("w")
    mean = X @ q.mean()
    var = np.einsum("nd,de,ne->n", X, q.cov(), X) + 0.25
    assert np.all(np.abs(rep.mean(0) - mean) < 4 * np.sqrt(var / 4000))
    X2, y2 = _regression_data(12, seed=1)
    m.set_data(X=X2, y=y2)
    again = fg.predict(r, draws=4000, seed=0)["y"]  # r was fitted to X, not to X2
    np.testing.assert_array_equal(again, rep)
    assert m.plates["n"].size == 12


def test_predict_errors():
    X, y = _logistic_data()
    r = fg.infer(_logistic(X, y))
    with pytest.raises(ModelError, match=r"no data node 'Z'"):
        fg.predict(r, data={"Z": X})
    with pytest.raises(ModelError, match=r"^predict: 'X' has shape \(5,\)"):
        fg.predict(r, data={"X": np.ones(5)})
    with pytest.raises(ModelError, match="draws must be a positive integer"):
        fg.predict(r, draws=0)
    with pytest.raises(ModelError, match="data must be a dict"):
        fg.predict(r, data=[X])
    with pytest.raises(ModelError, match="needs a fg.Result of fg.infer"):
        fg.predict(object())
    r.fit_record = pickle.loads(pickle.dumps(r.fit_record))  # the record pickles without the model
    assert r.fit_record.model is None
    with pytest.raises(ModelError, match="loaded from a pickle"):
        fg.predict(r)


def test_softmax_and_student_t_predictives():
    rng = np.random.default_rng(8)
    N = 60
    X = np.column_stack([np.ones(N), rng.normal(size=(N, 2))])
    with fg.Model("softmax") as m:
        n, c = fg.plate("n", N), fg.plate("c", 3)
        W = fg.mv_gaussian("W", 0.0, precision=1.0, dim=3, plates=[c])
        fg.categorical_softmax("y", logits=fg.inner(fg.data("X", X), W, plates=[n]), over=c,
                               observed=fg.data("y", rng.integers(0, 3, N)))
    labels = fg.predict(fg.infer(m), data={"X": X[:4]}, draws=500)["y"]
    assert labels.shape == (500, 4) and set(np.unique(labels)) <= {0, 1, 2}
    y = X @ np.array([1.0, 2.0, -1.0]) + rng.standard_t(3, N)
    with fg.Model("robust") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", 0.0, precision=1e-2, dim=3)
        tau = fg.gamma("tau", 1e-2, 1e-2)
        fg.student_t("y", mean=fg.inner(fg.data("X", X), w, plates=[n]), precision=tau, dof=6.0,
                     observed=fg.data("y", y))
    r = fg.infer(m)
    X_new = X[:5] * 2.0
    draws = fg.predict(r, data={"X": X_new}, draws=S, seed=3)["y"]
    # symmetric noise around xᵀw: the predictive mean is xᵀE_q[w]; the per-row weights λ are new draws
    # from their prior, so the spread is the Student-t's: Var = E[1/τ]·ν/(ν − 2) + xᵀCov(w)x
    q = r.posterior("w")
    assert np.all(np.abs(draws.mean(0) - X_new @ q.mean()) < 4 * draws.std(0) / np.sqrt(S))
    tq = r.posterior("tau")
    var = tq.rate / (tq.shape - 1) * 6.0 / 4.0 + np.einsum("nd,de,ne->n", X_new, q.cov(), X_new)
    dev = draws - draws.mean(0)
    se_var = np.sqrt(((dev**4).mean(0) - draws.var(0) ** 2) / S)  # from the draws' fourth moment
    assert np.all(np.abs(draws.var(0) - var) < 4 * se_var)


def test_hierarchical_predictive_at_new_rows_gathers_the_group_effects():
    rng = np.random.default_rng(11)
    g = rng.integers(0, 4, 80)
    y = np.array([-2.0, 0.0, 1.0, 3.0])[g] + 0.5 * rng.normal(size=80)
    with fg.Model("groups") as m:
        n, k = fg.plate("n", 80), fg.plate("k", 4)
        a = fg.gaussian("a", 0.0, precision=0.01, plates=[k])
        fg.gaussian("y", mean=a[fg.data("g", g)], precision=4.0, plates=[n], observed=fg.data("y", y))
    r = fg.infer(m)
    q = r.posterior("a")
    new = np.array([3, 3, 0, 1, 2])
    draws = fg.predict(r, data={"g": new}, draws=S, seed=12)["y"]
    var = q.var()[new] + 0.25
    assert draws.shape == (S, 5)
    assert np.all(np.abs(draws.mean(0) - q.mean()[new]) < 4 * np.sqrt(var / S))


def test_full_covariance_mixture_predicts_new_rows():
    rng = np.random.default_rng(13)
    lab = rng.random(150) < 0.6
    Y = np.where(lab[:, None], [3.0, 3.0], [-3.0, -3.0]) + rng.normal(size=(150, 2)) * 0.5
    with fg.Model("gmm") as m:
        n, k = fg.plate("n", 150), fg.plate("k", 2)
        pi = fg.dirichlet("pi", np.ones(2))
        theta = fg.gaussian_wishart("theta", mean=np.zeros(2), beta=1e-2, dof=3.0, scale=np.eye(2), plates=[k])
        z = fg.categorical("z", pi, plates=[n])
        fg.mv_gaussian("y", mean=theta[z], plates=[n], observed=fg.data("y", Y))
    r = fg.infer(m)
    high = int(np.argmax(r.posterior("theta").mean()[:, 0]))
    p_high = r.posterior("pi").mean()[high]
    draws = fg.predict(r, data={"y": np.zeros((4, 2))}, draws=S, seed=14)["y"]
    assert draws.shape == (S, 4, 2)
    frac = (draws[..., 0] > 0).mean(0)  # the components at ±(3, 3), sd 0.5, do not overlap
    assert np.all(np.abs(frac - p_high) < 4 * np.sqrt(p_high * (1 - p_high) / S))
    near = draws[draws[..., 0] > 0]  # the draws of the upper component: its mean and covariance
    np.testing.assert_allclose(near.mean(0), [3.0, 3.0], atol=0.15)
    np.testing.assert_allclose(np.cov(near.T), 0.25 * np.eye(2), atol=0.08)


def test_predict_mixture_with_a_gated_gamma_precision():
    """mv_gaussian(mu[z], precision=tau[z]): each predicted row takes its own component's precision (the gated
    Gamma used to raise AttributeError in the forward sampler): a tight and a wide cluster keep their spreads."""
    rng = np.random.default_rng(3)
    X = np.r_[rng.normal(-5.0, 0.1, (30, 2)), rng.normal(5.0, 3.0, (30, 2))]
    with fg.Model() as m:
        n, k = fg.plate("n", 60), fg.plate("k", 2)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], categories=k)
        mu = fg.mv_gaussian("mu", np.zeros(2), precision=0.01, plates=[k])
        tau = fg.gamma("tau", 1.0, 0.01, plates=[k])  # a weak rate: the tight cluster's sd is the data's 0.1
        fg.mv_gaussian("x", mu[z], precision=tau[z], plates=[n], observed=X)
    r = fg.infer(m, seed=1)
    draws = fg.predict(r, draws=400, seed=0)["x"]
    assert draws.shape == (400, 60, 2)
    sd_tight, sd_wide = draws[:, :30].std(0).mean(), draws[:, 30:].std(0).mean()
    assert 0.05 < sd_tight < 0.2 and 2.0 < sd_wide < 4.5


def _exposure_model(X, g, e, y, y_as_data):
    with fg.Model("pois_exposure") as m:
        n, k = fg.plate("n", len(y)), fg.plate("k", 3)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[k])
        rate = fg.inner(fg.data("X", X), w, plates=[n]) + a[fg.data("g", g)]
        fg.poisson_log("y", log_rate=rate, exposure=fg.data("e", e),
                       observed=fg.data("y", y) if y_as_data else y)
    return m


@pytest.mark.parametrize("y_as_data", [False, True])
def test_predict_at_new_rows_needs_the_inputs_only_never_the_observed(y_as_data):
    """A Poisson-log regression with an exposure and group labels as data nodes: predicting at new rows takes
    the new X, labels and exposure (the exposure a constant parameter of the factor), never new y; a missing
    input is named with its role."""
    rng = np.random.default_rng(21)
    N = 90
    X = rng.normal(size=(N, 2))  # no intercept: the group effects a_g are the levels
    g, e = rng.integers(0, 3, N), rng.uniform(0.5, 3.0, N)
    y = rng.poisson(e * np.exp(X @ np.array([0.3, 0.6]) + np.array([-0.5, 0.0, 0.5])[g])).astype(float)
    r = fg.infer(_exposure_model(X, g, e, y, y_as_data), fg.NCVMP())
    X_new = np.column_stack([np.linspace(-1.0, 1.0, 5), np.ones(5)])
    g_new, e_new = np.array([0, 1, 2, 2, 0]), np.array([0.5, 1.0, 2.0, 4.0, 10.0])
    draws = fg.predict(r, data={"X": X_new, "g": g_new, "e": e_new}, draws=S, seed=2)["y"]
    assert draws.shape == (S, 5)
    qw, qa = r.posterior("w"), r.posterior("a")
    mu = X_new @ qw.mean() + qa.mean()[g_new]
    v = np.einsum("nd,de,ne->n", X_new, qw.cov(), X_new) + qa.var()[g_new]
    mean = e_new * np.exp(mu + v / 2)  # E[y*] = e·E_q[exp(xᵀw + a_g)], q mean-field in w and a
    var = mean + e_new**2 * (np.exp(2 * mu + 2 * v) - np.exp(2 * mu + v))
    assert np.all(np.abs(draws.mean(0) - mean) < 4 * np.sqrt(var / S))
    with pytest.raises(ModelError, match=r"^predict: plate 'n' changes size from 90 to 5 \(from '[Xg]'\), but the "
                                         r"data node 'e' \(shape \(90,\)\) also spans it \(the exposure of 'y'\)"):
        fg.predict(r, data={"X": X_new, "g": g_new})
    with pytest.raises(ModelError, match=r"data node 'g' \(shape \(90,\)\) also spans it \(the labels of 'a'"):
        fg.predict(r, data={"X": X_new, "e": e_new})
    with pytest.raises(ModelError, match=r"'y': exposure must be positive"):  # the builder's own check
        fg.predict(r, data={"X": X_new, "g": g_new, "e": -e_new})
    # the same rows count: a new exposure alone is a new input, the rest held at the fitted data
    same = fg.predict(r, data={"e": 2.0 * e}, draws=4000, seed=3)["y"]
    base = fg.predict(r, data={"e": e}, draws=4000, seed=3)["y"]
    assert same.shape == base.shape == (4000, N)
    assert same.mean() > 1.8 * base.mean()


def test_multinomial_predicts_new_rows_from_their_trials():
    """The trials of a multinomial are an input: at new rows its draws sum to the new trials; without trials=
    they come from the observed counts, which new rows lack, and the error says so."""
    rng = np.random.default_rng(4)
    N = 40
    X, t = rng.normal(size=(N, 2)), rng.integers(1, 20, N)
    Y = np.stack([rng.multinomial(k, [0.2, 0.3, 0.5]) for k in t]).astype(float)
    with fg.Model() as m:
        n, c = fg.plate("n", N), fg.plate("c", 3)
        W = fg.mv_gaussian("W", 0.0, precision=1.0, dim=2, plates=[c])
        fg.multinomial_softmax("y", fg.data("t", t), fg.inner(fg.data("X", X), W, plates=[n]), over=c,
                               observed=fg.data("y", Y))
    r = fg.infer(m, fg.NCVMP(), max_iter=30, tol=1e-3)
    draws = fg.predict(r, data={"X": X[:3], "t": np.array([1, 5, 100])}, draws=50)["y"]
    assert draws.shape == (50, 3, 3)
    np.testing.assert_array_equal(draws.sum(-1), np.broadcast_to([1.0, 5.0, 100.0], (50, 3)))
    with pytest.raises(ModelError, match=r"'t' \(shape \(40,\)\) also spans it \(the trials of 'y'\)"):
        fg.predict(r, data={"X": X[:3]})
    with fg.Model() as m:
        n = fg.plate("n", N)
        fg.multinomial("y", None, fg.dirichlet("pi", np.ones(3)), plates=[n], observed=fg.data("y", Y))
    r = fg.infer(m)
    assert fg.predict(r, data={"y": Y[:3]}, draws=5)["y"].sum(-1).tolist() == [Y[:3].sum(-1).tolist()] * 5
    with pytest.raises(ModelError, match=r"trials of 'y' come from its observed counts .* 3 of its rows are missing"):
        fg.predict(r, data={"y": np.ma.masked_all((3, 3))})
