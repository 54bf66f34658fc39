"""Bad input gets a clear ``fg.ModelError`` naming the variable (or factor/plate) and the offending value.

docs/design.md §3: errors are raised when the model is built, or when ``fg.infer`` compiles it where only
then knowable, never deep inside an iteration.  Each case below is one bad input; the expected message
fragments (the name and the value) must all appear in the error.

* ``BUILD`` cases fail inside the ``with fg.Model()`` block: the function never calls ``fg.infer``.
* ``COMPILE`` cases build a valid-looking model and fail in ``fg.infer`` before the first sweep (a
  callback that would see the first iteration is never called).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import factorgraph as fg
from distributions import Gaussian

BUILD: list = []
COMPILE: list = []


def _pattern(*fragments: str) -> str:
    """A regex that matches when every fragment appears (in any order)."""
    return "(?s)^" + "".join(f"(?=.*{re.escape(f)})" for f in fragments)


def build_error(*fragments: str):
    def deco(fn):
        BUILD.append(pytest.param(fn, fragments, id=fn.__name__))
        return fn
    return deco


def compile_error(*fragments: str):
    def deco(fn):
        COMPILE.append(pytest.param(fn, fragments, id=fn.__name__))
        return fn
    return deco


def _simple_model(n: int = 3) -> fg.Model:
    """mu ~ N(0, 1), tau ~ Gam(1, 1), x_i ~ N(mu, tau) observed."""
    with fg.Model("simple") as m:
        p = fg.plate("n", n)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("x", mu, precision=tau, plates=[p], observed=np.arange(n, dtype=float))
    return m


# ------------------------------------------------------------------------------------ observed data
@build_error("'x'", "nan", "mask")
def nan_in_observed():
    with fg.Model():
        n = fg.plate("n", 3)
        mu = fg.gaussian("mu")
        fg.gaussian("x", mu, precision=1.0, plates=[n], observed=[1.0, np.nan, 2.0])


@build_error("'x'", "inf")
def inf_in_observed():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", 0.0, precision=1.0, plates=[n], observed=[1.0, np.inf, 2.0])


@build_error("'x'", "-inf")
def minus_inf_in_observed():
    with fg.Model():
        n = fg.plate("n", 2)
        fg.gaussian("x", 0.0, precision=1.0, plates=[n], observed=[-np.inf, 2.0])


@build_error("'x'", "nan")
def nan_where_mask_true():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", plates=[n], observed=[1.0, np.nan, 2.0], mask=np.array([True, True, False]))


@build_error("'x'", "(4,)", "(3,)")
def observed_shape_not_plate_shape():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", plates=[n], observed=np.zeros(4))


@build_error("'x'", "(3, 2)", "(2, 3)")
def observed_shape_transposed():
    with fg.Model():
        a, b = fg.plate("a", 2), fg.plate("b", 3)
        fg.gaussian("x", plates=[a, b], observed=np.zeros((3, 2)))


@build_error("'x'", "empty")
def empty_observed():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", plates=[n], observed=[])


@build_error("'x'", "numeric", "'abc'")
def non_numeric_observed():
    with fg.Model():
        fg.gaussian("x", observed="abc")


@build_error("'x'", "(2,)", "(3,)")
def mask_wrong_shape():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", plates=[n], observed=np.zeros(3), mask=np.array([True, False]))


@build_error("'x'", "boolean", "int64", "[1, 0, 1]")
def mask_not_boolean():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", plates=[n], observed=np.zeros(3), mask=np.array([1, 0, 1], dtype=np.int64))


@build_error("'x'", "mask", "without observed")
def mask_without_observed():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", plates=[n], mask=np.ones(3, bool))


@build_error("'t'", "Gamma", "-1.0")
def observed_gamma_negative():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gamma("t", 1.0, 1.0, plates=[n], observed=[1.0, -1.0, 2.0])


@build_error("'t'", "Gamma", "0.0")
def observed_gamma_zero():
    with fg.Model():
        n = fg.plate("n", 2)
        fg.gamma("t", 1.0, 1.0, plates=[n], observed=[0.0, 2.0])


# ------------------------------------------------------------------------------------ plates and names
@pytest.mark.parametrize("size", [0, -2, 2.5, 3.0, "3", True, None])
def test_plate_size_must_be_positive_integer(size):
    with fg.Model(), pytest.raises(fg.ModelError, match=_pattern("'n'", repr(size))):
        fg.plate("n", size)


@build_error("'n'", "twice")
def plate_declared_twice():
    with fg.Model():
        fg.plate("n", 3)
        fg.plate("n", 4)


@build_error("'mu'", "twice")
def variable_name_used_twice():
    with fg.Model():
        fg.gaussian("mu")
        fg.gamma("mu")


@build_error("non-empty string", "3")
def variable_name_not_a_string():
    with fg.Model():
        fg.gaussian(3)


@build_error("'x'", "plates", "'n'")
def plates_given_as_strings():
    with fg.Model():
        fg.plate("n", 3)
        fg.gaussian("x", plates=["n"])


# ------------------------------------------------------------------------------------ parameters
@build_error("'x'", "precision", "-1.0")
def negative_constant_precision():
    with fg.Model():
        fg.gaussian("x", 0.0, precision=-1.0)


@build_error("'x'", "precision", "0.0", "[1.0, 0.0, 2.0]")
def zero_in_precision_array():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", 0.0, precision=np.array([1.0, 0.0, 2.0]), plates=[n])


@build_error("'x'", "variance", "0.0")
def zero_variance():
    with fg.Model():
        fg.gaussian("x", 0.0, variance=0.0)


@build_error("'x'", "variance", "-3.0")
def negative_variance():
    with fg.Model():
        fg.gaussian("x", 0.0, variance=-3.0)


@build_error("'x'", "mean", "nan")
def nan_constant_mean():
    with fg.Model():
        fg.gaussian("x", mean=np.nan)


@build_error("'t'", "shape", "0.0")
def zero_gamma_shape():
    with fg.Model():
        fg.gamma("t", shape=0.0, rate=1.0)


@build_error("'t'", "shape", "inf")
def infinite_gamma_shape():
    with fg.Model():
        fg.gamma("t", shape=np.inf, rate=1.0)


@build_error("'t'", "rate", "-2.0")
def negative_gamma_rate():
    with fg.Model():
        fg.gamma("t", shape=1.0, rate=-2.0)


@build_error("'x'", "mean", "(4,)", "(3,)")
def constant_mean_does_not_fit_plates():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gaussian("x", mean=np.zeros(4), plates=[n])


@build_error("'x'", "mean", "(3,)", "()")
def constant_array_on_unplated_variable():
    with fg.Model():
        fg.gaussian("x", mean=np.zeros(3))


@build_error("'t'", "shape", "(4,)", "(3,)")
def gamma_shape_does_not_fit_plates():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.gamma("t", shape=np.ones(4), plates=[n])


@build_error("'p'", "alpha", "0.0")
def zero_beta_alpha():
    with fg.Model():
        fg.beta("p", alpha=0.0, beta=1.0)


@build_error("'p'", "beta", "-1.0")
def negative_beta_beta():
    with fg.Model():
        fg.beta("p", alpha=1.0, beta=-1.0)


@build_error("'theta'", "concentration", "0.0")
def zero_dirichlet_concentration():
    with fg.Model():
        fg.dirichlet("theta", concentration=[1.0, 0.0, 2.0])


@build_error("'theta'", "concentration", "vector", "3.0")
def dirichlet_with_a_scalar_concentration():  # one category ([3.0]) is allowed: the point mass, K = 1 mixtures
    with fg.Model():
        fg.dirichlet("theta", concentration=3.0)


@build_error("'x'", "precision (selected by 'z')", "positive", "-1.0")
def gaussian_precision_selected_negative():  # was accepted, and fg.infer failed with an improper q(z)
    with fg.Model():
        n = fg.plate("n", 6)
        z = fg.categorical("z", [0.5, 0.5], plates=[n])
        fg.gaussian("x", 0.0, precision=fg.select([1.0, -1.0], z), plates=[n], observed=np.zeros(6))


@build_error("'x'", "rate (selected by 'z')", "positive", "0.0")
def gamma_rate_selected_zero():  # was accepted, and the ELBO was not finite
    with fg.Model():
        n = fg.plate("n", 6)
        z = fg.categorical("z", [0.5, 0.5], plates=[n])
        fg.gamma("x", 2.0, fg.select([1.0, 0.0], z), plates=[n], observed=np.ones(6))


@build_error("'y'", "rate (selected by 'z')", "positive", "-1.0")
def poisson_rate_selected_negative():
    with fg.Model():
        n = fg.plate("n", 6)
        z = fg.categorical("z", [0.5, 0.5], plates=[n])
        fg.poisson("y", fg.select([1.0, -1.0], z), plates=[n], observed=np.arange(6))


@build_error("'y'", "probs (selected by 'z')", "(0, 1)", "1.0")
def binomial_probs_selected_one():
    with fg.Model():
        n = fg.plate("n", 6)
        z = fg.categorical("z", [0.5, 0.5], plates=[n])
        fg.binomial("y", 5, fg.select([0.5, 1.0], z), plates=[n], observed=np.arange(6) % 5)


@build_error("'theta'", "concentration", "empty")
def dirichlet_with_no_category():
    with fg.Model():
        fg.dirichlet("theta", concentration=[])


# ------------------------------------------------------------------------------------ discrete data
@build_error("'c'", "0..2", "3")
def label_out_of_range():
    with fg.Model():
        n = fg.plate("n", 4)
        fg.categorical("c", probs=np.ones(3) / 3, plates=[n], observed=[0, 1, 3, 2])


@build_error("'c'", "0..2", "-1")
def negative_label():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.categorical("c", probs=np.ones(3) / 3, plates=[n], observed=[0, -1, 2])


@build_error("'c'", "integers", "1.5")
def non_integer_label():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.categorical("c", probs=[0.5, 0.5], plates=[n], observed=[0, 1.5, 1])


@build_error("'c'", "integers", "'a'")
def string_labels():
    with fg.Model():
        n = fg.plate("n", 2)
        fg.categorical("c", probs=[0.5, 0.5], plates=[n], observed=["a", "b"])


@build_error("'c'", "nan", "mask")
def nan_label_unmasked():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.categorical("c", probs=[0.5, 0.5], plates=[n], observed=[0, np.nan, 1])


@build_error("'c'", "empty")
def empty_labels():
    with fg.Model():
        fg.categorical("c", probs=[0.5, 0.5], observed=[])


@build_error("'c'", "(2,)", "(3,)")
def label_mask_wrong_shape():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.categorical("c", probs=[0.5, 0.5], plates=[n], observed=[0, 1, 1], mask=np.array([True, False]))


@build_error("'c'", "[0.5, 0.4]", "0.9")
def categorical_probs_not_summing_to_one():
    with fg.Model():
        fg.categorical("c", probs=[0.5, 0.4])


@build_error("'c'", "-0.5")
def categorical_probs_negative():
    with fg.Model():
        fg.categorical("c", probs=[1.5, -0.5])


@build_error("'coin'", "0/1", "2.0")
def bernoulli_observed_not_binary():
    with fg.Model():
        n = fg.plate("n", 3)
        p = fg.beta("p")
        fg.bernoulli("coin", probs=p, plates=[n], observed=[0, 2, 1])


@build_error("'coin'", "nan")
def bernoulli_observed_nan():
    with fg.Model():
        n = fg.plate("n", 2)
        fg.bernoulli("coin", probs=0.5, plates=[n], observed=[0.0, np.nan])


@build_error("'coin'", "(2,)", "(3,)")
def bernoulli_mask_wrong_shape():
    with fg.Model():
        n = fg.plate("n", 3)
        fg.bernoulli("coin", probs=0.5, plates=[n], observed=[0, 1, 1], mask=np.array([True, False]))


@pytest.mark.parametrize("probs", [0.0, 1.0, 1.5, -0.2])
def test_bernoulli_probs_outside_unit_interval(probs):
    with fg.Model(), pytest.raises(fg.ModelError, match=_pattern("'coin'", "(0, 1)", repr(probs))):
        fg.bernoulli("coin", probs=probs)


# ------------------------------------------------------------------------------------ structure
@build_error("'sum_0'", "deterministic", "observe")
def observing_a_deterministic_node():
    with fg.Model():
        a, b = fg.gaussian("a"), fg.gaussian("b")
        (a + b).observe(1.0)


@build_error("['a']", "multiplied by itself")
def same_variable_squared():
    with fg.Model():
        a = fg.gaussian("a")
        _ = a * a


@build_error("['a']", "multiplied by itself")
def same_variable_on_both_sides_of_a_product():
    with fg.Model():
        a, b = fg.gaussian("a"), fg.gaussian("b")
        _ = (a + b) * a


@build_error("'x'", "precision", "Gamma", "Gaussian 'g'")
def gaussian_as_precision():
    with fg.Model():
        g = fg.gaussian("g")
        fg.gaussian("x", 0.0, precision=g)


@build_error("'x'", "mean", "Gaussian", "Gamma 'g'")
def gamma_as_mean():
    with fg.Model():
        g = fg.gamma("g")
        fg.gaussian("x", g, precision=1.0)


@build_error("'t'", "rate", "Gaussian 'g'")
def gaussian_as_gamma_rate():
    with fg.Model():
        g = fg.gaussian("g")
        fg.gamma("t", 1.0, g)


@build_error("'x'", "precision", "'sum_0'")
def expression_as_precision():
    with fg.Model():
        a, b = fg.gaussian("a"), fg.gaussian("b")
        fg.gaussian("x", 0.0, precision=a + b)


@build_error("'coin'", "probs", "Beta", "Gaussian 'g'")
def gaussian_as_bernoulli_probs():
    with fg.Model():
        g = fg.gaussian("g")
        fg.bernoulli("coin", probs=g)


@build_error("'c'", "probs", "Dirichlet", "Gaussian 'g'")
def gaussian_as_categorical_probs():
    with fg.Model():
        g = fg.gaussian("g")
        fg.categorical("c", probs=g)


@build_error("'g'", "shape", "cannot be gated", "'a'['z']")
def gate_on_a_parameter_that_cannot_be_gated():
    with fg.Model():
        k = fg.plate("k", 2)
        a = fg.gamma("a", plates=[k])
        z = fg.categorical("z", [0.5, 0.5])
        fg.gamma("g", shape=a[z], rate=1.0)


@build_error("'y'", "precision of category 1", "positive definite")
def select_on_a_constant_mv_precision_not_positive_definite():
    with fg.Model():
        z = fg.categorical("z", [0.5, 0.5])
        fg.mv_gaussian("y", mean=np.zeros(2), precision=fg.select([np.eye(2), [[1.0, 2.0], [2.0, 1.0]]], z))


@build_error("'p'", "'s'", "2 categories", "('k', 3)")
def bernoulli_selector_wrong_number_of_categories():
    with fg.Model():
        k = fg.plate("k", 3)
        p = fg.beta("p", plates=[k])
        s = fg.bernoulli("s", 0.5)
        _ = p[s]


@build_error("select", "3 rows", "'s'", "2 categories")
def select_rows_not_bernoulli_categories():
    with fg.Model():
        s = fg.bernoulli("s", 0.5)
        fg.gaussian("x", 0.0, precision=fg.select([1.0, 2.0, 3.0], s), observed=1.0)


@build_error("'p'", "alpha", "shape (K)", "'z'", "(2, 3)")
def select_values_with_plate_axes_for_a_parameter():
    with fg.Model():
        z = fg.categorical("z", [0.5, 0.5])
        fg.beta("p", alpha=fg.select(np.ones((2, 3)), z))


@build_error("'g'", "Gaussian", "Categorical or Bernoulli")
def gate_with_non_categorical_selector():
    with fg.Model():
        k = fg.plate("k", 2)
        mus = fg.gaussian("mus", plates=[k])
        g = fg.gaussian("g")
        _ = mus[g]


@build_error("'x'", "mean", "'a'", "another model")
def parent_from_another_model():
    with fg.Model("A"):
        a = fg.gaussian("a")
    with fg.Model("B"):
        fg.gaussian("x", a, precision=1.0)


@build_error("'a'", "'A'", "'B'")
def sum_with_a_node_from_another_model():
    with fg.Model("A"):
        a = fg.gaussian("a")
    with fg.Model("B"):
        b = fg.gaussian("b")
        _ = a + b


@build_error("inner", "'w'", "'A'", "'B'")
def inner_with_weights_from_another_model():
    with fg.Model("A"):
        w = fg.mv_gaussian("w", dim=2)
    with fg.Model("B"):
        n = fg.plate("n", 3)
        fg.inner(np.ones((3, 2)), w, plates=[n])


@build_error("'x'", "Plate('n', 3)", "'B'")
def plate_from_another_model():
    with fg.Model("A"):
        n = fg.plate("n", 3)
    with fg.Model("B"):
        fg.gaussian("x", plates=[n])


@build_error("'x'", "no active model")
def variable_outside_a_model():
    fg.gaussian("x")


@build_error("'n'", "no active model")
def plate_outside_a_model():
    fg.plate("n", 3)


@build_error("inner", "no active model")
def inner_outside_a_model():
    with fg.Model():
        w = fg.mv_gaussian("w", dim=2)
    fg.inner(np.ones((3, 2)), w)


# ------------------------------------------------------------------------------------ inner / gates
@build_error("inner", "'w'", "2 columns", "3")
def inner_columns_not_weight_dimension():
    with fg.Model():
        n = fg.plate("n", 4)
        w = fg.mv_gaussian("w", dim=3)
        fg.inner(np.ones((4, 2)), w, plates=[n])


@build_error("inner", "'n'", "5 rows", "4")
def inner_rows_not_plate_size():
    with fg.Model():
        n = fg.plate("n", 4)
        w = fg.mv_gaussian("w", dim=3)
        fg.inner(np.ones((5, 3)), w, plates=[n])


@build_error("inner", "'w'", "3", "('d', 2)")
def inner_mean_field_weights_without_matching_plate():
    with fg.Model():
        n, d = fg.plate("n", 4), fg.plate("d", 2)
        w = fg.gaussian("w", plates=[d])
        fg.inner(np.ones((4, 3)), w, plates=[n])


@build_error("inner", "X", "nan")
def inner_with_nan_inputs():
    with fg.Model():
        n = fg.plate("n", 3)
        w = fg.mv_gaussian("w", dim=2)
        fg.inner(np.array([[1.0, 2.0], [np.nan, 1.0], [1.0, 1.0]]), w, plates=[n])


@build_error("inner", "'g'", "Gamma")
def inner_with_gamma_weights():
    with fg.Model():
        n = fg.plate("n", 3)
        g = fg.gamma("g")
        fg.inner(np.ones((3, 2)), g, plates=[n])


@build_error("'mus'", "'z'", "2 categories", "('k', 3)")
def dirichlet_size_not_gate_plate():
    with fg.Model():
        k, n = fg.plate("k", 3), fg.plate("n", 5)
        pi = fg.dirichlet("pi", np.ones(2))
        z = fg.categorical("z", pi, plates=[n])
        mus = fg.gaussian("mus", 0.0, precision=1.0, plates=[k])
        fg.gaussian("x", mus[z], precision=1.0, plates=[n], observed=np.zeros(5))


@build_error("'z'", "size 2", "Plate('k', 3)")
def dirichlet_size_not_categories_plate():
    with fg.Model():
        k, n = fg.plate("k", 3), fg.plate("n", 5)
        pi = fg.dirichlet("pi", np.ones(2))
        fg.categorical("z", pi, plates=[n], categories=k)


@build_error("'mus'", "'z'", "('k', 2)", "('j', 2)")
def gate_with_ambiguous_plate():
    with fg.Model():
        k, j = fg.plate("k", 2), fg.plate("j", 2)
        mus = fg.gaussian("mus", plates=[k, j])
        z = fg.categorical("z", [0.5, 0.5])
        fg.gaussian("x", mus[z], precision=1.0, observed=1.0)


@build_error("select", "3 rows", "'z'", "2 categories")
def select_rows_not_categories():
    with fg.Model():
        z = fg.categorical("z", [0.5, 0.5])
        fg.gaussian("x", fg.select([1.0, 2.0, 3.0], z), precision=1.0, observed=1.0)


# ------------------------------------------------------------------------------------ mv_gaussian / normal-gamma
@build_error("'w'", "symmetric", "0.5", "0.0")
def precision_matrix_not_symmetric():
    with fg.Model():
        fg.mv_gaussian("w", precision=np.array([[1.0, 0.5], [0.0, 1.0]]))


@build_error("'w'", "positive definite", "-1.0")
def precision_matrix_not_positive_definite():
    with fg.Model():
        fg.mv_gaussian("w", precision=np.array([[1.0, 2.0], [2.0, 1.0]]))


@build_error("'w'", "square", "(2, 3)")
def precision_matrix_not_square():
    with fg.Model():
        fg.mv_gaussian("w", precision=np.ones((2, 3)))


@build_error("'w'", "covariance", "positive definite", "-1.0")
def covariance_not_positive_definite():
    with fg.Model():
        fg.mv_gaussian("w", covariance=np.array([[1.0, 2.0], [2.0, 1.0]]))


@build_error("'w'", "covariance", "zeros")
def covariance_all_zero():
    with fg.Model():
        fg.mv_gaussian("w", covariance=np.zeros((2, 2)))


@build_error("'w'", "diagonal precision", "[1.0, 0.0]")
def diagonal_precision_partly_zero():
    with fg.Model():
        fg.mv_gaussian("w", precision=np.array([1.0, 0.0]))


@pytest.mark.parametrize("dim", [0, -1, 2.5, "2"])
def test_mv_gaussian_dim_must_be_positive_integer(dim):
    with fg.Model(), pytest.raises(fg.ModelError, match=_pattern("'w'", "dim", repr(dim))):
        fg.mv_gaussian("w", dim=dim)


@build_error("'w'", "[2, 3]")
def mv_gaussian_inconsistent_dimensions():
    with fg.Model():
        d = fg.plate("d", 3)
        alpha = fg.gamma("alpha", plates=[d])
        fg.mv_gaussian("w", precision=alpha, dim=2)


@build_error("'y'", "'w'.tau", "inner")
def tau_without_inner_mean():
    with fg.Model():
        w = fg.gaussian_gamma("w", dim=2)
        fg.gaussian("y", 0.0, precision=w.tau, observed=1.0)


@build_error("'t'", "'w'.tau")
def tau_as_gamma_rate():
    with fg.Model():
        w = fg.gaussian_gamma("w", dim=2)
        fg.gamma("t", 1.0, w.tau)


@build_error("'g'", "Gaussian", "normal-gamma")
def tau_of_a_plain_gaussian():
    with fg.Model():
        g = fg.gaussian("g")
        _ = g.tau


@build_error("'y'", "precision must be 'w'.tau")
def normal_gamma_inner_with_other_precision():
    with fg.Model():
        n = fg.plate("n", 3)
        w = fg.gaussian_gamma("w", dim=2)
        fg.gaussian("y", fg.inner(np.ones((3, 2)), w, plates=[n]), precision=1.0, plates=[n], observed=np.zeros(3))


# ------------------------------------------------------------------------------------ compile time (fg.infer)
@compile_error("'w'", "dimension", "unknown")
def mv_gaussian_dimension_never_given():
    with fg.Model() as m:
        fg.mv_gaussian("w")
    return m, {}


@compile_error("init", "'nope'")
def init_names_unknown_variable():
    return _simple_model(), {"init": {"nope": Gaussian(mean=0.0, var=1.0)}}


@compile_error("init", "'x'")
def init_names_observed_variable():
    return _simple_model(), {"init": {"x": Gaussian(mean=np.zeros(3), var=np.ones(3))}}


@compile_error("init", "'mu'", "(2,)", "()")
def init_with_wrong_shape():
    return _simple_model(), {"init": {"mu": Gaussian(mean=np.zeros(2), var=np.ones(2))}}


@compile_error("init", "'mu'", "Gaussian", "Gamma")
def init_of_the_wrong_family():
    from distributions import Gamma

    return _simple_model(), {"init": {"mu": Gamma(shape=1.0, rate=1.0)}}


@compile_error("schedule", "'x'", "latent")
def schedule_names_observed_variable():
    return _simple_model(), {"schedule": ["mu", "tau", "x"]}


@compile_error("schedule", "'tau'", "never updated")
def schedule_omits_latent_variable():
    return _simple_model(), {"schedule": ["mu"]}


@compile_error("schedule", "'nope'")
def schedule_names_unknown_variable():
    return _simple_model(), {"schedule": ["mu", "tau", "nope"]}


@pytest.mark.parametrize("max_iter", [0, -5, 2.5, True])
def test_max_iter_must_be_positive_integer(max_iter):
    m = _simple_model()
    with pytest.raises(fg.ModelError, match=_pattern("max_iter", repr(max_iter))):
        fg.infer(m, max_iter=max_iter)


@pytest.mark.parametrize("value", [1.0, -0.1, 1.5, float("nan")])
def test_per_factor_damping_outside_unit_interval(value):
    m = _simple_model()
    name = m["x"].prior.name
    with pytest.raises(fg.ModelError, match=_pattern(repr(name), "[0, 1)", repr(value))):
        fg.infer(m, damping={name: value})


@compile_error("damping", "'nope'")
def damping_for_unknown_factor():
    return _simple_model(), {"damping": {"nope": 0.5}}


@pytest.mark.parametrize("algorithm", ["VMP", "NCVMP"])
@pytest.mark.parametrize("value", [1.0, -0.1, float("nan")])
def test_global_damping_outside_unit_interval(algorithm, value):
    with pytest.raises(fg.ModelError, match=_pattern(algorithm, "damping", "[0, 1)", repr(value))):
        getattr(fg, algorithm)(damping=value)


@compile_error("model 'empty'", "no variables")
def empty_model():
    with fg.Model("empty") as m:
        pass
    return m, {}


# ------------------------------------------------------------------------------------ the runners
@pytest.mark.parametrize(("build", "fragments"), BUILD)
def test_build_time_error(build, fragments):
    with pytest.raises(fg.ModelError, match=_pattern(*fragments)):
        build()


@pytest.mark.parametrize(("setup", "fragments"), COMPILE)
def test_compile_time_error(setup, fragments):
    model, kwargs = setup()
    sweeps = []
    with pytest.raises(fg.ModelError, match=_pattern(*fragments)):
        fg.infer(model, callbacks=[lambda it, elbo, eng: sweeps.append(it)], **kwargs)
    assert sweeps == [], "the error must come before the first iteration"


def test_model_error_is_a_value_error():
    assert issubclass(fg.ModelError, ValueError)


def test_enough_distinct_bad_inputs():
    assert len(BUILD) + len(COMPILE) >= 25


# ------------------------------------------------------------------------------------ positive controls
def test_nan_where_masked_is_allowed():
    """NaN at a masked (missing) entry is not an error, and the entry is ignored."""
    data = np.array([1.0, np.nan, 2.0, 4.0])
    mask = np.isfinite(data)

    def fit(obs, msk, n):
        with fg.Model() as m:
            p = fg.plate("n", n)
            mu = fg.gaussian("mu", 0.0, precision=1e-2)
            fg.gaussian("x", mu, precision=2.0, plates=[p], observed=obs, mask=msk)
        return fg.infer(m).posterior("mu")

    q = fit(data, mask, 4)
    ref = fit(data[mask], None, 3)
    assert np.isfinite(q.mean()) and np.isfinite(q.var())
    # the missing entry drops out of the likelihood: q(mu) is the fit without it
    np.testing.assert_allclose(q.mean(), ref.mean(), rtol=1e-10)
    np.testing.assert_allclose(q.var(), ref.var(), rtol=1e-10)


def test_masked_labels_and_bernoulli_allow_nan():
    with fg.Model() as m:
        n = fg.plate("n", 4)
        theta = fg.dirichlet("theta", np.ones(3))
        fg.categorical("c", theta, plates=[n], observed=[0, np.nan, 2, 2],
                       mask=np.array([True, False, True, True]))
        p = fg.beta("p")
        fg.bernoulli("coin", p, plates=[n], observed=[1.0, np.nan, 0.0, 1.0],
                     mask=np.array([True, False, True, True]))
    r = fg.infer(m)
    # the three observed labels count once each; the missing ones drop out of the likelihood (marginalised)
    np.testing.assert_allclose(r.posterior("theta").concentration, [2.0, 1.0, 3.0], rtol=1e-12)
    q = r.posterior("p")
    np.testing.assert_allclose([q.alpha, q.beta], [3.0, 2.0], rtol=1e-12)
    assert np.isfinite(r.elbo)


def test_constants_that_broadcast_are_accepted():
    """Constants may broadcast (numpy-style, trailing axes) over the plates; only growing them is an error."""
    with fg.Model() as m:
        a, b = fg.plate("a", 2), fg.plate("b", 3)
        mu = fg.gaussian("mu", mean=np.zeros((2, 1)), precision=np.ones(3), plates=[a, b])
        fg.gaussian("x", mu, precision=1.0, plates=[a, b], observed=np.ones((2, 3)))
    assert fg.infer(m).posterior("mu").mean().shape == (2, 3)


def test_infer_arguments_are_checked():
    m = _simple_model()
    with pytest.raises(fg.ModelError, match="fg.Model"):
        fg.infer("abc")
    with pytest.raises(fg.ModelError, match="tol"):
        fg.infer(m, tol=-1.0)
    with pytest.raises(fg.ModelError, match="twice"):
        fg.infer(m, schedule=["mu", "mu"])


def test_a_handler_given_as_the_algorithm_names_handlers_with_a_variable_of_the_model():
    """fg.infer(m, fg.Laplace()) (a handler in the algorithm's place) says to pass it by variable name, naming the
    model's Gaussian weight vector (a scale for fg.ScaleQuadrature)."""
    X = np.random.default_rng(0).normal(size=(8, 2))
    with fg.Model("logistic") as m:
        n = fg.plate("n", 8)
        beta = fg.mv_gaussian("beta", np.zeros(2), precision=1.0)
        fg.bernoulli_logit("y", fg.inner(X, beta, [n]), observed=np.arange(8) % 2)
    for handler in (fg.Laplace(), fg.MVI(), fg.VIDiag(), fg.BVI(), fg.AIKL()):
        with pytest.raises(fg.ModelError, match=rf"^{type(handler).__name__} is a global handler, not an algorithm.*"
                                                rf"handlers=\{{'beta': {re.escape(repr(handler))}\}}"):
            fg.infer(m, handler)
    with fg.Model("schools") as s:
        j = fg.plate("j", 3)
        tau = fg.half_cauchy("tau", 5.0)
        fg.gaussian("y", mean=0.0, sd=tau, plates=[j], observed=np.ones(3))
    with pytest.raises(fg.ModelError, match=r"handlers=\{'tau': ScaleQuadrature\("):
        fg.infer(s, fg.ScaleQuadrature())
    with pytest.raises(fg.ModelError, match=r"handlers=\{'sigma': ScaleQuadrature.*has no variable it can take over"):
        fg.infer(m, fg.ScaleQuadrature())


ALIASED = [  # (builder, keywords of another library, fragments of the error)
    ("gaussian", {"mu": 0.0, "sigma": 1.0}, ["fg.gaussian('x')", "no keyword 'mu': write mean=0.0",
                                             "no keyword 'sigma': write sd=1.0 (the standard deviation σ)"]),
    ("gaussian", {"loc": 1.0, "scale": 2.0}, ["write mean=1.0", "write sd=2.0"]),
    ("gaussian", {"std": 2.0}, ["write sd=2.0"]),
    ("gaussian", {"tau": 4.0}, ["write precision=4.0 (the precision 1/σ²)"]),
    ("gaussian", {"var": 4.0}, ["write variance=4.0"]),
    ("gaussian", {"precison": 4.0}, ["no keyword 'precison': write precision=4.0"]),  # a typo: the closest keyword
    ("gaussian", {"shape": (3,)}, ["use plates= instead (a list of fg.plate(name, size)"]),
    ("gamma", {"alpha": 2.0, "beta": 1.0}, ["write shape=2.0", "write rate=1.0"]),
    ("gamma", {"scale": 2.0}, ["use rate= instead (rate = 1/scale)"]),
    ("half_cauchy", {"sigma": 1.0}, ["write scale=1.0"]),
    ("bernoulli", {"p": 0.3}, ["write probs=0.3"]),
    ("mv_gaussian", {"mean": np.zeros(2), "cov": np.eye(2)}, ["use covariance= instead"]),
    ("poisson", {"mu": 1.0, "obs": np.ones(3)}, ["write rate=1.0", "use observed= instead"]),
    ("student_t", {"mean": 0.0, "nu": 3.0}, ["write dof=3.0"]),
    ("gaussian_markov_chain", {"initial_mean": 0.0, "sigma": 1.0}, ["fg.gaussian_markov_chain('x')",
                                                                     "no keyword 'sigma'", "plates"]),
]


@pytest.mark.parametrize("builder, kwargs, fragments", ALIASED, ids=[f"{b}-{'-'.join(k)}" for b, k, _ in ALIASED])
def test_keywords_of_other_libraries_name_the_keyword_meant(builder, kwargs, fragments):
    """Every public builder checks its keywords in one place: another library's spelling (PyMC, NumPyro, scipy) is
    a ModelError (and a TypeError, as Python's own) naming the keyword meant and listing the builder's parameters;
    it used to be a bare TypeError."""
    with fg.Model("aliases"):
        fg.plate("n", 3)
        with pytest.raises(fg.ModelError, match=_pattern(*fragments, "Its parameters: name")) as err:
            getattr(fg, builder)("x", **kwargs)
        assert isinstance(err.value, TypeError)
        with pytest.raises(TypeError, match=r"too many positional arguments"):
            fg.gaussian("y", 0.0, 1.0, 2.0)


def test_a_positional_precision_warns_with_the_sd_it_stands_for():
    """fg.gaussian("mu", 0, 10) is precision 10 (σ ≈ 0.32), not σ = 10 as pm.Normal("mu", 0, 10): a constant given
    by position warns; by keyword, or a Gamma variable by position (a precision in any library), it does not."""
    with fg.Model("positional"):
        with pytest.warns(UserWarning, match=r"fg.gaussian\('mu'\): the argument after the mean is the precision "
                                             r"1/σ² \(so σ = 0.3162\).*write precision=10 to say so, or sd=10"):
            mu = fg.gaussian("mu", 0, 10)
        assert mu.prior.edges["precision"] == 10.0
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fg.gaussian("a", 0.0, precision=10.0)
            fg.gaussian("b", 0.0, fg.gamma("tau", 1.0, 1.0))
            fg.gamma("c", 1.0, 2.0)


def test_a_positional_precision_matrix_warns_that_it_is_not_a_covariance():
    """fg.mv_gaussian("w", m, S) reads S as the precision Λ, where pm.MvNormal("w", m, S) reads a covariance: a
    constant given by position warns and names both keywords; by keyword, or a Wishart by position, it does not."""
    with fg.Model("positional mv"):
        with pytest.warns(UserWarning, match=r"fg.mv_gaussian\('w'\): the argument after the mean is the precision "
                                             r"matrix Λ = Σ⁻¹, not the covariance.*precision=\.\.\. to say so, or "
                                             r"covariance=\.\.\. for Σ"):
            w = fg.mv_gaussian("w", np.zeros(2), 4.0 * np.eye(2))
        np.testing.assert_allclose(np.asarray(w.prior.params["precision_raw"]), 4.0 * np.eye(2))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fg.mv_gaussian("a", np.zeros(2), precision=np.eye(2))
            fg.mv_gaussian("b", np.zeros(2), covariance=np.eye(2))
            fg.mv_gaussian("c", np.zeros(2), fg.wishart("L", 3.0, np.eye(2)))


@pytest.mark.parametrize("builder", ["bernoulli", "bernoulli_logit", "probit"])
def test_binary_labels_are_read_alike_by_every_binary_builder(builder):
    """fg.bernoulli, fg.bernoulli_logit and fg.probit take labels as bool, 0/1 or ±1 (−1 is 0; fg.bernoulli refused
    ±1), and refuse the same bad labels with the same message."""
    X = np.linspace(-1.0, 1.0, 6)[:, None]
    y01 = np.array([1, 0, 1, 1, 0, 1])

    def build(labels):
        with fg.Model(builder) as m:
            n = fg.plate("n", 6)
            if builder == "bernoulli":
                fg.bernoulli("y", fg.beta("p", 1.0, 1.0), plates=[n], observed=labels)
            else:
                w = fg.mv_gaussian("w", np.zeros(1), precision=1.0)
                getattr(fg, builder)("y", fg.inner(X, w, [n]), observed=labels)
        return m

    fits = [fg.infer(build(lab), max_iter=50, tol=None) for lab in (y01, 2 * y01 - 1, y01.astype(bool))]
    name = "p" if builder == "bernoulli" else "w"
    for r in fits[1:]:
        np.testing.assert_allclose(r.posterior(name).mean(), fits[0].posterior(name).mean(), rtol=1e-12)
    for bad, shown in [(np.array([1, 0, 2, 1, 0, 1]), "got 2.0"),
                       (np.array([1, 0, -1, 1, 0, 1]), "got 'both 0 and -1'")]:
        with pytest.raises(fg.ModelError, match=rf"^labels of 'y' must be bool, 0/1 or -1/\+1, {shown}"):
            build(bad)


def test_failed_builder_call_leaves_the_name_free():
    with fg.Model("retry"):
        with pytest.raises(fg.ModelError):
            fg.gaussian("x", precision=-1.0)
        fg.gaussian("x", precision=1.0)


def test_large_input_matrix_finiteness_check_is_exact():
    """The fast check of a large X (a finite sum settles it) misses no nan or ±inf entry, and a finite
    entry whose square overflows float64 is named as too large (not as non-finite)."""
    X = np.ones((70_000, 2))
    X[0] = 1e150  # the largest magnitude accepted
    with fg.Model("big"):
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=2)
        fg.inner(X, w, plates=[fg.plate("n", 70_000)])
    X[0] = 1e308  # the sum overflows, every entry is finite, but its square is not
    with fg.Model("big-huge"):
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=2)
        with pytest.raises(fg.ModelError, match="1e[+]308.*too large"):
            fg.inner(X, w, plates=[fg.plate("n", 70_000)])
    X[0] = 1.0
    for bad in (np.nan, np.inf, -np.inf):
        X[123, 1] = bad
        with fg.Model("big-bad"):
            w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=2)
            with pytest.raises(fg.ModelError, match="finite"):
                fg.inner(X, w, plates=[fg.plate("n", 70_000)])


