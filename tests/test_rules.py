"""The VMP identity, checked generically for every registered rule.

A factor's message to an edge is the gradient of its E[log f] with respect to the target's expected
sufficient statistics (the other edges held fixed).  Each factor type has a fixture below that
draws valid statistics for every edge and the factor's parameters; a factor type without a fixture
fails the coverage test.  Deterministic nodes obey the same identity for the Gaussian message
(η₁, η₂) they receive: the pullback is the gradient of η₁E[y] + η₂E[y²].
"""

from __future__ import annotations

import numpy as np
import pytest

from distributions import (
    Bernoulli,
    Beta,
    Binomial,
    Categorical,
    Dirichlet,
    Gamma,
    Gaussian,
    GaussianGamma,
    GaussianWishart,
    LogNormal,
    Multinomial,
    MvGaussian,
    Poisson,
    Wishart,
)
from factors import FACTOR_TYPES
from factors.base import point_stats
from factors.deterministic import Dot, Inner, Product, Sum
from factors.mv_gaussian_wishart_missing import missing_patterns
from factors.scale_priors import scale_prior_params
from factors.uniform_scale import uniform_scale_params
from factors.user_likelihood import user_params

D = 3
BATCH = (2,)


def _spd(rng, batch=()):
    a = rng.normal(size=batch + (D, D))
    return a @ np.swapaxes(a, -1, -2) + D * np.eye(D)


def _stats(family: type, rng: np.random.Generator, batch=BATCH) -> tuple:
    if family is Gaussian:
        return Gaussian(mean=rng.normal(size=batch), var=rng.uniform(0.5, 2, batch)).expected_stats()
    if family is Gamma:
        return Gamma(shape=rng.uniform(1, 3, batch), rate=rng.uniform(0.5, 2, batch)).expected_stats()
    if family is MvGaussian:
        return MvGaussian(mean=rng.normal(size=batch + (D,)), cov=_spd(rng, batch)).expected_stats()
    if family is Beta:
        return Beta(alpha=rng.uniform(1, 3, batch), beta=rng.uniform(1, 3, batch)).expected_stats()
    if family is Dirichlet:
        return Dirichlet(concentration=rng.uniform(1, 3, batch + (D,))).expected_stats()
    if family is Categorical:
        return Categorical(probs=rng.dirichlet(np.ones(D), size=batch)).expected_stats()
    if family is Bernoulli:
        return Bernoulli(probs=rng.uniform(0.1, 0.9, batch)).expected_stats()
    if family is GaussianGamma:
        return GaussianGamma(rng.normal(size=batch + (D,)), precision=_spd(rng, batch),
                             shape=rng.uniform(1, 3, batch), rate=rng.uniform(0.5, 2, batch)).expected_stats()
    if family is Poisson:
        return Poisson.observed_stats(rng.poisson(3.0, batch))
    if family is Binomial:  # observed successes out of the fixture's 9 trials
        return Binomial.observed_stats(rng.integers(0, 10, batch))
    if family is Multinomial:
        return Multinomial.observed_stats(rng.multinomial(9, np.ones(D) / D, size=batch))
    if family is LogNormal:
        return LogNormal(mu=rng.normal(size=batch), sigma=rng.uniform(0.5, 1.5, batch)).expected_stats()
    if family is Wishart:
        return Wishart(rng.uniform(D + 1, D + 4, batch), _spd(rng, batch)).expected_stats()
    if family is GaussianWishart:
        return GaussianWishart(rng.normal(size=batch + (D,)), rng.uniform(0.5, 2, batch),
                               rng.uniform(D + 1, D + 4, batch), _spd(rng, batch)).expected_stats()
    raise AssertionError(f"no statistics fixture for {family.__name__}")


