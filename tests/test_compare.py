"""fg.compare: evidence compares models of the same data only; LOO for every in-memory fit, SVI's included."""

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models

rng = np.random.default_rng(0)
Y = np.exp(rng.normal(1.0, 0.5, size=40))


def normal(y, name="y", mask=None):
    with fg.Model("normal") as m:
        n = fg.plate("n", len(y))
        mu = fg.gaussian("mu", 0.0, 1e-2)
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian(name, mu, tau, plates=[n], observed=y, mask=mask)
    return m


def student(y):
    with fg.Model("student") as m:
        n = fg.plate("n", len(y))
        mu = fg.gaussian("mu", 0.0, 1e-2)
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.student_t("y", mu, tau, dof=4.0, plates=[n], observed=y)
    return m


def test_fits_of_different_data_are_refused_by_name():
    r_y, r_log, r_half = fg.infer(normal(Y)), fg.infer(normal(np.log(Y))), fg.infer(normal(Y[:20]))
    with pytest.raises(fg.ModelError, match=r"compare: the results were fitted to different data.*'log y' has other "
                                            r"values or missing entries of \['y'\] \(against 'y'\); 'half' has other "
                                            r"values or missing entries of \['y'\].*same_data=False"):
        fg.compare({"y": r_y, "log y": r_log, "half": r_half})
    c = fg.compare({"y": r_y, "log y": r_log, "half": r_half}, same_data=False)
    assert "same_data=False" in c.note and len(c.names) == 3


def test_models_of_the_same_data_are_compared():
    a, b = fg.infer(normal(Y)), fg.infer(student(Y))
    assert a.data_digest == b.data_digest and set(a.data_digest) == {"y"}
    c = fg.compare({"normal": a, "student": b})
    assert "data" not in c.note
    # the same numbers under another name, as a list or a column: the same data
    renamed = fg.infer(normal(list(Y), name="obs"))
    fg.compare({"normal": a, "renamed": renamed})
    # a mixture with K = 1 holds its data with a component axis of length 1: the same data as K = 2
    X = rng.normal(size=(30, 2))
    fg.compare({f"K={K}": models.gaussian_mixture(X, K, "full") for K in (1, 2)})


def test_missing_entries_and_other_variables_count_as_other_data():
    mask = np.ones(40, bool)
    mask[3] = False
    full, holes = fg.infer(normal(Y)), fg.infer(normal(np.where(mask, Y, np.nan), mask=mask))
    with pytest.raises(fg.ModelError, match=r"'holes' has other values or missing entries of \['y'\]"):
        fg.compare({"full": full, "holes": holes})
    # a missing entry's stored value does not matter, only that it is missing
    other_fill = fg.infer(normal(np.where(mask, Y, -7.0), mask=mask))
    fg.compare({"holes": holes, "other fill": other_fill})
    with fg.Model("two") as m:
        n = fg.plate("n", 40)
        mu = fg.gaussian("mu", 0.0, 1e-2)
        fg.gaussian("y", mu, 1.0, plates=[n], observed=Y)
        fg.gaussian("z", mu, 1.0, plates=[n], observed=Y + 1.0)
    with pytest.raises(fg.ModelError, match=r"'two' has observed variables \['z'\] that 'full' lacks"):
        fg.compare({"full": full, "two": fg.infer(m)})


def test_class_labels_are_data_like_any_other():
    labels = rng.integers(0, 3, size=25)

    def cat(observed, a=1.0):
        with fg.Model("cat") as m:
            n = fg.plate("n", 25)
            p = fg.dirichlet("p", np.full(3, a))
            fg.categorical("c", p, plates=[n], observed=observed)
        return m

    a, b = fg.infer(cat(labels)), fg.infer(cat(labels, 2.0))
    assert a.data_digest == b.data_digest
    fg.compare({"a": a, "b": b})
    with pytest.raises(fg.ModelError, match="different data"):
        fg.compare({"a": a, "c": fg.infer(cat(np.roll(labels, 1)))})


