"""Data nodes: ``fg.data("X", array)``, ``model.set_data(X=..., y=...)`` and the bookkeeping behind them.

A data node is a named array that enters the model as the inputs of ``fg.inner``, as the labels of an
indexed view ``x[g]``, or as an array argument of a builder (``observed=``, ``mask=``, a constant
parameter).  Every public builder call is recorded on the model (``model.calls``: variable name → the
function and its arguments, data nodes included), so that ``set_data`` can replace data by re-running the
builders that read them: the new values pass exactly the checks of construction, and everything a builder
derives from its data (the one-hot labels of a categorical, the sufficient statistics XᵀX, Xᵀy of a
normal–gamma regression, ...) is derived again.  The re-run builds a scratch copy of the variable in the
same model; its values and its prior factor's constant arrays are moved onto the original variable and the
scratch nodes removed, so the graph (its nodes, edges and compiled rules) is unchanged.

Plates spanned by data may change size: a data node spans the plates of its leading axes (``Data.axes``),
and a plate's new size is read off the new arrays.  Every data node on a resized plate must be replaced
in the same call, and nothing else may pin the plate's size (constant labels of ``x[idx]``, the constant
X of an ``fg.inner``, a constant array in an expression): otherwise a ``ModelError`` names the node and the
sizes.  A failed call leaves the model as it was.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.arguments import check_call
from factorgraph.graph.context import current_model
from factorgraph.graph.expressions import feature_names, label_inner
from factorgraph.graph.expressions import inner as _inner
from factorgraph.graph.indexing import _labels
from factorgraph.graph.nodes import Data, Deterministic, Gate, ModelError, Node, Plate, Variable
from factorgraph.graph.resizing import check_resizable, indexed, new_sizes, observed_roles

_DEPTH = [0]  # nesting of recorded builder calls: only the outermost (the user's) call is recorded


@dataclass(eq=False)
class Call:
    """A recorded builder call: ``fn(*args, **kwargs)`` with its data nodes in place."""

    fn: Callable[..., Any]
    args: tuple
    kwargs: dict


def data(name: str, value: Any) -> Data:
    """Declare a named data array in the active model.

    Parameters
    ----------
    name
        The node's name (its own namespace: a data node and the variable observed through it may share
        a name, as in ``fg.gaussian("y", ..., observed=fg.data("y", y))``).
    value
        The array: inputs X (use as ``fg.inner(X, w, plates=[n])``), a column in a sum or product
        (``beta * x``), group labels (``a[g]``), observed values (``observed=``), a mask, or a constant
        parameter of a builder.

    Returns
    -------
    Data
        The node; ``model.set_data(name=new)`` replaces its values (possibly with a new size of the plates
        it spans) and ``fg.predict(result, data={name: new})`` predicts at new values.

    Notes
    -----
    The node spans the plates of its leading axes: the ``plates`` of ``fg.inner``, the plates of a sum or
    product it is an operand of (aligned as a constant operand is), the plate labels run over, the plates of
    the variable it is observed on (``observed=`` or ``mask=``), or of the variable it parameterises when its
    leading axes have that variable's plate sizes.  Those plates' sizes are then defined by the data.
    """
    model = current_model(f"data {name!r}")
    if not isinstance(name, str) or not name:
        raise ModelError(f"a data node needs a non-empty string name, got {name!r}")
    if name in model.data:
        raise ModelError(f"the data node {name!r} is declared twice in model {model.name!r}")
    node = Data(model, name, _as_array(value, name))
    node.columns = feature_names(value)
    model.data[name] = node
    return node


def _as_array(value: Any, name: str) -> Any:
    """A data array as given (numbers, booleans or a numpy masked array); strings and objects refused."""
    if isinstance(value, Data | Node | Gate):
        raise ModelError(f"data {name!r} must be an array, got {value!r}")
    if np.ma.isMaskedArray(value):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            raise ModelError(f"data {name!r} must be a regular (not ragged) array, got "
                             f"{checks._short(value)}") from None
    if arr.dtype.kind not in "biuf":
        raise ModelError(f"data {name!r} must hold numbers or booleans, got dtype {arr.dtype} ({checks._short(value)})")
    if arr.size == 0:
        raise ModelError(f"data {name!r} is empty")
    return arr


# ------------------------------------------------------------------------------------ recording uses
def _plain(x: Any, values: dict[str, Any] | None = None) -> Any:
    if isinstance(x, Data):
        return x.value if values is None or x.name not in values else values[x.name]
    return x


def _found(args: tuple, kwargs: dict) -> list[tuple[str | int, Data]]:
    return [(i, a) for i, a in enumerate(args) if isinstance(a, Data)] + [
        (k, a) for k, a in kwargs.items() if isinstance(a, Data)]


def recorded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a public builder: check its arguments (``arguments.check_call``: a keyword of another library is
    named with the one meant), accept data nodes among them and record the call on the model."""

    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def builder(*args: Any, **kwargs: Any) -> Any:
        if _DEPTH[0]:
            return fn(*args, **kwargs)
        check_call(fn, sig, args, kwargs)
        found = _found(args, kwargs)
        if found:
            _same_model(found, fn.__name__)
        _DEPTH[0] += 1
        try:
            with _scratch(current_model(fn.__name__)) if found else nullcontext() as undo:
                out = fn(*(_plain(a) for a in args), **{k: _plain(v) for k, v in kwargs.items()})
                if isinstance(out, Variable):
                    roles = {key if isinstance(key, str) else list(sig.parameters)[key]: d for key, d in found}
                    for role, d in roles.items():
                        if role in ("observed", "mask") or d.shape[:len(out.plates)] == out.shape and out.plates:
                            d.bind_axes(out.plates, f"{out.name!r}")
                if undo is not None:
                    undo.keep()
        finally:
            _DEPTH[0] -= 1
        if not isinstance(out, Variable):
            return out
        for _, d in found:
            if out not in d.uses:
                d.uses.append(out)
        out.model.calls[out.name] = Call(fn, tuple(args), dict(kwargs))
        out.data_roles = {role: d.name for role, d in roles.items()} if found else {}
        return out

    return builder


