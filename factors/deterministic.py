"""Deterministic Gaussian-valued nodes: sums, products, inner products with observed inputs.

Winn & Bishop (2005, §4.3).  Downward, a node y = g(parents) reports its moments (E[y], E[y²])
computed from its parents' posteriors (independent under mean field).  Upward, a Gaussian message
with natural parameters (η₁, η₂) arriving at y contributes η₁E[y] + η₂E[y²] to the ELBO, and each
moment of y is linear in each parent's expected statistics, so the message to a parent is that
contribution's gradient with respect to the parent's statistics:

* y = a + b:  E[y] = E[a] + E[b],  E[y²] = E[a²] + 2E[a]E[b] + E[b²]  ⇒ to a: (η₁ + 2η₂E[b], η₂)
* y = a·b:    E[y] = E[a]E[b],     E[y²] = E[a²]E[b²]               ⇒ to a: (η₁E[b], η₂E[b²])
* y_n = x_nᵀw (observed x_n):  E[y] = xᵀE[w],  E[y²] = xᵀE[wwᵀ]x
      ⇒ to w: (Σ_n η₁ₙ x_n, Σ_n η₂ₙ x_n x_nᵀ)   (MvGaussian w)
      ⇒ to w_d (mean field over d): (Σ_n x_nd(η₁ₙ + 2η₂ₙ(E[y_n] − x_nd E[w_d])), Σ_n η₂ₙ x_nd²)
* y_n = x_nᵀw_n, one weight vector per row (``inner(X, w[groups])``): the same per row, without the Σ_n
  (the indexed view w[groups] then sums the rows of each group)
* y = aᵀb of two independent random vectors (``dot(a, b)``, ``inner(Z, w)`` with a random Z):
      E[y] = E[a]ᵀE[b],  E[y²] = tr(E[aaᵀ]E[bbᵀ])  ⇒ to a: (Σ η₁E[b], Σ η₂E[bbᵀ])
  summed over the plates of y that a lacks (e.g. over d for z_n in y_nd = z_nᵀw_d); with an intercept
  (``intercept=True``) b has one more coordinate and y = b_{1:D}ᵀa + b_{D+1} = bᵀã with ã = (a, 1): the same
  rules on ã, whose moments are (E[a], 1) and [[E[aaᵀ], E[a]], [E[a]ᵀ, 1]], and a message (h̃, H̃) to ã is
  (h̃_{1:D} + 2H̃_{1:D, D+1}, H̃_{1:D, 1:D}) to a (the gradient through ã's moments)

A constant operand c enters with statistics (c, c²).  The parent's plates may be fewer than y's:
messages are summed over the missing plates (``plating.reduce``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Stats
from .data_products import cached_gram, projected_moments, weighted_grams
from .kernels.elementwise import sum_pullback_first, sum_second_moment
from .plating import expand, reduce


class Sum:
    """y = a + b (either may be a constant)."""

    name = "sum"

    @staticmethod
    def forward(par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        a, b = _expand_pair(par, p)
        return (a[0] + b[0], sum_second_moment(a[0], a[1], b[0], b[1]))

    @staticmethod
    def pullback(role: str, msg: Stats, par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        other = _expand_one(par, p, "b" if role == "a" else "a")
        h, eta2 = msg
        first = sum_pullback_first(h, eta2, other[0])
        out = (first, np.broadcast_to(eta2, np.broadcast_shapes(np.shape(eta2), np.shape(h))))
        return _reduce_to(out, p, role)


class Product:
    """y = a·b of two independent scalars (or a scaling by a constant)."""

    name = "product"

    @staticmethod
    def forward(par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        a, b = _expand_pair(par, p)
        return (a[0] * b[0], a[1] * b[1])

    @staticmethod
    def pullback(role: str, msg: Stats, par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        other = _expand_one(par, p, "b" if role == "a" else "a")
        h, eta2 = msg
        return _reduce_to((h * other[0], eta2 * other[1]), p, role)


class Inner:
    """y = Xw: rows of an observed matrix X (its own plates, last axis D) times a weight vector w.

    ``w`` is an MvGaussian (event D) or a scalar Gaussian plated over a plate of size D (mean
    field over d; that plate is consumed: its statistics arrive with D as the last axis).  The
    parameters hold einsum subscripts for X, w and y built from the plates, and XᵀX summed over
    X's plates for messages whose precision part is the same for every row.
    """

    name = "inner"

    @staticmethod
    def forward(par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        X, (sx, sw, sy) = p["X"], p["subscripts"]
        ew = par["w"]
        if p.get("rowwise") and not p["mean_field"]:  # E[y_n] = x_nᵀE[w_n], E[y_n²] = x_nᵀE[w_n w_nᵀ]x_n
            return (np.einsum(f"{sx}D,{sw}D->{sy}", X, ew[0], optimize=True),
                    np.einsum(f"{sx}D,{sw}DE,{sx}E->{sy}", X, ew[1], X, optimize=True))
        if p["mean_field"]:
            mean = np.einsum(f"{sx}D,{sw}D->{sy}", X, ew[0], optimize=True)
            var_w = ew[1] - ew[0] ** 2
            return mean, mean**2 + np.einsum(f"{sx}D,{sw}D->{sy}", X * X, var_w, optimize=True)
        # K weight vectors (K = 1 without plates on w): E[y_nk] = x_nᵀE[w_k] and E[y_nk²] = x_nᵀE[w_k w_kᵀ]x_n
        # from two BLAS products, X E[W]ᵀ and X [E[w_1w_1ᵀ] … E[w_Kw_Kᵀ]], then a row-wise dot
        X2 = X.reshape(-1, X.shape[-1])
        D = X2.shape[1]
        W1 = np.broadcast_to(ew[0], p["w_shape"] + (D,)).reshape(-1, D)
        W2 = np.broadcast_to(ew[1], p["w_shape"] + (D, D)).reshape(-1, D, D)
        mean, second = projected_moments(X2, W1, W2)
        return _to_y(mean, p), _to_y(second, p)

    @staticmethod
    def pullback(role: str, msg: Stats, par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        X, (sx, sw, sy) = p["X"], p["subscripts"]
        h, eta2 = (np.broadcast_to(a, p["shape"]) for a in msg)
        if p.get("rowwise") and not p["mean_field"]:  # to w_n: (η₁ₙx_n, η₂ₙx_n x_nᵀ)
            return (np.einsum(f"{sy},{sx}D->{sw}D", h, X, optimize=True),
                    np.einsum(f"{sy},{sx}D,{sx}E->{sw}DE", eta2, X, X, optimize=True))
        if p["mean_field"]:
            prec = np.einsum(f"{sy},{sx}D->{sw}D", eta2, X * X, optimize=True)
            ey = Inner.forward(par, p)[0]
            lin = np.einsum(f"{sy},{sx}D->{sw}D", h + 2.0 * eta2 * ey, X, optimize=True)
            return (lin - 2.0 * par["w"][0] * prec, prec)
        X2 = X.reshape(-1, X.shape[-1])
        D = X2.shape[1]
        H = _from_y(h, p)
        if all(msg[1].shape[i] == 1 for i in p["x_axes"]):
            # the precision part is the same for every row of X: use the cached XᵀX
            e = np.broadcast_to(np.squeeze(msg[1], axis=tuple(p["x_axes"])), p["w_shape"])
            return ((H.T @ X2).reshape(p["w_shape"] + (D,)), e[..., None, None] * cached_gram(p)[0])
        E = _from_y(eta2, p)
        if E.shape[1] <= _GRAM_LOOP:  # Xᵀh_k and Xᵀdiag(e_k)X for every weight vector in one pass over X
            lin, prec = weighted_grams(X2, E, H)
        else:  # many weight vectors on few rows
            lin, prec = H.T @ X2, np.einsum("nk,nd,ne->kde", E, X2, X2, optimize=True)
        return (lin.reshape(p["w_shape"] + (D,)), prec.reshape(p["w_shape"] + (D, D)))


class Dot:
    """y = aᵀb of two independent random D-vectors (MvGaussian), plated: y's plates are the union of a's and
    b's (``p["src"]`` of each operand, ``p["dst"]`` of y, ``p["sizes"]``), each operand broadcast over the plates
    it lacks.

    The moments and messages are einsum contractions over plate letters, so that neither operand is
    materialised over the plates it lacks (y_nd = z_nᵀw_d costs O(NDK²) flops and O(ND + NK² + DK²) memory):

        E[y] = E[a]ᵀE[b],   E[y²] = Σ_ij E[a_i a_j] E[b_i b_j],
        to a: (Σ_{plates of y not in a} η₁E[b],  Σ η₂E[bbᵀ]).

    With ``p["intercept"]`` b has D + 1 coordinates and a is read as ã = (a, 1) (module docstring).
    """

    name = "dot"

    @staticmethod
    def forward(par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        sa, sb, sy = dot_subscripts(p)
        (a1, a2), (b1, b2) = (_operand(par, p, r) for r in ("a", "b"))
        return (np.einsum(f"{sa}D,{sb}D->{sy}", a1, b1, optimize=True),
                np.einsum(f"{sa}DE,{sb}DE->{sy}", a2, b2, optimize=True))

    @staticmethod
    def pullback(role: str, msg: Stats, par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        sa, sb, sy = dot_subscripts(p)
        other = "b" if role == "a" else "a"
        mine, theirs = (sa, sb) if role == "a" else (sb, sa)
        o1, o2 = _operand(par, p, other)
        h, eta2 = (np.broadcast_to(m, p["sizes"]) for m in msg)
        h1 = np.einsum(f"{sy},{theirs}D->{mine}D", h, o1, optimize=True)
        h2 = np.einsum(f"{sy},{theirs}DE->{mine}DE", eta2, o2, optimize=True)
        if role == "a" and p.get("intercept"):  # the message to ã = (a, 1), pulled back to a
            return h1[..., :-1] + 2.0 * h2[..., :-1, -1], h2[..., :-1, :-1]
        return h1, h2


def _operand(par: dict[str, Stats], p: dict[str, Any], role: str) -> Stats:
    """An operand's moments on its plates; with an intercept, a's are those of ã = (a, 1)."""
    s1, s2 = _on_plates(par[role], p, role)
    if role == "b" or not p.get("intercept"):
        return s1, s2
    D = s1.shape[-1]
    t1 = np.concatenate([s1, np.ones(s1.shape[:-1] + (1,))], axis=-1)
    t2 = np.empty(s2.shape[:-2] + (D + 1, D + 1))
    t2[..., :D, :D] = s2
    t2[..., :D, D] = s1
    t2[..., D, :D] = s1
    t2[..., D, D] = 1.0
    return t1, t2


_PLATE_LETTERS = "abcdefghijklmnopqrstuvwxyz"  # plates of a dot product (events are D, E)


def dot_subscripts(p: dict[str, Any]) -> tuple[str, str, str]:
    """einsum letters of a, b and y from their plates (cached in the parameters)."""
    if "subscripts" not in p:
        letter = {q: _PLATE_LETTERS[j] for j, q in enumerate(p["dst"])}
        p["subscripts"] = tuple("".join(letter[q] for q in qs) for qs in (p["src"]["a"], p["src"]["b"], p["dst"]))
    return p["subscripts"]


def _on_plates(stats: Stats, p: dict[str, Any], role: str) -> Stats:
    """An operand's (E[x], E[xxᵀ]) broadcast (as views) to the full sizes of its own plates."""
    size = dict(zip(p["dst"], p["sizes"], strict=True))
    shape = tuple(size[q] for q in p["src"][role])
    out = []
    for s, k in zip(stats, (1, 2), strict=True):
        s = expand(s, p["src"][role], p["src"][role], k)
        out.append(np.broadcast_to(s, shape + s.shape[s.ndim - k:]))
    return tuple(out)


