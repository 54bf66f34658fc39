"""Sampling: forward (ancestral) draws from a model's prior and draws from a fitted posterior.

``fg.sample_prior(model, draws, seed)`` walks the model in the order its variables were declared
(every parent is declared before its children), draws each variable given its parents' draws, and
evaluates the deterministic nodes on the way; observed variables are drawn too (their data are
ignored), which gives the prior predictive.  ``result.sample(draws, seed)`` draws from the posterior
approximation q, jointly where q is joint.

Every array has the draws as its first axis, then the node's plates (in the model's declaration
order), then its event axes: ``(draws, *plates, *event)``.  Categorical variables are integer labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from distributions import GaussianGamma, GaussianWishart
from factors.deterministic import dot_subscripts
from factors.kernels.forward_backward import forward_sample_chains
from factors.kernels.kalman import forward_sample

from .gates import precision_matrices
from .nodes import Deterministic, Gate, Indexed, ModelError, Node, Plate, Variable

if TYPE_CHECKING:
    from .model import Model
    from .results import Result


def _check_draws(draws: Any) -> int:
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ModelError(f"draws must be a positive integer, got {draws!r}")
    return int(draws)


def _expand(arr: np.ndarray, src: tuple[Plate, ...], dst: tuple[Plate, ...] | list[Plate], what: str) -> np.ndarray:
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


class _Forward:
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
                self.views[id(node)] = _expand(gathered, plates, node.plates, node.name)
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
            z = _expand(self.value(a.selector), a.selector.plates, frame, what)
            full = (self.S, *(p.size for p in frame))
            z = np.broadcast_to(z, full).astype(np.intp)  # a Bernoulli selector's 0/1 are categories too
            if isinstance(a.source, np.ndarray) and a.layout is None:  # fg.select(values, z): (K, *event)
                return np.take(np.asarray(a.source, float), z, axis=0)
            if isinstance(a.source, np.ndarray):  # values over (K and some of the variable's plates, *event)
                x = _expand(np.asarray(a.source, float)[None], a.layout, (*frame, a.plate), what)
            else:
                x = _expand(self.value(a.source), a.source.plates, (*frame, a.plate), what)
            ev = x.ndim - 2 - len(frame)
            x = np.broadcast_to(x, full + x.shape[1 + len(frame):])
            idx = z.reshape(full + (1,) + (1,) * ev)
            idx = np.broadcast_to(idx, full + (1,) + x.shape[2 + len(frame):])
            return np.squeeze(np.take_along_axis(x, idx, axis=1 + len(frame)), axis=1 + len(frame))
        if isinstance(a, Node):
            return _expand(self.value(a), a.plates, frame, what)
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
        draw = _DRAWS.get(kind)
        if draw is None:
            raise ModelError(f"sampling: no forward sampler for {kind} (variable {v.name!r}); samplers exist for "
                             f"{sorted(_DRAWS)}")
        frame = tuple(v.plates)
        full = (self.S, *(p.size for p in frame))
        draw(self, v, f, frame, full)

    def put(self, v: Variable, x: np.ndarray, full: tuple[int, ...]) -> None:
        self.out[v.name] = np.broadcast_to(x, full + x.shape[len(full):] if x.ndim > len(full) else full).copy()


# ---------------------------------------------------------------------- one sampler per factor type
def _gaussian(s: _Forward, v, f, frame, full):
    m = s.arg(f.edges["mean"], frame, v.name)
    t = s.arg(f.edges["precision"], frame, v.name)
    m, t = np.broadcast_arrays(m, t)
    m, t = np.broadcast_to(m, full), np.broadcast_to(t, full)
    s.put(v, m + s.rng.standard_normal(full) / np.sqrt(t), full)


def _param(s: _Forward, v, f, key, frame):
    """A constant parameter, or constants selected per draw by ``fg.select(values, z)``."""
    x = f.params[key]
    return s.arg(x, frame, v.name) if isinstance(x, Gate) else np.asarray(x, float)


def _gamma(s: _Forward, v, f, frame, full):
    a = np.broadcast_to(_param(s, v, f, "shape", frame), full)
    b = np.broadcast_to(s.arg(f.edges["rate"], frame, v.name), full)
    s.put(v, s.rng.gamma(a, 1.0 / b), full)


def _beta(s: _Forward, v, f, frame, full):
    a = np.broadcast_to(_param(s, v, f, "alpha", frame), full)
    b = np.broadcast_to(_param(s, v, f, "beta", frame), full)
    s.put(v, s.rng.beta(a, b), full)


def _bernoulli_probs(s, v, p, full):
    s.put(v, (s.rng.random(full) < np.broadcast_to(p, full)).astype(float), full)


def _bernoulli(s: _Forward, v, f, frame, full):
    _bernoulli_probs(s, v, s.arg(f.edges["probs"], frame, v.name), full)


def _bernoulli_logit(s: _Forward, v, f, frame, full):
    x = s.arg(f.edges["logit"], frame, v.name)
    _bernoulli_probs(s, v, 0.5 * (1.0 + np.tanh(0.5 * x)), full)


def _dirichlet_draw(rng, alpha):
    g = rng.gamma(alpha)
    return g / g.sum(-1, keepdims=True)


def _dirichlet(s: _Forward, v, f, frame, full):
    alpha = np.broadcast_to(_param(s, v, f, "concentration", frame), full + v.event_shape)
    s.put(v, _dirichlet_draw(s.rng, alpha), full)


def _labels_from_logp(rng, logp, full):
    logp = np.broadcast_to(logp, full + logp.shape[-1:])
    return np.argmax(logp + rng.gumbel(size=logp.shape), axis=-1)


def _categorical(s: _Forward, v, f, frame, full):
    p = s.arg(f.edges["probs"], frame, v.name)
    with np.errstate(divide="ignore"):
        s.put(v, _labels_from_logp(s.rng, np.log(p), full), full)


def _softmax_logits(s: _Forward, v, f, frame, edge):
    over = f.consumed[edge]
    x = s.arg(f.edges[edge], (*frame, over), v.name)  # class axis last
    return x


def _categorical_softmax(s: _Forward, v, f, frame, full):
    s.put(v, _labels_from_logp(s.rng, _softmax_logits(s, v, f, frame, "logits"), full), full)


def _mv_precision_chol(lam: np.ndarray, D: int) -> np.ndarray:
    """Cholesky factor of the covariance Λ⁻¹ for a constant precision (scalar, vector or matrix)."""
    lam = np.asarray(lam, float)
    if lam.ndim == 2:
        return np.linalg.cholesky(np.linalg.inv(lam))
    return np.diag(np.broadcast_to(1.0 / np.sqrt(lam), (D,)))


def _gated_gamma_precision(s: _Forward, f, gate: Gate, frame: tuple, what: str) -> np.ndarray:
    """α of a gated Gamma precision ``alpha[z]`` at each draw and row, (S, *frame sizes, D or 1): the
    component z_n of each row; with ARD (``alpha`` plated over the consumed plate too) the vector diag(α)."""
    src = gate.source
    alpha, pl = s.value(src), tuple(src.plates)
    if f.params.get("ard"):  # the consumed plate becomes the last (event) axis
        ard = f.consumed["precision"]
        alpha = np.moveaxis(alpha, 1 + pl.index(ard), -1)
        pl = tuple(p for p in pl if p is not ard)
    else:
        alpha = alpha[..., None]
    full = (s.S, *(p.size for p in frame))
    x = np.broadcast_to(_expand(alpha, pl, (*frame, gate.plate), what), (*full, gate.plate.size, alpha.shape[-1]))
    z = _expand(s.value(gate.selector), gate.selector.plates, frame, what)
    z = np.broadcast_to(z, full).astype(np.intp)
    return np.take_along_axis(x, z[..., None, None], axis=-2)[..., 0, :]


def _mv_gaussian(s: _Forward, v, f, frame, full):
    D = v.event_shape[0]
    if D is None:
        raise ModelError(f"sampling: the dimension of {v.name!r} is not known (give dim=...)")
    m = np.broadcast_to(s.arg(f.edges["mean"], frame, v.name), full + (D,))
    z = s.rng.standard_normal(full + (D,))
    if isinstance(f.edges.get("precision"), Gate):  # a gated Gamma precision alpha[z]: each row's component
        alpha = _gated_gamma_precision(s, f, f.edges["precision"], frame, v.name)
        s.put(v, m + z / np.sqrt(alpha), full)
        return
    if "precision" in f.edges:  # a Gamma variable: αI, or ARD diag(α) over the consumed plate
        alpha = s.value(f.edges["precision"])
        if f.params.get("ard"):
            pl = f.edges["precision"].plates
            alpha = np.moveaxis(alpha, 1 + list(pl).index(f.consumed["precision"]), -1)
            rest = tuple(p for p in pl if p is not f.consumed["precision"])
            alpha = _expand(alpha, rest, frame, v.name)
        else:
            alpha = _expand(alpha, f.edges["precision"].plates, frame, v.name)[..., None]
        tail = f.params.get("tail")
        if tail is not None:  # Λ = diag(α, c): α for the first D − T coordinates, the constants c for the rest
            alpha = np.broadcast_to(alpha, alpha.shape[:-1] + (D - tail.size,))
            alpha = np.concatenate([alpha, np.broadcast_to(tail, alpha.shape[:-1] + tail.shape)], axis=-1)
        s.put(v, m + z / np.sqrt(alpha), full)
        return
    lam = f.params["precision_raw"]
    if isinstance(lam, Gate):  # fg.select(values, z): each row's category's matrix
        mats = s.arg(Gate(precision_matrices(lam.source, D), lam.selector, lam.plate), frame, v.name)
        s.put(v, m + np.einsum("...ij,...j->...i", np.linalg.cholesky(np.linalg.inv(mats)), z), full)
        return
    if not np.any(lam):
        raise ModelError(f"sampling: {v.name!r} has an improper flat prior (precision 0), which cannot be sampled")
    s.put(v, m + z @ _mv_precision_chol(lam, D).T, full)


def _normal_gamma(s: _Forward, v, f, frame, full):
    D = v.event_shape[0]
    p = f.params
    tau = s.rng.gamma(p["shape"], 1.0 / p["rate"], size=(s.S,))
    a = f.edges["precision"]
    if isinstance(a, Node):
        A = s.value(a).reshape(s.S, -1)  # (S, 1) for αI, (S, D) for ARD
    else:
        A = np.broadcast_to(np.asarray(a, float), (D,))[None, :]
    z = s.rng.standard_normal((s.S, D))
    w = np.broadcast_to(p["mean_raw"], (D,)) + z / np.sqrt(tau[:, None] * A)
    s.out[v.name] = w
    s.out[f"{v.name}.tau"] = tau


def _normal_gamma_regression(s: _Forward, v, f, frame, full):
    w = f.edges["w"]
    inner = [d for d in s.model.deterministics if d.op.name == "inner" and d.parents["w"] is w
             and tuple(d.plates) == tuple(frame)]
    if len(inner) != 1:
        raise ModelError(f"sampling: cannot tell which fg.inner(X, {w.name!r}) is the mean of {v.name!r}")
    mean = s.value(inner[0])
    tau = s.out[f"{w.name}.tau"].reshape((s.S,) + (1,) * len(frame))
    s.put(v, mean + s.rng.standard_normal(full) / np.sqrt(tau), full)


def _poisson_rate(s, v, f, rate, full):
    le = np.asarray(f.params.get("log_exposure", 0.0), float)
    s.put(v, s.rng.poisson(np.broadcast_to(rate * np.exp(le), full)).astype(float), full)


def _poisson(s: _Forward, v, f, frame, full):
    _poisson_rate(s, v, f, s.arg(f.edges["rate"], frame, v.name), full)


def _poisson_log(s: _Forward, v, f, frame, full):
    _poisson_rate(s, v, f, np.exp(s.arg(f.edges["log_rate"], frame, v.name)), full)


def _binomial_p(s, v, f, p, full):
    n = np.broadcast_to(np.asarray(f.params["trials"]).astype(np.int64), full)
    s.put(v, s.rng.binomial(n, np.broadcast_to(p, full)).astype(float), full)


def _binomial(s: _Forward, v, f, frame, full):
    _binomial_p(s, v, f, s.arg(f.edges["probs"], frame, v.name), full)


def _binomial_logit(s: _Forward, v, f, frame, full):
    x = s.arg(f.edges["logit"], frame, v.name)
    _binomial_p(s, v, f, 0.5 * (1.0 + np.tanh(0.5 * x)), full)


def _multinomial_p(s, v, p, full):
    if v.value is None:
        raise ModelError(f"sampling: the numbers of trials of {v.name!r} come from its observed counts, which it lacks")
    n = np.nansum(v.value, axis=-1).astype(np.int64)
    if n.shape != full[1:]:  # fg.predict at a new number of rows without new counts
        raise ModelError(f"sampling: the numbers of trials of {v.name!r} come from its observed counts, of shape "
                         f"{v.value.shape}; at plates of sizes {full[1:]} give counts of that shape (their row "
                         "sums are the trials)")
    n = np.broadcast_to(n, full)
    p = np.broadcast_to(p, full + p.shape[-1:])
    p = p / p.sum(-1, keepdims=True)
    s.put(v, s.rng.multinomial(n, p).astype(float), full)


def _multinomial(s: _Forward, v, f, frame, full):
    _multinomial_p(s, v, s.arg(f.edges["probs"], frame, v.name), full)


def _multinomial_softmax(s: _Forward, v, f, frame, full):
    x = _softmax_logits(s, v, f, frame, "logits")
    e = np.exp(x - x.max(-1, keepdims=True))
    _multinomial_p(s, v, e / e.sum(-1, keepdims=True), full)


def _sigma_from_prior(rng, prior: str, p0, p1, full) -> np.ndarray:
    """Draws of σ from a scale prior in the kernels' parameters (factors/scale_priors.py): half_t p0 = log(ν s²),
    p1 = (ν + 1)/2; half_normal p0 = 1/(2s²); exponential p0 = rate; uniform p0 = upper."""
    p0 = np.broadcast_to(np.asarray(p0, float), full)
    if prior == "uniform":
        return p0 * (1.0 - rng.uniform(size=full))
    if prior == "half_normal":
        return np.abs(rng.standard_normal(full)) / np.sqrt(2.0 * p0)
    if prior == "half_t":
        nu = 2.0 * np.broadcast_to(np.asarray(p1, float), full) - 1.0
        return np.abs(np.sqrt(np.exp(p0) / nu) * rng.standard_t(nu))
    return rng.exponential(1.0 / p0)


def _scale_prior(s: _Forward, v, f, frame, full):
    """σ from a half-normal, half-t (half-Cauchy) or exponential prior; parents see the precision σ⁻²."""
    p = f.params
    s.put(v, _sigma_from_prior(s.rng, p["prior"], p["p0"], p["p1"], full), full)
    s.precision[v.name] = s.out[v.name] ** -2.0


def _scale_sigma(s: _Forward, v, f, frame, full):
    """σ from its prior, for a scale used on σ itself (a term of a sum or product: factors/scale_sigma.py)."""
    b = f.params["base"]
    s.put(v, _sigma_from_prior(s.rng, b["prior"], b["p0"], b["p1"], full), full)


def _uniform_scale(s: _Forward, v, f, frame, full):
    """σ ~ U(0, upper); parents see the precision σ⁻²."""
    s.put(v, _sigma_from_prior(s.rng, "uniform", f.params["upper"], 0.0, full), full)
    s.precision[v.name] = s.out[v.name] ** -2.0


def _site(noise):
    def draw(s: _Forward, v, f, frame, full):
        x = np.broadcast_to(s.arg(f.edges["x"], frame, v.name), full)
        s.put(v, x + noise(s.rng, f.params, full), full)

    return draw


def _student_t(s: _Forward, v, f, frame, full):
    """y = mean + ε/√(λτ), λ ~ Gam(ν/2, ν/2): the scale mixture fg.student_t is built as (a learned ν from the fit)."""
    m = np.broadcast_to(s.arg(f.edges["mean"], frame, v.name), full)
    t = np.broadcast_to(s.arg(f.edges["precision"], frame, v.name), full)
    nu = float(s.hyper.get(v.name, {}).get("dof", f.params["dof"]))
    lam = s.rng.gamma(0.5 * nu, 2.0 / nu, full)
    s.put(v, m + s.rng.standard_normal(full) / np.sqrt(lam * t), full)


def _wishart_draw(rng, dof, scale, full, D):
    """Λ ~ Wishart(ν, V⁻¹) (E[Λ] = ν·V⁻¹, V the inverse scale matrix) by Bartlett's decomposition:
    Λ = L A Aᵀ Lᵀ with L L ᵀ = V⁻¹, A lower triangular, A_ii² ~ χ²(ν − i), A_ij ~ N(0, 1) below the diagonal."""
    nu = np.broadcast_to(np.asarray(dof, float), full)
    L = np.linalg.cholesky(np.linalg.inv(np.broadcast_to(np.asarray(scale, float), full + (D, D))))
    A = np.tril(rng.standard_normal(full + (D, D)), -1)
    idx = np.arange(D)
    A[..., idx, idx] = np.sqrt(rng.chisquare(nu[..., None] - idx))
    LA = L @ A
    return LA @ np.swapaxes(LA, -1, -2)


def _wishart(s: _Forward, v, f, frame, full):
    D = v.event_shape[0]
    s.put(v, _wishart_draw(s.rng, f.params["dof"], f.params["scale"], full, D), full)


def _normal_wishart(s: _Forward, v, f, frame, full):
    """Λ ~ Wishart(ν₀, V₀⁻¹), μ | Λ ~ N(m₀, (β₀Λ)⁻¹); μ under the name, Λ as "<name>.precision"."""
    p, D = f.params, v.event_shape[0]
    lam = _wishart_draw(s.rng, p["dof"], p["scale"], full, D)
    beta = np.broadcast_to(np.asarray(p["beta"], float), full)
    s.out[v.name] = _mv_given_precision(s.rng, np.broadcast_to(p["mean"], full + (D,)), beta[..., None, None] * lam)
    s.out[f"{v.name}.precision"] = lam


def _mv_given_precision(rng, mean, lam):
    """x ~ N(mean, Λ⁻¹) for a batch of precision matrices: x = mean + L⁻ᵀz with L Lᵀ = Λ."""
    L = np.linalg.cholesky(lam)
    z = rng.standard_normal(mean.shape)
    return mean + np.linalg.solve(np.swapaxes(L, -1, -2), z[..., None])[..., 0]


def _mv_gaussian_wishart(s: _Forward, v, f, frame, full):
    D = v.event_shape[0]
    m = np.broadcast_to(s.arg(f.edges["mean"], frame, v.name), full + (D,))
    lam = np.broadcast_to(s.arg(f.edges["precision"], frame, v.name), full + (D, D))
    s.put(v, _mv_given_precision(s.rng, m, lam), full)


class _Alias:
    """The precision half "<θ>.precision" of a normal–Wishart block θ, addressable like a node."""

    def __init__(self, node: Node) -> None:
        self.name, self.plates = f"{node.name}.precision", node.plates


def _mv_gaussian_normal_wishart(s: _Forward, v, f, frame, full):
    D = v.event_shape[0]
    a = f.edges["params"]
    m = np.broadcast_to(s.arg(a, frame, v.name), full + (D,))
    if isinstance(a, Gate):
        lam = s.arg(Gate(_Alias(a.source), a.selector, a.plate), frame, v.name)
    else:
        lam = _expand(s.out[f"{a.name}.precision"], a.plates, frame, v.name)
    s.put(v, _mv_given_precision(s.rng, m, np.broadcast_to(lam, full + (D, D))), full)


def _probit(s: _Forward, v, f, frame, full):
    x = np.broadcast_to(s.arg(f.edges["x"], frame, v.name), full)
    s.put(v, np.where(x + s.rng.standard_normal(full) > 0, 1.0, -1.0), full)  # labels ±1, as stored


def _markov_chain(s: _Forward, v, f, frame, full):
    """z_1 ~ π, z_t ~ A[z_{t−1}] with one (π, A) per draw; labels −1 past a sequence's length."""
    K = v.event_shape[0]
    pi, A = f.edges["initial"], f.edges["transition"]
    pi = s.value(pi).reshape(s.S, K) if isinstance(pi, Node) else np.broadcast_to(np.asarray(pi, float), (s.S, K))
    A = (s.value(A).reshape(s.S, K, K) if isinstance(A, Node)
         else np.broadcast_to(np.asarray(A, float), (s.S, K, K)))
    lengths = np.asarray(f.params["lengths"]).reshape(-1)
    z = forward_sample_chains(pi, A, lengths, full[-1], s.rng)  # (S, sequences, T)
    s.put(v, z.reshape(full), full)


