"""Any likelihood from its log density: ``fg.likelihood`` (observed data) and ``fg.potential`` (a free term).

The factor (``factors.user_likelihood``) takes E_q[log f] by Gauss–Hermite quadrature over the Gaussian
arguments and sends NCVMP gradient messages; run the model with ``fg.NCVMP`` (the default picks it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distributions import Gamma, Gaussian
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _finish, _var_plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import Data, Deterministic, Gate, Indexed, ModelError, Node, Plate, Variable
from factors.deterministic import Dot, Product, Sum
from factors.plating import expand
from factors.polynomial import Polynomial
from factors.user_likelihood import MAX_ARGS, user_params, user_type
from factors.user_shared import USER_LIKELIHOOD_SHARED

_RESERVED = ("y",)


def gaussian_under_q(x: Node) -> bool:
    """Whether an expression is Gaussian under the mean-field q: affine in its variables (a product or dot of
    two random nodes, or a polynomial with such a monomial, is not)."""
    if not isinstance(x, Deterministic):
        return True
    random = [a for a in x.parents.values() if isinstance(a, Node)]
    if x.op in (Product, Dot) and len(random) > 1:
        return False
    if x.op is Polynomial and any(len(roles) > 1 for _, roles in x.params["monomials"]):
        return False
    return all(gaussian_under_q(a) for a in random)


def _roots(x: Node) -> set[str]:
    return {v.name for v in (x.stochastic_parents() if isinstance(x, Deterministic | Indexed) else [x])}


def _positive(model: Any, name: str, key: str, x: Variable | Indexed) -> Node:
    """A Gamma variable (or an indexed view of one) as a positive parameter; scales are refused."""
    root = x.source if isinstance(x, Indexed) else x
    if root.model is not model:
        raise ModelError(f"{name!r}: {key} {root.name!r} belongs to another model")
    if getattr(root, "scale_prior", None) or root.lower is not None or root.base is not None:
        raise ModelError(f"{name!r}: parameter {key!r} is the scale variable {root.name!r} (fg.half_cauchy, "
                         "fg.half_normal, ...), whose posterior is not a Gamma; a user log density takes plain "
                         "Gamma variables (fg.gamma) as positive parameters, or put a Gaussian on the log scale and "
                         "map it through np.exp inside the log density")
    return x


def _split(model: Any, name: str, params: dict[str, Any]) -> tuple[dict[str, Node], dict[str, Node],
                                                                   dict[str, np.ndarray]]:
    """The parameters sorted into Gaussian nodes, Gamma nodes and constants, each checked."""
    gaussian: dict[str, Node] = {}
    positive: dict[str, Node] = {}
    consts: dict[str, np.ndarray] = {}
    for key, x in params.items():
        if key in _RESERVED:
            raise ModelError(f"{name!r}: {key!r} is the observed value's name in the log density; give the data "
                             f"as observed=... and name the parameter otherwise")
        if isinstance(x, Gate):
            raise ModelError(f"{name!r}: parameter {key!r} is a gate ({x!r}); gated (mixture) parameters are not "
                             "supported in a user log density")
        if isinstance(x, Variable | Indexed) and x.family is Gamma:
            positive[key] = _positive(model, name, key, x)
        elif isinstance(x, Variable | Indexed) and x.family is not Gaussian:
            raise ModelError(f"{name!r}: parameter {key!r} is the {x.family.__name__} variable {x.name!r}; a user log "
                             "density takes Gaussian variables and expressions, Gamma variables, or constants")
        elif isinstance(x, Variable | Deterministic | Indexed):
            _check_parent(model, x, name, key, (Gaussian,))
            gaussian[key] = x
        elif isinstance(x, Data):
            raise ModelError(f"{name!r}: parameter {key!r} is the data node {x.name!r} of another call")
        elif isinstance(x, np.ndarray | float | int | np.number | bool | list | tuple):
            consts[key] = checks.constant(x, f"{name!r}: parameter {key!r}")
        else:
            raise ModelError(f"{name!r}: parameter {key!r} must be a Gaussian variable or expression, a number or "
                             f"an array, got {checks._short(x)}")
    random = {**gaussian, **positive}
    if not random:
        raise ModelError(f"{name!r}: no parameter of the log density is random (a Gaussian or Gamma variable, or a "
                         f"Gaussian expression); got only constants {sorted(consts)}")
    if len(random) > MAX_ARGS:
        raise ModelError(f"{name!r}: at most {MAX_ARGS} random parameters per log density (a tensor quadrature "
                         f"grid), got {len(random)}: {sorted(random)}")
    keys = list(random)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            shared = _roots(random[a]) & _roots(random[b])
            if shared and (a in positive or b in positive):
                raise ModelError(f"{name!r}: parameters {a!r} and {b!r} both depend on the variable "
                                 f"{sorted(shared)[0]!r}; a Gamma parameter cannot share a variable with another")
    return gaussian, positive, consts


def _leaf_key(x: Node) -> tuple:
    """A leaf up to equivalence: the node, or for an indexed view its source gathered by the same labels."""
    if isinstance(x, Indexed):
        return ("indexed", id(x.source), x.along.index, x.plate.index, x.labels.tobytes())
    return ("node", id(x))


def _affine(x: Node, dst: tuple[int, ...]) -> dict[tuple, tuple[Node, Any]] | None:
    """x = Σ_ℓ c_ℓ·ℓ + (a constant) over leaves ℓ (variables, indexed views, expressions other than sums and
    products), the coefficients on the plates ``dst``; None if x is not affine in its leaves."""
    if not isinstance(x, Deterministic) or x.op not in (Sum, Product, Polynomial):
        return {_leaf_key(x): (x, 1.0)}
    out: dict[tuple, tuple[Node, Any]] = {}

    def add(sub: dict | None, scale: Any) -> bool:
        if sub is None:
            return False
        for key, (leaf, c) in sub.items():
            out[key] = (leaf, out.get(key, (leaf, 0.0))[1] + scale * c)
        return True

    if x.op is Sum:
        ok = all(add(_affine(x.parents[r], dst), 1.0) for r in ("a", "b") if isinstance(x.parents[r], Node))
        return out if ok else None
    if x.op is Product:
        nodes = [r for r in ("a", "b") if isinstance(x.parents[r], Node)]
        if len(nodes) != 1:
            return None
        rc = "b" if nodes[0] == "a" else "a"
        c = expand(np.asarray(x.parents[rc], float), x.params["src"][rc], dst, 0)
        return out if add(_affine(x.parents[nodes[0]], dst), c) else None
    for c, roles in x.params["monomials"]:  # a polynomial: affine if every monomial has at most one leaf
        if len(roles) > 1:
            return None
        if roles:
            c = expand(np.asarray(c, float), x.params["dst"], dst, 0)
            if not add(_affine(x.parents[next(iter(roles))], dst), c):
                return None
    return out


def _shared_leaves(name: str, gaussian: dict[str, Node], dst: tuple[int, ...]) -> list[tuple[Node, dict[int, Any]]]:
    """The leaves that two or more Gaussian parameters share, each with its coefficient in each of them (on the
    factor's plates); [] when the parameters share no variable.  Refused: a parameter not affine in its leaves
    that shares a variable, two different leaves of one variable (``a[i]`` and ``a[j]``: correlated where the
    labels meet), more than 3 shared leaves."""
    keys = list(gaussian)
    if not any(_roots(gaussian[a]) & _roots(gaussian[b]) for i, a in enumerate(keys) for b in keys[i + 1:]):
        return []
    dec = {}
    for key, x in gaussian.items():
        dec[key] = _affine(x, dst)
        if dec[key] is None:
            raise ModelError(f"{name!r}: parameter {key!r} shares a variable with another parameter but is not affine "
                             "in its variables (a product of random nodes): its joint distribution with the other is "
                             "not Gaussian under q; give it its own variables")
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if len(dec[a]) == 1 and set(dec[a]) == set(dec[b]):
                raise ModelError(f"{name!r}: parameters {a!r} and {b!r} are both functions of "
                                 f"{next(iter(dec[a].values()))[0].name!r} alone: perfectly correlated under q, they "
                                 "have no joint density; write the log density in one of them")
    leaves = {k: leaf for d in dec.values() for k, (leaf, _) in d.items()}
    lk = list(leaves)
    for i, a in enumerate(lk):
        for b in lk[i + 1:]:
            common = _roots(leaves[a]) & _roots(leaves[b])
            if common:
                raise ModelError(f"{name!r}: the parameters use the variable {sorted(common)[0]!r} through two "
                                 f"different expressions ({leaves[a].name!r}, {leaves[b].name!r}), which are "
                                 "correlated under q in a way this factor does not track: write both through the same "
                                 "expression")
    shared = [(leaves[k], {j: dec[p][k][1] for j, p in enumerate(keys) if k in dec[p]}) for k in lk
              if sum(k in d for d in dec.values()) > 1]
    if len(shared) > MAX_ARGS:
        raise ModelError(f"{name!r}: the parameters share {len(shared)} variables or expressions "
                         f"({[leaf.name for leaf, _ in shared]}); at most {MAX_ARGS} are supported")
    return shared


def _argnames(fn: Any, name: str, observed: bool, given: list[str]) -> tuple[str, ...]:
    """The order in which the log density takes the parameters after y, read off its signature (a numba
    ``@vectorize`` ufunc's from its Python function); every given parameter must be one it takes."""
    py = getattr(getattr(fn, "_dispatcher", None), "py_func", None) or fn
    try:
        sig = inspect.signature(py)
    except (TypeError, ValueError):
        raise ModelError(f"{name!r}: cannot read the parameter names of the log density {fn!r}; wrap it in a "
                         "def that names them") from None
    ps = list(sig.parameters.values())
    if any(q.kind is inspect.Parameter.VAR_KEYWORD for q in ps):
        return tuple(given)
    names = [q.name for q in ps if q.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                inspect.Parameter.POSITIONAL_ONLY)]
    names = names[1:] if observed else names
    missing = [k for k in given if k not in names]
    if missing:
        raise ModelError(f"{name!r}: the log density takes {'(y, ' if observed else '('}{', '.join(names)}), not the "
                         f"parameter {missing[0]!r}")
    required = [q.name for q in ps[1 if observed else 0:] if q.default is inspect.Parameter.empty
                and q.kind is not inspect.Parameter.VAR_POSITIONAL]
    absent = [k for k in required if k not in given]
    if absent:
        raise ModelError(f"{name!r}: the log density needs the parameter {absent[0]!r}, which was not given")
    return tuple(k for k in names if k in given)


def _build(fname: str, name: str, logpdf: Any, observed: Any, mask: Any, plates: Sequence[Plate],
           order: Any, params: dict[str, Any]) -> Variable:
    model = current_model(f"{fname} {name!r}")
    model.check_name(name)
    if not callable(logpdf):
        raise ModelError(f"{name!r}: the log density must be a function logpdf(y, **params), got "
                         f"{checks._short(logpdf)}")
    if order is not None:
        order = int(checks.number(order, f"{name!r}: order", low=1, high=128))  # numpy's rule is exact to 128
    gaussian, positive, consts = _split(model, name, params)
    var = Variable(model, name, Gaussian, _var_plates(model, plates, name, [*gaussian.values(), *positive.values()]))
    for key, a in consts.items():
        checks.fits(a.shape, var.shape, f"{name!r}: parameter {key!r}")
    is_obs = observed is not None
    if is_obs:
        y, present = checks.observed_array(observed, mask, var.shape, name)
        value = y
    else:
        present, value = None, np.zeros(var.shape)
    argnames = _argnames(logpdf, name, is_obs, list(params))
    p = user_params(logpdf, f"fg.{fname}({name!r})", tuple(gaussian), {}, is_obs, order, argnames, tuple(positive))
    shared = _shared_leaves(name, gaussian, tuple(q.index for q in var.plates))
    edges = {f"x{j}": x for j, x in enumerate(gaussian.values())}
    edges.update({f"p{i}": x for i, x in enumerate(positive.values())})
    if shared:  # jointly Gaussian parameters: factors.user_shared
        ftype = USER_LIKELIHOOD_SHARED[(len(gaussian), len(shared))]
        edges.update({f"s{i}": leaf for i, (leaf, _) in enumerate(shared)})
        p["shared"], p["compiled"] = [c for _, c in shared], None
    else:
        ftype = user_type(len(gaussian), len(positive))
    var = _finish(model, var, ftype, edges, p, value, present)
    vp, fp = [q.index for q in var.plates], [q.index for q in var.prior.plates]
    p["consts"] = {k: expand(np.broadcast_to(a, var.shape).astype(float), vp, fp, 0) if a.ndim else a.astype(float)
                   for k, a in consts.items()}
    if present is not None and not np.all(present):
        p["fill"] = float(np.asarray(y)[present].ravel()[0])
    # an argument that is not Gaussian under q is taken as the Gaussian with its moments: the term is then an
    # approximation, and the result's evidence says so
    var.prior.method = "default" if all(gaussian_under_q(x) for x in gaussian.values()) else "moments"
    var.potential = not is_obs  # a placeholder, not data (the pointwise log-likelihood leaves it out)
    return var


def likelihood(name: str, logpdf: Callable[..., Any], *, observed: Any, mask: Any = None,
               plates: Sequence[Plate] = (), order: int | None = None, **params: Any) -> Variable:
    """Observed data y with the density exp(logpdf(y, **params)), any log density written by the user.

    Parameters
    ----------
    logpdf
        ``logpdf(y, **params)``, vectorised elementwise with numpy broadcasting (a numba ``@vectorize`` ufunc
        works as it is); it must be finite wherever q puts mass.
    observed, mask
        The data (required), plate-shaped, and an optional boolean mask (True = observed).
    plates
        The data's plates (those of the random parameters are added).
    order
        Gauss–Hermite nodes per Gaussian parameter; by default the smallest of 8, 16, 32, … that agrees
        with twice as many to 1e-10 (chosen on the first sweep, again when q's width changes by 2×).
    **params
        The density's parameters by name: up to 3 random ones, Gaussian variables or expressions
        (``fg.inner(X, w)``, ``a[g] + b * x``) or Gamma variables (``fg.gamma``, ``tau[g]``; not the scale
        priors); and any numbers or arrays (or data nodes) that fit the data's plates.  Gaussian parameters
        that share variables are integrated under their joint Gaussian (``factors.user_shared``).

    Notes
    -----
    E_q[log f] = Σ_g w_g logpdf(y, m + √v·z_g) on the tensor Gauss–Hermite grid (exact to the rule's
    accuracy), and the NCVMP message to a Gaussian parameter is its gradient in that parameter's mean
    parameters, ∂S/∂m = E[log f·z]/√v, ∂S/∂v = ½E[log f·(z² − 1)]/v (Bonnet's and Price's identities).  A
    Gamma parameter is integrated in log λ by a rule for its own density, and its message is the gradient in
    (E[λ], E[log λ]) (docs/maths.md §19).
    """
    if observed is None:
        raise ModelError(f"{name!r}: fg.likelihood needs observed data (observed=...); for a term without data "
                         "use fg.potential")
    return _build("likelihood", name, logpdf, observed, mask, plates, order, params)


def potential(name: str, logf: Callable[..., Any], *, plates: Sequence[Plate] = (), order: int | None = None,
              **params: Any) -> Variable:
    """An unobserved term exp(logf(**params)) in the joint density: a prior density the builders lack, a
    penalty or a constraint written as a log density.  Its arguments and its quadrature are those of
    ``fg.likelihood``; ``logf`` is called with the parameters only (no data)."""
    return _build("potential", name, logf, None, None, plates, order, params)