def _same_model(found: list[tuple[Any, Data]], what: str) -> None:
    model = current_model(what)
    for _, d in found:
        if d.model is not model:
            raise ModelError(f"{what}: the data node {d.name!r} belongs to model {d.model.name!r}, not to the active "
                             f"model {model.name!r}")


@functools.wraps(_inner)
def inner(X: Any, w: Any, plates: Any = (), intercept: bool = False) -> Deterministic:
    if not isinstance(X, Data):
        return _inner(X, w, plates, intercept)
    _same_model([(0, X)], "inner")
    rows = checks.plate_list(plates, X.model, "inner")
    for i, p in enumerate(rows):
        if X.axes.get(i, p) is not p:
            raise ModelError(f"data {X.name!r}: axis {i} runs over plate {X.axes[i].name!r} in one use and over "
                             f"{p.name!r} in fg.inner({X.name!r}, ...)")
    det = _inner(X.value, w, plates, intercept)
    label_inner(det, X.columns)
    X.bind_axes(rows, f"fg.inner({X.name!r}, ...)")
    det.params["data"] = X.name
    X.uses.append(det)
    return det


inner.__doc__ = (_inner.__doc__ or "") + """
    X may be a data node (``fg.data("X", X)``): ``model.set_data(X=...)`` and ``fg.predict(result,
    data={"X": ...})`` then replace it, possibly with a new number of rows.
"""


# ------------------------------------------------------------------------------------ set_data
def set_data(model: Any, values: dict[str, Any], predicted: frozenset[str] = frozenset()) -> None:
    """Replace data by node name (``Model.set_data``).

    ``predicted``: observed variables whose observed values are not needed (``fg.predict`` draws them).  A
    data node read only as their observed values or mask need not be given when its plate is resized; such
    a variable, when it reads new inputs or sits on a resized plate, is rebuilt with all its entries
    missing (unless its observed values are given), so that its other inputs (an exposure, a number of
    trials, ...) are checked and taken from the new data as at construction.
    """
    if not values:
        raise ModelError("set_data: give at least one data node, e.g. model.set_data(X=X_new)")
    new: dict[str, Any] = {}
    for name, value in values.items():
        if name not in model.data:
            raise ModelError(f"set_data: model {model.name!r} has no data node {name!r}; its data nodes are "
                             f"{sorted(model.data)}")
        new[name] = _as_array(value, name)
    sizes = new_sizes(model, new)
    resized = {p: s for p, (s, _) in sizes.items() if s != p.size}
    check_resizable(model, new, sizes, resized, predicted)
    saved = _snapshot(model)
    try:
        for p, s in resized.items():
            object.__setattr__(p, "size", checks.plate_size(s, p.name))
        _update_expressions(model, new, resized)
        _update_labels(model, new)
        for v in list(model.variables.values()):
            call = model.calls.get(v.name)
            uses = set(getattr(v, "data_roles", {}).values()) & set(new)
            on_resized = any(p in resized for p in (*v.plates, *(v.prior.plates if v.prior else ())))
            if call is not None and (uses or on_resized):
                blank = v.name in predicted and not observed_roles(v) & set(new)
                _rerun(model, v, call, new, blank)
        for name, value in new.items():
            model.data[name].value = value
    except BaseException:
        _restore(model, saved)
        raise
    model.data_version += 1


