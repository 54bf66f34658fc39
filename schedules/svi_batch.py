"""The pieces of stochastic variational inference that know the model's structure.

``data_layout`` finds the data plate and splits the latent variables into globals and locals, checking
that the model fits SVI's pattern; ``batch_model`` builds the model restricted to some rows of the data
plate (a copy with the plate resized and the row arrays replaced); ``local_step`` is the minibatch step,
a function of (current global posteriors, one batch model) only: it fits the batch's local posteriors, steps
each global toward its intermediate natural parameters λ̂ (``intermediate``) and returns the new global
posteriors and the rescaled bound.  ``check_batch`` validates a streamed batch.  ``schedules.svi`` drives
them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distributions import Categorical
from factorgraph.graph import checks
from factorgraph.graph.expressions import _LETTERS
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Plate, Variable
from factors.onehot import OneHot
from factors.plating import weighted_total

from .algorithms import VMP
from .compile import compile_model
from .engine import Engine
from .errors import InferenceError
from .updates import _summary


@dataclass
class Layout:
    """Where the rows of the data plate live in a model.

    ``arrays`` maps a batch key to (the array, its row axis): an observed variable's name; an ``fg.inner``
    expression's name (``"X"`` its alias when there is one inner product); the labels of an indexed view
    ``x[labels]`` on the data plate (by the view's name, or the labels' data node's; alias ``"x[<plate>]"``);
    a row constant of a sum or product (by its data node's name or ``"<expression>.<operand>"``).
    ``aliases`` maps the names users write to those keys; ``links`` lists the further copies of an array
    that one batch key replaces."""

    plate: Plate
    globals: list[Variable]
    locals: list[Variable]
    local_factors: set[str]
    arrays: dict[str, tuple[np.ndarray, int]]
    aliases: dict[str, str]
    links: dict[str, list[np.ndarray]] = field(default_factory=dict)  # more arrays one batch key replaces


def _plate_axis(node: Any, plate: Plate) -> int | None:
    return node.plates.index(plate) if plate in node.plates else None


def data_layout(model: Model, plate: str | None = None) -> Layout:
    """The data plate (given, or detected), the global and local latent variables and the row arrays.

    Detection: among the plates every observed array is on, the one carrying the most per-row latent
    variables (on the plate and on no plate the data lack: z_n and θ_d, not μ over [k, d]) if it is
    also the largest; when the two criteria pick different plates, a ModelError asks for ``plate=``.

    Raises ``ModelError`` when the model does not fit SVI's pattern."""
    observed = [v for v in model.variables.values() if v.mask is not None and not v.is_latent]
    latent = [v for v in model.variables.values() if v.is_latent]
    if not observed:
        raise ModelError(f"SVI: model {model.name!r} has no observed variable, so no data plate to subsample")
    if plate is not None:
        if plate not in model.plates:
            raise ModelError(f"SVI: plate={plate!r} is not a plate of model {model.name!r}; its plates are "
                             f"{sorted(model.plates)}")
        P = model.plates[plate]
    else:
        cands = set.intersection(*(set(v.plates) for v in observed if v.value.size > 1) or [set()])
        if not cands:
            where = ", ".join(f"{v.name!r} on {[p.name for p in v.plates]}" for v in observed)
            raise ModelError(f"SVI: the observed variables of model {model.name!r} share no plate ({where}): data "
                             "and local variables on two plates do not fit SVI's one-data-plate pattern (pass "
                             "plate= if the data off that plate are fixed)")
        # per-row latent variables: on the plate, with no plate the data lack (z_n, θ_d; not μ over [k, d])
        def rows(p: Plate) -> int:
            return sum(p in v.plates and any(set(v.plates) <= set(o.plates) for o in observed) for v in latent)

        P = max(cands, key=lambda p: (rows(p), p.size, -p.index))
        big = max(cands, key=lambda p: (p.size, rows(p), -p.index))
        if big is not P:
            raise ModelError(f"SVI: the data plate of model {model.name!r} is ambiguous: {P.name!r} carries more "
                             f"per-row latent variables ({rows(P)} against {rows(big)}) but {big.name!r} is larger "
                             f"({big.size} against {P.size}); pass fg.SVI(plate=...)")
    if not any(P in v.plates for v in observed):
        raise ModelError(f"SVI: no observed variable is on the data plate {P.name!r}")
    locals_ = [v for v in latent if P in v.plates]
    globals_ = [v for v in latent if P not in v.plates]
    if not globals_:
        raise ModelError(f"SVI: model {model.name!r} has no global latent variable (every latent variable is on "
                         f"the data plate {P.name!r}): there is nothing for stochastic steps to learn")
    # data on a second plate with latent variables of its own: those would be neither global nor local
    for v in observed:
        if P in v.plates:
            continue
        for g in globals_:
            shared = [p.name for p in set(v.plates) & set(g.plates)]
            if shared and v.value.size > 1:
                raise ModelError(f"SVI: observed {v.name!r} is not on the data plate {P.name!r} but shares plates "
                                 f"{shared} with latent {g.name!r}: local variables on two plates (data on "
                                 f"{shared} and on {P.name!r}) do not fit SVI's one-data-plate pattern; pass plate= "
                                 "or restructure the model")
    local_factors = set()
    for f in model.factors:
        if P in f.plates:
            local_factors.add(f.name)
        if f.ftype.structured is not None and P in f.plates:
            raise ModelError(f"SVI: factor {f.name!r} ({f.ftype.name}) couples the rows of the data plate "
                             f"{P.name!r} (a chain): rows are not conditionally independent given the globals")
    # globals must be conjugate-exponential: every factor sending them messages has a conjugate VMP rule
    for g in globals_:
        for f in model.factors:
            touches = any((a.source if isinstance(a, Gate) else a) is g or _feeds(a, g) for a in f.edges.values())
            if touches and not f.ftype.conjugate:
                raise ModelError(f"SVI: global variable {g.name!r} is not conjugate-exponential: factor {f.name!r} "
                                 f"({f.ftype.name}, method {f.method!r}) is non-conjugate; SVI's step needs every "
                                 "message to a global variable to be conjugate")
    arrays: dict[str, tuple[np.ndarray, int]] = {}
    links: dict[str, list[np.ndarray]] = {}
    for v in model.variables.values():
        if v.mask is not None and P in v.plates:
            arrays[v.name] = (v.value, _plate_axis(v, P))
    for d in model.deterministics:
        if d.op.name == "inner" and P in d.plates:
            sx = d.params["subscripts"][0]
            letter = _LETTERS[P.index]
            if letter in sx:
                arrays[d.name] = (d.params["X"], sx.index(letter))
    for key, a, axis in row_constants(model, P):
        if key in arrays:  # one data node in several expressions: one batch key replaces each copy
            links.setdefault(key, []).append(a)
        else:
            arrays[key] = (a, axis)
    for v in model.variables.values():
        if v.mask is not None and v.is_latent and P in v.plates:
            raise ModelError(f"SVI: {v.name!r} is partly observed on the data plate {P.name!r}; SVI needs the "
                             "data-plate variables fully observed or fully latent")
    views_by_data: set[str] = set()
    for x in indexed_views(model):
        if x.plate is P:  # x[labels] gathered onto the data plate: the labels are row data
            key = getattr(x, "data", None)  # labels from fg.data("g", ...): one batch key "g" for every view
            if key is None or (key in arrays and key not in views_by_data):
                arrays[x.name] = (x.labels, 0)
            elif key in arrays:
                links.setdefault(key, []).append(x.labels)
            else:
                arrays[key] = (x.labels, 0)
                views_by_data.add(key)
        elif P in x.plates:
            raise ModelError(f"SVI: indexed view {x.name!r} is gathered along {x.along.name!r} onto {x.plate.name!r} "
                             f"under the data plate {P.name!r}; SVI can only subsample labels on the data plate")
    aliases = {}
    inners = [d.name for d in model.deterministics if d.name in arrays]
    if len(inners) == 1:
        aliases["X"] = inners[0]
    views = [x for x in indexed_views(model) if x.name in arrays]
    for x in views:  # "mu[n]" for the labels of mu[labels] on plate n (when that names one view)
        short = f"{x.source.name}[{P.name}]"
        if sum(f"{y.source.name}[{P.name}]" == short for y in views) == 1 and short not in arrays:
            aliases[short] = x.name
    _check_others(model, P)
    return Layout(P, globals_, locals_, local_factors, arrays, aliases, links)


def row_constants(model: Model, P: Plate) -> list[tuple[str, np.ndarray, int]]:
    """The constants given per row of the data plate inside sums and products (the x of ``b[g] * x``), keyed by
    their data node's name (``b[g] * fg.data("x", x)``: a streamed batch gives ``"x"``) or else by
    ``"<expression>.<operand>"``, with their row axis; constants broadcast along the rows are not row data."""
    out = []
    for d in model.deterministics:
        if d.op.name not in ("sum", "product") or P not in d.plates:
            continue
        for role, a in d.parents.items():
            src = d.params["src"][role]
            if isinstance(a, np.ndarray) and P.index in src:
                axis = a.ndim - len(src) + src.index(P.index)
                if a.shape[axis] > 1:
                    out.append((d.params.get("data", {}).get(role) or f"{d.name}.{role}", a, axis))
    return out


def indexed_views(model: Model) -> list[Indexed]:
    """Every ``x[labels]`` view the model's factors and expressions use."""
    out: dict[int, Indexed] = {}
    for node in [*(a for f in model.factors for a in f.edges.values()),
                 *(p for d in model.deterministics for p in d.parents.values())]:
        node = node.source if isinstance(node, Gate) else node
        if isinstance(node, Indexed):
            out[id(node)] = node
    return list(out.values())


def _feeds(arg: Any, g: Variable) -> bool:
    """Whether a factor argument is a deterministic/indexed expression of ``g``."""
    node = arg.source if isinstance(arg, Gate) else arg
    if isinstance(node, Deterministic | Indexed):
        return any(p is g for p in node.stochastic_parents())
    return False


def _check_others(model: Model, P: Plate) -> None:
    for f in model.factors:
        for e, a in f.edges.items():
            if isinstance(a, np.ndarray) and P in f.plates and a.ndim and a.size > 1:
                raise ModelError(f"SVI: factor {f.name!r} has a constant array on its edge {e!r} that may vary over "
                                 f"the data plate {P.name!r}; pass it as observed data instead")
    for d in model.deterministics:  # (sums' and products' row constants are row data: ``row_constants``)
        if P in d.plates and d.op.name == "polynomial":
            src = d.params["dst"]
            if P.index in src and any(np.shape(c)[src.index(P.index)] > 1 for c, _ in d.params["monomials"]
                                      if np.ndim(c) == len(src)):
                raise ModelError(f"SVI: expression {d.name!r} (a polynomial: a variable in two of its terms) has "
                                 f"coefficients that vary over the data plate {P.name!r}; SVI cannot subsample "
                                 "them: write each variable once (a[g] * (1 + x), not a[g] + a[g] * x)")


def batch_arrays(layout: Layout, rows: np.ndarray) -> dict[str, np.ndarray]:
    """The row arrays of in-memory data restricted to ``rows`` of the data plate."""
    return {k: np.asarray(OneHot(np.take(a.labels, rows, axis=ax), a.K) if isinstance(a, OneHot) else
                          np.take(a, rows, axis=ax))  # dask: reads the rows; labels: only the batch's rows formed
            for k, (a, ax) in layout.arrays.items()}


def user_keys(layout: Layout) -> dict[str, str]:
    """Layout key → the key a user writes in a batch: its alias where it has one (``"X"`` for ``"inner_0"``)."""
    back = {v: k for k, v in layout.aliases.items()}
    return {k: back.get(k, k) for k in layout.arrays}


def check_batch(model: Model, layout: Layout, batch: Any, index: int = 0, n_data: int | None = None
                ) -> tuple[dict[str, np.ndarray], int]:
    """Validate a streamed batch (a dict of row arrays); returns it keyed by layout key and its size.

    Values come as the model was given them: class labels 0..K−1 for a Categorical (stored one-hot),
    booleans or 0/1 for a Bernoulli, integer labels for an indexed view ``x[labels]``.  Messages name the
    batch by its place in the stream (``index``, from 0) and each array by the key the user gave it; a batch
    with more rows than ``n_data`` (the N of the rescaling N/|B|) is refused."""
    shown = user_keys(layout)
    where = f"SVI: batch {index} of the stream (counted from 0)"
    if not isinstance(batch, dict):
        raise ModelError(f"{where} must be a dict of row arrays keyed by {sorted(shown.values())}, got "
                         f"{type(batch).__name__}")
    out, given = {}, {}
    for k, a in batch.items():
        key = layout.aliases.get(k, k)
        if key not in layout.arrays:
            raise ModelError(f"{where}: key {k!r} is not a row array of the data plate {layout.plate.name!r}; the "
                             f"keys are {sorted(shown.values())}")
        if key in out:
            raise ModelError(f"{where} gives {shown[key]!r} twice (as {given[key]!r} and {k!r})")
        out[key], given[key] = _batch_value(model, layout, key, a, f"{where}: {k!r}"), k
    missing = set(layout.arrays) - set(out)
    if missing:
        raise ModelError(f"{where} lacks {sorted(shown[k] for k in missing)}")
    rows = {}
    for k, a in out.items():
        ref, ax = layout.arrays[k]
        shape = list(ref.shape)
        shape[ax] = a.shape[ax] if a.ndim == ref.ndim else -1
        if a.ndim != ref.ndim or tuple(shape) != a.shape:
            want = [str(n) for n in ref.shape]
            want[ax] = "rows"
            want_text = f"({', '.join(want)}{',' * (len(want) == 1)})"
            raise ModelError(f"{where}: {given[k]!r} has shape {a.shape}; the model's {given[k]!r} has shape "
                             f"{ref.shape}, so a batch's must be {want_text}: any number of rows on axis {ax} (the "
                             f"data plate {layout.plate.name!r}), the other axes as the model's")
        if not np.all(np.isfinite(a)):
            raise ModelError(f"{where}: {given[k]!r} has non-finite values (SVI's batches cannot have missing "
                             "entries)")
        rows[given[k]] = a.shape[ax]
    sizes = set(rows.values())
    if len(sizes) != 1:
        raise ModelError(f"{where}: its arrays disagree on the number of rows: " +
                         ", ".join(f"{k!r} has {n}" for k, n in rows.items()))
    B = sizes.pop()
    if B == 0:
        raise ModelError(f"{where} has no rows ({', '.join(repr(k) for k in rows)} are empty)")
    if n_data is not None and B > n_data:
        raise ModelError(f"{where} has {B} rows, more than n_data={n_data}, the number of rows N the batches are "
                         "drawn from (the rescaling N/|B| would be below 1); raise n_data")
    return out, B


def _batch_value(model: Model, layout: Layout, key: str, a: Any, name: str) -> np.ndarray:
    ref, ax = layout.arrays[key]
    v = model.variables.get(key)
    if v is None and ref.dtype.kind in "iu":  # labels of an indexed view (by its name or its labels' data node)
        x = next(x for x in indexed_views(model) if key in (x.name, getattr(x, "data", None)))
        lab = np.asarray(a)
        if lab.ndim != 1 or lab.dtype.kind not in "iu" or np.any(lab < 0) or np.any(lab >= x.along.size):
            raise ModelError(f"{name} must be a 1-d array of integer labels in [0, {x.along.size}), got "
                             f"{checks._short(a)}")
        return lab.astype(np.int64)
    if v is not None and v.family is Categorical:
        arr = np.asarray(a)
        if arr.ndim == ref.ndim - 1:  # class labels, stored one-hot
            K = ref.shape[-1]
            try:
                lab, _ = checks.integer_labels(arr, None, arr.shape, K, key)
            except ModelError as e:
                raise ModelError(f"{name.rsplit(':', 1)[0]}: {e}") from None
            return np.eye(K)[lab]
    a = checks.bool_as_float(a)
    arr, _ = checks.as_float_array(a, name)
    return arr


def batch_model(model: Model, layout: Layout, arrays: dict[str, np.ndarray], size: int) -> Model:
    """A copy of ``model`` with the data plate resized to ``size`` and its row arrays replaced."""
    P = layout.plate
    memo: dict[int, Any] = {id(P): Plate(P.name, size, P.index)}
    for f in model.factors:
        memo[id(f.ftype)] = f.ftype  # factor types and their rule tables are shared, not copied
    for d in model.deterministics:
        memo[id(d.op)] = d.op
        if "products" in d.params:
            memo[id(d.params["products"])] = {}
    for key, a in arrays.items():
        ref = layout.arrays[key][0]
        memo[id(ref)] = a
        for other in layout.links.get(key, ()):
            memo[id(other)] = a
        v = model.variables.get(key)
        if v is not None:
            memo[id(v.mask)] = np.ones(a.shape[:len(v.plates)], dtype=bool)
    out = copy.deepcopy(model, memo)
    for x in indexed_views(out):
        if x.plate.name == P.name:  # rows per label, of the batch
            if np.any(x.labels < 0) or np.any(x.labels >= x.along.size):
                raise ModelError(f"SVI: labels of {x.name!r} must lie in [0, {x.along.size})")
            x.labels = np.asarray(x.labels, dtype=np.int64)
            x.counts = np.bincount(x.labels, minlength=x.along.size).astype(float)
    for d in out.deterministics:
        if "shape" in d.params:  # cached plate sizes of an inner product
            d.params["shape"] = tuple(p.size for p in d.plates)
        if "sizes" in d.params:  # and of a sum or product
            d.params["sizes"] = tuple(p.size for p in d.plates)
    return out


def local_step(model: Model, layout: Layout, q_globals: dict[str, Any], scale: float, rho: float, local_iter: int,
               local_tol: float, rng: np.random.Generator, engine: Engine | None = None
               ) -> tuple[dict[str, Any], float, Engine]:
    """One minibatch step: local coordinate ascent given the globals, then the step of the globals.

    ``model`` is the batch's model (``batch_model``); ``q_globals`` the current global posteriors (natural
    parameters λ).  The batch's local posteriors are fitted by VMP sweeps over the local variables with the
    globals held; then each global in schedule order (element by element over a mean-field plate) moves to
    λ ← (1 − ρ)λ + ρλ̂ (``intermediate``), seeing the globals already stepped: with ρ = 1 and the whole data
    as the batch this is exactly a VMP sweep.  Returns the new global posteriors, the rescaled bound at
    (the old globals, the batch's local optimum) and the engine.
    """
    if engine is None:
        c = compile_model(model, VMP())
        eng = Engine(c)
        eng.initialise({}, rng)
    else:  # an engine already set up on this batch model (the starting sweeps)
        eng, c = engine, engine.c
    for g in layout.globals:
        eng.set_posterior(model.variables[g.name], q_globals[g.name])
    names = {v.name for v in layout.locals}
    for _ in range(local_iter):
        eng.max_change = 0.0
        for v in c.order:
            if v.name in names:
                eng.update(v)
        if eng.max_change <= local_tol:
            break
    bound = rescaled_bound(eng, layout, scale)
    glob = {g.name for g in layout.globals}
    for v in c.order:
        if v.name not in glob:
            continue
        plate = c.sequential.get(v.name)
        if plate is None:
            eng.set_posterior(v, step(v, eng.q[v.name], intermediate(eng, layout, v, scale), rho))
            continue
        axis = [p.index for p in v.plates].index(plate.index)
        for j in range(plate.size):  # a mean-field vector: its elements are coupled, step them in turn
            lam = intermediate(eng, layout, v, scale)
            cur = eng.q[v.name].natural
            idx = (slice(None),) * axis + (j,)
            mixed = []
            for a, b in zip(cur, lam, strict=True):
                a = np.array(np.broadcast_to(a, b.shape))
                a[idx] = (1.0 - rho) * a[idx] + rho * b[idx]
                mixed.append(a)
            eng.set_posterior(v, step(v, eng.q[v.name], tuple(mixed), 1.0))
    return {g: eng.q[g] for g in glob}, bound, eng


def intermediate(eng: Engine, layout: Layout, v: Variable, scale: float) -> tuple:
    """λ̂ of global ``v``: Σ_{f global} m_f + scale · Σ_{f on the data plate} m_f, from the engine's own
    messages (factor edges, expressions' pull-backs and gates' selector messages) at its current state."""
    c = eng.c
    total = [z.copy() for z in v.family._zero_natural(v.shape, v.event_shape)]
    for cons in c.consumers.get(id(v), []):
        s = scale if _is_local(cons, layout, c) else 1.0
        for i, a in enumerate(eng.consumer_message(cons)):
            total[i] = total[i] + s * a
    for f in c.selector_factors.get(id(v), []):
        s = scale if f.name in layout.local_factors else 1.0
        total[0] = total[0] + s * eng.selector_message(f)[0]
    return tuple(total)


def step(v: Variable, q_old: Any, lam_hat: tuple, rho: float) -> Any:
    """λ ← (1 − ρ)λ + ρλ̂ as a posterior object (a convex combination of proper parameters is proper)."""
    nat = tuple((1.0 - rho) * a + rho * b for a, b in zip(q_old.natural, lam_hat, strict=True))
    q = v.family.from_natural(*nat)
    if not np.all(np.asarray(q.is_proper())):
        raise InferenceError(f"SVI: the step gave an improper posterior for {v.name!r} (natural parameters "
                             f"{_summary(nat)}); check its prior")
    return q


def _is_local(cons: Any, layout: Layout, c: Any) -> bool:
    """Whether a consumer's message sums terms of the data plate's rows: a factor on the plate, or an
    expression on it or feeding (through expressions off the plate, like a·b in a·b + c_n) only such."""
    if cons.factor is not None:
        return cons.factor.name in layout.local_factors
    node = cons.det if cons.det is not None else cons.index
    if any(p.name == layout.plate.name for p in node.plates):
        return True
    kinds = {_is_local(k, layout, c) for k in c.consumers.get(id(node), [])}
    if len(kinds) > 1:
        raise ModelError(f"SVI: expression {node.name!r} feeds both factors on the data plate {layout.plate.name!r} "
                         "and factors off it; its messages cannot be rescaled by N/|B| as one")
    return kinds == {True}


def rescaled_bound(eng: Engine, layout: Layout, scale: float) -> float:
    """The ELBO with the local terms (factors and entropies on the data plate) multiplied by ``scale``."""
    total = 0.0
    for f in eng.c.factors:
        s = scale if f.name in layout.local_factors else 1.0
        total += s * weighted_total(eng.factor_evidence(f), eng.instance_weights(f), f.plates, f.sizes)
    names = {v.name for v in layout.locals}
    for v in eng.c.latent:
        ent = float(np.sum(np.broadcast_to(eng.q[v.name].entropy(), v.shape)))
        total += (scale if v.name in names else 1.0) * ent
    return total
