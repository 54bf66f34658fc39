"""Base classes: the common distribution interface and the exponential-family message algebra.

A member of an exponential family is

    q(x; η) = h(x) exp(ηᵀu(x) − κ(η)),   E[u(x)] = ∇κ(η).

In every family of this package the base measure is h(x) = 1 (all constants, such as the
(2π)^(D/2) of a Gaussian, are part of κ), so that log q(x) = ηᵀu(x) − κ(η) and
H[q] = κ(η) − ηᵀE[u].

Objects are immutable and batched: every natural-parameter array has leading *batch* axes (the
plates) followed by the family's trailing *event* axes (``event_ndims`` per parameter).  Messages
between factors and variables are unnormalised members of the same family, so the message algebra
(product, ratio, power, damping) is arithmetic on natural parameters.  Where the natural parameters
do not define a distribution (``is_proper()`` is False, e.g. the flat ``uniform`` message),
``log_partition`` is +inf and the moments, entropy and KL are undefined (nan or inf).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

Nat = tuple[np.ndarray, ...]
Shape = tuple[int, ...]
RngLike = np.random.Generator | int | None


class Distribution:
    """The interface shared by every distribution object (exponential family or not).

    Batched over leading axes (``batch_shape``) with trailing ``event_shape`` axes.  Subclasses
    implement ``mean``, ``var``, ``logpdf``, ``sample``, ``entropy`` and the two shape properties.
    """

    __slots__ = ()

    @property
    def batch_shape(self) -> Shape:
        raise NotImplementedError

    @property
    def event_shape(self) -> Shape:
        raise NotImplementedError

    def mean(self) -> np.ndarray:
        """E[x], shape ``batch_shape + event_shape``."""
        raise NotImplementedError

    def var(self) -> np.ndarray:
        """Var[x] (element-wise; the diagonal of ``cov()`` for vectors)."""
        raise NotImplementedError

    def std(self) -> np.ndarray:
        """Element-wise standard deviation √Var[x]."""
        return np.sqrt(self.var())

    def logpdf(self, x) -> np.ndarray:
        """log q(x); ``x`` broadcasts against ``batch_shape + event_shape``."""
        raise NotImplementedError

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape + event_shape``."""
        raise NotImplementedError

    def entropy(self) -> np.ndarray:
        """Differential (or discrete) entropy, batch-shaped."""
        raise NotImplementedError

    def elbo_term(self) -> np.ndarray:
        """What a variable with this posterior adds to the ELBO itself: its entropy H[q], batch-shaped.  A
        family whose base measure is the variable's prior (``TiltedScale``) adds E_q[log prior] too."""
        return self.entropy()


class Quantiles:
    """``median``, ``interval`` and inverse-cdf ``sample`` for a distribution that has a ``ppf``."""

    __slots__ = ()

    def median(self) -> np.ndarray:
        """ppf(0.5): a numpy float for one variable, an array of ``batch_shape`` for a batch."""
        return _batch_value(self.ppf(0.5), self.batch_shape)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """The central interval holding ``level`` of the mass: (ppf((1 − level)/2), ppf((1 + level)/2)), each
        a numpy float for one variable and an array of ``batch_shape`` for a batch, whatever the family."""
        return (_batch_value(self.ppf(0.5 * (1.0 - level)), self.batch_shape),
                _batch_value(self.ppf(0.5 * (1.0 + level)), self.batch_shape))

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape``: ppf of uniform draws."""
        return self.ppf(as_rng(rng).uniform(size=as_shape(shape) + self.batch_shape))


def _batch_value(x: Any, batch_shape: Shape) -> Any:
    """``x`` as float64 of ``batch_shape``: a numpy float when the batch is one variable (as numpy's reductions and
    scipy's frozen distributions give), else an array."""
    return np.broadcast_to(np.asarray(x, dtype=float), batch_shape).copy()[()]


class ChainPosterior(Distribution):
    """What the posteriors of Markov chains (``CategoricalChain``, ``GaussianChain``) share: their shapes, read
    off ``_steps`` (batch + (T, E): one row of E statistics per step), the joint entropy laid out on the steps,
    and joint draws from the ``_sampler`` the factor that built the chain supplies; without one, each subclass's
    ``_independent_draws(S, rng)`` draws every step from its marginal."""

    _steps: np.ndarray
    joint_entropy: np.ndarray
    _sampler: Any

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Sequences × steps (the shape of the chain variable)."""
        return self._steps.shape[:-1]

    @property
    def event_shape(self) -> tuple[int, ...]:
        return self._steps.shape[-1:]

    def entropy(self) -> np.ndarray:
        """H[q] laid out on the steps: each sequence's joint entropy at its first step, 0 elsewhere (a sum over
        steps gives the joint entropy, which is not a sum of per-step entropies)."""
        out = np.zeros(self._steps.shape[:-1])
        out[..., 0] = self.joint_entropy
        return out

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Joint draws of the sequences, shape ``shape + batch_shape`` (+ the event axis of a vector chain)."""
        shape = as_shape(shape)
        rng = as_rng(rng)
        S = int(np.prod(shape))
        x = np.asarray(self._sampler(S, rng)) if self._sampler is not None else self._independent_draws(S, rng)
        return x.reshape(shape + x.shape[1:])


