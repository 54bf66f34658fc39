"""Graph nodes: plates, random variables, deterministic expressions, gates and factors.

Every node lives under an ordered set of named plates (a plate is a name and a size and maps to one
numpy axis).  A node's arrays have its plates as leading axes, in the model's declaration order,
followed by the event axes of its family.

This module is the bottom of the model language: it imports no other module of it.  A node's operators
(``x + y``, ``c * x``, ``-x``, ``x[z]``, ``x[idx]``) are built by the model that owns the node (``node.model``,
whose ``_sum``, ``_product``, ``_scaled``, ``_gate`` and ``_index`` call ``expressions`` and ``indexing``), so
the modules that build and check expressions sit above the node classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distributions import GaussianGamma
from factors.base import FactorType


class ModelError(ValueError):
    """A model that cannot be built or compiled; the message names the node and the value."""


@dataclass(frozen=True, eq=False)
class Plate:
    """A named replication axis of the model (``fg.plate("n", 100)``)."""

    name: str
    size: int
    index: int  # declaration order in the model: fixes the axis order of every array

    def __repr__(self) -> str:
        return f"Plate({self.name!r}, {self.size})"


class Node:
    """Common base of variables and deterministic expressions (anything an edge may point to)."""

    name: str
    plates: tuple[Plate, ...]
    model: Any

    # arithmetic builds deterministic Gaussian expressions; numpy defers to it (x * a[g] with an array x)
    __array_ufunc__ = None

    def __add__(self, other: Any) -> Node:
        return self.model._sum(self, other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> Node:
        return self.model._sum(self, self.model._scaled(-1.0, other))

    def __rsub__(self, other: Any) -> Node:
        return self.model._sum(other, self.model._scaled(-1.0, self))

    def __mul__(self, other: Any) -> Node:
        return self.model._product(self, other)

    __rmul__ = __mul__

    def __neg__(self) -> Node:
        return self.model._scaled(-1.0, self)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(p.size for p in self.plates)


class Variable(Node):
    """A random variable of one family (``Gaussian``, ``Gamma``, ...), possibly (partly) observed.

    Parameters
    ----------
    family
        Distribution class of its posterior (from ``distributions``).
    event_shape
        Trailing event axes: ``()`` for scalars, ``(D,)`` for vectors, ``(K,)`` for Categorical.

    Attributes
    ----------
    value, mask
        Observed values (plate-shaped, plus event axes) and a boolean mask that is True where the
        value is observed; ``mask is None`` means fully latent.
    """

    def __init__(self, model: Any, name: str, family: type, plates: tuple[Plate, ...],
                 event_shape: tuple[int, ...] = ()) -> None:
        self.model = model
        self.name = name
        self.family = family
        self.plates = plates
        self.event_shape = event_shape
        self.value: np.ndarray | None = None
        self.mask: np.ndarray | None = None
        self.prior: FactorNode | None = None
        self.category_plate: Plate | None = None  # Categorical: the plate its categories index
        self.lower: np.ndarray | None = None  # a Gamma truncated to x > lower (fg.uniform_scale)
        self.base: dict | None = None  # a scale on σ itself: q is its prior tilted by Gaussian messages

    @property
    def is_observed(self) -> bool:
        return self.mask is not None and isinstance(self.mask, np.ndarray) and bool(np.all(self.mask))

    @property
    def is_latent(self) -> bool:
        """Whether some entry is not observed.  A lazy (dask) mask is not read: its variable counts as partly
        observed here; each chunk of a sharded fit sees its own rows' mask (docs/design.md §10)."""
        return self.mask is None or not isinstance(self.mask, np.ndarray) or not bool(np.all(self.mask))

    def __getitem__(self, selector: Any) -> Gate | Indexed:
        if not isinstance(selector, Node):  # constant integer labels: x[idx] gathers x onto a data plate
            return self.model._index(self, selector)
        return self.model._gate(self, selector)

    @property
    def tau(self) -> PrecisionOf:
        """The precision τ of a joint normal–gamma variable, for use as a likelihood precision."""
        if self.family is not GaussianGamma:
            raise ModelError(f"variable {self.name!r} is {self.family.__name__}, not a normal-gamma "
                             "block: only gaussian_gamma variables have a .tau")
        return PrecisionOf(self)

    def __repr__(self) -> str:
        obs = "observed " if self.is_observed else ""
        return f"<{obs}{self.family.__name__} {self.name!r} plates={[p.name for p in self.plates]}>"


@dataclass(eq=False)
class PrecisionOf:
    """``w.tau``: the precision half of a normal–gamma variable ``w``."""

    variable: Variable