def _fixture(name: str, rng: np.random.Generator) -> tuple[dict, dict]:
    """(moments by edge, params) for one factor type."""
    X = rng.normal(size=(5, D))
    y = rng.normal(size=5)
    regression = {"xtx": X.T @ X, "xty": X.T @ y, "yty": float(y @ y), "n": 5}
    params = {
        "Gaussian": {},
        "Gamma": {"shape": rng.uniform(1, 3, BATCH)},
        "Beta": {"alpha": 2.0, "beta": 3.0},
        "Bernoulli": {},
        "Dirichlet": {"concentration": rng.uniform(1, 3, D)},
        "Categorical": {},
        "MvGaussian": {"D": D, "ard": False},
        "MvGaussian/ard": {"D": D, "ard": True},
        # Λ = diag(α, c): ARD α over the first D − 1 coordinates, or one α for them, and a constant for the last
        "MvGaussian/tail": {"D": D, "ard": True, "tail": np.array([2.5])},
        "MvGaussian/tail_shared": {"D": D, "ard": False, "tail": np.array([2.5])},
        "MvGaussianFixedPrecision": {"D": D, "precision": _spd(rng), "logdet": None},
        "NormalGamma": {"D": D, "ard": False, "mean": rng.normal(size=D), "shape": 2.0, "rate": 0.5},
        "NormalGamma/ard": {"D": D, "ard": True, "mean": rng.normal(size=D), "shape": 2.0, "rate": 0.5},
        "NormalGammaRegression": regression,
        "LinearGaussian": regression,
        "BernoulliLogit": {"state": {}},
        "CategoricalSoftmax": {},
        # scales large against the test moments keep the heavy-tailed sites log-concave there (no clipping)
        "LaplaceSite": {"scale": 0.7, "state": {}},
        "CauchySite": {"scale": 3.0, "state": {}},
        "StudentTSite": {"scale": 3.0, "dof": 4.0, "state": {}},
        "Probit": {"state": {}},
        "IsPositive": {},  # EP rules only: tests/test_ep.py checks their tilted moments
        "Wishart": {"dof": rng.uniform(D, D + 3, BATCH), "scale": _spd(rng)},
        "MvGaussianWishart": {"D": D},
        "NormalWishart": {"mean": rng.normal(size=D), "beta": 1.3, "dof": D + 1.5, "scale": _spd(rng)},
        "MvGaussianNormalWishart": {"D": D},
        "GroupedGaussian": {"count": rng.integers(1, 5, BATCH).astype(float), "sum": rng.normal(size=BATCH),
                            "sumsq": rng.uniform(3, 5, BATCH)},
        "Poisson": {"log_exposure": rng.normal(size=BATCH)},
        "PoissonLog": {"log_exposure": rng.normal(size=BATCH)},
        "Binomial": {"trials": np.full(BATCH, 9.0), "log_coef": rng.normal(size=BATCH)},
        "BinomialLogit": {"trials": np.full(BATCH, 9.0), "log_coef": rng.normal(size=BATCH), "state": {}},
        "Multinomial": {},
        "MultinomialSoftmax": {},
        "ScalePrior": {**scale_prior_params("half_t", scale=2.0, dof=1.0), "state": {}},
        "UniformScale": uniform_scale_params(np.array([2.0, 0.7])),
        "ScaleSigma": {"base": {"prior": "half_t", "p0": np.log([4.0, 0.5]), "p1": np.ones(2),
                                "const": np.log(2.0 / np.pi) - 0.5 * np.log([4.0, 0.5])}, "s0": np.array([2.0, 0.7])},
        "MarkovChain": {"lengths": np.array([4, 3]), "state": {}},
        # 2 sequences × 4 steps of a D-dimensional chain (the second 3 steps long)
        "GaussianMarkovChain": {"lengths": np.array([4, 3]), "state": {}, "D": D, "noise": "full"},
        "GaussianMarkovChainDiag": {"lengths": np.array([4, 3]), "state": {}, "D": D, "noise": "diag"},
        "GaussianMarkovChainDiag/shared": {"lengths": np.array([4, 3]), "state": {}, "D": D, "noise": "shared"},
        "StudentT": {"dof": 3.0, "learn_dof": False, "present": np.array([1.0, 0.0]), "state": {}},
        "GroupedLinearGaussian": _grouped_linear_fixture(np.random.default_rng(7)),  # its own draws
        # a row with its middle coordinate missing, and a complete row (the conjugate message)
        "MvGaussianWishartMissing": {"D": D, **missing_patterns(np.array([[1, 0, 1], [1, 1, 1]]))},
        "MvGaussianNormalWishartMissing": {"D": D, **missing_patterns(np.array([[0, 1, 1], [1, 1, 1]]))},
        # 4 rows × 2 columns, D − 1 scores and an intercept; 4 rows × 2 columns with entries missing, D scores
        "FactorAnalysis": _factor_analysis_fixture(np.random.default_rng(8), intercept=True),
        "FactorAnalysis/missing": _factor_analysis_fixture(np.random.default_rng(9), intercept=False),
        **{f"UserLikelihood{k}": _user_fixture(k) for k in (1, 2, 3)},
        **{f"UserLikelihood{k}p{m}": _user_fixture(k, m) for m in (1, 2, 3) for k in range(4 - m)},
        **{f"UserLikelihood{k}s{s}": _user_shared_fixture(k, s) for k in (2, 3) for s in (1, 2, 3)},
        "NegativeBinomialLogGamma": {"log_exposure": rng.normal(size=BATCH), "state": {}},
        "NegativeBinomialLog": {"dispersion": rng.uniform(0.5, 4.0, BATCH), "log_exposure": rng.normal(size=BATCH)},
        "GaussianLogSd": {},
        "GaussianLogNormalSd": {},
        "LogNormal": {},
        "OrderedLogistic": {"cuts": np.array([-np.inf, -1.0, 0.3, 1.5, np.inf])},
        "OrderedProbit": {"cuts": np.array([-np.inf, -1.0, 0.3, 1.5, np.inf])},
        "ZeroInflatedPoisson": {"zero_prob": np.array([0.3, 0.2]), "log_exposure": rng.normal(size=BATCH)},
        "ZeroInflatedPoissonBeta": {"log_exposure": rng.normal(size=BATCH)},
        "ZeroInflatedPoissonLogBeta": {"log_exposure": rng.normal(size=BATCH)},
        "ZeroInflatedPoissonLog": {"zero_prob": np.array([0.3, 0.2]), "log_exposure": rng.normal(size=BATCH)},
    }[name]
    if name == "NormalWishart":
        from factors.normal_wishart import prior_natural

        params["log_partition"] = GaussianWishart.from_natural(*prior_natural(params)).log_partition()
    if name == "MvGaussianFixedPrecision":
        params["logdet"] = float(np.linalg.slogdet(params["precision"])[1])
    return params