def _update_expressions(model: Any, new: dict[str, Any], resized: dict[Plate, int]) -> None:
    """New inputs of the fg.inner nodes on data, and the sizes of every expression."""
    for d in model.deterministics:
        if d.op.name == "inner":
            name = d.params.get("data")
            p = d.params
            if name in new:
                X = checks.constant(new[name], f"inner: X (data {name!r})")
                if X.ndim != p["X"].ndim or X.shape[-1] != p["X"].shape[-1]:
                    raise ModelError(f"set_data: {name!r} must have shape (rows..., {p['X'].shape[-1]}) like the "
                                     f"inputs of {d.name!r}, got {X.shape}")
                d.params = {**p, "X": X}
            d.params = {**d.params, "shape": tuple(q.size for q in d.plates), "products": {},
                        "w_shape": tuple(q.size for q in _w_plates(d))}
        elif "sizes" in d.params:
            for role, name in d.params.get("data", {}).items():  # a data node as an operand of a sum or product
                if name in new:
                    node = model.data[name]
                    arr = checks.constant(new[name], f"{d.op.name}: data {name!r}")
                    d.parents[role] = arr.transpose(sorted(range(arr.ndim), key=lambda i: node.axes[i].index))
            d.params = {**d.params, "sizes": tuple(q.size for q in d.plates)}


def _update_labels(model: Any, new: dict[str, Any]) -> None:
    """New labels of the indexed views ``x[fg.data("g", labels)]``, checked as at construction."""
    for x in indexed(model):
        name = getattr(x, "data", None)
        if name in new:
            labels = _labels(x.source.name, new[name], x.along.size)
            if labels.size != x.plate.size:
                raise ModelError(f"set_data: {name!r} has {labels.size} labels but plate {x.plate.name!r} has size "
                                 f"{x.plate.size}")
            x.labels = labels
            x.counts = np.bincount(labels, minlength=x.along.size).astype(float)


def _w_plates(d: Deterministic) -> tuple[Plate, ...]:
    w = d.parents["w"]
    consumed = d.params["consumed"]
    return tuple(p for p in w.plates if p is not consumed)


def _rerun(model: Any, v: Variable, call: Call, new: dict[str, Any], blank: bool = False) -> None:
    """Build a scratch copy of ``v`` from its recorded call with the new data, move its data onto ``v``;
    ``blank``: with every observed entry missing (a variable ``fg.predict`` draws)."""
    sig = inspect.signature(call.fn)
    bound = sig.bind(*call.args, **call.kwargs)
    var_kw = [k for k, q in sig.parameters.items() if q.kind is inspect.Parameter.VAR_KEYWORD]
    args = {k: ({kk: _plain(x, new) for kk, x in a.items()} if k in var_kw else _plain(a, new))
            for k, a in bound.arguments.items()}  # a builder's **params (fg.likelihood) may hold data nodes too
    if blank and args.get("observed") is not None:
        obs = np.shape(args["observed"])
        shape = (*(p.size for p in v.plates), *obs[len(v.plates):])
        args["observed"] = np.ma.masked_all(shape)
        args.pop("mask", None)
    first = next(iter(sig.parameters))
    scratch = f"{v.name}.set_data"
    while scratch in model._names:
        scratch += "_"
    args[first] = scratch
    kw = {k: a for k, a in args.items() if sig.parameters[k].kind is not inspect.Parameter.VAR_KEYWORD}
    for k, a in args.items():
        if sig.parameters[k].kind is inspect.Parameter.VAR_KEYWORD:
            kw.update(a)
    with _scratch(model), model:
        try:
            tmp = call.fn(**kw)
        except ModelError as e:
            raise ModelError(str(e).replace(repr(scratch), repr(v.name)).replace(scratch, v.name)) from None
        _transplant(v, tmp)