class Deterministic(Node):
    """A Gaussian-valued deterministic function of its parents (inner product, sum, product, scale).

    Its moments E[y], E[y²] follow from the parents' posteriors (downward message); a Gaussian
    message arriving at y is pulled back to each parent through the function (upward message).
    The ``op`` is a ``factors.deterministic`` operation that knows both directions.
    """

    def __init__(self, model: Any, name: str, op: Any, parents: dict[str, Any],
                 plates: tuple[Plate, ...], params: dict[str, Any] | None = None) -> None:
        self.model = model
        self.name = name
        self.op = op
        self.parents = parents  # role -> Node or np.ndarray constant
        self.plates = plates
        self.params = params or {}
        self.event_shape: tuple[int, ...] = ()

    def observe(self, value: Any) -> None:
        raise ModelError(f"{self.name!r} is deterministic (a function of other variables) and cannot "
                         "be observed: observe a random variable whose mean it is instead")

    def stochastic_parents(self) -> list[Variable]:
        out: list[Variable] = []
        for p in self.parents.values():
            if isinstance(p, Variable):
                out.append(p)
            elif isinstance(p, Deterministic | Indexed):
                out.extend(p.stochastic_parents())
        return out

    def __getitem__(self, selector: Variable) -> Gate:
        return self.model._gate(self, selector)

    def __repr__(self) -> str:
        return f"<deterministic {self.name!r} plates={[p.name for p in self.plates]}>"


@dataclass(eq=False)
class Gate:
    """``x[z]``: a plated variable, expression or constant array selected by a Categorical (or Bernoulli) ``z``.

    A factor with a gated argument is a mixture: it is replicated over the selector's category
    plate and each replicate is weighted by q(z = k).
    """

    source: Variable | Deterministic | np.ndarray
    selector: Variable
    plate: Plate
    # fg.select(values, z) whose values also vary over plates of the variable: the plates of the array's leading
    # axes, in the model's order, the category plate among them (set by the builder; None: only the categories)
    layout: tuple[Plate, ...] | None = None

    def value_plates(self) -> tuple[Plate, ...]:
        """The plates of a constant source's leading axes (the category plate alone unless ``layout``)."""
        return self.layout if self.layout is not None else (self.plate,)

    def __repr__(self) -> str:
        src = self.source.name if isinstance(self.source, Node) else f"array{tuple(np.shape(self.source))}"
        return f"<gate {src}[{self.selector.name}]>"

    def _no_arithmetic(self, *_: Any) -> None:
        raise gated_arithmetic_error(self)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __neg__ = __truediv__ = _no_arithmetic
    __getitem__ = _no_arithmetic


def gated_arithmetic_error(g: Gate, what: str = "arithmetic") -> ModelError:
    """The error for an expression, index or product that takes a gate ``x[z]`` as an operand."""
    src = g.source.name if isinstance(g.source, Node) else "values"
    return ModelError(f"{what}: the gate {src}[{g.selector.name}] can only be an argument of a factor; build the "
                      f"expression on {src} itself (plated over the categories) and gate the result, e.g. "
                      f"(2.0 * {src})[{g.selector.name}] or fg.inner(X, {src}, [n])[{g.selector.name}]")


@dataclass(eq=False)
class FactorNode:
    """An instance of a factor type with its edges bound to nodes or constants."""

    ftype: FactorType
    name: str
    edges: dict[str, Any]  # edge -> Variable | Deterministic | Gate | np.ndarray
    plates: tuple[Plate, ...]
    method: str = "vmp"
    params: dict[str, Any] = field(default_factory=dict)
    consumed: dict[str, Plate] = field(default_factory=dict)  # edge -> plate used as its event axis

    def __repr__(self) -> str:
        return f"<factor {self.ftype.name} {self.name!r}>"