def _user_log_density(y, a=0.0, b=0.0, c=0.0, p=1.0, q=1.0, r=1.0):
    """A Gaussian in a, a softplus in b, a log cosh in c; in the positive p, q, r a Gamma-like log λ − λ term,
    a log(1 + λ) and a precision's ½ log r − ½ r y²."""
    return (-0.5 * (y - a) ** 2 - np.logaddexp(0.0, b) - np.logaddexp(c, -c) + 0.3 * y * b
            + 1.5 * np.log(p) - p * (1 + y * y) + np.log1p(q) + 0.5 * np.log(r) - 0.5 * r * y * y)


def _user_fixture(k, m=0):
    """fg.likelihood's factor with k Gaussian and m Gamma arguments, a fixed rule per argument."""
    order = {1: 128, 2: 96, 3: 48}[k + m] if m else 48
    names = (*("a", "b", "c")[:k], *("p", "q", "r")[:m])

    def logpdf(y, *args):  # the factor passes the parameters positionally, Gaussian ones first
        return _user_log_density(y, **dict(zip(names, args, strict=True)))

    return {**user_params(logpdf, "test", names[:k], {}, True, order, positive=names[k:]), "state": {}}


def _user_shared_fixture(k, s):
    """k arguments sharing s leaves (each leaf in the first two arguments and, for k = 3, leaf 0 in all three),
    with small per-row coefficients so that the arguments' covariance stays positive definite."""
    rng = np.random.default_rng(11)
    names = ("a", "b", "c")[:k]

    def logpdf(y, *args):
        return _user_log_density(y, **dict(zip(names, args, strict=True)))

    shared = [{j: 0.3 * rng.uniform(0.5, 1.0, BATCH) for j in (range(k) if i == 0 else (0, 1))} for i in range(s)]
    return {**user_params(logpdf, "test", names, {}, True, 24 if k == 2 else 48), "shared": shared, "state": {}}


def _factor_analysis_fixture(rng, intercept):
    """The fused factor analysis's parameters (schedules.fusion): rows × columns data, the scores' constant prior;
    with ``intercept`` every entry observed and one τ per column, else entries missing and one shared τ."""
    X = rng.normal(size=(4, 2))
    M = None if intercept else np.array([[1, 0], [1, 1], [0, 1], [1, 1]], dtype=float)
    X = X if M is None else X * M
    K = D - 1 if intercept else D
    lam = _spd(rng)[:K, :K]
    m0 = rng.normal(size=K)
    count = np.full(2, 4.0) if M is None else M.sum(0)
    return {"X": X, "mask": M, "xx": (X * X).sum(0), "colsum": X.sum(0), "count": count, "K": K,
            "intercept": intercept, "shared_noise": not intercept, "prior_precision": lam,
            "prior_logdet": float(np.linalg.slogdet(lam)[1]), "prior_mean": m0, "prior_shift": lam @ m0,
            "gram": None, "colmean": X.sum(0) / count, "state": {}}


