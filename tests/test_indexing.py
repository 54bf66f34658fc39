"""Indexing by constant integer labels (``x[idx]``, ``fg.index``): messages, hierarchies, bad input.

The generic identity: under VMP every message is the gradient of E[log f].  For an indexed view it
must hold through the gather: the natural parameters a variable receives from all its factors
(``natural_sum``) equal the gradient of Σ_f E[log f] with respect to its expected statistics, by
finite differences, whatever chain of indexed views and deterministic nodes lies between them.
"""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from factorgraph.graph.nodes import Indexed
from factors.index import gather, scatter
from schedules.compile import compile_model
from schedules.engine import Engine

RNG = np.random.default_rng(7)


# ------------------------------------------------------------------------------------ models
def _intercepts(rng, G=4, N=30):
    g = rng.integers(0, G, N)
    y = rng.normal(size=G)[g] + 0.3 * rng.normal(size=N)
    with fg.Model("varying-intercept") as m:
        n, c = fg.plate("n", N), fg.plate("c", G)
        mu = fg.gaussian("mu", 0.0, precision=1e-2)
        ta = fg.gamma("tau_a", 2.0, 1.0)
        a = fg.gaussian("a", mean=mu, precision=ta, plates=[c])
        tau = fg.gamma("tau", 2.0, 1.0)
        fg.gaussian("y", mean=a[g], precision=tau, plates=[n], observed=y)
    return m


def _slopes_and_precisions(rng, G=4, N=30):
    """Varying intercepts and slopes, a precision per group (tau[g]) and a constant covariate."""
    g = rng.integers(0, G, N)
    x = rng.normal(size=N)
    y = rng.normal(size=G)[g] + rng.normal(size=G)[g] * x + 0.3 * rng.normal(size=N)
    with fg.Model("varying-slopes") as m:
        n, c = fg.plate("n", N), fg.plate("c", G)
        mu = fg.gaussian("mu", 0.0, precision=1e-2)
        a = fg.gaussian("a", mean=mu, precision=1.0, plates=[c])
        b = fg.gaussian("b", mean=0.0, precision=1.0, plates=[c])
        tau = fg.gamma("tau", 2.0, 1.0, plates=[c])
        fg.gaussian("y", mean=2.0 * a[g] + b[g] * x, precision=tau[g], plates=[n], observed=y)
    return m


def _three_levels(rng, S=2, C=5, N=30):
    soc = rng.integers(0, S, C)
    cty = rng.integers(0, C, N)
    with fg.Model("three-levels") as m:
        n, c, s = fg.plate("n", N), fg.plate("c", C), fg.plate("s", S)
        b = fg.gaussian("b_state", 0.0, precision=1e-1, plates=[s])
        rate = fg.gamma("rate", 2.0, 1.0, plates=[s])
        ta = fg.gamma("tau_a", 2.0, rate[soc], plates=[c])  # a Gamma rate indexed by state
        a = fg.gaussian("a", mean=b[soc], precision=ta, plates=[c])
        fg.gaussian("y", mean=a[cty], precision=2.0, plates=[n], observed=rng.normal(size=N))
    return m


def _multi_plate(rng, G=3, K=2, N=8):
    """A source plated over (k, g), indexed along g onto n: the view has plates (n, k) in model order."""
    g = rng.integers(0, G, N)
    with fg.Model("multi-plate") as m:
        n = fg.plate("n", N)
        k = fg.plate("k", K)
        c = fg.plate("c", G)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[k, c])
        t = fg.gamma("t", 2.0, 1.0, plates=[k, c])
        fg.gaussian("y", mean=fg.index(a, g, along=c), precision=fg.index(t, g, along=c), plates=[n, k],
                    observed=rng.normal(size=(N, K)))
    return m


