"""Tests of the distributions package: scipy.stats references, ∇κ = E[u], KL, message algebra, sampling,
validation.  Every family is checked for batch shapes (), (3,) and (2, 3)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import scipy.stats as st
from hypothesis import given, settings
from hypothesis import strategies as hs
from scipy.integrate import quad

from distributions import (
    Bernoulli,
    Beta,
    Categorical,
    Dirichlet,
    ExponentialFamily,
    Gamma,
    Gaussian,
    GaussianGamma,
    MvGaussian,
    PointMass,
)

BATCHES = [(), (3,), (2, 3)]
D = 3  # MvGaussian event size
DG = 2  # GaussianGamma event size
K = 4  # Dirichlet / Categorical event size


def _spd(rng: np.random.Generator, batch: tuple, d: int) -> np.ndarray:
    a = rng.normal(size=batch + (d, d))
    return a @ np.swapaxes(a, -1, -2) / d + 0.5 * np.eye(d)


# ------------------------------------------------------------------------------------------ cases
@dataclass
class Case:
    """One family: random parameters, constructor, parameters read back, scipy reference per element."""

    name: str
    params: Callable[[tuple, np.random.Generator], dict]
    ctor: Callable[..., Any]
    params_of: Callable[[Any], dict]
    ref: Callable[[dict, tuple], dict]  # element idx -> {"logpdf": f(x), "entropy", "mean", "var", "cov"?}
    bounded: bool = False  # flat message is proper

    def __repr__(self) -> str:
        return self.name


def _ref_gaussian(p, i):
    f = st.norm(p["mean"][i], np.sqrt(p["var"][i]))
    return {"logpdf": f.logpdf, "entropy": f.entropy(), "mean": f.mean(), "var": f.var()}


def _ref_mvgaussian(p, i):
    f = st.multivariate_normal(p["mean"][i], p["cov"][i])
    return {"logpdf": f.logpdf, "entropy": f.entropy(), "mean": f.mean, "var": np.diag(f.cov),
            "cov": f.cov}


def _ref_gamma(p, i):
    f = st.gamma(p["shape"][i], scale=1.0 / p["rate"][i])
    return {"logpdf": f.logpdf, "entropy": f.entropy(), "mean": f.mean(), "var": f.var()}


def _ref_beta(p, i):
    f = st.beta(p["alpha"][i], p["beta"][i])
    return {"logpdf": f.logpdf, "entropy": f.entropy(), "mean": f.mean(), "var": f.var()}


def _ref_dirichlet(p, i):
    f = st.dirichlet(p["concentration"][i])
    return {"logpdf": f.logpdf, "entropy": f.entropy(), "mean": f.mean(), "var": f.var(), "cov": f.cov()}


def _ref_categorical(p, i):
    f = st.multinomial(1, p["probs"][i])
    return {"logpdf": lambda x: f.logpmf(np.eye(K)[int(x)]), "entropy": f.entropy(), "mean": f.mean(),
            "var": np.diag(f.cov()), "cov": f.cov()}


def _ref_bernoulli(p, i):
    f = st.bernoulli(p["probs"][i])
    return {"logpdf": f.logpmf, "entropy": f.entropy(), "mean": f.mean(), "var": f.var()}


def _ref_gaussian_gamma(p, i):
    mu, v, a, b = p["mean"][i], p["scale"][i], p["shape"][i], p["rate"][i]
    tau = st.gamma(a, scale=1.0 / b)
    e_log_tau = tau.expect(np.log)
    entropy = tau.entropy() + st.multivariate_normal(mu, v).entropy() - 0.5 * DG * e_log_tau
    return {"logpdf": lambda x: st.multivariate_normal(mu, v / x[1]).logpdf(x[0]) + tau.logpdf(x[1]),
            "entropy": entropy, "mean": mu, "cov": b / (a - 1.0) * v, "var": np.diag(b / (a - 1.0) * v)}


CASES = [
    Case("gaussian",
         lambda b, r: {"mean": r.normal(0, 2, b), "var": r.uniform(0.3, 3, b)},
         lambda **p: Gaussian(**p),
         lambda q: {"mean": q.mean(), "var": q.var()},
         _ref_gaussian),
    Case("mv_gaussian",
         lambda b, r: {"mean": r.normal(0, 2, b + (D,)), "cov": _spd(r, b, D)},
         lambda **p: MvGaussian(**p),
         lambda q: {"mean": q.mean(), "cov": q.cov()},
         _ref_mvgaussian),
    Case("gamma",
         lambda b, r: {"shape": r.uniform(1.5, 5, b), "rate": r.uniform(0.5, 3, b)},
         lambda **p: Gamma(**p),
         lambda q: {"shape": q.shape, "rate": q.rate},
         _ref_gamma),
    Case("beta",
         lambda b, r: {"alpha": r.uniform(0.7, 4, b), "beta": r.uniform(0.7, 4, b)},
         lambda **p: Beta(**p),
         lambda q: {"alpha": q.alpha, "beta": q.beta},
         _ref_beta, bounded=True),
    Case("dirichlet",
         lambda b, r: {"concentration": r.uniform(0.7, 4, b + (K,))},
         lambda **p: Dirichlet(**p),
         lambda q: {"concentration": q.concentration},
         _ref_dirichlet, bounded=True),
    Case("categorical",
         lambda b, r: {"probs": r.dirichlet(2.0 * np.ones(K), size=b)},
         lambda **p: Categorical(**p),
         lambda q: {"probs": q.probs},
         _ref_categorical, bounded=True),
    Case("bernoulli",
         lambda b, r: {"probs": r.uniform(0.1, 0.9, b)},
         lambda **p: Bernoulli(**p),
         lambda q: {"probs": q.probs},
         _ref_bernoulli, bounded=True),
    Case("gaussian_gamma",
         lambda b, r: {"mean": r.normal(0, 2, b + (DG,)), "scale": _spd(r, b, DG),
                       "shape": r.uniform(3, 5, b), "rate": r.uniform(0.5, 2, b)},
         lambda **p: GaussianGamma(**p),
         lambda q: {"mean": q.mean(), "scale": q.scale_matrix, "shape": q.shape, "rate": q.rate},
         _ref_gaussian_gamma),
]
EVENT = {"mv_gaussian": (D,), "dirichlet": (K,), "categorical": (K,), "gaussian_gamma": (DG,)}
SAMPLE_EVENT = {"mv_gaussian": (D,), "dirichlet": (K,)}  # categorical samples are integer labels


def _make(case: Case, batch: tuple, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = case.params(batch, rng)
    return case.ctor(**p), p


def _logpdf(q, x):
    return q.logpdf(*x) if isinstance(x, tuple) else q.logpdf(x)


def _at(x, i):
    return tuple(a[i] for a in x) if isinstance(x, tuple) else x[i]


cases = pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
batches = pytest.mark.parametrize("batch", BATCHES, ids=str)


# ------------------------------------------------------------------------------ against scipy.stats
@cases
@batches
def test_logpdf_matches_scipy(case, batch):
    q, p = _make(case, batch)
    x = q.sample((), rng=1)
    lp = _logpdf(q, x)
    assert lp.shape == batch
    for i in np.ndindex(batch):
        assert lp[i] == pytest.approx(case.ref(p, i)["logpdf"](_at(x, i)), rel=1e-10, abs=1e-10)
    # leading sample axes broadcast against the batch
    xs = q.sample(5, rng=2)
    assert _logpdf(q, xs).shape == (5,) + batch


@cases
@batches
def test_entropy_mean_var_match_scipy(case, batch):
    q, p = _make(case, batch)
    h, m, v = q.entropy(), q.mean(), q.var()
    ev = EVENT.get(case.name, ())
    assert h.shape == batch and m.shape == batch + ev and v.shape == batch + ev
    for i in np.ndindex(batch):
        r = case.ref(p, i)
        np.testing.assert_allclose(h[i], r["entropy"], rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(m[i], r["mean"], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(v[i], r["var"], rtol=1e-10, atol=1e-12)
        if "cov" in r:
            np.testing.assert_allclose(q.cov()[i], r["cov"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(q.std(), np.sqrt(v))


def test_gaussian_gamma_marginal_of_w_is_student_t():
    rng = np.random.default_rng(3)
    mu, v, a, b = np.array([0.5, -1.0]), _spd(rng, (), DG), 3.5, 1.7
    q = GaussianGamma(mu, scale=v, shape=a, rate=b)
    t = st.multivariate_t(loc=mu, shape=b / a * v, df=2 * a)
    for w in (mu, np.array([1.3, 0.2])):
        marginal, _ = quad(lambda tau, w=w: np.exp(q.logpdf(w, tau)), 0, np.inf)
        assert math.log(marginal) == pytest.approx(t.logpdf(w), rel=1e-7)
    # moments of w: Student-t covariance df/(df − 2)·shape, and Monte Carlo from scipy's sampler
    np.testing.assert_allclose(q.cov(), (2 * a) / (2 * a - 2) * (b / a) * v, rtol=1e-12)
    draws = t.rvs(size=200_000, random_state=4)
    np.testing.assert_allclose(draws.mean(0), q.mean(), atol=0.02)
    np.testing.assert_allclose(np.cov(draws.T), q.cov(), rtol=0.05, atol=0.02)
    assert q.tau.mean() == pytest.approx(a / b) and q.tau.shape == pytest.approx(a)


# ------------------------------------------------------------------------------ parameterisation
@cases
@batches
def test_natural_parameter_round_trip(case, batch):
    q, p = _make(case, batch)
    back = case.params_of(type(q).from_natural(*q.natural))
    for k in p:
        np.testing.assert_allclose(back[k], p[k], rtol=1e-12, atol=1e-14, err_msg=k)
    again = case.ctor(**back)
    for a, b in zip(again.natural, q.natural, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    assert q.batch_shape == batch and q.event_shape == EVENT.get(case.name, ())
    assert np.all(q.is_proper()) and q.is_proper().shape == batch


def test_precision_and_cov_constructors_agree():
    rng = np.random.default_rng(5)
    mu, s = rng.normal(size=(2, D)), _spd(rng, (2,), D)
    a, b = MvGaussian(mu, cov=s), MvGaussian(mu, precision=np.linalg.inv(s))
    for x, y in zip(a.natural, b.natural, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.precision @ a.cov(), np.broadcast_to(np.eye(D), (2, D, D)), atol=1e-12)
    np.testing.assert_allclose(a.logdet_cov(), np.linalg.slogdet(s)[1], rtol=1e-12)
    g1 = GaussianGamma(mu[:, :DG], scale=s[:, :DG, :DG], shape=2.0, rate=3.0)
    g2 = GaussianGamma(mu[:, :DG], precision=np.linalg.inv(s[:, :DG, :DG]), shape=2.0, rate=3.0)
    np.testing.assert_allclose(g1.precision_matrix, g2.precision_matrix, rtol=1e-10)
    g = Gaussian(1.5, precision=4.0)
    assert g.var() == 0.25 and g.precision == 4.0 and Gaussian().var() == 1.0
    np.testing.assert_allclose(MvGaussian(np.zeros(D), precision=2.0).cov(), 0.5 * np.eye(D))
    np.testing.assert_allclose(Categorical(logits=[0.0, math.log(3.0)]).probs, [0.25, 0.75])
    assert Bernoulli(logits=0.0).probs == 0.5 and Gamma(2.0, 4.0).scale == 0.25


def _kappa_grad_fd(q: ExponentialFamily, h: float = 1e-5) -> list[np.ndarray]:
    """Central finite differences of κ with respect to each natural-parameter component.

    All batch elements are perturbed at once (κ is element-wise over the batch).  For a matrix
    parameter (two event axes) the off-diagonal entries (j, k) and (k, j) are perturbed together,
    so the difference estimates ∂κ/∂η_jk + ∂κ/∂η_kj = 2 E[u]_jk.
    """
    cls, nat = type(q), q.natural
    grads = []
    for n, (eta, k) in enumerate(zip(nat, cls.event_ndims, strict=True)):
        g = np.zeros_like(eta)
        for e in np.ndindex(eta.shape[eta.ndim - k:]):
            positions = {e, e[::-1]} if k == 2 else {e}
            step = np.zeros_like(eta)
            for pos in positions:
                step[(Ellipsis,) + pos] = h
            kp = cls.from_natural(*(nat[:n] + (eta + step,) + nat[n + 1:])).log_partition()
            km = cls.from_natural(*(nat[:n] + (eta - step,) + nat[n + 1:])).log_partition()
            g[(Ellipsis,) + e] = (kp - km) / (2 * h)
        grads.append(g)
    return grads


@cases
@batches
def test_expected_stats_is_gradient_of_log_partition(case, batch):
    q, _ = _make(case, batch)
    eu = q.expected_stats()
    for n, (fd, e, k) in enumerate(zip(_kappa_grad_fd(q), eu, type(q).event_ndims, strict=True)):
        want = e
        if k == 2:  # symmetric pair perturbation: off-diagonal entries count twice
            want = 2 * e - e * np.eye(e.shape[-1])
        assert e.shape == q.natural[n].shape
        np.testing.assert_allclose(fd, want, rtol=1e-6, atol=1e-6, err_msg=f"{case.name} η{n + 1}")


@cases
def test_entropy_is_kappa_minus_eta_dot_expected_stats(case):
    """With base measure 1: H = κ − ηᵀE[u] (checks the constants of κ against the entropy)."""
    q, _ = _make(case, (3,))
    inner = sum(((n * e).reshape(3, -1)).sum(-1) for n, e in zip(q.natural, q.expected_stats(), strict=True))
    np.testing.assert_allclose(q.entropy(), q.log_partition() - inner, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------ KL
@cases
@batches
def test_kl_nonnegative_zero_at_equality_and_closed_form_matches_generic(case, batch):
    q, _ = _make(case, batch, seed=0)
    p, _ = _make(case, batch, seed=1)
    kl = q.kl(p)
    assert kl.shape == batch
    assert np.all(kl > 0)
    np.testing.assert_allclose(q.kl(q), 0.0, atol=1e-10)
    np.testing.assert_allclose(kl, ExponentialFamily.kl(q, p), rtol=1e-9, atol=1e-10)


@cases
def test_kl_matches_monte_carlo(case):
    q, _ = _make(case, (), seed=0)
    p, _ = _make(case, (), seed=1)
    x = q.sample(100_000, rng=7)
    d = _logpdf(q, x) - _logpdf(p, x)
    se = d.std() / math.sqrt(d.size)
    assert abs(q.kl(p) - d.mean()) < 5 * se + 1e-12


# ------------------------------------------------------------------------------ message algebra
@cases
@batches
def test_message_algebra(case, batch):
    q, _ = _make(case, batch, seed=0)
    p, _ = _make(case, batch, seed=1)
    cls = type(q)
    for a, b, c in zip((q * p).natural, q.natural, p.natural, strict=True):
        np.testing.assert_array_equal(a, b + c)
    for a, b in zip(((q * p) / p).natural, q.natural, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    for a, b in zip((q**2.5).natural, q.natural, strict=True):
        np.testing.assert_array_equal(a, 2.5 * b)
    for a, b, c in zip(q.damp(p, 0.3).natural, q.natural, p.natural, strict=True):
        np.testing.assert_allclose(a, 0.7 * b + 0.3 * c, rtol=1e-14)
    for a, b in zip(q.damp(p, 0.0).natural, q.natural, strict=True):
        np.testing.assert_array_equal(a, b)
    for bad in (-0.1, 1.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="damping"):
            q.damp(p, bad)
    flat = cls.uniform(batch, EVENT.get(case.name, ()))
    assert flat.batch_shape == batch
    for a, b in zip((q * flat).natural, q.natural, strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.all(flat.is_proper()) == case.bounded
    if not case.bounded:
        assert not np.any(flat.is_proper()) and np.all(np.isinf(flat.log_partition()))
    other = Gaussian(0.0) if cls is not Gaussian else Gamma(1.0, 1.0)
    with pytest.raises(TypeError):
        q * other


def test_bounded_flat_messages_are_uniform_laws():
    assert Beta.uniform().entropy() == pytest.approx(0.0, abs=1e-12)
    assert Dirichlet.uniform((), (K,)).logpdf(np.full(K, 1 / K)) == pytest.approx(math.log(math.factorial(K - 1)))
    np.testing.assert_allclose(Categorical.uniform((2,), (K,)).probs, np.full((2, K), 1 / K))
    assert Bernoulli.uniform().probs == 0.5
    with pytest.raises(ValueError, match="event_shape"):
        MvGaussian.uniform((2,))


def test_algebra_broadcasts_batches_and_checks_events():
    q = Gaussian(np.zeros(3), var=1.0)
    r = q * Gaussian(1.0, var=2.0)
    assert r.batch_shape == (3,)
    g = Gaussian.from_natural(np.ones((2, 3)), -0.5)  # naturals with different batch shapes broadcast
    assert g.batch_shape == (2, 3) and g.natural[1].shape == (2, 3)
    with pytest.raises(ValueError, match="event shapes differ"):
        MvGaussian(np.zeros(2)) * MvGaussian(np.zeros(3))
    m = MvGaussian(np.zeros((2, 3, D)))
    assert m[1].batch_shape == (3,) and m[:, 0].batch_shape == (2,) and len(m) == 2


def test_improper_messages():
    # a Gaussian message of negative precision keeps its mean and (negative) variance
    g = Gaussian.from_natural(np.array([1.0, 1.0]), np.array([-0.5, 0.25]))
    np.testing.assert_array_equal(g.is_proper(), [True, False])
    np.testing.assert_allclose(g.var(), [1.0, -2.0])
    np.testing.assert_allclose(g.mean(), [1.0, -2.0])
    assert np.isinf(g.log_partition()[1]) and np.isfinite(g.log_partition()[0])
    # MvGaussian: properness per batch element; an indefinite but invertible Λ still has Λ⁻¹η₁
    lam = np.stack([np.eye(2), np.diag([1.0, -2.0]), np.zeros((2, 2))])
    m = MvGaussian.from_natural(np.ones((3, 2)), -0.5 * lam)
    np.testing.assert_array_equal(m.is_proper(), [True, False, False])
    np.testing.assert_allclose(m.mean()[:2], [[1.0, 1.0], [1.0, -0.5]])
    assert np.all(np.isnan(m.mean()[2]))
    np.testing.assert_array_equal(np.isinf(m.log_partition()), [False, True, True])
    assert not Gamma.from_natural(1.0, 0.0).is_proper()
    assert not Dirichlet.from_natural([0.0, -1.5]).is_proper()
    assert not GaussianGamma.from_natural(np.zeros(2), -0.5 * np.eye(2), 1.0, 0.0).is_proper()


def test_categorical_softmax_kernel_matches_scipy():
    """The one-pass kernel (log p, p, H) equals scipy's softmax on ordinary, huge and floored logits, and rows
    without a finite maximum (only from natural parameters) keep scipy's conventions."""
    from scipy.special import log_softmax as sp_log_softmax

    rng = np.random.default_rng(7)
    eta = np.concatenate([rng.normal(scale=3.0, size=(5, 6)), rng.normal(scale=3.0, size=(2, 6)) + 1e6,
                          np.r_[0.0, -708.0, -1e300, 1.0, 2.0, -3.0][None]])
    c = Categorical.from_natural(eta.reshape(2, 4, 6))
    lp = sp_log_softmax(eta, axis=-1).reshape(2, 4, 6)
    np.testing.assert_allclose(c.logits, lp, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(c.probs, np.exp(lp), rtol=1e-13, atol=1e-300)
    h = -np.where(np.exp(lp) > 0, np.exp(lp) * lp, 0.0).sum(-1)
    np.testing.assert_allclose(c.entropy(), h, rtol=1e-13, atol=1e-14)
    from scipy.special import logsumexp

    odd_eta = np.array([[0.0, 1.0], [np.inf, 0.0], [-np.inf, -np.inf]])
    with np.errstate(invalid="ignore"):
        odd = Categorical.from_natural(odd_eta)
        np.testing.assert_array_equal(odd.probs, np.exp(odd_eta - logsumexp(odd_eta, axis=-1, keepdims=True)))
    np.testing.assert_array_equal(odd.is_proper(), [True, False, False])
    np.testing.assert_array_equal(Categorical.from_natural(np.array([[0.0, np.nan]])).is_proper(), [False])
    assert c.is_proper().shape == (2, 4) and c.is_proper().all()


def test_categorical_and_bernoulli_extremes():
    c = Categorical(probs=[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert np.all(np.isfinite(c.natural[0]))  # zero probabilities get a finite floor: no nan in algebra
    np.testing.assert_allclose(c.probs, [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]], atol=1e-300)
    assert np.all(np.isfinite(((c * c) / c).natural[0]))
    np.testing.assert_allclose(c.entropy(), [math.log(2), 0.0], atol=1e-12)
    lp = c.logpdf([[0], [3]])  # labels (2, 1) against batch (2,): label 0 in row 0, label 3 in row 1
    assert lp[0, 0] == pytest.approx(math.log(0.5)) and lp[0, 1] < -700  # zero probability: ≈ −708
    np.testing.assert_array_equal(lp[1], -np.inf)  # outside {0, …, K−1}
    assert c.logpdf(2.5)[1] == -np.inf
    np.testing.assert_allclose(c.sufficient_stats(np.array([2, 0]))[0], [[0, 0, 1], [1, 0, 0]])
    b = Bernoulli(probs=[0.0, 1.0, 0.25])
    assert np.all(np.isfinite(b.logits))
    np.testing.assert_allclose(b.entropy()[:2], 0.0, atol=1e-12)
    np.testing.assert_allclose(b.logpdf([1, 1, 1]), [-708.3964185322641, 0.0, math.log(0.25)], rtol=1e-12,
                               atol=1e-300)
    assert b.logpdf(0.5)[2] == -np.inf
    np.testing.assert_allclose(Bernoulli(logits=800.0).log_partition(), 708.3964185322641)


# ------------------------------------------------------------------------------ sampling
@cases
@batches
def test_sample_shapes(case, batch):
    q, _ = _make(case, batch)
    ev = SAMPLE_EVENT.get(case.name, ())
    for shape, want in (((), ()), (4, (4,)), ((2, 5), (2, 5))):
        x = q.sample(shape, rng=np.random.default_rng(0))
        if case.name == "gaussian_gamma":
            w, tau = x
            assert w.shape == want + batch + (DG,) and tau.shape == want + batch
        else:
            assert x.shape == want + batch + ev
    a, b = q.sample(3, rng=11), q.sample(3, rng=11)
    for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,), strict=True):
        np.testing.assert_array_equal(u, v)  # seeded draws are reproducible