class Indexed(Node):
    """``x[idx]``: a plated variable gathered by constant integer labels onto another plate.

    ``x`` is plated over ``along`` (size G); ``labels`` has one entry in [0, G) per element of
    ``plate`` (size N).  The node has x's family and x's plates with ``along`` replaced by ``plate``:
    element n is x[labels[n]].  Its statistics are x's gathered along ``along``; the messages it
    receives are summed back onto x's elements (segment sums over the rows with the same label).
    Built by ``fg.index`` (or ``x[idx]``).
    """

    def __init__(self, model: Any, name: str, source: Variable, labels: np.ndarray, along: Plate,
                 plate: Plate, plates: tuple[Plate, ...]) -> None:
        self.model = model
        self.name = name
        self.source = source
        self.family = source.family
        self.event_shape = source.event_shape
        self.labels = labels  # int64, shape (plate.size,)
        self.along = along
        self.plate = plate
        self.plates = plates
        self.counts = np.bincount(labels, minlength=along.size).astype(float)  # rows per label

    @property
    def is_latent(self) -> bool:
        return self.source.is_latent

    @property
    def is_observed(self) -> bool:
        return self.source.is_observed

    def stochastic_parents(self) -> list[Variable]:
        return [self.source]

    def __getitem__(self, labels: Any) -> Indexed:
        if isinstance(labels, Node):
            raise ModelError(f"{self.name!r}[{labels.name!r}]: gate the variable itself, {self.source.name!r}[...]; "
                             "an indexed view can only be indexed again by integer labels")
        return self.model._index(self, labels)

    def observe(self, value: Any) -> None:
        raise ModelError(f"{self.name!r} is an indexed view of {self.source.name!r} and cannot be observed")

    def __repr__(self) -> str:
        return f"<{self.source.name}[{self.along.name} -> {self.plate.name}] plates={[p.name for p in self.plates]}>"


class Data:
    """``fg.data("X", array)``: a named array of data that ``model.set_data`` and ``fg.predict`` can replace.

    A data node is accepted as the inputs ``X`` of ``fg.inner``, as the integer labels of ``x[labels]``
    (``fg.index``), as an operand of a sum or product (``beta * x``, ``b[g] * x``), and as any array argument
    of a builder (``observed=``, ``mask=``, a constant ``mean``,
    ``precision``, ``trials``, ``exposure``, ...).  It spans the plates of its leading axes: the ``plates`` of
    ``fg.inner``, the plate the labels run over, the plates of the variable it is observed on, or of the
    variable it parameterises when its leading axes have that variable's plate sizes; ``axes`` maps each
    such axis to its plate (filled in as the node is used).
    """

    __array_ufunc__ = None  # numpy defers to the operators below

    def __init__(self, model: Any, name: str, value: Any) -> None:
        self.model = model
        self.name = name
        self.value = value
        self.axes: dict[int, Plate] = {}  # leading axis -> the plate it runs over
        self.uses: list[Any] = []  # deterministic nodes (inner, sums, products) and variables that read it
        self.columns: Any = None  # a DataFrame's column names, as strings (they name fg.inner's weights)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.value))

    @property
    def plates(self) -> tuple[Plate, ...]:
        return tuple(self.axes[i] for i in sorted(self.axes))

    def bind_axes(self, plates: tuple[Plate, ...], user: str) -> None:
        """Record that the leading axes run over ``plates`` (consistently with earlier uses; ``user`` names the
        use in the error)."""
        for i, p in enumerate(plates):
            old = self.axes.get(i)
            if old is not None and old is not p:
                raise ModelError(f"data {self.name!r}: axis {i} runs over plate {old.name!r} in one use and over "
                                 f"{p.name!r} in {user}")
        self.axes.update(enumerate(plates))

    def __repr__(self) -> str:
        return f"<data {self.name!r} shape={self.shape} plates={[p.name for p in self.plates]}>"

    def _arithmetic(self, other: Any) -> Any:
        """A data node times or plus a random node is an expression (``beta * x``); with anything else
        the result would be a plain array that ``set_data`` could not replace: refused by name."""
        if isinstance(other, Node):
            return self.model._sum(other, self)
        what = f"another data node ({other.name!r})" if isinstance(other, Data) else f"a constant ({other!r})"
        raise ModelError(f"data {self.name!r}: arithmetic between a data node and {what} is not tracked; compute "
                         f"the array in numpy and declare the result with fg.data, or combine {self.name!r} with a "
                         f"random node (beta * {self.name})")

    def _product(self, other: Any) -> Any:
        if isinstance(other, Node):
            return self.model._product(other, self)
        return self._arithmetic(other)

    __add__ = __radd__ = _arithmetic
    __mul__ = __rmul__ = _product

    def __sub__(self, other: Any) -> Any:
        if isinstance(other, Node):
            return self.model._sum(self, self.model._scaled(-1.0, other))
        return self._arithmetic(other)

    def __neg__(self) -> Any:
        raise ModelError(f"data {self.name!r}: -{self.name} is not tracked; declare the negated array with fg.data")

    def __truediv__(self, other: Any) -> Any:
        raise ModelError(f"data {self.name!r}: division is not an expression of the model; compute the array in "
                         "numpy and declare it with fg.data")

    __rtruediv__ = __truediv__

    def __rsub__(self, other: Any) -> Any:
        return self._arithmetic(other)
