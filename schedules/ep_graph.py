"""What expectation propagation (``fg.EP``) sees of a model: each factor's role and each site's linear form.

A factor is, under EP,

* ``exact``: a conjugate factor with one latent edge, a latent variable itself, every other edge known
  (constants or fully observed data).  As a function of that variable it is exp(η_f·u(x) + c_f), a member of
  the variable's family: its tilted distribution is in the family, so its EP message is the factor itself,
  which is its VMP message (priors, observed Beta–Bernoulli, Dirichlet–Categorical, Gamma–Poisson, a Gaussian
  mean under observed data with known precision).
* ``site``: a factor with an EP rule (``("x", "ep", method)`` in its registry) on a Gaussian edge whose value
  is a linear form d = Σ_t s_t + c of latent Gaussians: s_t = k·x[i] (a scalar Gaussian, possibly indexed or
  scaled), or s_t = x_nᵀw (``fg.inner`` with observed X and a full-covariance weight vector w); the other
  edges known.  A Gaussian factor with known precision is a site on d = out − mean.
* ``gate``: a Gaussian factor whose mean or precision is gated by a Categorical or Bernoulli selector, with
  known precisions: a mixture site (``schedules.ep_gates``).
* ``vmp``: any other factor with a VMP (or NCVMP) rule on each latent edge: it sends its VMP message from the
  current q, pulled back through deterministic expressions and indexed views to the variables as under VMP
  (hybrid EP–VMP; ``Result.notes`` lists these factors).

Anything else is refused naming the factor (``ModelError``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from distributions import Gaussian, MvGaussian
from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, ModelError, Variable
from factors.base import RuleNotFound
from factors.deterministic import Inner, Product, Sum
from factors.plating import expand
from factors.polynomial import Polynomial

SITE_EDGES = ("mean", "x", "logit")  # the Gaussian edge of a factor's EP site rule


@dataclass
class Form:
    """d = Σ_t s_t + offset on a factor's N instances (its plates flattened, row-major).

    ``scalar``: (variable, element index (N,), coefficient (N,)) for s_t = coef·x[index];
    ``vector``: (variable, X (N, D)) for s = Xw.
    """

    offset: np.ndarray
    scalar: list = field(default_factory=list)
    vector: list = field(default_factory=list)

    def add(self, other: Form, sign: float = 1.0) -> Form:
        return Form(self.offset + sign * other.offset,
                    self.scalar + [(v, i, sign * c) for v, i, c in other.scalar],
                    self.vector + [(v, sign * X) for v, X in other.vector])

    def scaled(self, c: np.ndarray) -> Form:
        return Form(self.offset * c, [(v, i, k * c) for v, i, k in self.scalar], [(v, X * c[:, None])
                                                                                 for v, X in self.vector])


@dataclass
class Role:
    """A factor's role under EP (module docstring) and what its update needs."""

    factor: FactorNode
    kind: str  # "exact", "site", "gate", "vmp", "constant"
    edge: str = ""  # the site's Gaussian edge, or the exact factor's latent edge
    form: Form | None = None
    rule: object = None
    targets: tuple = ()  # vmp: the latent edges
    rows: np.ndarray | None = None  # site: the instances whose label is observed (None: all)


def _known(arg) -> bool:
    if isinstance(arg, Gate):
        return False
    if isinstance(arg, Variable):
        return not arg.is_latent
    if isinstance(arg, Indexed | Deterministic):
        return False
    return True


def _check_whole(v: Variable, fname: str) -> None:
    if v.mask is not None and v.is_latent:
        raise ModelError(f"EP: {v.name!r} (used by {fname}) is partly observed; EP takes fully latent or fully "
                         "observed variables")


def element_index(node, fname: str) -> tuple[Variable, np.ndarray]:
    """(variable, flat element index of the variable for each element of ``node``, shaped like the node)."""
    if isinstance(node, Variable):
        _check_whole(node, fname)
        return node, np.arange(int(np.prod(node.shape, dtype=np.int64))).reshape(node.shape)
    src_var, idx = element_index(node.source, fname)
    src = node.source
    axis = src.plates.index(node.along)
    idx = np.take(idx, node.labels, axis=axis)
    order = [node.plate if p is node.along else p for p in src.plates]
    return src_var, np.transpose(idx, [order.index(p) for p in node.plates])