# the grouped linear-Gaussian fixture: 2 groups, every slot used: scalar blocks of one coefficient (s0, s2, s4,
# s5) and of D mean-field coefficients (a consumed plate: s1, s3), vector blocks (v0, v1).  The message is per
# group (a global block's is summed over the groups by the engine, tested in test_grouped_linear.py), so
# every block's statistics here are per group.
_GL_SHAPES = {"s0": BATCH, "s1": BATCH + (D,), "s2": BATCH, "s3": BATCH + (D,), "s4": BATCH, "s5": BATCH,
              "v0": BATCH, "v1": BATCH}
_GL_SIZES = {"s0": 1, "s1": D, "s2": 1, "s3": D, "s4": 1, "s5": 1, "v0": D, "v1": D}


def _grouped_linear_fixture(rng):
    from factors.grouped_linear_gaussian import grouped_linear_stats

    layout, start = [], 0
    for slot, size in _GL_SIZES.items():
        layout.append((slot, start, size, slot.startswith("v")))
        start += size
    rows = 11
    labels = np.r_[np.arange(BATCH[0]), rng.integers(0, BATCH[0], rows - BATCH[0])]
    return grouped_linear_stats(labels, rng.normal(size=(rows, start)), rng.normal(size=rows), BATCH[0], layout)


CASES = [(ft, variant) for ft in FACTOR_TYPES
         for variant in ([ft.name, ft.name + "/ard", ft.name + "/tail", ft.name + "/tail_shared"]
                         if ft.name == "MvGaussian" else [ft.name, ft.name + "/ard"] if ft.name == "NormalGamma" else
                         [ft.name, ft.name + "/shared"] if ft.name == "GaussianMarkovChainDiag" else
                         [ft.name, ft.name + "/missing"] if ft.name == "FactorAnalysis" else [ft.name])]


def _moments(ft, variant, rng):
    m = {}
    for edge, family in ft.edges.items():
        if ft.name.startswith("GaussianMarkovChain"):  # 2 sequences × 4 steps; A's D rows; τ per dimension
            tau = () if variant.endswith("/shared") or family is Wishart else (D,)
            m[edge] = _stats(family, rng, {"out": BATCH + (4,), "transition": BATCH + (D,),
                                           "noise_precision": BATCH + tau}.get(edge, BATCH))
        elif ft.name == "MarkovChain":  # 2 sequences × 4 steps; π and A (D "from" rows) per sequence
            m[edge] = _stats(family, rng, {"out": BATCH + (4,), "initial": BATCH, "transition": BATCH + (D,)}[edge])
        elif ft.name in ("CategoricalSoftmax", "MultinomialSoftmax") and edge == "logits":  # class plate = event axis
            m[edge] = _stats(family, rng, BATCH + (D,))
        elif edge == "precision" and variant.endswith("/ard"):
            m[edge] = _stats(family, rng, BATCH + (D,))
        elif edge == "precision" and variant.endswith("/tail"):
            m[edge] = _stats(family, rng, BATCH + (D - 1,))
        elif ft.name == "FactorAnalysis":  # 4 rows of scores (D − 1 with the intercept), 2 columns of loadings
            K = D - 1 if variant == ft.name else D
            if edge == "out":
                a = rng.normal(size=(4, K, K + 2))
                m[edge] = MvGaussian(mean=rng.normal(size=(4, K)), cov=a @ a.transpose(0, 2, 1) / 5).expected_stats()
            else:
                m[edge] = _stats(family, rng, (2,) if edge == "loadings" or variant == ft.name else ())
        elif ft.name == "GroupedLinearGaussian" and edge != "precision":
            m[edge] = _stats(family, rng, _GL_SHAPES[edge])
        elif ft.name.startswith("Ordered") and edge == "out":  # categories of 4: the lowest and a middle one, or
            # a middle one and the highest
            m[edge] = point_stats(Gaussian, np.array([0.0, 2.0] if ft.name == "OrderedLogistic" else [1.0, 3.0]))
        elif ft.name.startswith("ZeroInflatedPoisson") and edge == "out":  # a zero and a positive count
            m[edge] = Poisson.observed_stats(np.array([0.0, 4.0]))
        elif ft.name in ("LinearGaussian",) and edge == "precision":
            m[edge] = _stats(family, rng, BATCH)
        else:
            m[edge] = _stats(family, rng)
    return m