class ExponentialFamily(Distribution):
    """Base class of the batched exponential-family distributions.

    Subclasses define ``event_ndims`` (trailing event axes of each natural parameter) and implement
    ``expected_stats``, ``log_partition``, ``entropy``, ``logpdf``, ``sample``, ``mean``, ``var``,
    ``sufficient_stats`` and ``is_proper``; they add keyword constructors (which validate) and
    family parameters as properties.  ``from_natural`` does not validate: messages may be improper.

    Natural-parameter arrays of differing batch shapes are broadcast to a common batch shape.
    """

    event_ndims: ClassVar[tuple[int, ...]] = ()
    __slots__ = ("_nat", "_cache")

    def __init__(self, *nat: np.ndarray) -> None:
        arrs = [np.asarray(n, dtype=float) for n in nat]
        if len(arrs) != len(self.event_ndims):
            raise ValueError(f"{type(self).__name__} takes {len(self.event_ndims)} natural parameters, "
                             f"got {len(arrs)}")
        batches = []
        for i, (a, k) in enumerate(zip(arrs, self.event_ndims, strict=True)):
            if a.ndim < k:
                raise ValueError(f"{type(self).__name__}: natural parameter {i} needs at least {k} "
                                 f"axes, got shape {a.shape}")
            batches.append(a.shape[: a.ndim - k])
        if len(set(batches)) > 1:
            try:
                batch = np.broadcast_shapes(*batches)
            except ValueError as err:
                raise ValueError(f"{type(self).__name__}: natural parameters have incompatible batch "
                                 f"shapes {batches}") from err
            arrs = [np.ascontiguousarray(np.broadcast_to(a, batch + a.shape[a.ndim - k:]))
                    for a, k in zip(arrs, self.event_ndims, strict=True)]
        self._nat = tuple(arrs)
        self._cache: dict = {}  # derived quantities (Cholesky factors, moments): objects are immutable

    # ----------------------------------------------------------------------------------- creation
    @classmethod
    def from_natural(cls, *nat: np.ndarray):
        """Build from natural parameters (no validation: messages may be improper)."""
        obj = cls.__new__(cls)
        ExponentialFamily.__init__(obj, *nat)
        return obj

    @classmethod
    def uniform(cls, batch_shape: Shape = (), event_shape: Shape = ()):
        """The flat message (all natural parameters zero): the unit of the product.

        Improper for the unbounded families (Gaussian, MvGaussian, Gamma, GaussianGamma); on a
        bounded support (Beta, Dirichlet, Categorical, Bernoulli) it is the proper uniform law.
        """
        return cls.from_natural(*cls._zero_natural(tuple(batch_shape), tuple(event_shape)))

    @classmethod
    def _zero_natural(cls, batch_shape: Shape, event_shape: Shape) -> Nat:
        # every family here has a single event length (D or K); a parameter with k event axes is D^k
        need = 1 if any(cls.event_ndims) else 0
        if len(event_shape) != need:
            raise ValueError(f"{cls.__name__}.uniform: event_shape must have {need} axis/axes, "
                             f"got {event_shape!r}")
        size = event_shape[:1]
        return tuple(np.zeros(batch_shape + size * k) for k in cls.event_ndims)

    # ----------------------------------------------------------------------------------- accessors
    @property
    def natural(self) -> Nat:
        """Natural parameters η, one array per sufficient statistic."""
        return self._nat

    @property
    def batch_shape(self) -> Shape:
        n0, k0 = self._nat[0], self.event_ndims[0]
        return n0.shape[: n0.ndim - k0]

    @property
    def event_shape(self) -> Shape:
        n0, k0 = self._nat[0], self.event_ndims[0]
        return n0.shape[n0.ndim - k0:]

    def __len__(self) -> int:  # batch length, numpy style
        return self.batch_shape[0]

    def __getitem__(self, index):
        """Index the batch axes: ``q[2]``, ``q[:, 0]``."""
        idx = index if isinstance(index, tuple) else (index,)
        return self.from_natural(*(n[idx] for n in self._nat))

    # ----------------------------------------------------------------------------------- interface
    def sufficient_stats(self, x) -> Nat:
        """u(x), with the structure of ``natural`` (batch axes those of ``x``)."""
        raise NotImplementedError

    def expected_stats(self) -> Nat:
        """E[u(x)] = ∇κ(η), with the structure of ``natural``."""
        raise NotImplementedError

    def log_partition(self) -> np.ndarray:
        """κ(η), batch-shaped (+inf where not proper)."""
        raise NotImplementedError

    def is_proper(self) -> np.ndarray:
        """Boolean array (batch-shaped): True where the natural parameters define a distribution."""
        raise NotImplementedError

    def kl(self, other: ExponentialFamily) -> np.ndarray:
        """KL(self ‖ other) = (η_q − η_p)ᵀE_q[u] − κ(η_q) + κ(η_p), batch-shaped.

        This generic form is what subclasses fall back on; several override it with a closed form.
        """
        self._check_same(other)
        eu = self.expected_stats()
        inner = sum(_contract(nq - np_, e, k) for nq, np_, e, k in
                    zip(self._nat, other._nat, eu, self.event_ndims, strict=True))
        return inner - self.log_partition() + other.log_partition()

    # ----------------------------------------------------------------------------------- algebra
    def __mul__(self, other: ExponentialFamily):
        self._check_same(other)
        return self.from_natural(*(a + b for a, b in zip(self._nat, other._nat, strict=True)))

    def __truediv__(self, other: ExponentialFamily):
        self._check_same(other)
        return self.from_natural(*(a - b for a, b in zip(self._nat, other._nat, strict=True)))

    def __pow__(self, power: float):
        return self.from_natural(*(power * a for a in self._nat))

    def damp(self, previous: ExponentialFamily, alpha: float):
        """Damped message (1 − α)·η_self + α·η_previous, α ∈ [0, 1)."""
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"damping must lie in [0, 1), got {alpha!r}")
        self._check_same(previous)
        if alpha == 0.0:
            return self.from_natural(*self._nat)
        return self.from_natural(*((1.0 - alpha) * a + alpha * b
                                   for a, b in zip(self._nat, previous._nat, strict=True)))

    def _check_same(self, other: ExponentialFamily) -> None:
        if type(other) is not type(self):
            raise TypeError(f"cannot combine {type(self).__name__} with {type(other).__name__}")
        if other.event_shape != self.event_shape:
            raise ValueError(f"{type(self).__name__}: event shapes differ, {self.event_shape} and "
                             f"{other.event_shape}")

    #: the parameters a repr shows, as names of properties or of argument-free methods
    _repr_fields: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return describe(self, self._repr_fields)