def linear_form(node, fplates: list[int], fshape: tuple[int, ...], fname: str) -> Form:
    """The linear form of a Gaussian ``node`` on the factor's plates ``fplates`` (ModelError if not linear)."""
    n = int(np.prod(fshape, dtype=np.int64))

    def flat(a, src) -> np.ndarray:
        return np.broadcast_to(expand(np.asarray(a, dtype=float), list(src), fplates, 0), fshape).reshape(n)

    if isinstance(node, Variable) and not node.is_latent:
        return Form(flat(node.value, [p.index for p in node.plates]))
    if isinstance(node, Variable | Indexed):
        var, idx = element_index(node, fname)
        if var.family is not Gaussian or var.event_shape:
            raise ModelError(f"EP: {fname} needs scalar Gaussian variables in its linear form, {var.name!r} is "
                             f"{var.family.__name__}")
        if not var.is_latent:
            return Form(flat(np.asarray(var.value, float).reshape(-1)[idx], [p.index for p in node.plates]))
        ix = np.broadcast_to(expand(idx, [p.index for p in node.plates], fplates, 0), fshape).reshape(n)
        return Form(np.zeros(n), [(var, ix.astype(np.int64), np.ones(n))])
    if not isinstance(node, Deterministic):
        return Form(flat(node, list(fplates[len(fplates) - np.ndim(node):]) if np.ndim(node) else []))
    p = node.params
    if node.op is Sum:
        a, b = (_operand(node, r, fplates, fshape, fname) for r in ("a", "b"))
        return a.add(b)
    if node.op is Product:
        ra, rb = (isinstance(node.parents[r], Variable | Deterministic | Indexed) for r in ("a", "b"))
        if ra and rb:
            raise ModelError(f"EP: {fname}: {node.name!r} is a product of two random terms, not a linear form")
        rnd, const = ("a", "b") if ra else ("b", "a")
        c = flat(node.parents[const], p["src"][const])
        return _operand(node, rnd, fplates, fshape, fname).scaled(c)
    if node.op is Polynomial:
        out = Form(np.zeros(n))
        for c, roles in p["monomials"]:
            if len(roles) > 1:
                raise ModelError(f"EP: {fname}: {node.name!r} multiplies random terms, not a linear form")
            cc = flat(c, p["dst"])
            if not roles:
                out = out.add(Form(cc))
            else:
                (r,) = tuple(roles)
                out = out.add(linear_form(node.parents[r], fplates, fshape, fname).scaled(cc))
        return out
    if node.op is Inner:
        return _inner(node, fplates, fshape, fname)
    raise ModelError(f"EP: {fname}: {node.name!r} ({node.op.name}) is not a linear form of Gaussians")


def _operand(node: Deterministic, role: str, fplates, fshape, fname) -> Form:
    x = node.parents[role]
    if isinstance(x, Variable | Deterministic | Indexed):
        return linear_form(x, fplates, fshape, fname)
    n = int(np.prod(fshape, dtype=np.int64))
    src = list(node.params["src"][role])
    return Form(np.broadcast_to(expand(np.asarray(x, dtype=float), src, fplates, 0), fshape).reshape(n).copy())


def _inner(node: Deterministic, fplates, fshape, fname) -> Form:
    p = node.params
    w = node.parents["w"]
    n = int(np.prod(fshape, dtype=np.int64))
    sx, sw, sy = p["subscripts"]
    yp = [q.index for q in node.plates]
    if not isinstance(w, Variable) or not w.is_latent or p.get("rowwise") or sw or p.get("intercept"):
        raise ModelError(f"EP: {fname}: fg.inner({node.name!r}) needs observed X and one latent weight vector "
                         f"(not plated, no intercept)")
    _check_whole(w, fname)
    X = np.einsum(f"{sx}D->{sy}D", np.asarray(p["X"], dtype=float))
    D = X.shape[-1]
    X = np.broadcast_to(expand(X, yp, fplates, 1), fshape + (D,)).reshape(n, D)
    if w.family is MvGaussian:
        return Form(np.zeros(n), [], [(w, np.ascontiguousarray(X))])
    if p["mean_field"] and w.family is Gaussian and len(w.plates) == 1:  # Σ_d x_nd w_d, w mean field
        return Form(np.zeros(n), [(w, np.full(n, d, dtype=np.int64), X[:, d].copy()) for d in range(D)])
    raise ModelError(f"EP: {fname}: fg.inner with weights {w.name!r} ({w.family.__name__}, plates "
                     f"{[q.name for q in w.plates]}) is not supported")