def _discrete(rng, G=3, N=20, K=3):
    g = rng.integers(0, G, N)
    with fg.Model("discrete") as m:
        n, c = fg.plate("n", N), fg.plate("c", G)
        p = fg.beta("p", 2.0, 3.0, plates=[c])
        fg.bernoulli("z", probs=p[g], plates=[n], observed=rng.integers(0, 2, N))
        th = fg.dirichlet("theta", np.ones(K) * 1.5, plates=[c])
        fg.categorical("w", probs=th[g], plates=[n], observed=rng.integers(0, K, N))
    return m


def _chained(rng, G=4, H=6, N=12):
    """x[i][j] (= x[i[j]]) and two views of one variable in a sum, with labels that differ in every row."""
    i = rng.integers(0, G, H)
    j = rng.integers(0, H, N)
    k = (i[j] + 1) % G
    with fg.Model("chained") as m:
        fg.plate("h", H)
        n, c = fg.plate("n", N), fg.plate("c", G)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        fg.gaussian("y", mean=a[i][j] + a[k], precision=2.0, plates=[n], observed=rng.normal(size=N))
    return m


def _inner_views(rng, G=3, N=15, D=2):
    """fg.inner(X, w[g]): varying coefficient vectors, full covariance (MvGaussian) and mean field."""
    g = rng.integers(0, G, N)
    s_of_c = np.array([0, 1, 1])
    X = rng.normal(size=(N, D))
    with fg.Model("inner-views") as m:
        n, c, d, s = fg.plate("n", N), fg.plate("c", G), fg.plate("d", D), fg.plate("s", 2)
        mw = fg.mv_gaussian("m_w", mean=0.0, precision=1.0, dim=D, plates=[s])
        W = fg.mv_gaussian("W", mean=mw[s_of_c], precision=2.0, plates=[c])  # an MvGaussian mean indexed
        s = fg.gaussian("s", mean=0.0, precision=1.0, plates=[c, d])
        z = fg.inner(X, W[g], plates=[n]) + fg.inner(X, fg.index(s, g, along=c), plates=[n])
        fg.gaussian("y", mean=z, precision=3.0, plates=[n], observed=rng.normal(size=N))
    return m


def _logistic(rng, G=3, N=20):
    """A non-conjugate factor on an indexed view (NCVMP): varying-intercept logistic regression."""
    g = rng.integers(0, G, N)
    x = rng.normal(size=N)
    with fg.Model("logistic") as m:
        fg.plate("n", N)
        c = fg.plate("c", G)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        a = fg.gaussian("a", mean=mu, precision=2.0, plates=[c])
        b = fg.gaussian("b", mean=0.0, precision=1.0, plates=[c])
        fg.bernoulli_logit("y", logit=a[g] + b[g] * x, observed=rng.integers(0, 2, N))
    return m


MODELS = {"logistic": _logistic, "inner_views": _inner_views, "intercepts": _intercepts,
          "slopes_and_precisions": _slopes_and_precisions,
          "three_levels": _three_levels, "multi_plate": _multi_plate, "discrete": _discrete, "chained": _chained}


def _engine(model, rng):
    c = compile_model(model, fg.NCVMP() if model.name == "logistic" else fg.VMP())
    eng = Engine(c)
    eng.initialise({}, rng)
    for _ in range(2):  # move away from the prior so every statistic is generic
        for v in c.order:
            eng.update(v)
    return c, eng


# ------------------------------------------------------------------------------------ generic identity
@pytest.mark.parametrize("name", sorted(MODELS))
def test_messages_are_gradients_of_expected_log_factors(name):
    """natural_sum(v) = ∂ Σ_f E[log f] / ∂E[u(v)] for every latent variable, by central differences."""
    rng = np.random.default_rng(3)
    model = MODELS[name](rng)
    c, eng = _engine(model, rng)
    for v in c.latent:
        msg = eng.natural_sum(v)
        base = eng.stats[v.name]
        for i, s in enumerate(base):
            s = np.asarray(s, dtype=float)
            grad = np.zeros(s.shape)
            for idx in np.ndindex(s.shape):
                vals = []
                for h in (1e-6, -1e-6):
                    pert = [np.array(a, dtype=float, copy=True) for a in base]
                    pert[i][idx] += h
                    eng.stats[v.name] = tuple(pert)
                    eng.version[v.name] += 1
                    vals.append(eng.elbo_terms()[0])
                grad[idx] = (vals[0] - vals[1]) / 2e-6
            eng.stats[v.name] = base
            eng.version[v.name] += 1
            got = np.broadcast_to(msg[i], grad.shape)
            np.testing.assert_allclose(got, grad, rtol=1e-5, atol=1e-5, err_msg=f"{name}: {v.name}[{i}]")