def test_every_factor_type_has_a_fixture():
    rng = np.random.default_rng(0)
    for ft in FACTOR_TYPES:
        _fixture(ft.name, rng)  # KeyError = a factor type nobody tests


# a "gibbs" rule draws (an augmentation's auxiliary variable) and is no gradient: tests/test_gibbs*.py check it;
# EP rules return tilted moments, not gradients of E[log f]: tests/test_ep.py checks them by quadrature
RULES = [(ft, variant, key) for ft, variant in CASES for key in sorted(ft.rules()) if key[1] not in ("gibbs", "ep")]


@pytest.mark.parametrize(("ft", "variant", "key"), RULES, ids=[f"{v}:{'/'.join(k)}" for _, v, k in RULES])
def test_message_is_gradient_of_evidence(ft, variant, key):
    """Every rule, VMP or NCVMP, sends ∂E[log f]/∂E[u(target)] for its own method's E[log f]."""
    rng = np.random.default_rng(1)
    params = _fixture(variant, rng)
    moments = _moments(ft, variant, rng)
    edge, _, method = key
    evidence, _ = ft.get_evidence(method)
    rule = ft.rules()[key]
    if (ft.name in ("CategoricalSoftmax", "MultinomialSoftmax")) and (edge, method) == ("logits", "taylor"):
        _check_taylor_message(rule, moments, params)
        return
    if True:
        msg = rule(moments, params)
        stats = moments[edge]
        assert len(msg) == len(stats), f"{ft.name}->{edge}: message has {len(msg)} parts for {len(stats)} statistics"
        for i, s in enumerate(stats):
            grad = np.zeros(np.broadcast_shapes(s.shape, np.shape(msg[i])))
            h = 1e-6
            for idx in np.ndindex(s.shape):
                up = [np.array(a, dtype=float, copy=True) for a in stats]
                dn = [np.array(a, dtype=float, copy=True) for a in stats]
                up[i][idx] += h
                dn[i][idx] -= h
                eu = evidence({**moments, edge: tuple(up)}, params)
                ed = evidence({**moments, edge: tuple(dn)}, params)
                # the batch element that idx belongs to carries the change
                grad[idx] = (np.sum(eu) - np.sum(ed)) / (2 * h)
            expected = np.broadcast_to(msg[i], grad.shape)
            matrix_stat = s.ndim >= 2 and i > 0 and s.shape[-1] == s.shape[-2] == D
            if matrix_stat and ft.edges[edge] in (MvGaussian, GaussianGamma):
                # a symmetric matrix statistic: compare the symmetrised gradient
                grad = 0.5 * (grad + np.swapaxes(grad, -1, -2))
                expected = 0.5 * (expected + np.swapaxes(expected, -1, -2))
            np.testing.assert_allclose(expected, grad, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{variant} message to {edge!r}, statistic {i}")


def _check_taylor_message(rule, moments, params):
    """The Taylor softmax message is docs/maths.md §5's closed form (expansion point held fixed)."""
    from factors.kernels import softmax

    ex, ex2 = moments["logits"]
    d1 = moments["out"][0]
    c = d1.sum(-1, keepdims=True)
    s = softmax(ex)
    prec = c * s * (1 - s)
    h1, h2 = rule(moments, params)
    np.testing.assert_allclose(-2 * h2, prec, rtol=1e-12)
    np.testing.assert_allclose(h1, d1 - c * s + prec * ex, rtol=1e-10, atol=1e-12)


def _det_case(op, rng):
    if op is Inner:
        X = rng.normal(size=(4, D))
        params = {"X": X, "subscripts": ("a", "", "a"), "mean_field": False, "consumed": None, "shape": (4,),
                  "w_shape": (), "x_axes": (0,)}
        par = {"w": _stats(MvGaussian, rng, ())}
        return params, par, (4,)
    params = {"src": {"a": (0,), "b": ()}, "dst": (0,), "sizes": (4,)}
    par = {"a": _stats(Gaussian, rng, (4,)), "b": _stats(Gaussian, rng, ())}
    return params, par, (4,)


def _det_plated(rng, case):
    """K = 3 weight vectors times X with one plate (sy = sx + sw), with w's plate first (sy = sw + sx), or
    with two plates of X around w's (sy = "abc", sx = "ac", sw = "b")."""
    sx, sw, sy = {"inner_plated": ("a", "b", "ab"), "inner_plated_wfirst": ("b", "a", "ab"),
                  "inner_plated_2x": ("ac", "b", "abc")}[case]
    xshape = (4,) if len(sx) == 1 else (4, 2)
    sizes = dict(zip(sx, xshape, strict=True)) | {sw: 3}
    yshape = tuple(sizes[c] for c in sy)
    X = rng.normal(size=xshape + (D,))
    params = {"X": X, "subscripts": (sx, sw, sy), "mean_field": False, "consumed": None, "shape": yshape,
              "w_shape": (3,), "x_axes": tuple(sy.index(c) for c in sx)}
    par = {"w": _stats(MvGaussian, rng, (3,))}
    ey, ey2 = Inner.forward(par, params)
    np.testing.assert_allclose(ey, np.einsum(f"{sx}D,{sw}D->{sy}", X, par["w"][0]), rtol=1e-12)
    np.testing.assert_allclose(ey2, np.einsum(f"{sx}D,{sw}DE,{sx}E->{sy}", X, par["w"][1], X), rtol=1e-12)
    return params, par, yshape


def _det_mean_field(rng):
    X = rng.normal(size=(4, D))
    params = {"X": X, "subscripts": ("a", "", "a"), "mean_field": True, "consumed": None, "shape": (4,),
              "w_shape": (), "x_axes": (0,)}
    par = {"w": _stats(Gaussian, rng, (D,))}
    return params, par, (4,)


@pytest.mark.parametrize("case", ["sum", "product", "inner", "inner_mean_field", "inner_rowwise_precision",
                                  "inner_plated", "inner_plated_wfirst", "inner_plated_2x", "dot", "dot_intercept"])
def test_deterministic_pullback_is_gradient(case):
    rng = np.random.default_rng(2)
    op = {"sum": Sum, "product": Product, "dot": Dot, "dot_intercept": Dot}.get(case, Inner)
    if case == "dot":  # y_tp = c_pᵀx_t: x on plate 0 (4 steps), c on plate 1 (2 outputs)
        params = {"src": {"a": (1,), "b": (0,)}, "dst": (0, 1), "sizes": (4, 2)}
        par = {"a": _stats(MvGaussian, rng, (2,)), "b": _stats(MvGaussian, rng, (4,))}
        yshape = (4, 2)
    elif case == "dot_intercept":  # y_nd = w_dᵀ(z_n, 1): z_n of D − 1 on plate 0 (4 rows), w_d of D on plate 1 (2)
        params = {"src": {"a": (0,), "b": (1,)}, "dst": (0, 1), "sizes": (4, 2), "intercept": True}
        a = rng.normal(size=(4, D - 1, D + 1))
        par = {"a": MvGaussian(mean=rng.normal(size=(4, D - 1)), cov=a @ a.transpose(0, 2, 1) / 4).expected_stats(),
               "b": _stats(MvGaussian, rng, (2,))}
        yshape = (4, 2)
    elif case.startswith("inner_plated"):
        params, par, yshape = _det_plated(rng, case)
    else:
        params, par, yshape = _det_mean_field(rng) if case == "inner_mean_field" else _det_case(op, rng)
    h1 = rng.normal(size=yshape)
    h2 = -rng.uniform(0.5, 2, yshape) if case != "inner" else -np.full((1,), 0.7)
    roles = ["a", "b"] if op is not Inner else ["w"]

    def objective(p):
        ey, ey2 = op.forward(p, params)
        return float(np.sum(h1 * ey) + np.sum(np.broadcast_to(h2, ey2.shape) * ey2))

    for role in roles:
        msg = op.pullback(role, (h1, h2), par, params)
        for i, s in enumerate(par[role]):
            grad = np.zeros(s.shape)
            for idx in np.ndindex(s.shape):
                up = [np.array(a, dtype=float) for a in par[role]]
                dn = [np.array(a, dtype=float) for a in par[role]]
                up[i][idx] += 1e-6
                dn[i][idx] -= 1e-6
                grad[idx] = (objective({**par, role: tuple(up)}) - objective({**par, role: tuple(dn)})) / 2e-6
            got = np.broadcast_to(msg[i], grad.shape)
            if grad.ndim == 2 and op is not Dot:
                grad, got = 0.5 * (grad + grad.T), 0.5 * (got + got.T)
            elif i == 1 and op is Dot:  # symmetric second moments: compare symmetrised
                grad, got = 0.5 * (grad + np.swapaxes(grad, -1, -2)), 0.5 * (got + np.swapaxes(got, -1, -2))
            np.testing.assert_allclose(got, grad, rtol=1e-5, atol=1e-6, err_msg=f"{case} -> {role}[{i}]")
