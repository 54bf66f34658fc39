"""Multilinear polynomials of independent Gaussian leaves: sums and products whose operands share variables.

``a*b + b*c`` is refused by the binary ``Sum`` (its operands are correlated through b) but is exact under
mean field when written out: y = Σ_m c_m Π_{v∈m} v, each variable of degree ≤ 1 in every monomial m
(multilinear), so y² has degree ≤ 2 in every variable and

    E[y]  = Σ_m c_m Π_{v∈m} E[v],
    E[y²] = Σ_{m,m'} c_m c_m' Π_{v∈m∩m'} E[v²] Π_{v∈m△m'} E[v].

Both are linear in each leaf's statistics (E[u], E[u²]), so a Gaussian message (η₁, η₂) on y pulls back
to u as the gradient of η₁E[y] + η₂E[y²]:

    to u: (η₁ Σ_{m∋u} c_m Π_{m∖u} E[v] + η₂ Σ_{u∈m△m'} c_m c_m' Π…,   η₂ Σ_{u∈m∩m'} c_m c_m' Π…)

summed over y's plates that u lacks.  Coefficients c_m are arrays on y's plates (constants of the
expression, expanded).  Leaves are ``x0``, ``x1``, … with plates ``p["src"][role]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Stats
from .plating import expand, reduce


def _leaf_moments(par: dict[str, Stats], p: dict[str, Any]) -> dict[str, Stats]:
    return {r: tuple(expand(s, p["src"][r], p["dst"], 0) for s in par[r]) for r in p["roles"]}


def _product(m: dict[str, Stats], factors: dict[str, int]) -> Any:
    """Π over leaves of E[v] (power 1) or E[v²] (power 2)."""
    out: Any = 1.0
    for r, k in factors.items():
        out = out * m[r][k - 1]
    return out


def _pairs(p: dict[str, Any]):
    """(c_m c_m', {leaf: degree in the monomial m·m'}) for every ordered pair of monomials."""
    for ca, la in p["monomials"]:
        for cb, lb in p["monomials"]:
            deg = dict.fromkeys(la | lb, 1)
            for r in la & lb:
                deg[r] = 2
            yield ca * cb, deg


class Polynomial:
    """y = Σ_m c_m Π_{v∈m} v over independent scalar Gaussian leaves (multilinear; see the module docstring)."""

    name = "polynomial"

    @staticmethod
    def forward(par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        m = _leaf_moments(par, p)
        shape = p["shape"]
        ey = sum((c * _product(m, dict.fromkeys(leaves, 1)) for c, leaves in p["monomials"]), np.zeros(shape))
        ey2 = sum((c * _product(m, deg) for c, deg in _pairs(p)), np.zeros(shape))
        return np.broadcast_to(ey, shape), np.broadcast_to(ey2, shape)

    @staticmethod
    def pullback(role: str, msg: Stats, par: dict[str, Stats], p: dict[str, Any]) -> Stats:
        m = _leaf_moments(par, p)
        h, eta2 = msg
        g1: Any = 0.0
        g2: Any = 0.0
        for c, leaves in p["monomials"]:
            if role in leaves:
                g1 = g1 + h * c * _product(m, {r: 1 for r in leaves if r != role})
        for c, deg in _pairs(p):
            k = deg.pop(role, 0)
            if k == 1:
                g1 = g1 + eta2 * c * _product(m, deg)
            elif k == 2:
                g2 = g2 + eta2 * c * _product(m, deg)
        shape = p["shape"]
        out = (np.broadcast_to(g1, shape), np.broadcast_to(g2, shape))
        return tuple(reduce(a, p["dst"], p["src"][role], p["sizes"], 0) for a in out)