def test_streamed_fits_are_not_checked_and_say_so():
    m = normal(np.zeros(10))
    stream = ({"y": np.random.default_rng(i).normal(size=10)} for i in range(20))
    svi = fg.infer(m, algorithm=fg.SVI(batch_size=10, n_data=100), data=stream, max_iter=20)
    assert svi.data_digest is None
    c = fg.compare({"svi": svi, "vmp": fg.infer(m)})
    assert "the data of ['svi'] were not recorded" in c.note


def test_loo_on_a_fit_by_svi():
    """SVI on in-memory rows keeps its model and data: LOO, to_arviz and predict work as for fg.infer's VMP."""
    X = rng.normal(size=(120, 2))
    y = X @ [1.0, -1.0] + 0.5 * rng.normal(size=120)
    with fg.Model("reg") as m:
        n = fg.plate("n", 120)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2))
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("y", fg.inner(X, w, plates=[n]), tau, plates=[n], observed=y)
    vmp = fg.infer(m)
    svi = fg.infer(m, algorithm=fg.SVI(batch_size=30), max_iter=100, seed=1)
    c = fg.compare({"vmp": vmp, "svi": svi}, loo=True, loo_draws=2000)
    assert np.all(np.isfinite(c.elpd_loo))
    assert c.elpd_loo[1] == pytest.approx(c.elpd_loo[0], abs=0.5)  # one posterior, reached two ways
    assert fg.predict(svi, draws=4)["y"].shape == (4, 120)
    # a streamed fit holds no rows to score: refused, saying why
    stream = ({"y": y[i:i + 30], "X": X[i:i + 30]} for i in range(0, 120, 30))
    streamed = fg.infer(m, algorithm=fg.SVI(batch_size=30, n_data=120), data=stream, max_iter=4)
    with pytest.raises(fg.ModelError, match=r"compare: LOO scores each fit's own data, and 'streamed' has none: this "
                                            r"fit by fg.SVI was made on streamed batches"):
        fg.compare({"vmp": vmp, "streamed": streamed}, loo=True)
    with pytest.raises(fg.ModelError, match="to_arviz needs the model and the data of the fit: this fit by fg.SVI"):
        streamed.to_arviz()
    with pytest.raises(fg.ModelError, match="predict needs the model and the data of the fit: this fit by fg.SVI"):
        fg.predict(streamed)


def test_svi_without_the_final_pass_names_the_missing_local_posteriors():
    y = rng.normal(size=40)
    with fg.Model("effects") as m:
        n = fg.plate("n", 40)
        mu = fg.gaussian("mu", 0.0, 1.0)
        u = fg.gaussian("u", mu, 1.0, plates=[n])
        fg.gaussian("y", u, 4.0, plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.SVI(batch_size=10, exact_elbo=False), max_iter=10)
    with pytest.raises(fg.ModelError, match=r"to_arviz: the log-likelihood needs draws of latent variables this Result "
                                            r"has no posterior for, among \['u'\].*exact_elbo=True"):
        r.to_arviz(draws=8)


def test_dask_data_are_not_read_for_the_digest_and_a_sharded_fit_says_what_it_lacks():
    da = pytest.importorskip("dask.array")
    y = rng.normal(size=200)

    def fit(values):
        return fg.infer(normal(da.from_array(values, chunks=50)))

    a, b = fit(y), fit(y)
    assert a.sharding is not None and a.data_digest == b.data_digest and a.data_digest["y"].startswith("dask:")
    fg.compare({"a": a, "b": b})
    with pytest.raises(fg.ModelError, match="'other' has other values or missing entries of \\['y'\\]"):
        fg.compare({"a": a, "other": fit(y + 1.0)})
    with pytest.raises(fg.ModelError, match="to_arviz needs the model and the data of the fit: a sharded fit on dask "
                                            "data does not keep its model and data"):
        a.to_arviz()
