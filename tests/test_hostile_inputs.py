"""Hostile input: every public entry point, every argument, a wide set of bad values.

Each builder, ``fg.infer``'s options, ``fg.compare``, the handlers' constructors, ``fg.approximate`` and the
canned models are called with one argument replaced by a bad value (wrong types, None, strings, bools,
complex numbers, nan/inf, huge and negative numbers, empty and ragged arrays, object arrays, masked arrays,
data frames, numpy scalar types).  The call may succeed (a value that is in fact valid), but when it fails
the error must be the library's own (``fg.ModelError`` or ``fg.InferenceError``), never an exception from
deep inside numpy, scipy or numba.  The hypothesis property test draws the bad values at random.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd  # part of the test extra: data frames are one more kind of input
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import factorgraph as fg
from factorgraph import models
from schedules.handlers.laplace import HandlerError

LIBRARY_ERRORS = (fg.ModelError, fg.InferenceError, HandlerError)


def library_error(exc: BaseException) -> bool:
    """An exception the library raises on purpose: one of its own classes (ModelError subclasses ValueError,
    so the exact type is what counts), never one escaping from numpy, scipy or numba."""
    return isinstance(exc, LIBRARY_ERRORS) and type(exc).__module__.split(".")[0] in ("factorgraph", "schedules")


def run_expecting_library_errors(fn, *args, **kwargs):
    """Call fn; an exception must be one of the library's.  Returns the exception or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the point is to look at whatever escapes
        assert library_error(exc), f"{type(exc).__module__}.{type(exc).__name__} escaped: {exc}"
        return exc
    return None


# ------------------------------------------------------------------------------------ bad values
def _masked(a, m):
    return np.ma.masked_array(np.asarray(a, dtype=float), mask=m)


BAD_VALUES = {
    "None": None,
    "str": "abc",
    "empty_str": "",
    "bool_true": True,
    "bool_false": False,
    "complex": 1 + 2j,
    "complex_array": np.array([1 + 1j, 2.0, 3.0]),
    "nan": float("nan"),
    "inf": float("inf"),
    "minus_inf": -float("inf"),
    "huge": 1e300,
    "minus_huge": -1e300,
    "tiny": 1e-320,
    "zero": 0,
    "minus_one": -1,
    "minus_float": -0.5,
    "two_pow_62": 2**62,
    "big_int": 10**400,
    "empty_list": [],
    "empty_array": np.zeros((0,)),
    "ragged": [[1.0, 2.0], [3.0]],
    "object_array": np.array([1.0, "a", None], dtype=object),
    "string_array": np.array(["a", "b", "c"]),
    "nested_3d": np.ones((2, 2, 2)),
    "matrix_3x3": np.eye(3),
    "vector_5": np.arange(5.0),
    "vector_3": np.array([0.5, 1.0, 2.0]),
    "masked_vector_3": _masked([1.0, 2.0, 3.0], [False, True, False]),
    "np_int64": np.int64(3),
    "np_float32": np.float32(0.5),
    "np_bool": np.bool_(True),
    "np_complex": np.complex128(1j),
    "dict": {"a": 1},
    "set": {1, 2},
    "callable": (lambda x: x),
    "object": object(),
    "tuple_strs": ("a", "b"),
    "list_none": [None, None, None],
    "bytes": b"\x00\x01",
    "datetime_array": np.array(["2020-01-01"] * 3, dtype="datetime64[D]"),
}
BAD_VALUES["dataframe"] = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": ["x", "y", "z"]})
BAD_VALUES["series"] = pd.Series([1.0, 2.0, 3.0])
BAD_VALUES["series_na"] = pd.Series([1.0, None, 3.0])


# ------------------------------------------------------------------------------------ entry points
# Each scene builds a small valid model around one builder call whose keyword arguments are ``kw``
# (the defaults below, one replaced by a bad value), then runs a few sweeps of inference on it.
N = 3


def _infer(m, algorithm=None):
    fg.infer(m, algorithm or fg.VMP(), max_iter=3, tol=None)


def scene_plate(**kw):
    args = {"name": "n", "size": 3} | kw
    with fg.Model() as m:
        n = fg.plate(args["name"], args["size"])
        fg.gaussian("x", 0.0, precision=1.0, plates=[n], observed=np.arange(3.0))
    _infer(m)