# --------------------------------------------------------------------------------------- helpers
def summarise(value) -> str:
    """A short one-line text of a parameter: the number itself for a scalar, every entry of a small
    array, and for a larger one its shape with its first and last entries."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        return repr(arr.item()) if arr.ndim == 0 else f"<array of shape {arr.shape}>"
    if arr.ndim == 0:
        return _number(arr.item())
    if arr.size <= 8:
        with np.printoptions(precision=6):
            return " ".join(np.array2string(arr, separator=", ").split())
    flat = arr.ravel()
    return f"<shape {arr.shape}: {', '.join(_number(x) for x in flat[:3])}, ..., {_number(flat[-1])}>"


def _number(x) -> str:
    """A number to 6 significant digits, written as Python writes a float (``1.0``, ``2.5e-07``)."""
    return repr(float(f"{x:.6g}")) if isinstance(x, float) else repr(x)


def describe(dist, fields: tuple[str, ...]) -> str:
    """``Name(field=value, ...)`` for a distribution, batched ones with their batch shape first.  A field
    that cannot be computed (the moments of an improper message) is shown as the natural parameters."""
    parts = [f"batch_shape={dist.batch_shape}"] if dist.batch_shape else []
    try:
        with np.errstate(all="ignore"):
            for f in fields:
                v = getattr(dist, f)
                parts.append(f"{f}={summarise(v() if callable(v) else v)}")
    except Exception:  # noqa: BLE001 - a repr must not fail; show what certainly exists instead
        parts = parts[:1] + [f"natural={tuple(summarise(a) for a in getattr(dist, '_nat', ()))}"]
    return f"{type(dist).__name__}({', '.join(parts)})"


def _contract(a: np.ndarray, b: np.ndarray, event_ndims: int) -> np.ndarray:
    """Sum of a*b over the trailing ``event_ndims`` axes."""
    prod = a * b
    return prod.sum(axis=tuple(range(-event_ndims, 0))) if event_ndims else prod


def as_rng(rng: RngLike) -> np.random.Generator:
    """A numpy Generator from a Generator, an int seed, or None (fresh OS entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    raise TypeError(f"rng must be a numpy Generator, an int seed or None, got {type(rng).__name__}")


def as_shape(shape: int | Shape) -> Shape:
    """A sample shape as a tuple (an int n means (n,))."""
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def where_proper(value: np.ndarray, proper: np.ndarray, fill: float) -> np.ndarray:
    """``value`` where ``proper``, ``fill`` elsewhere (a 0-d array stays 0-d)."""
    return np.where(proper, value, fill) if not np.all(proper) else np.asarray(value)
