"""Pointwise log-likelihoods of the observed variables at parameter draws (for LOO and WAIC).

``pointwise_log_likelihood(model, draws)`` evaluates, for every observed variable y and every draw θ⁽ˢ⁾
of the latent variables, log p(y_i | θ⁽ˢ⁾) per observation i: an array ``(S, *plates of y)`` with NaN
at missing (masked) entries.  The parents of each observed factor are evaluated on the draws by the
forward sampler's machinery (``factorgraph.posterior.samplers.forward``: gates, indexed views, deterministic
nodes), and one log-density function per factor type, vectorised over draws and rows, does the rest
(``_LOGPDF``).

A factor with an argument gated by a latent selector z (a mixture, ``mus[z]``) is marginalised over
that row's z: log p(y_n | θ) = log Σ_k π_k Π_j p(y_nj | θ_k), the product over the plates of y that z
lacks, π_k the selector's prior probabilities at the draw (a Dirichlet's draw, softmax logits, ...);
where z is observed the sum has its one term.  The result is then indexed by the selector's plates.
An ``mv_gaussian`` row observed by coordinate (``v.coord_mask``, plates + (D,)) with some coordinates
missing has the marginal density of its observed coordinates o, log N(y_o | m_o, Σ_oo) with Σ = Λ⁻¹ (as in
its likelihood, ``schedules.missing``); whole rows keep the full density.
The labels of a hidden Markov model (``fg.markov_chain``) are not independent given θ, so its unit is the
sequence: log p(y_n | θ) sums the label paths by a forward filter at the draw's (π, A), indexed by the
sequence plates (one value for a single sequence).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import gammaln, log_ndtr, logsumexp

from distributions import Categorical
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Gate, Indexed, ModelError, Node, Variable
from factorgraph.posterior.loglik_families import FAMILY_LOGPDF
from factorgraph.posterior.loglik_mv import mv_gaussian_logpdf, mv_gaussian_normal_wishart_logpdf
from factorgraph.posterior.samplers.forward import Forward, expand, softmax_logits
from factors.index import segment_sum
from factors.kernels.forward_backward import chain_log_normalisers
from factors.onehot import OneHot

_LOG2PI = np.log(2.0 * np.pi)


def _fparam(f, v: Variable, arr: Any) -> np.ndarray:
    """A per-row constant stored on the factor's plates → the observed variable's plates (the factor's
    extra plates, e.g. a gate's category plate, are singletons in such constants)."""
    arr = np.asarray(arr, float)
    fplates = list(f.plates)
    if arr.ndim < len(fplates):
        return arr
    keep = tuple(slice(None) if p in v.plates else 0 for p in fplates)
    return arr[keep]


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


# ---------------------------------------------------------------------- one log density per factor type
def _gaussian(s: Forward, v, f, frame, y):
    m = s.arg(f.edges["mean"], frame, v.name)
    t = s.arg(f.edges["precision"], frame, v.name)
    return 0.5 * (np.log(t) - _LOG2PI - t * (y - m) ** 2)


def _student_t(s: Forward, v, f, frame, y):
    m = s.arg(f.edges["mean"], frame, v.name)
    t = s.arg(f.edges["precision"], frame, v.name)
    nu = float(s.hyper.get(v.name, {}).get("dof", f.params["dof"]))  # a learned ν (result.hyper), else the given
    z2 = t * (y - m) ** 2
    return (gammaln(0.5 * (nu + 1.0)) - gammaln(0.5 * nu) + 0.5 * np.log(t / (nu * np.pi))
            - 0.5 * (nu + 1.0) * np.log1p(z2 / nu))


def _normal_gamma_regression(s: Forward, v, f, frame, y):
    w = f.edges["w"]
    inner = [d for d in s.model.deterministics if d.op.name == "inner" and d.parents["w"] is w
             and tuple(d.plates) == tuple(frame)]
    if len(inner) != 1:
        raise ModelError(f"log-likelihood: cannot tell which fg.inner(X, {w.name!r}) is the mean of {v.name!r}")
    m = s.value(inner[0])
    t = s.out[f"{w.name}.tau"].reshape((s.S,) + (1,) * len(frame))
    return 0.5 * (np.log(t) - _LOG2PI - t * (y - m) ** 2)


def _bernoulli_p(y, p):
    with np.errstate(divide="ignore"):
        return np.where(y > 0.5, np.log(p), np.log1p(-p))


def _bernoulli(s: Forward, v, f, frame, y):
    return _bernoulli_p(y, s.arg(f.edges["probs"], frame, v.name))


def _bernoulli_logit(s: Forward, v, f, frame, y):
    x = s.arg(f.edges["logit"], frame, v.name)
    return _log_sigmoid(np.where(y > 0.5, x, -x))


def _probit(s: Forward, v, f, frame, y):  # labels stored as ±1
    return log_ndtr(y * s.arg(f.edges["x"], frame, v.name))


def _categorical_logp(y: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """Σ_k y_k log p_k: a label stored one-hot (its log probability), or the counts d_k of
    ``categorical_softmax(..., counts=True)``; labels held as labels (``OneHot``) are a gather."""
    if isinstance(y, OneHot):
        return y.inner(logp)
    return np.where(y > 0, y * logp, 0.0).sum(-1)


def _categorical(s: Forward, v, f, frame, y):
    p = s.arg(f.edges["probs"], frame, v.name)
    with np.errstate(divide="ignore"):
        return _categorical_logp(y, np.log(p / p.sum(-1, keepdims=True)))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    return x - logsumexp(x, axis=-1, keepdims=True)


def _categorical_softmax(s: Forward, v, f, frame, y):
    return _categorical_logp(y, _log_softmax(softmax_logits(s, v, f, frame, "logits")))


def _poisson_log_rate(v, f, y, log_rate):
    le = _fparam(f, v, f.params.get("log_exposure", 0.0))
    return y * (log_rate + le) - np.exp(log_rate + le) - gammaln(y + 1.0)


def _poisson(s: Forward, v, f, frame, y):
    with np.errstate(divide="ignore"):
        return _poisson_log_rate(v, f, y, np.log(s.arg(f.edges["rate"], frame, v.name)))


def _poisson_log(s: Forward, v, f, frame, y):
    return _poisson_log_rate(v, f, y, s.arg(f.edges["log_rate"], frame, v.name))


def _log_choose(n, y):
    return gammaln(n + 1.0) - gammaln(y + 1.0) - gammaln(n - y + 1.0)


def _binomial(s: Forward, v, f, frame, y):
    n = _fparam(f, v, f.params["trials"])
    p = s.arg(f.edges["probs"], frame, v.name)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _log_choose(n, y) + np.where(y > 0, y * np.log(p), 0.0) + np.where(n > y, (n - y) * np.log1p(-p), 0.0)


def _binomial_logit(s: Forward, v, f, frame, y):
    n = _fparam(f, v, f.params["trials"])
    x = s.arg(f.edges["logit"], frame, v.name)
    return _log_choose(n, y) + y * _log_sigmoid(x) + (n - y) * _log_sigmoid(-x)


def _multinomial_logp(y, logp):
    n = y.sum(-1)
    terms = np.where(y > 0, y * logp, 0.0)
    return gammaln(n + 1.0) - gammaln(y + 1.0).sum(-1) + terms.sum(-1)


def _multinomial(s: Forward, v, f, frame, y):
    p = s.arg(f.edges["probs"], frame, v.name)
    with np.errstate(divide="ignore"):
        return _multinomial_logp(y, np.log(p / p.sum(-1, keepdims=True)))


def _multinomial_softmax(s: Forward, v, f, frame, y):
    return _multinomial_logp(y, _log_softmax(softmax_logits(s, v, f, frame, "logits")))


def _site(logpdf):
    def lp(s: Forward, v, f, frame, y):
        p = dict(f.params)
        for h in s.hyper.values():  # a scale learned by a handler (learn=("scale",)): by factor name
            if isinstance(h.get("scale"), dict) and f.name in h["scale"]:
                p["scale"] = float(h["scale"][f.name])
        return logpdf(y - s.arg(f.edges["x"], frame, v.name), p)

    return lp


def _laplace(r, p):
    return -np.log(2.0 * p["scale"]) - np.abs(r) / p["scale"]


def _cauchy(r, p):
    g = p["scale"]
    return -np.log(np.pi * g) - np.log1p((r / g) ** 2)


def _student_t_site(r, p):
    nu, sc = p["dof"], p["scale"]
    return (gammaln(0.5 * (nu + 1.0)) - gammaln(0.5 * nu) - 0.5 * np.log(nu * np.pi) - np.log(sc)
            - 0.5 * (nu + 1.0) * np.log1p((r / sc) ** 2 / nu))


def _user(s: Forward, v, f, frame, y):
    """fg.likelihood: the user's log density at the draws of its random parameters and its constants."""
    p = f.params
    kw = {name: s.arg(f.edges[f"x{j}"], frame, v.name) for j, name in enumerate(p["gaussian"])}
    kw.update({name: s.arg(f.edges[f"p{i}"], frame, v.name) for i, name in enumerate(p.get("positive", ()))})
    kw.update({c: _fparam(f, v, a) for c, a in p["consts"].items()})
    with np.errstate(all="ignore"):
        return p["logpdf"][0](y, *[kw[a] for a in p["argnames"]])


_LOGPDF = {
    "Gaussian": _gaussian, "StudentT": _student_t, "NormalGammaRegression": _normal_gamma_regression,
    "MvGaussian": mv_gaussian_logpdf, "MvGaussianFixedPrecision": mv_gaussian_logpdf,
    "MvGaussianWishart": mv_gaussian_logpdf, "MvGaussianNormalWishart": mv_gaussian_normal_wishart_logpdf,
    "MvGaussianWishartMissing": mv_gaussian_logpdf, "MvGaussianNormalWishartMissing": mv_gaussian_normal_wishart_logpdf,
    "Bernoulli": _bernoulli, "BernoulliLogit": _bernoulli_logit, "Probit": _probit,
    "Categorical": _categorical, "CategoricalSoftmax": _categorical_softmax,
    "Poisson": _poisson, "PoissonLog": _poisson_log, "Binomial": _binomial, "BinomialLogit": _binomial_logit,
    "Multinomial": _multinomial, "MultinomialSoftmax": _multinomial_softmax,
    "LaplaceSite": _site(_laplace), "CauchySite": _site(_cauchy), "StudentTSite": _site(_student_t_site),
}
_LOGPDF.update({f"UserLikelihood{k}": _user for k in (1, 2, 3)})
_LOGPDF.update({f"UserLikelihood{k}p{m}": _user for m in (1, 2, 3) for k in range(4 - m)})
_LOGPDF.update({f"UserLikelihood{k}s{m}": _user for k in (2, 3) for m in (1, 2, 3)})
_LOGPDF.update(FAMILY_LOGPDF)


# ---------------------------------------------------------------------- gates: marginalising the selector
def _gate_of(f) -> Gate | None:
    gates = [a for a in (*f.edges.values(), *f.params.values()) if isinstance(a, Gate)]
    return gates[0] if gates else None


def _log_weights(s: Forward, z: Variable, K: int) -> np.ndarray:
    """log π_k of the selector z at each draw: (S, *z plates, K)."""
    f = z.prior
    kind = f.ftype.name
    frame = tuple(z.plates)
    if kind == "Categorical":
        p = s.arg(f.edges["probs"], frame, z.name)
        with np.errstate(divide="ignore"):
            lw = np.log(p / p.sum(-1, keepdims=True))
    elif kind == "CategoricalSoftmax":
        lw = _log_softmax(softmax_logits(s, z, f, frame, "logits"))
    elif kind in ("Bernoulli", "BernoulliLogit"):
        x = s.arg(f.edges["probs" if kind == "Bernoulli" else "logit"], frame, z.name)
        if kind == "Bernoulli":
            with np.errstate(divide="ignore"):
                lw = np.stack([np.log1p(-x), np.log(x)], axis=-1)
        else:
            lw = np.stack([_log_sigmoid(-x), _log_sigmoid(x)], axis=-1)
    else:
        raise ModelError(f"log-likelihood: no log-likelihood for observations gated by {z.name!r}, whose prior is "
                         f"{kind}; selectors may be Categorical, CategoricalSoftmax, Bernoulli, BernoulliLogit "
                         "or MarkovChain")
    lw = np.broadcast_to(lw, (s.S, *(p.size for p in frame), K))
    if z.mask is not None:  # observed labels: their one term
        obs = np.broadcast_to(z.mask, z.shape)[None, ..., None]
        onehot = (np.arange(K) == labels(z)[..., None])[None]
        lw = np.where(obs, np.where(onehot, 0.0, -np.inf), lw)
    return lw


def _chain_log_likelihood(s: Forward, z: Variable, phi: np.ndarray) -> np.ndarray:
    """log p(y_n | θ) per sequence n of a hidden Markov model: the emission log-likelihoods ``phi`` (S, *z
    plates, K) summed over the label paths by a forward filter at each draw's (π, A).  (S, *sequence plates)."""
    f = z.prior
    K = phi.shape[-1]
    pi, A = f.edges["initial"], f.edges["transition"]
    pi = s.value(pi).reshape(s.S, K) if isinstance(pi, Node) else np.broadcast_to(np.asarray(pi, float), (s.S, K))
    A = (s.value(A).reshape(s.S, K, K) if isinstance(A, Node)
         else np.broadcast_to(np.asarray(A, float), (s.S, K, K)))
    lengths = np.asarray(f.params["lengths"]).reshape(-1)
    seq = z.shape[:-1]
    T = z.shape[-1]
    with np.errstate(divide="ignore"):
        logz = chain_log_normalisers(phi.reshape(s.S, -1, T, K), np.log(pi), A, lengths)
    return logz.reshape((s.S, *seq))


# ---------------------------------------------------------------------- public entry point
def labels(v: Variable) -> np.ndarray:
    """The observed labels of a Categorical variable (stored one-hot, or as ``factors.onehot.OneHot``), 0 where
    missing."""
    if isinstance(v.value, OneHot):
        return np.maximum(v.value.labels, 0)
    return np.argmax(np.nan_to_num(np.asarray(v.value, float)), axis=-1)


def _observed(model: Model) -> list[Variable]:
    """The observed variables (an fg.potential's placeholder is no data)."""
    return [v for v in model.variables.values() if v.mask is not None and bool(np.any(v.mask))
            and not getattr(v, "potential", False)]


def present_entries(v: Variable) -> np.ndarray:
    """Where an observed variable has data (plate-shaped booleans)."""
    m = np.broadcast_to(v.mask, v.shape)
    if "present" in v.prior.params:  # fg.student_t keeps its missing rows apart
        m = m & (np.broadcast_to(_fparam(v.prior, v, v.prior.params["present"]), v.shape) > 0)
    return m


def pointwise_log_likelihood(model: Model, draws: dict[str, np.ndarray],
                             hyper: dict[str, dict[str, Any]] | None = None) -> dict[str, np.ndarray]:
    """log p(y_i | θ⁽ˢ⁾) for every observed variable y, observation i and draw s.

    Parameters
    ----------
    model
        The fitted ``fg.Model``.
    draws
        Draws of the latent variables by name, each ``(S, *plates, *event)`` (``result.sample``); a
        normal–gamma block ``w`` needs ``"w.tau"`` too, a scale variable (``fg.half_cauchy``, ...) is σ.
    hyper
        Learned hyperparameters by variable (``result.hyper``): a Student-t likelihood's learned ``"dof"``,
        the ``"scale"`` of Laplace/Cauchy/Student-t sites learned by a handler.

    Returns
    -------
    dict
        Observed variable name → array ``(S, *plates)`` (for a gated/mixture observation, ``(S, *plates of
        the selector)``: the rows the selector marginalises over), NaN where the entry is missing.
        Observations of a multivariate family (``mv_gaussian``, ``multinomial``) are one entry per row.

    Raises
    ------
    ModelError
        For an observed factor type without a log density here (the message lists those with one), or a
        mixture whose selector has a prior other than those listed in the message.
    """
    obs = _observed(model)
    S = None
    base: dict[str, np.ndarray] = {}
    for name, x in draws.items():
        base[name] = np.asarray(x)
        S = base[name].shape[0] if S is None else S
    if S is None:
        S = 1
    for v in obs:  # observed entries of observed variables are known at every draw
        value = labels(v) if v.family is Categorical else v.value  # draws of a Categorical are labels
        val = np.broadcast_to(value, (S, *value.shape))
        if v.name in base and not v.is_observed:
            m = np.broadcast_to(v.mask, v.shape).reshape(v.shape + (1,) * (value.ndim - len(v.shape)))
            val = np.where(m, val, base[v.name].reshape(val.shape))
        base[v.name] = val
    scales = {n for n, v in model.variables.items() if getattr(v, "scale_prior", None) and v.base is None and n in base}

    def forward(over: dict[str, np.ndarray] | None = None) -> Forward:
        fwd = Forward(model, S, np.random.default_rng(0))
        fwd.out = {**base, **(over or {})}
        fwd.precision = {n: fwd.out[n] ** -2.0 for n in scales}
        fwd.hyper = hyper or {}
        return fwd

    out: dict[str, np.ndarray] = {}
    rows: dict[str, np.ndarray] = {}  # entries of each output that have data
    for v in obs:
        f = v.prior
        fn = _LOGPDF.get(f.ftype.name)
        if fn is None:
            raise ModelError(f"log-likelihood: no log density for the observed {f.ftype.name} factor of {v.name!r}; "
                             f"log densities exist for {sorted(_LOGPDF)}")
        frame = tuple(v.plates)
        full = (S, *v.shape)
        present = present_entries(v)
        if isinstance(v.value, OneHot):  # labels stay labels; a missing one stands at 0 (its value is discarded)
            y = OneHot(np.where(present, v.value.labels, 0), v.value.K, "zero")
        else:
            y = np.asarray(v.value, float)
            fill = np.expand_dims(present, tuple(range(present.ndim, y.ndim)))
            y = np.where(fill, y, np.nanmax(np.where(fill, y, np.nan)) if np.any(fill) else 0.0)  # harmless stand-in
        gate = _gate_of(f)
        z = gate.selector if gate is not None else None
        if z is None or not z.is_latent:
            lp = np.broadcast_to(fn(forward(), v, f, frame, y), full)
            out[v.name], rows[v.name] = np.where(present, lp, np.nan), present
            continue
        K = gate.plate.size
        zi = z  # a selector gathered by labels (mu[z[g]]): each of z's elements marginalises all its rows at once
        z = zi.source if isinstance(zi, Indexed) else zi
        zfull = (S, *z.shape)
        kept = tuple(p for p in frame if p in zi.plates)
        terms = []
        for k in range(K):  # a loop over the K components, each vectorised over draws and rows
            lk = np.broadcast_to(fn(forward({z.name: np.full(zfull, k)}), v, f, frame, y), full)
            lk = np.where(present, lk, 0.0)
            extra = tuple(1 + i for i, p in enumerate(frame) if p not in zi.plates)
            lk = lk.sum(axis=extra)  # (S, *[p in frame ∩ z plates])
            terms.append(np.broadcast_to(expand(*_by_selector(lk, zi, kept), z.plates, v.name), zfull))
        if z.prior.ftype.name == "MarkovChain":  # one entry per sequence: its labels summed out by the forward filter
            out[v.name] = _chain_log_likelihood(forward(), z, np.stack(terms, axis=-1))
            rows[v.name] = np.ones(out[v.name].shape[1:], bool)
            continue
        lw = _log_weights(forward(), z, K)
        with np.errstate(invalid="ignore"):
            lp = logsumexp(np.stack(terms, axis=-1) + lw, axis=-1)
        seen = present.any(axis=tuple(i for i, p in enumerate(frame) if p not in zi.plates))  # a row with data
        seen, grouped = _by_selector(seen[None].astype(float), zi, kept)
        any_row = np.broadcast_to(expand(seen, grouped, z.plates, v.name)[0], z.shape) > 0
        out[v.name], rows[v.name] = np.where(any_row, lp, np.nan), any_row
    for v in obs:
        _check_defined(v, out[v.name], rows[v.name])
    return out


def _by_selector(a: np.ndarray, z: Any, kept: tuple) -> tuple[np.ndarray, tuple]:
    """(a, its plates) on the selector's own plates: for a selector gathered by labels, z[g], the rows' values
    (axis 1 + position of the rows' plate in ``kept``) summed over the rows with each label."""
    if not isinstance(z, Indexed):
        return a, kept
    if z.plate not in kept:
        raise ModelError(f"log-likelihood: the selector {z.source.name!r} is gathered onto {z.plate.name!r}, which the "
                         "observed variable is not plated over")
    ax = 1 + kept.index(z.plate)
    out = segment_sum(z.labels, np.moveaxis(a, ax, 0), z.along.size)
    return np.moveaxis(out, 0, ax), tuple(z.along if p is z.plate else p for p in kept)


def _check_defined(v: Variable, lp: np.ndarray, rows: np.ndarray) -> None:
    """NaN at an entry with data is numerical trouble (a draw outside a parameter's support): named, not passed on."""
    bad = np.isnan(lp) & rows
    if np.any(bad):
        s, *ix = (int(i) for i in np.argwhere(bad)[0])
        raise ModelError(f"log-likelihood: log p({v.name}{ix if ix else ''} | θ) is NaN at draw {s} "
                         f"({int(bad.sum())} entries in all): a parameter draw outside its support?")


def observed_plates(model: Model, name: str) -> tuple:
    """The plates that index the pointwise log-likelihood of observed variable ``name``."""
    v = model[name]
    gate = _gate_of(v.prior)
    if gate is not None and gate.selector.is_latent:
        z = gate.selector.source if isinstance(gate.selector, Indexed) else gate.selector
        return tuple(z.plates[:-1]) if z.prior.ftype.name == "MarkovChain" else tuple(z.plates)
    return tuple(v.plates)


__all__ = ["observed_plates", "pointwise_log_likelihood", "present_entries"]