def scene_gaussian(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        args = {"name": "x", "mean": mu, "precision": 2.0, "plates": [n], "observed": np.arange(3.0),
                "mask": None} | kw
        fg.gaussian(**args)
    _infer(m)


def scene_gaussian_variance(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "x", "mean": 0.0, "variance": 2.0, "plates": [n]} | kw
        fg.gaussian(**args)
    _infer(m)


def scene_gamma(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "t", "shape": 2.0, "rate": 1.0, "plates": [n], "observed": None, "mask": None} | kw
        t = fg.gamma(**args)
        if args["observed"] is None:
            fg.gaussian("x", 0.0, precision=t, plates=[n], observed=np.arange(3.0))
    _infer(m)


def scene_gamma_observed(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        r = fg.gamma("r", 1.0, 1.0)
        args = {"name": "t", "shape": 2.0, "rate": r, "plates": [n], "observed": np.array([1.0, 2.0, 3.0]),
                "mask": None} | kw
        fg.gamma(**args)
    _infer(m)


def scene_beta(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "p", "alpha": 1.0, "beta": 2.0, "plates": []} | kw
        p = fg.beta(**args)
        fg.bernoulli("s", p, plates=[n], observed=[0, 1, 1])
    _infer(m)


def scene_bernoulli(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        p = fg.beta("p", 1.0, 1.0)
        args = {"name": "s", "probs": p, "plates": [n], "observed": [0, 1, 1], "mask": None} | kw
        fg.bernoulli(**args)
    _infer(m)


def scene_dirichlet(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "pi", "concentration": [1.0, 1.0, 1.0], "plates": []} | kw
        pi = fg.dirichlet(**args)
        fg.categorical("z", pi, plates=[n], observed=[0, 1, 2])
    _infer(m)


def scene_categorical(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        pi = fg.dirichlet("pi", [1.0, 1.0, 1.0])
        args = {"name": "z", "probs": pi, "plates": [n], "observed": [0, 1, 2], "mask": None,
                "categories": None} | kw
        fg.categorical(**args)
    _infer(m)


def scene_categorical_const(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "z", "probs": [0.2, 0.3, 0.5], "plates": [n], "observed": None} | kw
        fg.categorical(**args)
    _infer(m)


def scene_mixture(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        k = fg.plate("k", 2)
        pi = fg.dirichlet("pi", [1.0, 1.0])
        z = fg.categorical("z", pi, plates=[n])
        mus = fg.gaussian("mus", 0.0, precision=0.1, plates=[k])
        args = {"name": "x", "mean": mus[z], "precision": 1.0, "plates": [n], "observed": [-1.0, 0.0, 2.0]} | kw
        args.pop("seed", None)
        fg.gaussian(**args)
    fg.infer(m, max_iter=3, tol=None, seed=kw.get("seed", 0))


def scene_mv_gaussian(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "w", "mean": 0.0, "precision": 1.0, "covariance": None, "plates": [], "dim": 2,
                "observed": None} | kw
        w = fg.mv_gaussian(**args)
        fg.gaussian("y", fg.inner(np.ones((3, 2)), w, plates=[n]), precision=1.0, plates=[n], observed=[1.0, 2.0, 3.0])
    _infer(m)


def scene_gaussian_gamma(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "w", "mean": 0.0, "precision": 1.0, "shape": 1e-2, "rate": 1e-4, "dim": 2} | kw
        w = fg.gaussian_gamma(**args)
        fg.gaussian("y", fg.inner(np.eye(3, 2), w, plates=[n]), precision=w.tau, plates=[n], observed=[1.0, 2.0, 3.0])
    _infer(m)


def scene_inner(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        args = {"X": np.eye(3, 2), "w": w, "plates": [n]} | kw
        fg.gaussian("y", fg.inner(**args), precision=1.0, plates=[n], observed=[1.0, 2.0, 3.0])
    _infer(m)


def scene_arithmetic(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[n])
        c = kw.get("c", 2.0)
        fg.gaussian("y", a * c + c, precision=1.0, plates=[n], observed=[1.0, 2.0, 3.0])
    _infer(m)


def scene_select(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        z = fg.categorical("z", [0.5, 0.5], plates=[n])
        args = {"values": [0.0, 1.0], "selector": z} | kw
        fg.gaussian("x", fg.select(**args), precision=1.0, plates=[n], observed=[0.0, 1.0, 0.5])
    _infer(m)


def scene_bernoulli_logit(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        args = {"name": "s", "logit": fg.inner(np.eye(3, 2), w, plates=[n]), "observed": [0, 1, 1], "mask": None,
                "method": "quadrature", "plates": [], "xi0": None} | kw
        fg.bernoulli_logit(**args)
    _infer(m, fg.NCVMP())


def scene_probit(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        x = fg.gaussian("x", 0.0, precision=1.0, plates=[n])
        args = {"name": "s", "x": x, "observed": [0, 1, 1], "mask": None} | kw
        fg.probit(**args)
    _infer(m, fg.NCVMP())


def scene_softmax(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        k = fg.plate("k", 3)
        W = fg.mv_gaussian("W", 0.0, precision=1.0, plates=[k], dim=2)
        args = {"name": "y", "logits": fg.inner(np.eye(3, 2), W, plates=[n]), "over": k, "observed": [0, 2, 1],
                "mask": None, "counts": False, "method": "tilted"} | kw
        fg.categorical_softmax(**args)
    _infer(m, fg.NCVMP())


def _site_scene(builder, **extra):
    def scene(**kw):
        with fg.Model() as m:
            n = fg.plate("n", N)
            x = fg.gaussian("x", 0.0, precision=1.0, plates=[n])
            args = {"name": "s", "x": x, "location": [0.0, 1.0, 2.0], "scale": 1.0} | extra | kw
            builder(**args)
        _infer(m, fg.NCVMP())
    return scene


scene_laplace_site = _site_scene(fg.laplace_site)
scene_cauchy_site = _site_scene(fg.cauchy_site)
scene_student_t_site = _site_scene(fg.student_t_site, dof=3.0)


def _simple_model():
    with fg.Model() as m:
        n = fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("x", mu, precision=tau, plates=[n], observed=[0.0, 1.0, 2.0])
    return m


def scene_infer(**kw):
    fg.infer(_simple_model(), **({"max_iter": 3} | kw))


def scene_infer_model(**kw):
    fg.infer(kw.get("model"), max_iter=3)


def scene_vmp(**kw):
    fg.infer(_simple_model(), fg.VMP(**kw), max_iter=3)


def scene_ncvmp(**kw):
    fg.infer(_simple_model(), fg.NCVMP(**kw), max_iter=3)


def scene_compare(**kw):
    r = fg.infer(_simple_model(), max_iter=3)
    fg.compare(kw.get("results", {"a": r}))


def _regression_model():
    X = np.column_stack([np.ones(6), np.linspace(-1, 1, 6)])
    with fg.Model() as m:
        n = fg.plate("n", 6)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        fg.bernoulli_logit("s", fg.inner(X, w, plates=[n]), observed=[0, 0, 1, 0, 1, 1])
    return m


def _handler_scene(cls, fit: bool = True, **defaults):
    def scene(**kw):
        h = cls(**(defaults | kw))
        if fit:
            fg.infer(_regression_model(), fg.NCVMP(), handlers={"w": h}, max_iter=2)
    return scene


scene_laplace = _handler_scene(fg.Laplace)
scene_mvi = _handler_scene(fg.MVI, n_samples=50)
scene_vidiag = _handler_scene(fg.VIDiag, n_samples=50)
# BVI and AIKL validate every argument in their constructors; a fit per case costs seconds, so the default run
# constructs them only and the slow run (SLOW_SCENES) fits each accepted value too
scene_bvi = _handler_scene(fg.BVI, fit=False, n_components=2)
scene_aikl = _handler_scene(fg.AIKL, fit=False, lattice=16, max_lattice=32, gaussian_lattice=16)
scene_bvi_fit = _handler_scene(fg.BVI, n_components=2)
scene_aikl_fit = _handler_scene(fg.AIKL, lattice=16, max_lattice=32, gaussian_lattice=16)


def scene_approximate(**kw):
    args = {"log_density": lambda x: -0.5 * float(np.sum(x**2)), "x0": [0.0], "method": fg.Laplace()} | kw
    fg.approximate(**args)


def scene_linear_regression(**kw):
    X = np.column_stack([np.ones(6), np.linspace(-1, 1, 6)])
    args = {"X": X, "y": np.linspace(0, 1, 6), "ard": False, "a0": 1e-2, "b0": 1e-4, "c0": 1e-2, "d0": 1e-4} | kw
    models.linear_regression(**args)


def scene_logistic_regression(**kw):
    X = np.column_stack([np.ones(6), np.linspace(-1, 1, 6)])
    args = {"X": X, "y": [0, 0, 1, 0, 1, 1], "ard": False} | kw
    models.logistic_regression(**args)


def scene_softmax_regression(**kw):
    X = np.column_stack([np.ones(6), np.linspace(-1, 1, 6)])
    args = {"X": X, "y": [0, 1, 2, 0, 1, 2], "n_classes": 3, "method": "tilted", "prior_precision": 1.0,
            "max_iter": 3} | kw
    models.softmax_regression(**args)


def scene_poisson(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        r = fg.gamma("r", 1.0, 1.0)
        args = {"name": "y", "rate": r, "exposure": None, "plates": [n], "observed": [0, 3, 1], "mask": None} | kw
        fg.poisson(**args)
    _infer(m)


def scene_poisson_log(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        x = fg.gaussian("x", 0.0, precision=1.0, plates=[n])
        args = {"name": "y", "log_rate": x, "exposure": [1.0, 2.0, 1.0], "plates": [], "observed": [0, 3, 1],
                "mask": None} | kw
        fg.poisson_log(**args)
    _infer(m, fg.NCVMP())


def scene_binomial(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        p = fg.beta("p", 1.0, 1.0)
        args = {"name": "y", "trials": [5, 5, 3], "probs": p, "plates": [n], "observed": [0, 3, 1], "mask": None} | kw
        fg.binomial(**args)
    _infer(m)


def scene_multinomial(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        pi = fg.dirichlet("pi", [1.0, 1.0])
        args = {"name": "y", "trials": [3, 2, 1], "probs": pi, "plates": [n], "observed": [[1, 2], [2, 0], [0, 1]],
                "mask": None} | kw
        fg.multinomial(**args)
    _infer(m)


def scene_index(**kw):
    with fg.Model() as m:
        n, c = fg.plate("n", N), fg.plate("c", 2)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        args = {"x": a, "idx": [0, 1, 1], "plate": n, "along": c} | kw
        fg.gaussian("y", fg.index(**args), precision=1.0, plates=[n], observed=[1.0, 2.0, 3.0])
    _infer(m)


def scene_hierarchical(**kw):
    X = np.column_stack([np.ones(6), np.linspace(-1, 1, 6)])
    args = {"X": X, "y": np.linspace(0, 1, 6), "groups": [0, 0, 1, 1, 2, 2], "varying": ("intercept",),
            "n_groups": None, "pooling": "partial", "prior_precision": 1e-2, "a0": 1.0, "b0": 1.0} | kw
    fg.infer(models.hierarchical_regression_model(**args), max_iter=3)


_PRED = {}


def _fitted(kind):
    """Small fitted canned models (cached: the predictive functions are what is under test)."""
    if kind not in _PRED:
        X = np.column_stack([np.ones(6), np.linspace(-1, 1, 6)])
        _PRED[kind] = {
            "linear": lambda: models.linear_regression(X, np.linspace(0, 1, 6)),
            "logistic": lambda: models.logistic_regression(X, [0, 0, 1, 0, 1, 1]),
            "softmax": lambda: models.softmax_regression(X, [0, 1, 2, 0, 1, 2], n_classes=3, max_iter=5),
        }[kind]()
    return _PRED[kind]


def scene_linear_predictive(**kw):
    args = {"result": _fitted("linear"), "X_new": np.ones((2, 2))} | kw
    models.linear_predictive(**args)


def scene_logistic_predictive(**kw):
    args = {"result": _fitted("logistic"), "X_new": np.ones((2, 2)), "method": "quadrature"} | kw
    models.logistic_predictive(**args)


def scene_softmax_predictive(**kw):
    args = {"result": _fitted("softmax"), "X_new": np.ones((2, 2)), "n_samples": 50, "seed": 0} | kw
    models.softmax_predictive(**args)


def scene_predictive_log_density(**kw):
    args = {"result": _fitted("logistic"), "X_test": np.ones((2, 2)), "y_test": [0, 1]} | kw
    models.predictive_log_density(**args)


def _scale_scene(builder, **extra):
    def scene(**kw):
        with fg.Model() as m:
            n = fg.plate("n", N)
            args = {"name": "s", "plates": []} | extra | kw
            s = builder(**args)
            fg.gaussian("x", 0.0, sd=s, plates=[n], observed=[0.5, -1.0, 2.0])
        _infer(m, fg.NCVMP())
    return scene


def scene_gaussian_sd(**kw):
    with fg.Model() as m:
        n = fg.plate("n", N)
        args = {"name": "x", "mean": 0.0, "sd": 2.0, "plates": [n], "observed": [0.5, -1.0, 2.0]} | kw
        fg.gaussian(**args)
    _infer(m)


# (scene, the arguments to make hostile)
SCENES = {
    "half_normal": (_scale_scene(fg.half_normal, scale=1.0), ["name", "scale", "plates"]),
    "half_cauchy": (_scale_scene(fg.half_cauchy, scale=1.0), ["scale", "plates"]),
    "half_student_t": (_scale_scene(fg.half_student_t, dof=3.0, scale=1.0), ["dof", "scale"]),
    "exponential": (_scale_scene(fg.exponential, rate=1.0), ["rate", "plates"]),
    "gaussian_sd": (scene_gaussian_sd, ["sd"]),
    "linear_predictive": (scene_linear_predictive, ["result", "X_new"]),
    "logistic_predictive": (scene_logistic_predictive, ["result", "X_new", "method"]),
    "softmax_predictive": (scene_softmax_predictive, ["result", "X_new", "n_samples", "seed"]),
    "predictive_log_density": (scene_predictive_log_density, ["result", "X_test", "y_test", "likelihood"]),
    "poisson": (scene_poisson, ["rate", "exposure", "plates", "observed", "mask"]),
    "poisson_log": (scene_poisson_log, ["log_rate", "exposure", "observed", "mask"]),
    "binomial": (scene_binomial, ["trials", "probs", "observed", "mask"]),
    "multinomial": (scene_multinomial, ["trials", "probs", "observed"]),
    "index": (scene_index, ["x", "idx", "plate", "along"]),
    "hierarchical_regression": (scene_hierarchical, ["X", "y", "groups", "varying", "n_groups", "pooling",
                                                     "prior_precision", "a0", "b0"]),
    "plate": (scene_plate, ["name", "size"]),
    "gaussian": (scene_gaussian, ["name", "mean", "precision", "plates", "observed", "mask"]),
    "gaussian_variance": (scene_gaussian_variance, ["variance"]),
    "gamma": (scene_gamma, ["name", "shape", "rate", "plates"]),
    "gamma_observed": (scene_gamma_observed, ["shape", "rate", "observed", "mask"]),
    "beta": (scene_beta, ["name", "alpha", "beta", "plates"]),
    "bernoulli": (scene_bernoulli, ["probs", "plates", "observed", "mask"]),
    "dirichlet": (scene_dirichlet, ["concentration", "plates"]),
    "categorical": (scene_categorical, ["probs", "plates", "observed", "mask", "categories"]),
    "categorical_const": (scene_categorical_const, ["probs", "observed"]),
    "mixture": (scene_mixture, ["precision", "observed", "seed"]),
    "mv_gaussian": (scene_mv_gaussian, ["name", "mean", "precision", "covariance", "plates", "dim", "observed"]),
    "gaussian_gamma": (scene_gaussian_gamma, ["mean", "precision", "shape", "rate", "dim"]),
    "inner": (scene_inner, ["X", "w", "plates"]),
    "arithmetic": (scene_arithmetic, ["c"]),
    "select": (scene_select, ["values", "selector"]),
    "bernoulli_logit": (scene_bernoulli_logit, ["logit", "observed", "mask", "method", "plates", "xi0"]),
    "probit": (scene_probit, ["x", "observed", "mask"]),
    "categorical_softmax": (scene_softmax, ["logits", "over", "observed", "mask", "counts", "method"]),
    "laplace_site": (scene_laplace_site, ["x", "location", "scale"]),
    "cauchy_site": (scene_cauchy_site, ["x", "location", "scale"]),
    "student_t_site": (scene_student_t_site, ["x", "location", "scale", "dof"]),
    "infer": (scene_infer, ["algorithm", "max_iter", "tol", "param_tol", "init", "schedule", "warmup", "damping",
                            "handlers", "callbacks", "progress", "seed"]),
    "infer_model": (scene_infer_model, ["model"]),
    "VMP": (scene_vmp, ["damping"]),
    "NCVMP": (scene_ncvmp, ["damping", "backtracking"]),
    "compare": (scene_compare, ["results"]),
    "Laplace": (scene_laplace, ["learn"]),
    "MVI": (scene_mvi, ["kind", "n_samples", "seed", "fresh_factor", "maxiter", "learn"]),
    "VIDiag": (scene_vidiag, ["n_samples", "seed", "fresh_factor", "maxiter"]),
    "BVI": (scene_bvi, ["n_components", "init", "init_scale"]),
    "AIKL": (scene_aikl, ["base", "lattice", "theta", "learn_theta", "refine_tol", "pad", "maxiter", "rounds"]),
    "approximate": (scene_approximate, ["log_density", "x0", "method", "grad"]),
    "linear_regression": (scene_linear_regression, ["X", "y", "ard", "a0", "b0", "c0", "d0"]),
    "logistic_regression": (scene_logistic_regression, ["X", "y", "ard"]),
    "softmax_regression": (scene_softmax_regression, ["X", "y", "n_classes", "method", "prior_precision"]),
}

# an exponential prior of rate 2**62 on a scale: the scale-prior factor's moment matching fails at run time with
# a ValueError (factors/scale_priors.py gamma_from_stats) instead of a named InferenceError
# fg.select's values of shape (2, 2, 2) for a 2-category selector on a plate of 3: the gates rework now allows
# trailing value axes (event axes of the gated argument), and this shape reaches the factor unvalidated
_ELSEWHERE: set[tuple[str, str, str]] = set()
SLOW_SCENES = {"BVI_fit": (scene_bvi_fit, SCENES["BVI"][1]), "AIKL_fit": (scene_aikl_fit, SCENES["AIKL"][1])}

CASES = [pytest.param(scene, arg, value, id=f"{name}-{arg}-{label}",
                      marks=[pytest.mark.xfail(reason="owned by another change (see _ELSEWHERE)", strict=False)]
                      if (name, arg, label) in _ELSEWHERE else [])
         for name, (scene, args) in SCENES.items() for arg in args for label, value in BAD_VALUES.items()]


@pytest.mark.parametrize("scene, arg, value", CASES)
def test_hostile_argument_gets_library_error(scene, arg, value):
    run_expecting_library_errors(scene, **{arg: value})


@pytest.mark.slow
@pytest.mark.parametrize("scene, arg, value", [
    pytest.param(scene, arg, value, id=f"{name}-{arg}-{label}")
    for name, (scene, args) in SLOW_SCENES.items() for arg in args for label, value in BAD_VALUES.items()])
def test_hostile_handler_argument_fitted_gets_library_error(scene, arg, value):
    run_expecting_library_errors(scene, **{arg: value})


def test_aikl_theta_of_wrong_length_named():
    with pytest.raises(fg.ModelError, match="AIKL: theta has 3 entries but the block has dimension 1"):
        fg.approximate(lambda x: -0.5 * float(x @ x), [0.0], fg.AIKL(theta=[1.0, 1.0, 1.0], learn_theta=False))


def test_every_scene_runs_with_valid_arguments():
    """The scenes themselves are valid models, so a bad value is what a failure blames."""
    for name, (scene, _) in SCENES.items():
        if name in ("infer_model",):
            continue
        scene()


# ------------------------------------------------------------------------------------ property test
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# each case of a handler costs a fit; the scale priors' extreme-but-valid values (a rate of 2**62) reach a
# run-time failure owned by another change (see _ELSEWHERE): the parametrized suite covers them
FAST_SCENES = {k: v for k, v in SCENES.items()
               if k not in ("MVI", "VIDiag", "BVI", "AIKL", "Laplace", "approximate", "half_normal", "half_cauchy",
                            "half_student_t", "exponential", "gaussian_sd")}

def _float32(xs):
    with np.errstate(over="ignore"):
        return np.array(xs, dtype=np.float32)


scalars = st.one_of(
    st.none(), st.booleans(), st.text(max_size=5), st.binary(max_size=3),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.complex_numbers(allow_nan=True, allow_infinity=True),
    st.sampled_from([np.int64(3), np.int8(-1), np.uint64(2**63), np.float32(0.5), np.float16(np.inf),
                     np.bool_(False), np.complex64(1j), np.str_("a"), np.datetime64("2020-01-01")]),
)
arrays = st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**66), 2**66),
                            st.none(), st.text(max_size=2), st.booleans(), st.complex_numbers()),
                  max_size=6).map(lambda xs: np.array(xs, dtype=object))
numeric_arrays = st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=6).flatmap(
    lambda xs: st.sampled_from([np.array(xs), np.array(xs).reshape(-1, 1), list(xs),
                                np.ma.masked_invalid(np.array(xs, dtype=float)), _float32(xs),
                                np.array(xs, dtype=complex)]))
bad_values = st.one_of(scalars, arrays, numeric_arrays, st.lists(scalars, max_size=4),
                       st.dictionaries(st.text(max_size=3), scalars, max_size=2))


@SETTINGS
@given(scene=st.sampled_from(sorted(FAST_SCENES)), data=st.data())
def test_random_bad_values_get_only_library_errors(scene, data):
    """Property: for any builder (and fg.infer's options, the algorithms, fg.compare and the canned models),
    any argument, any value, the library either accepts it or raises its own ModelError/InferenceError."""
    fn, args = FAST_SCENES[scene]
    arg = data.draw(st.sampled_from(args), label="argument")
    value = data.draw(bad_values, label="value")
    run_expecting_library_errors(fn, **{arg: value})


@SETTINGS
@given(option=st.sampled_from(["max_iter", "tol", "param_tol", "damping", "seed", "progress", "schedule",
                               "warmup", "init", "handlers", "callbacks", "algorithm"]), value=bad_values)
def test_random_infer_options_get_only_library_errors(option, value):
    run_expecting_library_errors(scene_infer, **{option: value})


# ------------------------------------------------------------------------------------ named failures
def _gaussian_tau(data, **kw):
    with fg.Model() as m:
        n = fg.plate("n", len(data))
        mu = fg.gaussian("mu", 0.0, precision=1e-2)
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("x", mu, precision=tau, plates=[n], observed=data, **kw)
    return m


@pytest.mark.parametrize("big", [1e300, -1e300, 1e151])
def test_overflowing_data_blames_data(big):
    with pytest.raises(fg.ModelError, match=r"(?s)observed data of 'x'.*too large.*overflows float64") as e:
        _gaussian_tau([1.0, big, 2.0])
    assert f"{big!r}" in str(e.value)
    X = np.ones((3, 2))
    X[1, 0] = big
    with fg.Model():
        n = fg.plate("n", 3)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        with pytest.raises(fg.ModelError, match=r"inner: X has the value .*too large") as e:
            fg.inner(X, w, plates=[n])
    assert f"{big!r}" in str(e.value)
    with pytest.raises(fg.ModelError, match="X has the value .*too large"):
        models.linear_regression(X, [1.0, 2.0, 3.0])


def test_large_but_safe_data_still_fits():
    """1e100 squares to 1e200: still representable, so it is accepted and gives finite answers."""
    r = fg.infer(_gaussian_tau(np.array([1.0, 2.0, 3.0]) * 1e100), max_iter=50)
    assert np.isfinite(r.elbo)


@pytest.mark.parametrize("value", [np.array([1.0 + 1e-3j, 2.0, 3.0]), 1 + 0j, np.complex64(2.0)])
def test_complex_data_rejected(value):
    with fg.Model():
        n = fg.plate("n", 3)
        with pytest.raises(fg.ModelError, match=r"observed data of 'x' must be real, got the complex"):
            fg.gaussian("x", 0.0, precision=1.0, plates=[n], observed=np.broadcast_to(value, (3,)))
        with pytest.raises(fg.ModelError, match=r"'y': mean must be real, got the complex"):
            fg.gaussian("y", value, precision=1.0, plates=[n])
        with pytest.raises(fg.ModelError, match=r"inner: X must be real"):
            fg.inner(np.ones((3, 2)) * value if np.ndim(value) == 0 else np.ones((3, 2)) + 1j,
                     fg.mv_gaussian("w", dim=2), plates=[n])


def test_masked_array_mask_honoured():
    """A masked entry is missing, whatever value hides under it: the answer is that of passing the same mask
    as mask=, and a masked array combines with mask=."""
    data = np.array([1.0, 2.0, 1e6, 3.0])
    hidden = np.ma.masked_array(data, mask=[False, False, True, False])
    r_ma = fg.infer(_gaussian_tau(hidden), max_iter=100)
    r_mask = fg.infer(_gaussian_tau(data, mask=np.array([True, True, False, True])), max_iter=100)
    r_drop = fg.infer(_gaussian_tau(np.delete(data, 2)), max_iter=100)
    np.testing.assert_allclose(r_ma.posterior("mu").mean(), r_mask.posterior("mu").mean(), rtol=1e-12)
    assert r_ma.elbo == pytest.approx(r_mask.elbo, rel=1e-12)
    other = np.ma.masked_array([1.0, 2.0, -7.0, 3.0], mask=[False, False, True, False])
    r_other = fg.infer(_gaussian_tau(other), max_iter=100)  # the hidden value is never read
    assert r_other.elbo == r_ma.elbo
    np.testing.assert_array_equal(r_other.posterior("mu").mean(), r_ma.posterior("mu").mean())
    # near the answer without the entry (a missing x is a latent variable under mean field, which moves
    # the fixed point slightly); the hidden 1e6 would have moved the mean by ~2.5e5
    np.testing.assert_allclose(r_ma.posterior("mu").mean(), r_drop.posterior("mu").mean(), rtol=1e-2)
    np.testing.assert_allclose(r_ma.posterior("tau").mean(), r_drop.posterior("tau").mean(), rtol=1e-2)
    both = fg.infer(_gaussian_tau(hidden, mask=np.array([False, True, True, True])), max_iter=100)
    same = fg.infer(_gaussian_tau(data, mask=np.array([False, True, False, True])), max_iter=100)
    np.testing.assert_allclose(both.posterior("mu").mean(), same.posterior("mu").mean(), rtol=1e-12)
    # a nan under the mask is fine; labels and binary data honour masks too
    fg.infer(_gaussian_tau(np.ma.masked_invalid([1.0, np.nan, 2.0])), max_iter=5)
    def binary(observed, mask=None):
        with fg.Model() as m:
            n = fg.plate("n", 3)
            fg.bernoulli("s", fg.beta("p", 1.0, 1.0), plates=[n], observed=observed, mask=mask)
        return fg.infer(m).posterior("p").alpha

    assert binary(np.ma.masked_array([1, 7, 0], mask=[False, True, False])) == \
        binary(np.array([1, 0, 0]), mask=np.array([True, False, True]))

    def labels(observed, mask=None):
        with fg.Model() as m:
            n = fg.plate("n", 3)
            fg.categorical("z", fg.dirichlet("pi", [1.0, 1.0]), plates=[n], observed=observed, mask=mask)
        return fg.infer(m).posterior("pi").concentration

    np.testing.assert_array_equal(labels(np.ma.masked_array([0, 9, 1], mask=[False, True, False])),
                                  labels(np.array([0, 0, 1]), mask=np.array([True, False, True])))
    # a parameter cannot have missing values: a masked entry there is refused by name
    with fg.Model():
        with pytest.raises(fg.ModelError, match="'g': shape is a masked array"):
            fg.gamma("g", np.ma.masked_array([1.0, 2.0], mask=[True, False]))


def test_softmax_string_labels_clear_error():
    with fg.Model():
        n, k = fg.plate("n", 3), fg.plate("k", 3)
        W = fg.mv_gaussian("W", 0.0, precision=1.0, plates=[k], dim=2)
        with pytest.raises(fg.ModelError, match=r"observed labels of 'y' must be integers 0..2, got strings"):
            fg.categorical_softmax("y", fg.inner(np.eye(3, 2), W, plates=[n]), over=k, observed=["a", "b", "c"])
        with pytest.raises(fg.ModelError, match=r"observed labels of 'z' must be integers 0..1, got strings"):
            fg.categorical("z", [0.5, 0.5], plates=[n], observed=np.array(["0", "1", "1"]))
    with pytest.raises(fg.ModelError, match="got strings"):
        models.softmax_regression(np.eye(3, 2), ["cat", "dog", "cat"], n_classes=2)


def test_huge_plate_clear_error():
    with fg.Model():
        with pytest.raises(fg.ModelError, match=r"plate 'n': size 4611686018427387904 is too large"):
            fg.plate("n", 2**62)
    with fg.Model():  # each plate is fine, the arrays they imply are not
        a, b = fg.plate("a", 2**20), fg.plate("b", 2**20)
        with pytest.raises(fg.ModelError, match=r"'x' spans plates of shape \(1048576, 1048576\)"):
            fg.gaussian("x", 0.0, precision=1.0, plates=[a, b])


@pytest.mark.parametrize("seed", ["abc", -1, 1.5, True, [1, "a"], np.float64(3.0)])
def test_bad_seed_clear_error(seed):
    with pytest.raises(fg.ModelError, match=r"seed .*got"):
        fg.infer(_gaussian_tau([1.0, 2.0]), seed=seed)
    with pytest.raises(fg.ModelError, match=r"MVI: seed"):
        fg.MVI("lr", seed=seed)


_POSTERIOR_TOOLS = {
    "predict": lambda r, **kw: fg.predict(r, draws=5, **kw),
    "result.sample": lambda r, **kw: r.sample(5, **kw),
    "to_arviz": lambda r, **kw: r.to_arviz(draws=8, **kw),
    "sample_prior": lambda r, **kw: fg.sample_prior(r.model, 5, **kw),
    "compare": lambda r, **kw: fg.compare({"a": r}, loo=True, loo_draws=40, **kw),
    "summary": lambda r, **kw: r.summary(draws=10, **kw),
}


@pytest.mark.parametrize("tool", sorted(_POSTERIOR_TOOLS))
@pytest.mark.parametrize("seed", ["abc", -1, 1.5, True, [1, "a"], np.float64(3.0)])
def test_bad_seed_clear_error_after_the_fit(tool, seed):
    r = _fitted_gaussian_tau()
    with pytest.raises(fg.ModelError, match=rf"{tool}: seed must be None or an integer ≥ 0, got"):
        _POSTERIOR_TOOLS[tool](r, seed=seed)


@pytest.mark.parametrize("tool", sorted(_POSTERIOR_TOOLS))
def test_good_seeds_accepted_after_the_fit(tool):
    r = _fitted_gaussian_tau()
    for seed in (None, 7, np.int64(3), np.uint8(1), np.array(2), 2**70):
        _POSTERIOR_TOOLS[tool](r, seed=seed)


_GT: dict = {}


def _fitted_gaussian_tau():
    if "r" not in _GT:
        _GT["r"] = fg.infer(_gaussian_tau(np.linspace(-1.0, 1.0, 12)))
    return _GT["r"]


@pytest.mark.parametrize("draws", [1, 2, 20, 0, -5, 1.5, "100", True])
def test_compare_too_few_loo_draws_named(draws):
    r = _fitted_gaussian_tau()
    with pytest.raises(fg.ModelError, match=r"compare: loo_draws .*must be an integer( ≥ 21)?, got"):
        fg.compare({"a": r}, loo=True, loo_draws=draws)
    fg.compare({"a": r}, loo_draws=draws)  # without loo the draws are not used
    c = fg.compare({"a": r}, loo=True, loo_draws=np.int64(21))
    assert np.isfinite(c.elpd_loo).all()


def test_numpy_scalars_accepted_by_the_posterior_tools():
    r = _fitted_gaussian_tau()
    t = r.summary(prob=np.float32(0.9), draws=np.int64(50), seed=np.int32(1))
    ref = r.summary(prob=0.9, draws=50, seed=1)
    assert list(t.columns) == list(ref.columns) == ["mean", "sd", "5%", "95%", "exact"]
    np.testing.assert_allclose(t.iloc[:, :4].to_numpy(float), ref.iloc[:, :4].to_numpy(float), rtol=1e-6)
    r.summary(prob=np.array(0.5))
    for bad in (1.0, 0.0, np.float64(1.5), np.nan, "0.9", True):
        with pytest.raises(fg.ModelError, match=r"summary: prob \(in \(0, 1\)\) must"):
            r.summary(prob=bad)
    assert r.sample(np.int64(4))["mu"].shape == (4,)
    assert fg.predict(r, draws=np.int16(3))["x"].shape == (3, 12)
    assert fg.sample_prior(r.model, np.array(3))["x"].shape == (3, 12)
    idata = r.to_arviz(draws=np.int64(8), prior=np.bool_(True), posterior_predictive=np.bool_(False))
    assert idata.posterior["mu"].size == 8
    c = fg.compare({"a": r}, loo=np.bool_(True), loo_draws=np.int32(50), seed=np.uint16(2))
    assert c.elpd_loo is not None
    assert fg.compare({"a": r}, loo=np.bool_(False)).elpd_loo is None


def test_good_seeds_accepted():
    for seed in (None, 0, 7, np.int64(3), np.uint8(1), 2**70):
        fg.infer(_gaussian_tau([1.0, 2.0]), seed=seed, max_iter=2)


@pytest.mark.parametrize("results", [{"a": 1.0}, {"a": None}, [1.0], "ab", None, {}])
def test_compare_non_result_clear_error(results):
    with pytest.raises(fg.ModelError, match="compare"):
        fg.compare(results)


def test_aikl_nonfinite_log_density_named():
    def log_density(x):  # nan beyond x = 1.5: AIKL's lattice reaches there
        return -0.5 * float(x @ x) + (np.nan if x[0] > 1.5 else 0.0)

    with pytest.raises(HandlerError, match=r"AIKL: the log density is nan \(not finite\) at \["):
        fg.approximate(log_density, [0.0], fg.AIKL(lattice=16, max_lattice=64, gaussian_lattice=16))
    with pytest.raises(fg.ModelError, match=r"log_density\(x0\) must be one finite number"):
        fg.approximate(lambda x: -np.inf, [0.0], fg.AIKL())


def test_numpy_scalar_options_accepted():
    m = _gaussian_tau([1.0, 2.0, 3.0])
    ref = fg.infer(m, max_iter=50, tol=1e-9, damping={"Gaussian(x)": 0.5})
    r = fg.infer(m, max_iter=np.int64(50), tol=np.float32(1e-9), param_tol=np.float64(0.0),
                 damping={"Gaussian(x)": np.float32(0.5)}, seed=np.int32(0), progress=np.bool_(False))
    assert r.n_iter == ref.n_iter and r.elbo == pytest.approx(ref.elbo, rel=1e-6)
    assert fg.VMP(damping=np.float32(0.5)).damping == 0.5 and isinstance(fg.VMP(damping=np.float32(0.5)).damping,
                                                                         float)
    assert fg.NCVMP(damping=np.float64(0.25), backtracking=np.bool_(True)).backtracking is True
    assert fg.MVI("lr", n_samples=np.int64(50), seed=np.int64(1), maxiter=np.int32(10)).n_samples == 50
    assert fg.BVI(np.int64(2), init_scale=np.float32(2.0)).n_components == 2
    assert fg.AIKL(lattice=np.int64(16), refine_tol=np.float32(1e-3)).lattice == 16
    with fg.Model():
        n = fg.plate("n", np.int64(3))
        assert n.size == 3 and type(n.size) is int
        fg.gaussian("x", np.float32(1.0), precision=np.float64(2.0), plates=[n])
        fg.mv_gaussian("w", dim=np.int16(2))
        fg.laplace_site("s", fg.gaussian("y", plates=[n]), scale=np.float32(2.0))


def test_bad_option_names_argument_and_value():
    m = _gaussian_tau([1.0, 2.0])
    for kw, frag in [({"max_iter": 0}, "max_iter"), ({"max_iter": 2.5}, "max_iter"), ({"tol": -1.0}, "tol"),
                     ({"tol": "fast"}, "tol"), ({"damping": {"Gaussian(x)": 1.5}}, "damping['Gaussian(x)']"),
                     ({"schedule": "mu"}, "schedule"), ({"callbacks": [1]}, "callbacks"),
                     ({"handlers": {"mu": "MVI"}}, "handlers['mu']"), ({"progress": "yes"}, "progress")]:
        with pytest.raises(fg.ModelError, match=re.escape(frag) + ".*got") as e:
            fg.infer(m, **kw)
        value = next(iter(kw.values()))
        shown = value if not isinstance(value, dict | list) else next(iter(value.values() if isinstance(value, dict)
                                                                            else value))
        assert repr(shown) in str(e.value)


def test_distribution_reprs_show_parameters():
    from distributions import Bernoulli, Beta, Categorical, Dirichlet, Gamma, Gaussian, GaussianGamma, MvGaussian
    from distributions.affine_independent import AffineIndependent
    from distributions.gaussian_mixture import GaussianMixture
    from distributions.point_mass import PointMass

    assert repr(Gaussian(mean=1.0, var=2.0)) == "Gaussian(mean=1.0, var=2.0)"
    assert repr(Gamma(2.0, 3.0)) == "Gamma(shape=2.0, rate=3.0)"
    assert repr(Beta(1.0, 2.0)) == "Beta(alpha=1.0, beta=2.0)"
    assert repr(Bernoulli(0.25)) == "Bernoulli(probs=0.25)"
    assert repr(Categorical(probs=[0.25, 0.75])) == "Categorical(probs=[0.25, 0.75])"
    assert repr(Dirichlet([1.0, 2.0])) == "Dirichlet(concentration=[1., 2.])"
    assert repr(MvGaussian(mean=[1.0, 2.0], cov=np.eye(2))) == "MvGaussian(mean=[1., 2.], cov=[[1., 0.], [0., 1.]])"
    assert repr(PointMass(3.0)) == "PointMass(value=3.0)"
    assert repr(GaussianGamma(np.zeros(1), shape=2.0, rate=1.0)) == \
        "GaussianGamma(mean=[0.], scale_matrix=[[1.]], shape=2.0, rate=1.0)"
    assert repr(GaussianMixture([1.0], [[0.0]], [[[1.0]]])).startswith("GaussianMixture(weights=[1.], means=[[0.]]")
    assert repr(AffineIndependent(np.eye(1), np.zeros(1), "skew_normal")).startswith(
        "AffineIndependent(base=SkewNormalBase(), A=[[1.]], b=[0.], theta=")
    batched = repr(Gaussian(mean=np.arange(100.0), var=np.ones(100)))
    assert batched == ("Gaussian(batch_shape=(100,), mean=<shape (100,): 0.0, 1.0, 2.0, ..., 99.0>, "
                       "var=<shape (100,): 1.0, 1.0, 1.0, ..., 1.0>)")
    assert len(repr(MvGaussian(mean=np.zeros((50, 20)), cov=np.eye(20)))) < 200
    assert "nan" in repr(Gaussian.uniform(()))  # an improper message still has a repr
    r = fg.infer(_gaussian_tau([1.0, 2.0, 3.0]))
    assert repr(r.posterior("mu")).startswith("Gaussian(mean=")


def test_dir_fg_lists_public_api():
    names = dir(fg)
    for public in fg.__all__ + ["__version__"]:
        assert public in names
        getattr(fg, public)  # every listed name resolves (the lazy ones included)
    for public in ("infer", "NCVMP", "approximate", "models", "AIKL"):
        assert public in names
    for leftover in ("annotations", "Any", "builders", "checks", "expressions", "nodes", "nonconjugate",
                     "results", "model", "importlib"):
        assert leftover not in names


def test_infer_signature_readable_defaults():
    import inspect

    sig = inspect.signature(fg.infer)
    assert sig.parameters["tol"].default == "auto" and sig.parameters["param_tol"].default == "auto"
    assert "object at" not in str(sig)
    for obj in (fg.infer, fg.compare, fg.approximate, fg.gaussian, fg.MVI, fg.AIKL, fg.BVI, models.linear_regression):
        assert "object at 0x" not in str(inspect.signature(obj)), obj
    r_auto = fg.infer(_gaussian_tau([1.0, 2.0]), tol="auto")
    assert r_auto.n_iter == fg.infer(_gaussian_tau([1.0, 2.0])).n_iter


def test_fg_version():
    import importlib.metadata
    from pathlib import Path

    import tomllib

    assert isinstance(fg.__version__, str) and fg.__version__[0].isdigit()
    with open(Path(fg.__file__).resolve().parents[1] / "pyproject.toml", "rb") as fh:
        assert fg.__version__ == tomllib.load(fh)["project"]["version"]
    assert importlib.metadata.version("fgvmp")  # the installed metadata exists too


def test_compare_shows_elbo_se():
    a = fg.infer(_gaussian_tau([1.0, 2.0, 3.0]))
    b = fg.infer(_gaussian_tau([1.0, 2.0, 3.5]))  # other data: the table's layout is under test, not the ranking
    exact = fg.compare({"a": a, "b": b}, same_data=False)
    assert "± se" not in str(exact) and "2 se" not in str(exact)
    a.elbo_se, b.elbo_se = 0.5, 0.5
    close = fg.compare({"a": a, "b": b}, same_data=False)
    text = str(close)
    assert "± se" in text.splitlines()[0]
    assert "0.5000" in text
    best, other = ("a", "b") if a.elbo > b.elbo else ("b", "a")
    assert abs(a.elbo - b.elbo) < 2 * np.hypot(0.5, 0.5)
    assert f"{best} and {other} differ by less than 2 se" in text
    np.testing.assert_allclose(close.elbo_se, [0.5, 0.5])
    a.elbo_se, b.elbo_se = 1e-6, 1e-6  # now the difference is far outside the Monte Carlo error
    assert "2 se" not in str(fg.compare({"a": a, "b": b}, same_data=False))