GATE_MISUSES = {
    "gate * constant": lambda mu, z, zc, W, x: mu[z] * x,
    "constant * gate": lambda mu, z, zc, W, x: 2.0 * mu[z],
    "negated gate": lambda mu, z, zc, W, x: -mu[z],
    "gate + constant": lambda mu, z, zc, W, x: mu[z] + 1.0,
    "variable + gate": lambda mu, z, zc, W, x: fg.gaussian("nu", 0.0, precision=1.0) + mu[z],
    "inner on a gate": lambda mu, z, zc, W, x: fg.inner(np.ones((6, 2)), W[z], [z.plates[0]]),
    "index of a gate": lambda mu, z, zc, W, x: fg.index(mu[zc], np.array([0, 1, 2, 0, 1, 2])),
    "named gate": lambda mu, z, zc, W, x: fg.deterministic("g", mu[z]),
}


@pytest.mark.parametrize("case", sorted(GATE_MISUSES))
def test_a_gate_in_an_expression_is_a_model_error_with_the_way_out(case):
    """x[z] is a factor's argument only: arithmetic, fg.inner, fg.index or fg.deterministic on it name the gate and
    say to gate the expression instead (it was a raw TypeError or a message quoting a dataclass)."""
    with fg.Model("gates"):
        k, n, c = fg.plate("k", 2), fg.plate("n", 6), fg.plate("c", 3)
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        zc = fg.categorical("zc", [0.5, 0.5], plates=[c], categories=k)
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        W = fg.mv_gaussian("W", np.zeros(2), precision=0.01, plates=[k])
        with pytest.raises(fg.ModelError, match=r"the gate (mu|W)\[zc?\] can only be an argument of a factor.*gate the "
                                                r"result, e\.g\. \(2\.0 \* (mu|W)\)\[zc?\]"):
            GATE_MISUSES[case](mu, z, zc, W, np.linspace(-1, 1, 6))


def test_a_gate_needs_a_categorical_or_bernoulli_selector():
    with fg.Model("bad selector"):
        k, c = fg.plate("k", 2), fg.plate("c", 3)
        fg.plate("n", 6)
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[c])
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        with pytest.raises(fg.ModelError, match=r"Bernoulli selector.*got Gaussian 'w' gathered by labels"):
            mu[w[np.array([0, 1, 2, 0, 1, 2])]]