def _gaussian_markov_chain(s: _Forward, v, f, frame, full):
    """x_1 ~ N(m₀, P₀⁻¹), x_t ~ N(A x_{t−1}, Q⁻¹) with one (m₀, P₀, A, Q) per draw; 0 past a sequence's length."""
    D = v.event_shape[0]

    def per_draw(arg, shape):
        if isinstance(arg, Node):
            return np.asarray(s.value(arg), float).reshape((s.S, *shape)) if arg.family.__name__ != "Gamma" else \
                np.asarray(s.value(arg), float).reshape(s.S, -1)
        return np.broadcast_to(np.asarray(arg, float), (s.S, *shape))

    e = f.edges
    m0, P0, A = per_draw(e["initial_mean"], (D,)), per_draw(e["initial_precision"], (D, D)), per_draw(
        e["transition"], (D, D))
    Q = per_draw(e["noise_precision"], (D, D))
    if Q.ndim == 2:  # Gamma precisions: τ per dimension, or one τ for all (a draw τ = 0 gives an infinite state)
        with np.errstate(divide="ignore"):
            LQ = np.broadcast_to(1.0 / np.sqrt(Q), (s.S, D))[:, :, None] * np.eye(D)
    else:
        LQ = np.linalg.cholesky(np.linalg.inv(Q))
    L0 = np.linalg.cholesky(np.linalg.inv(P0))
    lengths = np.asarray(f.params["lengths"], dtype=np.int64).reshape(-1)
    z = s.rng.standard_normal((s.S, lengths.size, full[-1], D))
    x = forward_sample(np.ascontiguousarray(m0), np.ascontiguousarray(L0), np.ascontiguousarray(A),
                       np.ascontiguousarray(LQ), lengths, z)
    s.put(v, x.reshape(full + (D,)), full)