@cases
def test_sample_moments(case):
    q, _ = _make(case, (3,))
    n = 40_000
    x = q.sample(n, rng=np.random.default_rng(12))
    if case.name == "gaussian_gamma":
        w, tau = x
        np.testing.assert_allclose(tau.mean(0), q.tau.mean(), rtol=0.03)
        x = w
        np.testing.assert_allclose(np.einsum("nbi,nbj->bij", w - w.mean(0), w - w.mean(0)) / n, q.cov(),
                                   rtol=0.1, atol=0.05)
    elif case.name == "categorical":
        x = np.eye(K)[x]
    m, v = q.mean(), q.var()
    assert np.all(np.abs(x.mean(0) - m) < 6 * np.sqrt(v / n) + 1e-12)
    np.testing.assert_allclose(x.var(0), v, rtol=0.1, atol=1e-12)


# ------------------------------------------------------------------------------ point mass
def test_point_mass():
    pm = PointMass(np.arange(6.0).reshape(2, 3), event_ndims=1)
    assert pm.batch_shape == (2,) and pm.event_shape == (3,)
    np.testing.assert_array_equal(pm.mean(), pm.value)
    np.testing.assert_array_equal(pm.var(), 0.0)
    assert pm.cov().shape == (2, 3, 3) and np.all(pm.cov() == 0)
    np.testing.assert_array_equal(pm.entropy(), [0.0, 0.0])
    np.testing.assert_array_equal(pm.logpdf([[0, 1, 2], [3, 4, 0]]), [0.0, -np.inf])
    assert pm.sample(4, rng=0).shape == (4, 2, 3) and np.all(pm.sample(4)[2] == pm.value)
    eu = PointMass([1.0, 2.0]).expected_stats(Gaussian(np.zeros(2)))
    np.testing.assert_array_equal(eu[1], [1.0, 4.0])
    assert pm[1].batch_shape == () and np.all(pm.is_proper())
    with pytest.raises(ValueError, match="value"):
        PointMass([1.0, np.nan])