def classify(f: FactorNode) -> Role:
    """The factor's role under EP (module docstring)."""
    ft = f.ftype
    fplates = [p.index for p in f.plates]
    fshape = tuple(p.size for p in f.plates)
    out = f.edges.get("out")
    rows = None
    if isinstance(out, Variable) and out.mask is not None and out.is_latent and ft.name != "Gaussian" and any(
            (e, "ep", f.method) in ft.rules() for e in SITE_EDGES):
        # a site's missing labels: f summed over the label is 1, so those instances drop out
        mask = np.broadcast_to(expand(out.mask, [p.index for p in out.plates], fplates, 0), fshape)
        rows = np.ascontiguousarray(mask).reshape(-1)
    latent = {e: a for e, a in f.edges.items() if not _known(a) and not (rows is not None and e == "out")}
    if ft.name == "Gaussian" and any(isinstance(f.edges.get(e), Gate) for e in ("mean", "precision")):
        return Role(f, "gate")  # a mixture with known precisions: schedules.ep_gates
    for a in latent.values():
        if isinstance(a, Gate):
            raise ModelError(f"EP: {f.name} is gated (a mixture); EP takes gated Gaussian factors only")
    if not latent:
        return Role(f, "constant")
    if len(latent) == 1 and ft.conjugate and f.consumed == {}:
        (edge, arg), = latent.items()
        if isinstance(arg, Variable):
            try:
                rule = ft.get_rule(edge, "vmp", f.method)
                _check_whole(arg, f.name)
                return Role(f, "exact", edge, rule=rule)
            except RuleNotFound:
                pass
    for edge in SITE_EDGES:
        try:
            rule = ft.get_rule(edge, "ep", f.method)
        except (RuleNotFound, ValueError):
            continue
        pair = ("out", "mean") if ft.name == "Gaussian" else (edge,)
        others = [e for e in latent if e not in pair]
        if others:
            break  # e.g. a Gaussian with a latent precision: hybrid below
        form = linear_form(f.edges[pair[0]], fplates, fshape, f.name)
        if len(pair) == 2:
            form = form.add(linear_form(f.edges["mean"], fplates, fshape, f.name), -1.0)
        if len(form.vector) > 1:
            raise ModelError(f"EP: {f.name}: its linear form has more than one weight vector; use one")
        if not form.vector and not form.scalar:
            return Role(f, "constant")
        return Role(f, "site", edge, form, rule, rows=rows)
    if rows is not None:
        raise ModelError(f"EP: {out.name!r} has missing entries, which EP drops only from a site's rows")
    targets = []
    for edge, arg in latent.items():
        try:
            ft.get_rule(edge, "ncvmp", f.method)
        except RuleNotFound as e:
            raise ModelError(f"EP: factor {f.name} has no EP rule and no VMP/NCVMP rule for edge {edge!r}: {e}") \
                from None
        if f.consumed:
            raise ModelError(f"EP: factor {f.name} has no EP rule, and its VMP messages are not taken along a "
                             f"consumed plate ({edge!r})")
        for v in _leaves(arg):
            _check_whole(v, f.name)
        targets.append(edge)
    return Role(f, "vmp", targets=tuple(targets))


def _leaves(node) -> list:
    """The variables (latent or observed) a node reads; a gate inside an expression is refused."""
    if isinstance(node, Variable):
        return [node]
    if isinstance(node, Indexed):
        return _leaves(node.source)
    if isinstance(node, Deterministic):
        out = []
        for p in node.parents.values():
            if isinstance(p, Gate):
                raise ModelError(f"EP: {node.name!r} holds a gate; EP does not take mixtures")
            if isinstance(p, Variable | Deterministic | Indexed):
                out += _leaves(p)
        return out
    return []