_DRAWS = {
    "Gaussian": _gaussian, "Gamma": _gamma, "Beta": _beta, "Bernoulli": _bernoulli, "Dirichlet": _dirichlet,
    "Categorical": _categorical, "MvGaussian": _mv_gaussian, "MvGaussianFixedPrecision": _mv_gaussian,
    "NormalGamma": _normal_gamma, "NormalGammaRegression": _normal_gamma_regression,
    "BernoulliLogit": _bernoulli_logit, "CategoricalSoftmax": _categorical_softmax,
    "Poisson": _poisson, "PoissonLog": _poisson_log, "Binomial": _binomial, "BinomialLogit": _binomial_logit,
    "Multinomial": _multinomial, "MultinomialSoftmax": _multinomial_softmax,
    "LaplaceSite": _site(lambda rng, p, shape: rng.laplace(0.0, p["scale"], shape)),
    "CauchySite": _site(lambda rng, p, shape: p["scale"] * rng.standard_cauchy(shape)),
    "StudentTSite": _site(lambda rng, p, shape: p["scale"] * rng.standard_t(p["dof"], shape)),
    "Probit": _probit, "ScalePrior": _scale_prior, "UniformScale": _uniform_scale, "ScaleSigma": _scale_sigma,
    "MarkovChain": _markov_chain, "StudentT": _student_t,
    "Wishart": _wishart, "NormalWishart": _normal_wishart, "MvGaussianWishart": _mv_gaussian_wishart,
    "MvGaussianNormalWishart": _mv_gaussian_normal_wishart,
    # rows with some coordinates missing (their own factor types only for the likelihood): the same law
    "MvGaussianWishartMissing": _mv_gaussian_wishart, "MvGaussianNormalWishartMissing": _mv_gaussian_normal_wishart,
    "GaussianMarkovChain": _gaussian_markov_chain, "GaussianMarkovChainDiag": _gaussian_markov_chain,
}


