"""Factor types and their rule registry.

A factor type declares its edges (``out`` first) with the family each edge carries, and registers
one plain function per (target edge, algorithm, method)::

    GAUSSIAN = FactorType("Gaussian", out=Gaussian, mean=Gaussian, precision=Gamma)

    @GAUSSIAN.rule("mean", "vmp")
    def _gaussian_to_mean(m, p):
        ...

A rule receives ``m``, a mapping from edge name to the expected sufficient statistics of that
edge's current posterior (aligned to the factor's plates, event axes last), and ``p``, the factor
instance's static parameters.  It returns the natural parameters of the message to its target
edge: by the VMP identity, the gradient of E[log f] with respect to the target's expected
statistics.  ``evidence`` functions return E[log f] per factor instance and say what kind of
number it is (exact, or a bound).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import gammaln

Stats = tuple[np.ndarray, ...]
Moments = Mapping[str, Stats]
Rule = Callable[[Moments, dict[str, Any]], Stats]

# the algorithms rules are registered for; NCVMP uses the VMP rule of a conjugate factor (its
# gradient-matched message equals the VMP message: Knowles & Minka, Theorem 2)
ALGORITHMS = ("vmp", "ncvmp", "ep")
FALLBACK = {"ncvmp": "vmp"}
# Gibbs sampling: a conjugate factor's VMP message at point statistics is its full conditional; a factor may
# register its own "gibbs" rule (an augmentation: factors/polya_gamma.py)
FALLBACK["gibbs"] = "vmp"


class RuleNotFound(LookupError):
    """No message rule for a (factor, edge, algorithm, method); lists the rules that exist."""


_REGISTRY: dict[str, FactorType] = {}


def factor_type(name: str) -> FactorType:
    """The factor type registered under ``name`` (how a pickled ``FactorType`` is restored).

    Every factor type registers itself when its module is imported, and the package's ``__init__`` imports
    every factor module.  Unpickling imports this module as ``factors.base``, which runs that ``__init__``
    first, so the registry is complete whenever this is called.
    """
    return _REGISTRY[name]


class FactorType:
    """A factor family: its edges, its message rules and its evidence terms."""

    def __init__(self, name: str, conjugate: bool = True, **edges: type) -> None:
        self.name = name
        _REGISTRY.setdefault(name, self)
        self.conjugate = conjugate  # False: messages depend on the target's own posterior (NCVMP)
        self.edges: dict[str, type] = dict(edges)
        self._rules: dict[tuple[str, str, str], Rule] = {}
        self._evidence: dict[str, tuple[Callable[[Moments, dict], np.ndarray], str]] = {}
        # pointwise (log f, (log f)′, (log f)″) in a Gaussian edge at given values, for global handlers
        self.pointwise: dict[str, Callable] = {}
        # NCVMP's first message along an edge, by method (see ``initial``)
        self.initial_rules: dict[tuple[str, str], Rule] = {}
        # a structured factor owns the posterior of its "out" variable: fn(m, p, potentials) -> q, where
        # potentials are the summed messages of every other factor (None: the starting q from m["out"])
        self.structured: Callable | None = None

    def __reduce__(self) -> tuple:
        # pickled by name: the registered instance is the same object in every process (a sharded fit ships
        # its model to workers, and the compiler tests factor types by identity)
        return (factor_type, (self.name,))

    def rule(self, edge: str, algorithm: str = "vmp", method: str = "default") -> Callable[[Rule], Rule]:
        if edge not in self.edges:
            raise ValueError(f"factor {self.name} has no edge {edge!r}")

        def register(fn: Rule) -> Rule:
            self._rules[(edge, algorithm, method)] = fn
            return fn

        return register

    def initial(self, edge: str, method: str = "default") -> Callable[[Rule], Rule]:
        """Register the first NCVMP message along ``edge``: sent once, before the gradient rule, when the
        target's moments are still the prior's and a cheap conservative message is a better start (it
        does not change the fixed point)."""

        def register(fn: Rule) -> Rule:
            self.initial_rules[(edge, method)] = fn
            return fn

        return register

    def evidence(self, method: str = "default", kind: str = "exact") -> Callable:
        """Register E[log f]; ``kind`` is "exact", "bound" (a lower bound) or "approximation"."""

        def register(fn: Callable[[Moments, dict], np.ndarray]) -> Callable:
            self._evidence[method] = (fn, kind)
            return fn

        return register

    def point(self, edge: str) -> Callable:
        """Register ``fn(u, m, p, order=2) -> (log f, ∂ log f/∂u, ∂² log f/∂u²)`` at values u of ``edge``
        (the other edges' statistics in ``m``), for handlers that optimise over that edge's parent; with
        ``order=1`` a rule may return None for the second derivative (a vector site's K×K Hessian per point
        is costly; a scalar one is not, and is returned anyway)."""

        def register(fn: Callable) -> Callable:
            self.pointwise[edge] = fn
            return fn

        return register

    def get_rule(self, edge: str, algorithm: str, method: str = "default") -> Rule:
        alg = algorithm
        while True:
            fn = self._rules.get((edge, alg, method))
            if fn is not None:
                return fn
            if alg not in FALLBACK:
                break
            alg = FALLBACK[alg]
        have = sorted(f"{e}/{a}/{m}" for e, a, m in self._rules)
        raise RuleNotFound(
            f"factor {self.name}: no rule for edge {edge!r} under algorithm {algorithm!r} with method "
            f"{method!r}{self._fix(edge, algorithm, method)}. Registered rules (edge/algorithm/method): "
            f"{', '.join(have) or 'none'}")

    def _fix(self, edge: str, algorithm: str, method: str) -> str:
        """What to do instead: the algorithm that has the rule, or the methods that have one."""
        algs = [a for a in ALGORITHMS if a != algorithm and (edge, a, method) in self._rules]
        if algs:
            return ": use " + " or ".join(f"fg.{a.upper()}()" for a in algs)
        usable, alg = [], algorithm
        while alg:  # the algorithms whose rules this one may use
            usable.append(alg)
            alg = FALLBACK.get(alg)
        methods = sorted({m for e, a, m in self._rules if e == edge and a in usable})
        if methods:
            return f": methods with a rule for {edge!r} under {algorithm!r}: {', '.join(methods)}"
        return ""

    def get_evidence(self, method: str = "default") -> tuple[Callable[[Moments, dict], np.ndarray], str]:
        try:
            return self._evidence[method]
        except KeyError:
            raise RuleNotFound(f"factor {self.name}: no evidence term for method {method!r}; have "
                               f"{sorted(self._evidence)}") from None

    def rules(self) -> dict[tuple[str, str, str], Rule]:
        """All registered rules (for the generic message-equals-gradient tests)."""
        return dict(self._rules)

    def __repr__(self) -> str:
        return f"FactorType({self.name}: {', '.join(self.edges)})"


# ---------------------------------------------------------------------------------- helpers
def log_mvbeta(alpha: np.ndarray) -> np.ndarray:
    """log B(α) = Σ log Γ(α_k) − log Γ(Σ α_k) over the last axis."""
    return gammaln(alpha).sum(-1) - gammaln(alpha.sum(-1))


LOG_2PI = float(np.log(2.0 * np.pi))


def point_stats(family: type, value: np.ndarray) -> Stats:
    """Sufficient statistics u(x) of a known value x (a constant or an observation) in ``family``.

    Gaussian (x, x²); MvGaussian (x, xxᵀ); Gamma (x, log x); Beta (log p, log(1−p));
    Dirichlet log p; Categorical one-hot (``value`` holds integer labels and the number of
    categories is ``family.K`` of the caller, so Categorical is handled by ``one_hot``); Bernoulli x.
    """
    x = np.asarray(value, dtype=float)
    name = family.__name__
    observed = getattr(family, "observed_stats", None)  # families only ever observed (counts)
    if observed is not None:
        return observed(x)
    with np.errstate(divide="ignore"):
        if name == "Gaussian":
            return (x, x * x)
        if name == "MvGaussian":
            return (x, x[..., :, None] * x[..., None, :])
        if name == "Gamma":
            return (x, np.log(x))
        if name == "Beta":
            return (np.log(x), np.log1p(-x))
        if name == "Dirichlet":
            return (np.log(x),)
        if name == "Bernoulli":
            return (x,)
        if name == "Wishart":
            return (x, np.linalg.slogdet(x)[1])
    raise TypeError(f"no point statistics for family {name}")


def one_hot(labels: np.ndarray, k: int) -> np.ndarray:
    """One-hot encoding of integer labels along a new last axis of length k."""
    labels = np.asarray(labels)
    return (labels[..., None] == np.arange(k)).astype(float)


def same_stats(a: Stats, b: Stats) -> bool:
    """Whether two statistics tuples view the same memory with the same layout.

    Kernel caches keep a reference to the statistics they were computed from, so that memory cannot
    be reused by a new array while the cache holds it: equal addresses then mean the same values
    (the engine never writes into statistics it has handed out).
    """
    return len(a) == len(b) and all(
        x is y or (x.__array_interface__["data"][0] == y.__array_interface__["data"][0]
                   and x.shape == y.shape and x.strides == y.strides)
        for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class DiagPlusOuter:
    """Per-row K × K matrices diag(a_n) + v_n v_nᵀ kept factored (a softmax's Hessian in its logits:
    a = −c·s, v = √c·s): a handler's block Hessian Σ_n (G_n ⊗ x_n x_nᵀ) is then K weighted Gram matrices
    plus one rank-N update, instead of K² weighted Gram matrices."""

    diag: np.ndarray  # (..., K)
    vec: np.ndarray  # (..., K)

    def dense(self) -> np.ndarray:
        """The matrices themselves, shape (..., K, K)."""
        K = self.diag.shape[-1]
        return self.diag[..., :, None] * np.eye(K) + self.vec[..., :, None] * self.vec[..., None, :]