# ------------------------------------------------------------------------------ validation
BAD = [
    (lambda: Gaussian(0.0, var=0.0), "var", "0.0"),
    (lambda: Gaussian(0.0, var=[1.0, -2.0]), "var", "-2.0"),
    (lambda: Gaussian(np.nan), "mean", "nan"),
    (lambda: Gaussian(0.0, precision=-1.0), "precision", "-1.0"),
    (lambda: Gaussian(0.0, var=1.0, precision=1.0), "precision", "var"),
    (lambda: Gaussian(np.zeros(3), var=np.ones(2)), "var", "(2,)"),
    (lambda: Gaussian("a"), "mean", "'a'"),
    (lambda: MvGaussian(0.0), "mean", "shape"),
    (lambda: MvGaussian(np.zeros(3), cov=np.eye(2)), "cov", "(2, 2)"),
    (lambda: MvGaussian(np.zeros(2), cov=np.diag([1.0, -1.0])), "cov", "positive definite"),
    (lambda: MvGaussian(np.zeros(2), cov=[[1.0, 0.5], [0.0, 1.0]]), "cov", "symmetric"),
    (lambda: MvGaussian(np.zeros(2), precision=np.array([[[1, 0], [0, 1]], [[1, 2], [2, 1]]])),
     "precision", "batch index (1,)"),
    (lambda: MvGaussian(np.zeros((3, 2)), cov=np.broadcast_to(np.eye(2), (2, 2, 2))), "cov", "batch"),
    (lambda: MvGaussian(np.zeros(2), cov=-1.0), "cov", "-1.0"),
    (lambda: Gamma(0.0, 1.0), "shape", "0.0"),
    (lambda: Gamma(1.0, -1.0), "rate", "-1.0"),
    (lambda: Gamma(1.0, np.inf), "rate", "inf"),
    (lambda: Beta(0.0, 1.0), "alpha", "0.0"),
    (lambda: Beta(1.0, np.nan), "beta", "nan"),
    (lambda: Dirichlet([1.0, 0.0, 2.0]), "concentration", "0.0 at index (1,)"),
    (lambda: Dirichlet(1.0), "concentration", "shape"),
    (lambda: Categorical(probs=[0.5, 0.6]), "probs", "1.1"),
    (lambda: Categorical(probs=[-0.1, 1.1]), "probs", "-0.1"),
    (lambda: Categorical(logits=[np.nan, 0.0]), "logits", "nan"),
    (lambda: Categorical(), "probs", "logits"),
    (lambda: Bernoulli(probs=1.5), "probs", "1.5"),
    (lambda: Bernoulli(logits=np.nan), "logits", "nan"),
    (lambda: GaussianGamma(np.zeros(2), shape=0.0, rate=1.0), "shape", "0.0"),
    (lambda: GaussianGamma(np.zeros(2), shape=1.0, rate=-3.0), "rate", "-3.0"),
    (lambda: GaussianGamma(np.zeros(2), scale=np.diag([1.0, 0.0]), shape=1.0, rate=1.0), "scale",
     "positive definite"),
    (lambda: GaussianGamma(np.zeros(2), precision=np.eye(3), shape=1.0, rate=1.0), "precision", "(3, 3)"),
]