# ------------------------------------------------------------------------------------ helpers
_GRAM_LOOP = 64  # up to this many weight vectors, a weighted Gram per vector (BLAS) beats one einsum


def _perm(p: dict[str, Any]) -> tuple[int, ...]:
    """Axes of y in the order (X's plates, w's plates)."""
    sx, sw, sy = p["subscripts"]
    return tuple(sy.index(c) for c in sx + sw)


def _to_y(a: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """(rows of X, weight vectors) → y's plate order."""
    return a.reshape(p["X"].shape[:-1] + p["w_shape"]).transpose(np.argsort(_perm(p)))


def _from_y(a: np.ndarray, p: dict[str, Any]) -> np.ndarray:
    """y's plate order → (rows of X, weight vectors) as a matrix."""
    n = int(np.prod(p["X"].shape[:-1], dtype=np.int64))
    return np.broadcast_to(a, p["shape"]).transpose(_perm(p)).reshape(n, -1)


def _expand_one(par: dict[str, Stats], p: dict[str, Any], role: str) -> Stats:
    return tuple(expand(s, p["src"][role], p["dst"], 0) for s in par[role])


def _expand_pair(par: dict[str, Stats], p: dict[str, Any]) -> tuple[Stats, Stats]:
    return _expand_one(par, p, "a"), _expand_one(par, p, "b")


def _reduce_to(msg: Stats, p: dict[str, Any], role: str) -> Stats:
    return tuple(reduce(m, p["dst"], p["src"][role], p["sizes"], 0) for m in msg)