def test_scatter_is_the_gradient_of_the_gather():
    """⟨m, gather(s)⟩ has gradient scatter(m) in s, for plates before/after the gathered one and events."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 7)
    counts = np.bincount(labels, minlength=4).astype(float)
    # source plates (k=2, g=4) with a (3,) event; view plates (n=7, k=2): axis 1 -> dest 0
    s = rng.normal(size=(2, 4, 3))
    for m in (rng.normal(size=(7, 2, 3)), rng.normal(size=(1, 2, 3)), rng.normal(size=(7, 1, 3))):
        got = scatter(m, labels, counts, 1, 0, 2, 1)
        assert gather(s, labels, 1, 0, 2).shape == (7, 2, 3)
        grad = np.zeros_like(s)
        for idx in np.ndindex(s.shape):
            e = np.zeros_like(s)
            e[idx] = 1.0
            grad[idx] = np.sum(np.broadcast_to(m, (7, 2, 3)) * gather(e, labels, 1, 0, 2))
        np.testing.assert_allclose(np.broadcast_to(got, s.shape), grad, rtol=1e-12, atol=1e-12)


def test_segment_sum_kernel_matches_numpy():
    from factors.kernels.segment import segment_sum

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, 50)
    v = rng.normal(size=(50, 3, 2))
    want = np.zeros((5, 3, 2))
    np.add.at(want, labels, v)
    np.testing.assert_allclose(segment_sum(labels, v, 5), want, rtol=1e-12)
    np.testing.assert_allclose(segment_sum(labels, v[:, 0, 0], 5), want[:, 0, 0], rtol=1e-12)


# ------------------------------------------------------------------------------------ behaviour
@pytest.mark.parametrize("name", ["intercepts", "slopes_and_precisions", "three_levels", "multi_plate", "chained",
                                  "inner_views"])
def test_elbo_never_decreases(name):
    r = fg.infer(MODELS[name](np.random.default_rng(5)), max_iter=500, tol=1e-12)
    d = np.diff(r.elbo_trace)
    assert np.all(d >= -1e-9 * np.abs(r.elbo_trace[1:])), d.min()
    assert not r.warnings


def test_index_equals_explicit_replication():
    """With one row per group, a[idx] is a permutation: the fit equals the model without labels."""
    rng = np.random.default_rng(2)
    G = 6
    perm = rng.permutation(G)
    y = rng.normal(size=G)

    def fit(indexed: bool):
        with fg.Model("perm") as m:
            n, c = fg.plate("n", G), fg.plate("c", G)
            mu = fg.gaussian("mu", 0.0, precision=1e-2)
            a = fg.gaussian("a", mean=mu, precision=2.0, plates=[c])
            if indexed:
                fg.gaussian("y", mean=a[perm], precision=3.0, plates=[n], observed=y)
            else:
                fg.gaussian("y", mean=a, precision=3.0, plates=[c], observed=y[np.argsort(perm)])
        return fg.infer(m, tol=1e-14, max_iter=1000)

    r1, r2 = fit(True), fit(False)
    np.testing.assert_allclose(r1.posterior("a").mean(), r2.posterior("a").mean(), rtol=1e-10)
    assert abs(r1.elbo - r2.elbo) < 1e-9


def test_ragged_groups_and_function_form():
    """fg.index(x, idx) is x[idx]; groups of very different sizes (one empty) are fine."""
    g = np.array([0] * 20 + [1] * 2 + [3] * 5)
    y = np.r_[np.full(20, 1.0), np.full(2, -1.0), np.full(5, 3.0)] + 0.1 * np.sin(np.arange(27))
    with fg.Model("ragged") as m:
        n, c = fg.plate("n", 27), fg.plate("c", 4)
        a = fg.gaussian("a", mean=0.0, precision=1e-2, plates=[c])
        view = fg.index(a, g)
        assert isinstance(view, Indexed) and view.plates == (n,)
        fg.gaussian("y", mean=view, precision=100.0, plates=[n], observed=y)
    r = fg.infer(m)
    mean = r.posterior("a").mean()
    np.testing.assert_allclose(mean[[0, 1, 3]], [y[:20].mean(), y[20:22].mean(), y[22:].mean()], atol=1e-3)
    assert abs(mean[2]) < 1e-12 and abs(r.posterior("a").var()[2] - 100.0) < 1e-9  # no data: the prior


def test_plate_choice():
    with fg.Model("plates"):
        fg.plate("n", 5)
        m = fg.plate("m", 5)
        c = fg.plate("c", 3)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        with pytest.raises(fg.ModelError, match=r"several plates \['n', 'm'\].*plate=<plate>"):
            a[[0, 1, 2, 0, 1]]
        view = fg.index(a, [0, 1, 2, 0, 1], plate=m)
        assert view.plates == (m,) and view.family is a.family
        assert a[[2, 1, 0]].plates == (c,)  # no other plate of size 3: a permutation onto c itself


# ------------------------------------------------------------------------------------ bad input
def _bad(labels, match, plates=("c",), plate=None, along=None):
    with fg.Model("bad"):
        n = fg.plate("n", 4)
        c = fg.plate("c", 3)
        d = fg.plate("d", 2)
        byname = {"c": c, "d": d}
        a = fg.gaussian("alpha", 0.0, precision=1.0, plates=[byname[p] for p in plates])
        kw = {}
        if plate is not None:
            kw["plate"] = {"n": n, **byname}.get(plate, plate)
        if along is not None:
            kw["along"] = byname[along]
        with pytest.raises(fg.ModelError, match=match):
            fg.index(a, labels, **kw)


@pytest.mark.parametrize(("labels", "match"), [
    ([0, 1, 3, 0], r"'alpha' must lie in 0\.\.2.*got 3 at position 2"),
    ([0, -1, 2, 0], r"'alpha' must lie in 0\.\.2.*got -1"),
    ([0, 1.5, 2, 0], r"'alpha' must be integers in 0\.\.2, got 1\.5"),
    ([0, np.nan, 2, 0], r"'alpha' must be integers in 0\.\.2, got nan"),
    (["a", "b", "c", "a"], r"'alpha' must be integers in 0\.\.2, got 'a'; encode named groups.*np\.unique"),
    (np.array([0, 1, 2**63, 0], np.uint64), r"'alpha' must lie in 0\.\.2, got 9223372036854775808 at position 2"),
    (np.array([0.0, 1.0, 1e20, 0.0]), r"'alpha' must lie in 0\.\.2, got 1e\+20 at position 2"),
    (np.array([0.0, 1.0, -3.0, 0.0]), r"'alpha' must lie in 0\.\.2, got -3 at position 2"),
    (np.array([0, 1, 2**70, 0], dtype=object), r"'alpha' must lie in 0\.\.2, got 1180591620717411303424 at position 2"),
    (np.array([0, 1, None, 0], dtype=object), r"'alpha' must be integers in 0\.\.2, got None"),
    (np.array([0, 1.5, 2, 0], dtype=object), r"'alpha' must be integers in 0\.\.2, got 1\.5"),
    (np.ma.array([0, 1, 2, 0], mask=[0, 0, 1, 0]),
     r"labels of 'alpha' cannot be missing, got a masked array with 1 masked entry \(first at position 2\)"),
    ([True, False, True, True], r"'alpha' must be integers.*booleans"),
    ([[0, 1], [2, 0]], r"'alpha' must be a 1-D array.*shape \(2, 2\)"),
    ([0, 1, 2, 0, 1], r"5 labels for 'alpha', but the model has no plate of size 5"),
    ([], r"'alpha' are empty"),
])
def test_bad_labels(labels, match):
    _bad(labels, match)


@pytest.mark.parametrize("labels", [
    np.array([2, 0, 1, 2], dtype=object),                    # Python ints (a pandas object column)
    np.array([np.int16(2), 0, 1, 2], dtype=object),
    np.array([2, 0, 1, 2], np.uint64),
    np.array([2, 0, 1, 2], np.int8),
    np.array([2.0, 0.0, 1.0, 2.0]),
    np.array([2, 0.0, 1, 2], dtype=object),
    np.ma.array([2, 0, 1, 2], mask=[0, 0, 0, 0]),              # a masked array with nothing masked
])
def test_label_dtypes_accepted(labels):
    with fg.Model("dtypes"):
        fg.plate("n", 4)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[fg.plate("c", 3)])
        view = a[labels]
    assert view.labels.dtype == np.int64
    np.testing.assert_array_equal(view.labels, [2, 0, 1, 2])


def test_bad_index_targets():
    _bad([0, 1, 2, 0], r"4 labels for 'alpha', but plate 'd' has size 2", plate="d")
    _bad([0, 1, 2, 0], r"plate must be a plate of model 'bad', got Plate\('c', 3\)", plate=fg.Plate("c", 3, 1))
    _bad([0, 1, 1, 0], r"'alpha' has plates \['c', 'd'\]; say which.*along=", plates=("c", "d"))
    _bad([0, 1, 1, 0], r"along=Plate\('d', 2\) is not a plate of 'alpha'", plates=("c",), along="d")
    with fg.Model("no-plate"):
        fg.plate("n", 3)
        s = fg.gaussian("s", 0.0, precision=1.0)
        with pytest.raises(fg.ModelError, match=r"'s' has no plate, so it cannot be indexed by labels \[0, 1, 0\]"):
            s[[0, 1, 0]]
        t = fg.gaussian("t", 0.0, precision=1.0, plates=[fg.plate("c", 2)])
        with pytest.raises(fg.ModelError, match=r"only a random variable can be indexed.*'sum_0'"):
            fg.index(t + 1.0, [0, 1, 0])
        with pytest.raises(fg.ModelError, match=r"variable\(s\) \['t'\] appear on both sides"):
            t[[0, 1, 0]] + t[[0, 0, 1]]  # row 0 uses t_0 twice: not independent


def test_indexed_view_keeps_family_checks():
    with fg.Model("family"):
        n, c = fg.plate("n", 3), fg.plate("c", 2)
        tau = fg.gamma("tau", 1.0, 1.0, plates=[c])
        with pytest.raises(fg.ModelError, match=r"'y': mean must be Gaussian, got Gamma"):
            fg.gaussian("y", mean=tau[[0, 1, 0]], precision=1.0, plates=[n])


# ------------------------------------------------------------------------------------ fused grouped Gaussian
@pytest.mark.parametrize("precision", ["constant", "shared", "per_group"])
def test_grouped_fusion_equals_generic_path(precision):
    """y ~ N(a[g], ·) with observed y runs on per-group sums (GroupedGaussian); a[g] + 0.0 is the same
    model on the generic gather/scatter path: same trace, same posteriors."""
    rng = np.random.default_rng(11)
    G, N = 5, 60
    g = rng.integers(0, G - 1, N)  # the last group has no rows
    y = rng.normal(size=G)[g] + 0.4 * rng.normal(size=N)

    def fit(fused: bool):
        with fg.Model("grouped") as m:
            n, c = fg.plate("n", N), fg.plate("c", G)
            mu = fg.gaussian("mu", 0.0, precision=1e-2)
            ta = fg.gamma("tau_a", 1.0, 1.0)
            a = fg.gaussian("a", mean=mu, precision=ta, plates=[c])
            prec = {"constant": lambda: 4.0, "shared": lambda: fg.gamma("tau", 1.0, 1.0),
                    "per_group": lambda: fg.gamma("tau", 1.0, 1.0, plates=[c])[g]}[precision]()
            fg.gaussian("y", mean=a[g] if fused else a[g] + 0.0, precision=prec, plates=[n], observed=y)
        c = compile_model(m, fg.VMP())
        assert any(f.node.ftype.name == "GroupedGaussian" for f in c.factors) == fused
        order = ["a"] + (["tau"] if precision != "constant" else []) + ["mu", "tau_a"]
        return fg.infer(m, tol=None, max_iter=40, schedule=order)

    r1, r2 = fit(True), fit(False)
    np.testing.assert_allclose(r1.elbo_trace, r2.elbo_trace, rtol=1e-12)
    for name in r1.posteriors:
        for s1, s2 in zip(r1.posterior(name).natural, r2.posterior(name).natural, strict=True):
            np.testing.assert_allclose(s1, s2, rtol=1e-10, atol=1e-12, err_msg=name)


def test_rowwise_inner_pullback_is_gradient():
    """inner(X, w[g]) with an MvGaussian w: y_n = x_nᵀw_n row by row; its pullback is the gradient of
    η₁E[y] + η₂E[y²] in the per-row statistics of w."""
    from distributions import MvGaussian
    from factors.deterministic import Inner
    from tests.test_rules import _stats

    rng = np.random.default_rng(4)
    N, D = 4, 3
    X = rng.normal(size=(N, D))
    params = {"X": X, "subscripts": ("a", "a", "a"), "mean_field": False, "consumed": None, "shape": (N,),
              "w_shape": (N,), "x_axes": (0,), "rowwise": True}
    par = {"w": _stats(MvGaussian, rng, (N,))}
    ey, ey2 = Inner.forward(par, params)
    np.testing.assert_allclose(ey, np.einsum("nd,nd->n", X, par["w"][0]), rtol=1e-12)
    np.testing.assert_allclose(ey2, np.einsum("nd,nde,ne->n", X, par["w"][1], X), rtol=1e-12)
    h1, h2 = rng.normal(size=N), -rng.uniform(0.5, 2, N)

    def objective(w):
        a, b = Inner.forward({"w": w}, params)
        return float(np.sum(h1 * a) + np.sum(h2 * b))

    msg = Inner.pullback("w", (h1, h2), par, params)
    for i, s in enumerate(par["w"]):
        grad = np.zeros(s.shape)
        for idx in np.ndindex(s.shape):
            up = [np.array(a, dtype=float) for a in par["w"]]
            dn = [np.array(a, dtype=float) for a in par["w"]]
            up[i][idx] += 1e-6
            dn[i][idx] -= 1e-6
            grad[idx] = (objective(tuple(up)) - objective(tuple(dn))) / 2e-6
        got = np.broadcast_to(msg[i], grad.shape)
        if i == 1:
            grad, got = 0.5 * (grad + np.swapaxes(grad, -1, -2)), 0.5 * (got + np.swapaxes(got, -1, -2))
        np.testing.assert_allclose(got, grad, rtol=1e-6, atol=1e-7)


def test_indexed_view_cannot_be_gated():
    with fg.Model("gated-view"):
        n, c = fg.plate("n", 3), fg.plate("c", 2)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        z = fg.categorical("z", probs=[0.5, 0.5], plates=[n])
        with pytest.raises(fg.ModelError, match=r"gate the variable itself, 'a'\[\.\.\.\]"):
            a[[0, 1, 0]][z]


# ------------------------------------------------------------------------------------ indexed conjugate parameters
# Ragged groups (sizes 4, 1, 0, 3): the empty group keeps its prior.  One conjugate level, so VMP is exact: the
# posterior of each group is the closed-form conjugate update and the ELBO the log evidence.
LABELS = np.array([0, 3, 1, 0, 3, 0, 3, 0])


def _group_sums(values):
    return np.stack([values[LABELS == k].sum(0) for k in range(4)])


def test_indexed_poisson_rate_is_gamma_poisson():
    """y_n ~ Poisson(e_n λ_{g(n)}), λ_k ~ Gam(a0, b0): q(λ_k) = Gam(a0 + Σy, b0 + Σe) and the ELBO is log p(y)."""
    from scipy.special import gammaln

    y = np.array([2, 0, 5, 1, 3, 0, 4, 2])
    e = np.array([1.0, 0.5, 2.0, 1.5, 1.0, 0.7, 2.5, 1.2])
    a0, b0 = 1.5, 0.8
    with fg.Model("gamma-poisson") as m:
        n, c = fg.plate("n", 8), fg.plate("c", 4)
        lam = fg.gamma("lam", a0, b0, plates=[c])
        fg.poisson("y", lam[LABELS], exposure=e, plates=[n], observed=y)
    r = fg.infer(m)
    a, b = a0 + _group_sums(y), b0 + _group_sums(e)
    q = r.posterior("lam")
    np.testing.assert_allclose(q.shape, a, rtol=1e-12)
    np.testing.assert_allclose(q.rate, b, rtol=1e-12)
    log_evidence = (np.sum(a0 * np.log(b0) - gammaln(a0) + gammaln(a) - a * np.log(b))
                    + np.sum(y * np.log(e) - gammaln(y + 1)))
    assert abs(r.elbo - log_evidence) < 1e-10


def test_indexed_binomial_probs_is_beta_binomial():
    """k_n ~ Binomial(t_n, p_{g(n)}), p_k ~ Beta(α, β): q(p_k) = Beta(α + Σk, β + Σ(t − k)), ELBO = log p(k)."""
    from scipy.special import betaln, gammaln

    t = np.array([5, 3, 8, 2, 6, 4, 7, 5])
    k = np.array([1, 3, 6, 0, 2, 4, 7, 3])
    al, be = 2.0, 1.5
    with fg.Model("beta-binomial") as m:
        n, c = fg.plate("n", 8), fg.plate("c", 4)
        p = fg.beta("p", al, be, plates=[c])
        fg.binomial("y", t, p[LABELS], plates=[n], observed=k)
    r = fg.infer(m)
    a, b = al + _group_sums(k), be + _group_sums(t - k)
    q = r.posterior("p")
    np.testing.assert_allclose(q.alpha, a, rtol=1e-12)
    np.testing.assert_allclose(q.beta, b, rtol=1e-12)
    log_coef = gammaln(t + 1) - gammaln(k + 1) - gammaln(t - k + 1)
    log_evidence = np.sum(betaln(a, b) - betaln(al, be)) + np.sum(log_coef)
    assert abs(r.elbo - log_evidence) < 1e-10


def test_indexed_multinomial_probs_is_dirichlet_multinomial():
    """y_n ~ Multinomial(p_{g(n)}), p_k ~ Dir(α): q(p_k) = Dir(α + Σy), ELBO = log p(y)."""
    from scipy.special import gammaln

    y = np.random.default_rng(3).integers(0, 4, size=(8, 3))
    alpha = np.array([1.0, 2.0, 0.5])
    with fg.Model("dirichlet-multinomial") as m:
        n, c = fg.plate("n", 8), fg.plate("c", 4)
        p = fg.dirichlet("p", alpha, plates=[c])
        fg.multinomial("y", None, p[LABELS], plates=[n], observed=y)
    r = fg.infer(m)
    post = alpha + _group_sums(y)
    np.testing.assert_allclose(r.posterior("p").concentration, post, rtol=1e-12)

    def log_norm(a):
        return gammaln(a).sum(-1) - gammaln(a.sum(-1))

    log_coef = gammaln(y.sum(1) + 1) - gammaln(y + 1).sum(1)
    log_evidence = np.sum(log_norm(post) - log_norm(alpha)) + np.sum(log_coef)
    assert abs(r.elbo - log_evidence) < 1e-10


@pytest.mark.parametrize("prior", ["half_normal", "uniform_scale"])
def test_indexed_scale_as_sd_equals_explicit_plates(prior):
    """y ~ N(a[g], sd=s[g]) with every group on the same number of rows is the model with plates [c, r]."""
    G, R = 3, 5
    rng = np.random.default_rng(8)
    g = np.tile(np.arange(G), R)
    y = rng.normal(size=G)[g] + np.array([0.5, 1.0, 2.0])[g] * rng.normal(size=G * R)

    def fit(indexed: bool):
        with fg.Model("scales") as m:
            c = fg.plate("c", G)
            s = (fg.half_normal("s", 3.0, plates=[c]) if prior == "half_normal"
                 else fg.uniform_scale("s", 10.0, plates=[c]))
            a = fg.gaussian("a", 0.0, precision=0.1, plates=[c])
            if indexed:
                n = fg.plate("n", G * R)
                fg.gaussian("y", a[g], sd=s[g], plates=[n], observed=y)
            else:
                r = fg.plate("r", R)
                fg.gaussian("y", a, sd=s, plates=[c, r], observed=y.reshape(R, G).T)
        return fg.infer(m, tol=1e-13, max_iter=500)

    r1, r2 = fit(True), fit(False)
    assert r1.algorithm == r2.algorithm == ("ncvmp" if prior == "half_normal" else "vmp")
    assert r1.converged and r2.converged
    assert abs(r1.elbo - r2.elbo) < 1e-10
    for name in ("a", "s"):
        for s1, s2 in zip(r1.posteriors[name].natural, r2.posteriors[name].natural, strict=True):
            np.testing.assert_allclose(s1, s2, rtol=1e-10, atol=1e-12, err_msg=name)


def test_indexed_gamma_as_sd_says_precision():
    with fg.Model("sd-gamma"):
        n, c = fg.plate("n", 3), fg.plate("c", 2)
        tau = fg.gamma("tau", 1.0, 1.0, plates=[c])
        with pytest.raises(fg.ModelError, match=r"'tau' is a Gamma variable over a precision: pass "
                                                r"precision=tau\[labels\]"):
            fg.gaussian("y", 0.0, sd=tau[[0, 1, 0]], plates=[n], observed=np.zeros(3))


@pytest.mark.parametrize("likelihood", ["bernoulli_logit", "poisson_log"])
def test_default_algorithm_sees_indexed_arguments(likelihood):
    """A non-conjugate factor on a bare a[g]: fg.infer picks NCVMP (and says so), the same fit as fg.NCVMP()."""
    g = np.array([0, 1, 2, 0, 1, 2, 2])
    with fg.Model("default-ncvmp") as m:
        n, c = fg.plate("n", 7), fg.plate("c", 3)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        if likelihood == "bernoulli_logit":
            fg.bernoulli_logit("y", a[g], observed=[0, 1, 1, 0, 1, 0, 1], plates=[n])
        else:
            fg.poisson_log("y", a[g], observed=[0, 1, 3, 0, 2, 5, 4], plates=[n])
    default = fg.infer(m)
    assert default.algorithm == "ncvmp"
    assert any("fg.NCVMP(), chosen by default" in note for note in default.notes), default.notes
    explicit = fg.infer(m, algorithm=fg.NCVMP())
    np.testing.assert_allclose(default.elbo_trace, explicit.elbo_trace, rtol=1e-12)
    np.testing.assert_allclose(default.posterior("a").mean(), explicit.posterior("a").mean(), rtol=1e-12)
