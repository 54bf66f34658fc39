"""One forward pass over a model: draws of every node by name, and the registry of samplers by factor type.

``Forward`` holds S joint draws of the nodes drawn so far, ``out[name]`` of shape ``(S, *plates, *event)``,
and evaluates what a factor reads from its parents on those draws: indexed views ``x[idx]`` (gathered by
their labels), gates ``x[z]`` (each row's component selected by the drawn label z), and the deterministic
nodes (``fg.inner``, dot products, polynomials, sums, products), broadcast to the frame of the child.

``Forward.variable(v)`` draws a variable from its prior factor given its parents' draws, x ~ p(x | pa(x)),
by the sampler registered for the factor's type (``@sampler("Gaussian")``; one module per family in this
package registers its own).  The pointwise log-likelihood (``factorgraph.posterior.loglik``) and
``fg.predict`` use the same pass to evaluate the parents of an observation on posterior draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from distributions import GaussianGamma
from factorgraph.graph import checks
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, ModelError, Node, Plate, Variable
from factors.deterministic import dot_subscripts

Draw = Callable[["Forward", Variable, FactorNode, tuple[Plate, ...], tuple[int, ...]], None]

# factor type name -> the function drawing a variable from a factor of that type:
# draw(s, v, f, frame, full) sets s.out[v.name] to an array (S, *frame sizes, *event), full = (S, *frame sizes)
SAMPLERS: dict[str, Draw] = {}


def sampler(*kinds: str) -> Callable[[Draw], Draw]:
    """Register ``draw`` as the forward sampler of the factor types ``kinds`` (their ``ftype.name``)."""

    def register(draw: Draw) -> Draw:
        for kind in kinds:
            SAMPLERS[kind] = draw
        return draw

    return register


def check_draws(draws: Any, caller: str = "") -> int:
    """The number of draws S, checked to be a positive integer (a Python or numpy integer, or a 0-d integer
    array); ``caller`` (``"predict"``) starts the message."""
    what = f"{caller}: draws" if caller else "draws"
    if isinstance(draws, np.ndarray) and draws.ndim == 0:
        draws = draws[()]
    if isinstance(draws, bool | np.bool_) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ModelError(f"{what} must be a positive integer, got {checks._short(draws)}")
    return int(draws)


def check_seed(seed: Any, caller: str) -> int | None:
    """A seed of the random draws, checked as ``fg.infer`` checks its own: None (fresh entropy) or an integer ≥ 0
    (Python or numpy); ``caller`` starts the message."""
    return checks.seed(seed, f"{caller}: seed")


def expand(arr: np.ndarray, src: tuple[Plate, ...], dst: tuple[Plate, ...] | list[Plate], what: str) -> np.ndarray:
    """``arr`` of shape (S, *src sizes, *event) → (S, *[size if in src else 1 for dst], *event)."""
    src, dst = list(src), list(dst)
    for p in src:
        if p not in dst:
            raise ModelError(f"sampling {what}: plate {p.name!r} of a parent is not among {[q.name for q in dst]}")
    order = sorted(range(len(src)), key=lambda i: dst.index(src[i]))
    n = len(src)
    arr = np.transpose(arr, (0, *[1 + i for i in order], *range(1 + n, arr.ndim)))
    shape = (arr.shape[0], *[p.size if p in src else 1 for p in dst], *arr.shape[1 + n:])
    return arr.reshape(shape)


class Forward:
    """One forward pass: draws of every node by name."""

    def __init__(self, model: Model, draws: int, rng: np.random.Generator) -> None:
        self.model, self.S, self.rng = model, draws, rng
        self.out: dict[str, np.ndarray] = {}
        self.views: dict[int, np.ndarray] = {}
        self.precision: dict[str, np.ndarray] = {}  # scale variables (fg.half_cauchy, ...): σ⁻², as parents use it
        self.hyper: dict[str, dict[str, Any]] = {}  # learned hyperparameters by variable (a fit's result.hyper)

    # ------------------------------------------------------------------ values of parents
    def value(self, node: Node) -> np.ndarray:
        if isinstance(node, Indexed):
            if id(node) not in self.views:
                src = self.value(node.source)
                axis = 1 + list(node.source.plates).index(node.along)
                gathered = np.take(src, node.labels, axis=axis)
                plates = tuple(node.plate if p is node.along else p for p in node.source.plates)
                self.views[id(node)] = expand(gathered, plates, node.plates, node.name)
            return self.views[id(node)]
        if node.name in self.precision:
            return self.precision[node.name]
        if node.name not in self.out:
            if not isinstance(node, Deterministic):
                raise ModelError(f"sampling: {node.name!r} is used before it is drawn")
            self.out[node.name] = self.deterministic(node)
        return self.out[node.name]

    def arg(self, a: Any, frame: tuple[Plate, ...], what: str) -> np.ndarray:
        """An edge's argument as an array that broadcasts against (S, *frame sizes, *event)."""
        if isinstance(a, Gate):
            z = expand(self.value(a.selector), a.selector.plates, frame, what)
            full = (self.S, *(p.size for p in frame))
            z = np.broadcast_to(z, full).astype(np.intp)  # a Bernoulli selector's 0/1 are categories too
            if isinstance(a.source, np.ndarray) and a.layout is None:  # fg.select(values, z): (K, *event)
                return np.take(np.asarray(a.source, float), z, axis=0)
            if isinstance(a.source, np.ndarray):  # values over (K and some of the variable's plates, *event)
                x = expand(np.asarray(a.source, float)[None], a.layout, (*frame, a.plate), what)
            else:
                x = expand(self.value(a.source), a.source.plates, (*frame, a.plate), what)
            ev = x.ndim - 2 - len(frame)
            x = np.broadcast_to(x, full + x.shape[1 + len(frame):])
            idx = z.reshape(full + (1,) + (1,) * ev)
            idx = np.broadcast_to(idx, full + (1,) + x.shape[2 + len(frame):])
            return np.squeeze(np.take_along_axis(x, idx, axis=1 + len(frame)), axis=1 + len(frame))
        if isinstance(a, Node):
            return expand(self.value(a), a.plates, frame, what)
        return np.asarray(a, dtype=float)

    def deterministic(self, d: Deterministic) -> np.ndarray:
        if d.op.name == "inner":
            w = d.parents["w"]
            p = d.params
            wv = self.value(w)
            if isinstance(w, Variable) and w.family is GaussianGamma:
                wv = self.out[w.name]
            consumed = p["consumed"]
            wplates = tuple(w.plates)
            if p["mean_field"]:
                axis = 1 + wplates.index(consumed)
                wv = np.moveaxis(wv, axis, -1)
                wplates = tuple(q for q in wplates if q is not consumed)
            sx, sw, sy = p["subscripts"]
            return np.einsum(f"{sx}D,Z{sw}D->Z{sy}", p["X"], wv)
        full = (self.S, *(q.size for q in d.plates))
        if d.op.name == "dot":  # aᵀb of two random vectors
            sa, sb, sy = dot_subscripts(d.params)
            a = self.value(d.parents["a"])
            if d.params.get("intercept"):  # bᵀ(a, 1)
                a = np.concatenate([a, np.ones(a.shape[:-1] + (1,))], axis=-1)
            return np.einsum(f"Z{sa}D,Z{sb}D->Z{sy}", a, self.value(d.parents["b"]))
        if d.op.name == "polynomial":  # Σ_m c_m Π_{v∈m} v
            leaf = {r: self.arg(x, d.plates, d.name) for r, x in d.parents.items()}
            y = np.zeros(full)
            for c, roles in d.params["monomials"]:
                term = np.asarray(c, dtype=float)
                for r in roles:
                    term = term * leaf[r]
                y = y + term
            return y
        a = self.arg(d.parents["a"], d.plates, d.name)
        b = self.arg(d.parents["b"], d.plates, d.name)
        if d.op.name == "sum":
            return np.broadcast_to(a + b, full).copy()
        if d.op.name == "product":
            return np.broadcast_to(a * b, full).copy()
        raise ModelError(f"sampling: no forward evaluation for the deterministic operation {d.op.name!r} of {d.name!r}")

    # ------------------------------------------------------------------ draws of one variable
    def variable(self, v: Variable) -> None:
        f = v.prior
        if f is None:
            raise ModelError(f"sampling: {v.name!r} has no prior factor")
        kind = f.ftype.name
        draw = SAMPLERS.get(kind)
        if draw is None:
            raise ModelError(f"sampling: no forward sampler for {kind} (variable {v.name!r}); samplers exist for "
                             f"{sorted(SAMPLERS)}")
        frame = tuple(v.plates)
        full = (self.S, *(p.size for p in frame))
        draw(self, v, f, frame, full)

    def put(self, v: Variable, x: np.ndarray, full: tuple[int, ...]) -> None:
        self.out[v.name] = np.broadcast_to(x, full + x.shape[len(full):] if x.ndim > len(full) else full).copy()


# ---------------------------------------------------------------------- what several families read
def param(s: Forward, v: Variable, f: FactorNode, key: str, frame: tuple[Plate, ...]) -> np.ndarray:
    """A constant parameter, or constants selected per draw by ``fg.select(values, z)``."""
    x = f.params[key]
    return s.arg(x, frame, v.name) if isinstance(x, Gate) else np.asarray(x, float)


def softmax_logits(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], edge: str) -> np.ndarray:
    """The logits x of a softmax factor at each draw, (S, *frame sizes, K): the class axis (the consumed plate)
    last; class probabilities p_k = exp(x_k) / Σ_j exp(x_j)."""
    over = f.consumed[edge]
    x = s.arg(f.edges[edge], (*frame, over), v.name)  # class axis last
    return x


__all__ = ["SAMPLERS", "Forward", "check_draws", "check_seed", "expand", "param", "sampler", "softmax_logits"]
