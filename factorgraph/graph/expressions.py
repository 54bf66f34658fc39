"""Deterministic expressions (inner products, sums, products, scalings) and gates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical, Gamma, Gaussian, GaussianGamma, MvGaussian
from factorgraph.graph import checks
from factorgraph.graph.context import current_model
from factorgraph.graph.nodes import (
    Data,
    Deterministic,
    Gate,
    Indexed,
    ModelError,
    Node,
    Plate,
    Variable,
    gated_arithmetic_error,
)
from factorgraph.graph.scale_terms import on_sigma
from factors.deterministic import Dot, Inner, Product, Sum
from factors.plating import expand
from factors.polynomial import Polynomial

_LETTERS = "abcdefghijklmnopqrstuvwxyz".replace("d", "").replace("e", "")  # D, E are event letters


def _gaussian_operand(x: Any, what: str) -> Node | np.ndarray:
    if isinstance(x, Deterministic):
        return x
    if isinstance(x, Variable) and getattr(x, "scale_prior", None) and x.family is Gamma:
        return on_sigma(x, what)
    if isinstance(x, Variable | Indexed):
        if x.family is not Gaussian:
            raise ModelError(f"{what}: {x.name!r} is {x.family.__name__}; only scalar Gaussian variables "
                             "and deterministic Gaussian expressions can be added or multiplied")
        return x
    if isinstance(x, Gate):
        raise gated_arithmetic_error(x, what)
    if isinstance(x, Data):
        return x
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
            return _polynomial(model, stem, op, a, b)
    random = model.sorted_plates([*_plates_of(a), *_plates_of(b)])
    data = {r: x for r, x in (("a", a), ("b", b)) if isinstance(x, Data)}
    for d in data.values():
        if d.model is not model:
            raise ModelError(f"{stem}: the data node {d.name!r} belongs to model {d.model.name!r}, not to the "
                             f"active model {model.name!r}")
    a, b = (checks.constant(x.value, f"{stem}: data {x.name!r}") if isinstance(x, Data) else x for x in (a, b))
    a, new_a = _on_plates_by_size(model, a, random, stem)
    b, new_b = _on_plates_by_size(model, b, random, stem)
    plates = model.sorted_plates([*random, *new_a, *new_b])
    dst = tuple(p.index for p in plates)
    src = {"a": _src(a, plates), "b": _src(b, plates)}
    params = {"src": src, "dst": dst, "sizes": tuple(p.size for p in plates)}
    node = Deterministic(model, model.fresh_name(stem), op, {"a": a, "b": b}, plates, params)
    if data:
        params["data"] = {r: _data_operand(d, node, r, new_a if r == "a" else new_b) for r, d in data.items()}
    model.deterministics.append(node)
    return node


def _data_operand(d: Data, node: Deterministic, role: str, new: list[Plate]) -> str:
    """Record that the operand ``role`` of ``node`` is the data node ``d``, so that ``set_data`` and
    ``fg.predict`` can replace it (resizing its plates).  Its axes run over ``new`` (plates found by size)
    and then, numpy-style, the trailing plates of the node; an axis of size 1 on a plate of another size
    (broadcast) is refused: a data operand spans its plates."""
    shape = d.shape
    rest = [p for p in node.plates if p not in new]
    k = len(shape) - len(new)
    axes = [*new, *rest[len(rest) - k:]] if 0 < k <= len(rest) else list(new)
    for s, p in zip(shape, axes, strict=False):
        if s != p.size or len(axes) != len(shape):
            raise ModelError(f"{node.op.name}: data {d.name!r} of shape {shape} broadcasts along plate {p.name!r} "
                             f"(size {p.size}); a data operand must span its plates, one entry per element")
    d.bind_axes(tuple(axes), f"{node.name!r}")
    d.uses.append(node)
    return d.name


def _polynomial(model: Any, stem: str, op: Any, a: Any, b: Any) -> Deterministic:
    """``a op b`` whose operands share variables, written out as a multilinear polynomial of independent
    leaves (factors/polynomial.py): exact under mean field.  A variable that would be squared is refused."""
    plates = model.sorted_plates([*_plates_of(a), *_plates_of(b)])
    dst = tuple(p.index for p in plates)
    leaves: dict[int, Node] = {}

    def const(c: Any, src: tuple[int, ...]) -> dict[frozenset, Any]:
        return {frozenset(): expand(np.asarray(c, float), src, dst, 0)}

    def flat(x: Any, src: tuple[int, ...]) -> dict[frozenset, Any]:
        if not isinstance(x, Node):
            return const(x, src)
        if isinstance(x, Deterministic) and x.op in (Sum, Product):
            pa, pb = (flat(x.parents[r], x.params["src"][r]) for r in ("a", "b"))
            return _combine(x.op, pa, pb, stem, names)
        if isinstance(x, Deterministic) and x.op is Polynomial:
            out: dict[frozenset, Any] = {}
            for c, roles in x.params["monomials"]:
                key = frozenset(_leaf(x.parents[r]) for r in roles)
                out[key] = out.get(key, 0.0) + expand(c, x.params["dst"], dst, 0)
            return out
        return {frozenset([_leaf(x)]): 1.0}

    def _leaf(x: Node) -> int:
        leaves.setdefault(id(x), x)
        return id(x)

    def names(ids: frozenset) -> list[str]:
        return sorted(leaves[i].name for i in ids)

    poly = _combine(op, flat(a, _src(a, plates)), flat(b, _src(b, plates)), stem, names)
    nodes = list(leaves.values())
    for i, x in enumerate(nodes):
        for y in nodes[i + 1:]:
            shared = {v.name for v in _roots(x)} & {v.name for v in _roots(y)}
            if shared:
                raise ModelError(f"{stem}: variable(s) {sorted(shared)} appear on both sides through different "
                                 f"expressions ({x.name!r}, {y.name!r}); a sum of products that share variables is "
                                 "exact only when each shared variable enters itself")
    role = {id(x): f"x{i}" for i, x in enumerate(nodes)}
    monomials = [(c, frozenset(role[i] for i in key)) for key, c in poly.items()]
    sizes = tuple(p.size for p in plates)
    params = {"monomials": monomials, "roles": list(role.values()), "dst": dst, "sizes": sizes, "shape": sizes,
              "src": {role[id(x)]: tuple(p.index for p in x.plates) for x in nodes}}
    node = Deterministic(model, model.fresh_name(stem), Polynomial, {role[id(x)]: x for x in nodes}, plates, params)
    model.deterministics.append(node)
    return node


def _combine(op: Any, pa: dict, pb: dict, stem: str, names: Any) -> dict:
    if op is Sum:
        out = dict(pa)
        for k, c in pb.items():
            out[k] = out.get(k, 0.0) + c
        return out
    out = {}
    for ka, ca in pa.items():
        for kb, cb in pb.items():
            if ka & kb:
                raise ModelError(f"{stem}: {names(ka & kb)} would be multiplied by itself (a square); only sums of "
                                 "products of distinct variables are exact under mean field")
            out[ka | kb] = out.get(ka | kb, 0.0) + ca * cb
    return out


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


def _on_plates_by_size(model: Any, x: Any, plates: tuple[Plate, ...], stem: str) -> tuple[Any, list[Plate]]:
    """A constant operand with more axes than the plates of the random operands (``beta * x``: an unplated
    ``beta`` and one x per row) puts its extra leading axes on the model's plates of those sizes, one plate
    each, not already among ``plates``; a size-1 extra axis is dropped.  Returns the constant with its axes
    in the model's plate order and the plates it added.  No plate, or more than one, of a size: an error
    naming the candidates."""
    extra = np.ndim(x) - len(plates)
    if isinstance(x, Node) or extra <= 0:
        return x, []
    shape = np.shape(x)
    new: list[Plate] = []
    for s in shape[:extra]:
        if s == 1:
            continue
        cands = [p for p in model.plates.values() if p.size == s and p not in plates and p not in new]
        if len(cands) != 1:
            have = [(p.name, p.size) for p in model.plates.values()]
            why = (f"no plate of model {model.name!r} has size {s} (its plates: {have})" if not cands else
                   f"plates {[p.name for p in cands]} all have size {s}, so which one it lies on is ambiguous")
            raise ModelError(f"{stem}: a constant operand of shape {shape} has more axes than the plates "
                             f"{[p.name for p in plates]} of the random operand(s), and {why}; a column x goes on its "
                             "plate explicitly as fg.inner(x[:, None], w, plates=[...]) with a one-dimensional w")
        new.append(cands[0])
    x = x.reshape(tuple(s for s in shape[:extra] if s != 1) + shape[extra:])
    own = [*new, *plates]  # the constant's axes: the new plates, then the random operands' plates
    order = sorted(range(len(own)), key=lambda i: own[i].index)
    return (x.transpose(order) if order != list(range(len(own))) else x), new


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


def _random_vector(x: Any, what: str) -> Variable | Indexed:
    if not isinstance(x, Variable | Indexed):
        raise ModelError(f"{what}: {checks._short(x)} is not a random vector (an fg.mv_gaussian variable); for an "
                         "observed matrix use fg.inner(X, w, plates)")
    if x.family is not MvGaussian:
        raise ModelError(f"{what}: {x.name!r} is {x.family.__name__}; dot products need fg.mv_gaussian vectors")
    return x


def dot(a: Any, b: Any, intercept: bool = False) -> Deterministic:
    """y = aᵀb of two independent random vectors (``fg.mv_gaussian``, same dimension D), plated.

    Under mean field (q(a)q(b)) the moments are exact: E[y] = E[a]ᵀE[b] and E[y²] = tr(E[aaᵀ]E[bbᵀ]).  The
    result is plated over the union of a's and b's plates (``z`` over n and ``w`` over d give y over (n, d):
    y_nd = z_nᵀw_d).  Messages to a are Gaussian, (Σ η₁E[b], Σ η₂E[bbᵀ]) summed over the plates a lacks;
    see factors/deterministic.py.  Both operands latent and at zero mean is a fixed point: start one of them
    away from zero (``fg.infer(..., init={"w": ...})``).

    With ``intercept=True`` b has D + 1 coordinates, the last an intercept: y = b_{1:D}ᵀa + b_{D+1} = bᵀ(a, 1)
    (the mean of Bayesian PCA, x_nd = w_dᵀz_n + μ_d, with w_d and μ_d one joint vector).
    """
    model = current_model("dot")
    a = _random_vector(a, "dot")
    b = _random_vector(b, "dot")
    for x in (a, b):
        if x.model is not model:
            raise ModelError(f"dot: {x.name!r} belongs to model {x.model.name!r}, not to the active model "
                             f"{model.name!r}")
    shared = {v.name for v in _roots(a)} & {v.name for v in _roots(b)}
    if shared:
        raise ModelError(f"dot: {sorted(shared)} appear(s) on both sides; under mean field the operands of a dot "
                         "product must be independent")
    extra = int(checks.flag(intercept, "dot: intercept"))  # b's coordinates beyond a's
    da, db = a.event_shape[0], b.event_shape[0]
    if da is None or db is None:
        if da is None and db is None:
            raise ModelError(f"dot: the dimensions of {a.name!r} and {b.name!r} are unknown; give one of them dim=")
        if da is None:
            a.event_shape = (db - extra,)
        else:
            b.event_shape = (da + extra,)
    elif da + extra != db:
        raise ModelError(f"dot: {a.name!r} has dimension {da} but {b.name!r} has dimension {db}"
                         + (f" (with an intercept it needs {da + 1})" if extra else ""))
    plates = model.sorted_plates([*a.plates, *b.plates])
    params = {"src": {"a": _src(a, plates), "b": _src(b, plates)}, "dst": tuple(p.index for p in plates),
              "sizes": tuple(p.size for p in plates), "intercept": bool(extra)}
    node = Deterministic(model, model.fresh_name("dot"), Dot, {"a": a, "b": b}, plates, params)
    model.deterministics.append(node)
    return node


def inner(X: Any, w: Variable, plates: Sequence[Plate] = (), intercept: bool = False) -> Deterministic:
    """Inner products y = X w of the rows of an observed matrix, or of a random plated vector, with a weight
    vector.

    Parameters
    ----------
    X
        Observed inputs, shape (plate sizes..., D): one row per element of ``plates``; or a random vector Z
        (``fg.mv_gaussian`` plated, e.g. z_n ~ N(0, I) over n, or the states x_t of a state-space model): then
        y = Zᵀw is ``fg.dot(Z, w)``, exact under mean field, with E[(zᵀw)²] = tr(E[zzᵀ]E[wwᵀ]) (``plates`` may
        be omitted or must be Z's plates); ``intercept=True`` appends a constant 1 to Z, so that w's last
        coordinate is an intercept (``fg.dot(Z, w, intercept=True)``).
    w
        An ``mv_gaussian`` (full covariance, event D), a ``gaussian_gamma`` block, or a scalar
        ``gaussian`` plated over a plate of size D (mean field over the components).  Extra plates
        of ``w`` (e.g. one weight vector per class) become plates of the result.
    plates
        The plates that index the rows of X.
    intercept
        Random Z only (for an observed X add a column of ones).
    """
    model = current_model("inner")
    plates = checks.plate_list(plates, model, "inner")
    columns = feature_names(X)
    if isinstance(X, Variable | Indexed | Deterministic):
        if plates and tuple(plates) != tuple(X.plates):
            raise ModelError(f"inner: {X.name!r} is plated over {[p.name for p in X.plates]}, not over "
                             f"{[p.name for p in plates]}")
        return dot(X, w, intercept)
    if intercept is not False:
        raise ModelError("inner: intercept=True is for a random Z; with an observed X add a column of ones to X")
    Xa = checks.constant(X, "inner: X")
    if Xa.ndim != len(plates) + 1:
        raise ModelError(f"inner: X must have one axis per plate {[p.name for p in plates]} plus the "
                         f"feature axis, got shape {Xa.shape}")
    for p, s in zip(plates, Xa.shape, strict=False):
        if s != p.size:
            raise ModelError(f"inner: X has {s} rows along plate {p.name!r}, whose size is {p.size}")
    D = Xa.shape[-1]
    if isinstance(w, Gate):
        raise gated_arithmetic_error(w, "inner")
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
    label_inner(node, columns)
    return node


def label_inner(node: Deterministic, columns: np.ndarray | None) -> None:
    """Name the weights of ``fg.inner(X, w)`` (the plate or event axis the product sums over) by X's columns."""
    w, consumed = node.parents["w"], node.params["consumed"]
    source = w.source if isinstance(w, Indexed) else w
    label_features(node.model, columns, consumed.name if consumed is not None else f"{source.name}_dim_0")


def feature_names(X: Any) -> np.ndarray | None:
    """The column names of a pandas DataFrame X (anything with ``columns`` and ``to_numpy``), as strings; else
    None."""
    cols = getattr(X, "columns", None)
    if cols is None or not callable(getattr(X, "to_numpy", None)):
        return None
    return np.asarray([str(c) for c in cols], dtype=object)


def label_features(model: Any, names: np.ndarray | None, *keys: str) -> None:
    """Name the entries of the axes ``keys`` (a plate's name, or ``"<w>_dim_0"`` for a weight vector's event
    axis) by the columns of X, in ``model.coords``, where summaries and ArviZ read them; keys named before
    keep their names."""
    if names is None:
        return
    for key in keys:
        model.coords.setdefault(key, names)


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
    K = n_categories(selector.source if isinstance(selector, Indexed) else selector)
    if K is None:
        if isinstance(selector, Indexed):
            got = f"{selector.family.__name__} {selector.source.name!r} gathered by labels"
        else:
            got = f"{selector.family.__name__} {selector.name!r}" if isinstance(selector, Variable) else repr(selector)
        raise ModelError(f"{what} needs a Categorical or Bernoulli selector (or one gathered by labels, z[g]), "
                         f"got {got}")
    return K


def gate(source: Variable | Deterministic | np.ndarray, selector: Variable) -> Gate:
    """``source[selector]``: a mixture argument selected by a Categorical (or Bernoulli) variable.

    ``source`` is plated over a plate of size K (the selector's categories; K = 2 for a Bernoulli
    selector, category 0 = False, 1 = True).  The factor that takes the gate is replicated over that
    plate and each replicate is weighted by q(z = k).
    """
    name = getattr(source, "name", "values")
    K = _selector_categories(selector, f"{name!r}[...]")
    z = selector.source if isinstance(selector, Indexed) else selector  # z[g]: a selector shared through labels
    if isinstance(source, Variable | Deterministic):
        if z.category_plate is not None:
            if z.category_plate not in source.plates:
                raise ModelError(f"{source.name!r}[{selector.name!r}]: {source.name!r} is not plated over "
                                 f"{z.name!r}'s category plate {z.category_plate.name!r}")
            return Gate(source, selector, z.category_plate)
        cands = [p for p in source.plates if p.size == K]
        if len(cands) != 1:
            raise ModelError(f"{source.name!r}[{selector.name!r}]: {selector.name!r} has {K} categories, so "
                             f"{source.name!r} needs exactly one plate of size {K}; its plates are "
                             f"{[(p.name, p.size) for p in source.plates]} (pass categories=<plate> to "
                             f"fg.{'bernoulli' if selector.family is Bernoulli else 'categorical'} to say which)")
        z.category_plate = cands[0]  # later gates and fg.select on z select along the same plate
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
    z = selector.source if isinstance(selector, Indexed) else selector
    if z.category_plate is None:
        z.category_plate = z.model.add_plate(f"{z.name}.category", K)
    return Gate(arr, selector, z.category_plate)