# ---------------------------------------------------------------------- public API
def sample_prior(model: Model, draws: int = 1000, seed: int | None = 0) -> dict[str, np.ndarray]:
    """Forward (ancestral) draws of every variable of a model from its prior, observed ones included.

    Parameters
    ----------
    model
        An ``fg.Model``.
    draws
        Number of joint draws S.
    seed
        Seed of the random generator (``None``: fresh entropy).

    Returns
    -------
    dict
        Variable name → array of shape ``(draws, *plates, *event)``, in the model's declaration order,
        with the deterministic nodes (``fg.inner``, sums, products) evaluated on the draws.  A
        normal–gamma block ``w`` gives ``"w"`` and its precision ``"w.tau"``; a scale made by
        ``fg.half_cauchy`` and the like gives σ; Categorical variables are integer labels; labels of
        ``fg.probit`` are ±1.  Observed variables are drawn afresh (the prior predictive), ignoring their
        data; a multinomial keeps its observed numbers of trials.

    Notes
    -----
    Each variable is drawn from its prior factor given its parents' draws: p(x) = Π_i p(x_i | pa(x_i))
    (ancestral sampling), gates (``x[z]``) selecting by the drawn labels and indexed views (``x[idx]``)
    gathering by their labels.  Site potentials (``fg.laplace_site`` and kin) are drawn as the
    observation model they define: location = x + noise.
    """
    from .model import Model

    if not isinstance(model, Model):
        raise ModelError(f"sample_prior needs an fg.Model, got {type(model).__name__}")
    S = _check_draws(draws)
    fwd = _Forward(model, S, np.random.default_rng(seed))
    for v in model.variables.values():
        fwd.variable(v)
    for d in model.deterministics:
        fwd.value(d)
    return fwd.out