@pytest.mark.parametrize("make,name,value", BAD, ids=[f"{n}-{i}" for i, (_, n, _) in enumerate(BAD)])
def test_bad_constructor_input(make, name, value):
    with pytest.raises(ValueError) as err:
        make()
    assert name in str(err.value) and value in str(err.value), str(err.value)


# ------------------------------------------------------------------------------ property-based
_pos = hs.floats(min_value=1e-2, max_value=1e2, allow_nan=False)
_real = hs.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


@settings(max_examples=100, deadline=None, database=None)
@given(m=_real, v=_pos, m2=_real, v2=_pos)
def test_gaussian_round_trip_and_kl_property(m, v, m2, v2):
    q, p = Gaussian(m, var=v), Gaussian(m2, var=v2)
    r = Gaussian.from_natural(*q.natural)
    assert r.mean() == pytest.approx(m, rel=1e-12, abs=1e-12) and r.var() == pytest.approx(v, rel=1e-12)
    assert q.kl(p) >= 0 and abs(q.kl(q)) < 1e-12
    assert q.kl(p) == pytest.approx(ExponentialFamily.kl(q, p), rel=1e-6, abs=1e-6)


@settings(max_examples=100, deadline=None, database=None)
@given(a=_pos, b=_pos, a2=_pos, b2=_pos)
def test_gamma_round_trip_and_kl_property(a, b, a2, b2):
    q, p = Gamma(a, b), Gamma(a2, b2)
    r = Gamma.from_natural(*q.natural)
    assert r.shape == pytest.approx(a, rel=1e-12) and r.rate == pytest.approx(b, rel=1e-12)
    assert q.kl(p) >= -1e-12 and abs(q.kl(q)) < 1e-10
    assert q.entropy() == pytest.approx(st.gamma(a, scale=1 / b).entropy(), rel=1e-9, abs=1e-9)


