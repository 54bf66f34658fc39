"""Deterministic expressions (inner products, sums, products, scalings) and gates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical, Gaussian, GaussianGamma, MvGaussian
from factors.deterministic import Dot, Inner, Product, Sum

from . import checks
from .model import current_model
from .nodes import Deterministic, Gate, Indexed, ModelError, Node, Plate, Variable

_LETTERS = "abcdefghijklmnopqrstuvwxyz".replace("d", "").replace("e", "")  # D, E are event letters


def _gaussian_operand(x: Any, what: str) -> Node | np.ndarray:
    if isinstance(x, Deterministic):
        return x
    if isinstance(x, Variable | Indexed):
        if x.family is not Gaussian:
            raise ModelError(f"{what}: {x.name!r} is {x.family.__name__}; only scalar Gaussian variables "
                             "and deterministic Gaussian expressions can be added or multiplied")
        return x
    if isinstance(x, Gate):
        raise ModelError(f"{what}: a gated variable (x[z]) can only be an argument of a factor")
    return checks.constant(x, what)


def _binary(op: Any, stem: str, a: Any, b: Any) -> Deterministic:
    model = current_model(f"{stem} of {a!r} and {b!r}")
    a = _gaussian_operand(a, stem)
    b = _gaussian_operand(b, stem)
    for x in (a, b):
        if isinstance(x, Node) and x.model is not model:
            raise ModelError(f"{stem}: {x.name!r} belongs to model {x.model.name!r}, not to the active model "
                             f"{model.name!r}")
    if isinstance(a, Node) and isinstance(b, Node):
        va = {v.name for v in _roots(a)}
        vb = {v.name for v in _roots(b)}
        if va & vb and not _distinct_elements(a, b, va & vb):
            raise ModelError(f"{stem}: variable(s) {sorted(va & vb)} appear on both sides; under mean field "
                             "the operands of a deterministic node must be independent")
    plates = model.sorted_plates([*_plates_of(a), *_plates_of(b)])
    dst = tuple(p.index for p in plates)
    src = {"a": _src(a, plates), "b": _src(b, plates)}
    node = Deterministic(model, model.fresh_name(stem), op, {"a": a, "b": b}, plates,
                         {"src": src, "dst": dst, "sizes": tuple(p.size for p in plates)})
    model.deterministics.append(node)
    return node


def _roots(x: Node) -> list[Variable]:
    return x.stochastic_parents() if isinstance(x, Deterministic | Indexed) else [x]


def _leaves(x: Node) -> list[Node]:
    """The variables and indexed views a deterministic expression is built from."""
    if isinstance(x, Deterministic):
        return [leaf for p in x.parents.values() if isinstance(p, Node) for leaf in _leaves(p)]
    return [x]


def _distinct_elements(a: Node, b: Node, shared: set[str]) -> bool:
    """Whether a variable on both sides appears only through labels that differ in every row
    (``a[i] + a[j]`` with i_n ≠ j_n): then the two operands are different, independent elements."""
    la = [x for x in _leaves(a) if _roots(x)[0].name in shared]
    lb = [x for x in _leaves(b) if _roots(x)[0].name in shared]
    for x in la:
        for y in lb:
            if not (isinstance(x, Indexed) and isinstance(y, Indexed) and x.source is y.source
                    and x.plate is y.plate and x.along is y.along and np.all(x.labels != y.labels)):
                return False
    return True


def _plates_of(x: Any) -> tuple[Plate, ...]:
    return x.plates if isinstance(x, Node) else ()


def _src(x: Any, plates: tuple[Plate, ...]) -> tuple[int, ...]:
    """Plate indices of an operand: a constant is aligned numpy-style to the trailing plates."""
    if isinstance(x, Node):
        return tuple(p.index for p in x.plates)
    nd = np.ndim(x)
    if nd > len(plates):
        raise ModelError(f"constant operand of shape {np.shape(x)} has more axes than the plates "
                         f"{[p.name for p in plates]}")
    tail = plates[len(plates) - nd:] if nd else ()
    for p, s in zip(tail, np.shape(x), strict=True):
        if s not in (1, p.size):
            raise ModelError(f"constant operand of shape {np.shape(x)} does not fit plate {p.name!r} "
                             f"of size {p.size}")
    return tuple(p.index for p in tail)


def add(a: Any, b: Any) -> Deterministic:
    return _binary(Sum, "sum", a, b)


def multiply(a: Any, b: Any) -> Deterministic:
    return _binary(Product, "product", a, b)


def scale(c: Any, a: Any) -> Deterministic:
    return _binary(Product, "scale", c, a)


def inner(X: Any, w: Variable, plates: Sequence[Plate] = ()) -> Deterministic:
    """Inner products y = X w of the rows of an observed matrix with a weight vector.

    Parameters
    ----------
    X
        Observed inputs, shape (plate sizes..., D): one row per element of ``plates``; or a random
        ``mv_gaussian`` vector (its own plates index the rows; ``plates`` must then be empty), giving
        y = Xᵀw of two independent vectors (E[y] = E[X]ᵀE[w], E[y²] = tr(E[XXᵀ]E[wwᵀ])), e.g. the
        observation y_{t,p} = c_pᵀx_t of a state-space model with a random loading matrix.
    w
        An ``mv_gaussian`` (full covariance, event D), a ``gaussian_gamma`` block, or a scalar
        ``gaussian`` plated over a plate of size D (mean field over the components).  Extra plates
        of ``w`` (e.g. one weight vector per class) become plates of the result.
    plates
        The plates that index the rows of X.
    """
    model = current_model("inner")
    if isinstance(X, Variable | Indexed):
        return _dot(model, X, w, plates)
    plates = checks.plate_list(plates, model, "inner")
    Xa = checks.constant(X, "inner: X")
    if Xa.ndim != len(plates) + 1:
        raise ModelError(f"inner: X must have one axis per plate {[p.name for p in plates]} plus the "
                         f"feature axis, got shape {Xa.shape}")
    for p, s in zip(plates, Xa.shape, strict=False):
        if s != p.size:
            raise ModelError(f"inner: X has {s} rows along plate {p.name!r}, whose size is {p.size}")
    D = Xa.shape[-1]
    if not isinstance(w, Variable | Indexed):
        raise ModelError(f"inner: w must be a random variable, got {w!r}")
    if w.model is not model:
        raise ModelError(f"inner: {w.name!r} belongs to model {w.model.name!r}, not to the active model "
                         f"{model.name!r}")
    mean_field = False
    consumed: Plate | None = None
    if w.family in (MvGaussian, GaussianGamma):
        if w.event_shape == (None,):
            w.event_shape = (D,)
        if w.event_shape != (D,):
            raise ModelError(f"inner: X has {D} columns but {w.name!r} has dimension {w.event_shape[0]}")
        wplates = w.plates
    elif w.family is Gaussian:
        cands = [p for p in w.plates if p.size == D and p not in plates]
        if len(cands) != 1:
            raise ModelError(f"inner: scalar Gaussian {w.name!r} needs exactly one plate of size {D} (the "
                             f"columns of X) to sum over; its plates are {[(p.name, p.size) for p in w.plates]}")
        consumed, mean_field = cands[0], True
        wplates = tuple(p for p in w.plates if p is not consumed)
    else:
        raise ModelError(f"inner: {w.name!r} is {w.family.__name__}; it must be a Gaussian vector")
    # w[groups] on the rows' plate: y_n = x_nᵀ w_{g(n)}, row by row
    rowwise = isinstance(w, Indexed) and set(plates) & set(wplates) == {w.plate}
    if set(plates) & set(wplates) and not rowwise:
        raise ModelError(f"inner: {w.name!r} and X share plates {[p.name for p in set(plates) & set(wplates)]}")
    yplates = model.sorted_plates([*plates, *wplates])
    letter = {p.name: _LETTERS[p.index] for p in yplates}
    sx = "".join(letter[p.name] for p in plates)
    sw = "".join(letter[p.name] for p in wplates)
    sy = "".join(letter[p.name] for p in yplates)
    params = {"X": Xa, "subscripts": (sx, sw, sy), "mean_field": mean_field, "consumed": consumed,
              "shape": tuple(p.size for p in yplates), "w_shape": tuple(p.size for p in wplates),
              "x_axes": tuple(i for i, p in enumerate(yplates) if p in plates), "rowwise": rowwise,
              "products": {}}  # XᵀX (and Xᵀy) computed when first needed: factors.data_products
    node = Deterministic(model, model.fresh_name("inner"), Inner, {"w": w}, yplates, params)
    model.deterministics.append(node)
    return node


def _dot(model: Any, a: Any, b: Any, plates: Sequence[Plate]) -> Deterministic:
    """y = aᵀb of two independent random vectors, on the union of their plates."""
    if plates:
        raise ModelError(f"inner: with a random X ({a.name!r}) its own plates index the rows; pass no plates=")
    for x in (a, b):
        if not isinstance(x, Variable | Indexed) or x.family is not MvGaussian:
            raise ModelError(f"inner: {getattr(x, 'name', x)!r} must be an mv_gaussian vector when X is random")
        if x.model is not model:
            raise ModelError(f"inner: {x.name!r} belongs to model {x.model.name!r}, not to the active model "
                             f"{model.name!r}")
    if a.event_shape != b.event_shape:
        raise ModelError(f"inner: {a.name!r} has dimension {a.event_shape[0]} but {b.name!r} has "
                         f"{b.event_shape[0]}")
    if {v.name for v in _roots(a)} & {v.name for v in _roots(b)}:
        raise ModelError(f"inner: {a.name!r} and {b.name!r} must be different variables (mean field)")
    yplates = model.sorted_plates([*a.plates, *(p for p in b.plates if p not in a.plates)])
    dst = tuple(p.index for p in yplates)
    params = {"src": {"a": _src(a, yplates), "b": _src(b, yplates)}, "dst": dst,
              "sizes": tuple(p.size for p in yplates)}
    node = Deterministic(model, model.fresh_name("dot"), Dot, {"a": a, "b": b}, yplates, params)
    model.deterministics.append(node)
    return node


def n_categories(selector: Any) -> int | None:
    """Number of categories of a selector: K of a Categorical, 2 of a Bernoulli (False, True); None
    for anything that cannot select."""
    if isinstance(selector, Variable):
        if selector.family is Categorical:
            return selector.event_shape[0]
        if selector.family is Bernoulli:
            return 2
    return None


def _selector_categories(selector: Any, what: str) -> int:
    K = n_categories(selector)
    if K is None:
        got = f"{selector.family.__name__} {selector.name!r}" if isinstance(selector, Variable) else repr(selector)
        raise ModelError(f"{what} needs a Categorical or Bernoulli selector, got {got}")
    return K


def gate(source: Variable | Deterministic | np.ndarray, selector: Variable) -> Gate:
    """``source[selector]``: a mixture argument selected by a Categorical (or Bernoulli) variable.

    ``source`` is plated over a plate of size K (the selector's categories; K = 2 for a Bernoulli
    selector, category 0 = False, 1 = True).  The factor that takes the gate is replicated over that
    plate and each replicate is weighted by q(z = k).
    """
    name = getattr(source, "name", "values")
    K = _selector_categories(selector, f"{name!r}[...]")
    if isinstance(source, Variable | Deterministic):
        if selector.category_plate is not None:
            if selector.category_plate not in source.plates:
                raise ModelError(f"{source.name!r}[{selector.name!r}]: {source.name!r} is not plated over "
                                 f"{selector.name!r}'s category plate {selector.category_plate.name!r}")
            return Gate(source, selector, selector.category_plate)
        cands = [p for p in source.plates if p.size == K]
        if len(cands) != 1:
            raise ModelError(f"{source.name!r}[{selector.name!r}]: {selector.name!r} has {K} categories, so "
                             f"{source.name!r} needs exactly one plate of size {K}; its plates are "
                             f"{[(p.name, p.size) for p in source.plates]} (pass categories=<plate> to "
                             "fg.categorical to say which)")
        return Gate(source, selector, cands[0])
    raise ModelError("index constant arrays by a Categorical with fg.select(array, z)")


def select(values: Any, selector: Variable) -> Gate:
    """``values[z]`` for a constant array whose first axis runs over the K categories of ``z`` (a
    Categorical, or a Bernoulli with K = 2: ``values[0]`` where z is False, ``values[1]`` where True)."""
    K = _selector_categories(selector, "select")
    arr = checks.constant(values, f"select(values, {selector.name!r})")
    if arr.ndim == 0 or arr.shape[0] != K:
        raise ModelError(f"select: values has {arr.shape[0] if arr.ndim else 0} rows but {selector.name!r} has "
                         f"{K} categories")
    model = selector.model
    if selector.category_plate is None:
        selector.category_plate = model.add_plate(f"{selector.name}.category", K)
    return Gate(arr, selector, selector.category_plate)