def sample_posterior(result: Result, draws: int = 1000, seed: int | None = 0) -> dict[str, np.ndarray]:
    """Draws from the posterior approximation q of a fit (``result.sample``); see ``Result.sample``."""
    S = _check_draws(draws)
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    quad = getattr(result, "quadrature", None)
    if quad is not None:  # fg.ScaleQuadrature: a node per draw, then σ at the node and the rest from q_node
        nodes = rng.choice(quad["weights"].size, size=S, p=quad["weights"])
        for name, q in result.posteriors.items():
            out[name] = np.exp(quad["u"][nodes]) if name == quad["variable"] else q.sample_at(nodes, rng)
        return _with_tracked(result, out, S, rng)
    for name in result.posteriors:
        q = result.posterior(name)  # scale variables (fg.half_cauchy, ...) on the σ scale
        joint = result.joint.get(name)
        if joint is not None:  # class-plated weights handled as one block: q over the stacked vector
            shape = q.batch_shape + q.event_shape
            out[name] = np.asarray(joint.sample(S, rng)).reshape((S, *shape))
            continue
        x = q.sample(S, rng)
        if isinstance(q, GaussianGamma):
            out[name], out[f"{name}.tau"] = (np.asarray(a) for a in x)
        elif isinstance(q, GaussianWishart):  # joint (μ, Λ): the mean under the name, Λ as "<name>.precision"
            out[name], out[f"{name}.precision"] = (np.asarray(a) for a in x)
        else:
            out[name] = np.asarray(x)
    return _with_tracked(result, out, S, rng)


def _with_tracked(result: Result, out: dict[str, np.ndarray], S: int, rng: np.random.Generator) -> dict:
    """Add the draws of the model's named deterministic nodes (``fg.deterministic``), evaluated on the joint
    draws of q (fully observed variables at their data)."""
    model = result.model
    tracked = getattr(model, "tracked", {}) if model is not None else {}
    if not tracked:
        return out
    fw = _Forward(model, S, rng)
    fw.out.update(out)
    for v in model.variables.values():
        if v.name not in fw.out and v.mask is not None and not v.is_latent:
            fw.out[v.name] = np.broadcast_to(np.asarray(v.value, dtype=float), (S, *np.shape(v.value)))
    for name, d in tracked.items():
        try:
            out[name] = np.asarray(fw.value(d))
        except ModelError as e:
            raise ModelError(f"result.sample: the deterministic node {name!r} cannot be drawn from this fit ({e})") \
                from None
    return out


__all__ = ["sample_prior", "sample_posterior"]