@settings(max_examples=50, deadline=None, database=None)
@given(a=hs.lists(_pos, min_size=2, max_size=6), seed=hs.integers(0, 2**32 - 1))
def test_dirichlet_and_beta_kl_property(a, seed):
    rng = np.random.default_rng(seed)
    a = np.array(a)
    q, p = Dirichlet(a), Dirichlet(rng.uniform(0.1, 10, a.size))
    assert q.kl(p) >= -1e-10 and abs(q.kl(q)) < 1e-10
    bq, bp = Beta(a[0], a[1]), Beta(*rng.uniform(0.1, 10, 2))
    assert bq.kl(bp) >= -1e-10
    assert bq.kl(bp) == pytest.approx(Dirichlet(a[:2]).kl(Dirichlet([bp.alpha, bp.beta])), rel=1e-8, abs=1e-9)


@settings(max_examples=50, deadline=None, database=None)
@given(batch=hs.lists(hs.integers(1, 3), max_size=3).map(tuple), d=hs.integers(1, 4),
       seed=hs.integers(0, 2**32 - 1))
def test_mv_gaussian_shapes_and_kl_property(batch, d, seed):
    rng = np.random.default_rng(seed)
    q = MvGaussian(rng.normal(size=batch + (d,)), cov=_spd(rng, batch, d))
    p = MvGaussian(rng.normal(size=(d,)), precision=_spd(rng, (), d))
    assert q.batch_shape == batch and q.sample(2, rng).shape == (2,) + batch + (d,)
    assert q.logpdf(q.sample((), rng)).shape == batch
    kl = q.kl(p)
    assert kl.shape == batch and np.all(kl >= -1e-10)
    np.testing.assert_allclose(kl, ExponentialFamily.kl(q, p), rtol=1e-7, atol=1e-8)


@settings(max_examples=50, deadline=None, database=None)
@given(rate=hs.floats(max_value=0.0, allow_nan=False) | hs.just(float("nan")) | hs.just(float("inf")))
def test_gamma_rejects_bad_rate_property(rate):
    with pytest.raises(ValueError, match="rate"):
        Gamma(1.0, rate)