class _Undo:
    kept = False

    def keep(self) -> None:
        self.kept = True


@contextmanager
def _scratch(model: Any) -> Iterator[_Undo]:
    """Whatever a block adds to the model's containers is removed when it ends (unless it calls ``keep()``)."""
    plates, variables, names = dict(model.plates), dict(model.variables), set(model._names)
    dets, factors = list(model.deterministics), list(model.factors)
    undo = _Undo()
    try:
        yield undo
    finally:
        if not undo.kept:
            model.plates, model.variables, model._names = plates, variables, names
            model.deterministics, model.factors = dets, factors


def _transplant(v: Variable, tmp: Variable) -> None:
    if (tmp.plates != v.plates or tmp.family is not v.family or tmp.event_shape != v.event_shape
            or (tmp.prior is None) != (v.prior is None) or (v.prior and tmp.prior.ftype is not v.prior.ftype)):
        raise ModelError(f"set_data: the new data change the structure of {v.name!r} (its plates, family or "
                         "factor); build a new model instead")
    v.value, v.mask = tmp.value, tmp.mask
    if hasattr(tmp, "coord_mask"):
        v.coord_mask = tmp.coord_mask
    elif hasattr(v, "coord_mask"):
        del v.coord_mask
    if v.prior is None:
        return
    for k, a in tmp.prior.edges.items():
        if isinstance(a, np.ndarray) and k in v.prior.edges:
            v.prior.edges[k] = a
    # the data-derived parameters are the scratch factor's (a key it lacks is dropped: e.g. the rows present
    # when the old data had missing rows); closures and gates stay the original's
    def derived(a: Any) -> bool:
        return not callable(a) and not isinstance(a, Node | Gate)

    params = {k: a for k, a in v.prior.params.items() if not derived(a)}
    params.update({k: a for k, a in tmp.prior.params.items() if derived(a)})
    v.prior.params.clear()
    v.prior.params.update(params)


def _snapshot(model: Any) -> dict[str, Any]:
    return {
        "sizes": {p: p.size for p in model.plates.values()},
        "data": {k: d.value for k, d in model.data.items()},
        "vars": {k: (v.value, v.mask, v.__dict__.get("coord_mask", _NONE)) for k, v in model.variables.items()},
        "factors": [(f, dict(f.edges), dict(f.params)) for f in model.factors],
        "dets": [(d, d.params, dict(d.parents)) for d in model.deterministics],
        "labels": [(x, x.labels, x.counts) for x in indexed(model)],
    }


_NONE = object()


def _restore(model: Any, s: dict[str, Any]) -> None:
    for p, size in s["sizes"].items():
        object.__setattr__(p, "size", size)
    for k, value in s["data"].items():
        model.data[k].value = value
    for k, (value, mask, coords) in s["vars"].items():
        v = model.variables[k]
        v.value, v.mask = value, mask
        if coords is _NONE:
            v.__dict__.pop("coord_mask", None)
        else:
            v.coord_mask = coords
    for f, edges, params in s["factors"]:
        f.edges.clear()
        f.edges.update(edges)
        f.params.clear()
        f.params.update(params)
    for d, params, parents in s["dets"]:
        d.params = params
        d.parents.clear()
        d.parents.update(parents)
    for x, labels, counts in s["labels"]:
        x.labels, x.counts = labels, counts


@contextmanager
def swapped(model: Any, values: dict[str, Any], predicted: frozenset[str] = frozenset(),
            caller: str = "set_data") -> Iterator[None]:
    """Within the block the model holds ``values`` (see ``set_data``, ``predicted`` as there); afterwards
    everything is as before.
    ``caller`` names the user's call in set_data's errors (``fg.predict``'s are "predict: ...")."""
    saved = _snapshot(model)
    version = model.data_version
    try:
        if values:
            try:
                set_data(model, values, predicted)
            except ModelError as e:
                text = str(e)
                if not text.startswith("set_data:"):
                    raise
                raise ModelError(caller + text[len("set_data"):]) from None
        yield
    finally:
        _restore(model, saved)
        model.data_version = version


__all__ = ["Call", "data", "inner", "recorded", "set_data", "swapped"]
