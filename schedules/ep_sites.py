"""EP sites on linear forms (``schedules.ep_graph.Form``): their messages, sequential and parallel updates, and
their share of log Z_EP.

A site's instance n has terms s_t: scalar ones k·x[i] (messages ``h``, ``lam`` of shape (N, T)) and at most one
weight-vector term x_nᵀw (messages ``hv``, ``lv`` of shape (N,)), all in the coordinate of the term.  The
cavity of a term is q's marginal of s_t divided by the term's message; the kernels in
``factors.kernels.ep_sites`` do the moment matching and the convolutions (maths §18).
"""

from __future__ import annotations

import numpy as np

from factors.kernels.ep_sites import SITE_GAUSS, sequential_site, tilted_batch

from .ep_graph import Role, _known
from .messages import _Moments

_LOG_2PI = float(np.log(2.0 * np.pi))


def a1(lin: np.ndarray, prec: np.ndarray) -> np.ndarray:
    """The log partition of a 1-d Gaussian in natural form exp(L s − ½P s²): L²/(2P) − ½log P + ½log 2π."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return lin * lin / (2.0 * prec) - 0.5 * np.log(prec) + 0.5 * _LOG_2PI


class Site:
    """A site factor's constants and messages (one row per instance, one column per term)."""

    def __init__(self, role: Role, eng) -> None:
        f, form = role.factor, role.form
        cf = eng.cfactor(f)
        self.role, self.cf = role, cf
        m = {e: _Moments(eng, cf)[e] for e, arg in f.edges.items()
             if _known(arg) or (e == "out" and role.rows is not None)}
        self.code, a, self.c = role.rule.site(m, cf.params)
        n = form.offset.shape[0]
        fshape = tuple(p.size for p in f.plates)
        keep = np.ones(n, bool) if role.rows is None else role.rows  # rows with a missing label drop out
        self.a = np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=float), fshape).reshape(n)[keep])
        self.off = np.ascontiguousarray(form.offset[keep], dtype=float)
        n = self.off.shape[0]
        if form.scalar:
            self.idx = np.stack([eng.start[v.name] + i[keep] for v, i, _ in form.scalar], axis=1).astype(np.int64)
            self.coef = np.ascontiguousarray(np.stack([k[keep] for _, _, k in form.scalar], axis=1).astype(float))
        else:
            self.idx, self.coef = np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0))
        self.nz = self.coef != 0.0  # a term with coefficient 0 is absent from its row
        self.h, self.lam = np.zeros(self.idx.shape), np.zeros(self.idx.shape)
        self.scalars = list({id(v): v for v, _, _ in form.scalar}.values())
        self.w, X = form.vector[0] if form.vector else (None, np.zeros((len(keep), 0)))
        self.X = np.ascontiguousarray(X[keep], dtype=float)
        self.hv, self.lv = np.zeros(n), np.zeros(n)
        D = self.X.shape[1]
        self.current = (np.zeros(D), np.zeros((D, D)))  # the message to w that q(w) holds now

    def contribution(self, lv=None, hv=None) -> tuple:
        """The message to the weight vector, (Xᵀh, XᵀΛX)."""
        lv = self.lv if lv is None else lv
        hv = self.hv if hv is None else hv
        return self.X.T @ hv, (self.X.T * lv) @ self.X


def cavities(eng, s: Site):
    """Per instance and term the cavity (mean, variance) of s_t (variance inf: flat; 0: an absent term), the
    rows with an improper cavity, and for the vector term q's (variance, mean) and the cavity's natural pair."""
    k = np.where(s.nz, s.coef, 1.0)
    ps = np.where(s.nz, eng.prec[s.idx] / (k * k) - s.lam, 1.0)
    bad = np.any(ps < 0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        vc = np.where(s.nz, np.where(ps > 0, 1.0 / ps, np.inf), 0.0)
        mc = np.where(s.nz & (ps > 0), (eng.lin[s.idx] / k - s.h) * vc, 0.0)
    vec = None
    if s.w is not None:
        mu, sigma = eng._mu_sigma(s.w.name)
        vq = np.einsum("nd,nd->n", s.X @ sigma, s.X)
        mq = s.X @ mu
        pc, lc = 1.0 / vq - s.lv, mq / vq - s.hv
        bad |= ~(pc > 0)
        vcv = 1.0 / np.where(pc > 0, pc, 1.0)
        vc, mc = np.c_[vc, vcv], np.c_[mc, lc * vcv]
        vec = (vq, mq, pc, lc)
    return mc, vc, bad, vec


def targets(eng, s: Site, mc, vc, bad):
    """Every instance's new messages to its terms from the given cavities (parallel EP), and the rows updated."""
    flat = np.isinf(vc)
    nflat = flat.sum(axis=1)
    vfin = np.where(flat, 0.0, vc)
    md = s.off + mc.sum(axis=1)
    vd = np.where(nflat > 0, np.inf, vfin.sum(axis=1))
    if s.code == SITE_GAUSS:
        ld, hd, ok = s.a.copy(), np.zeros_like(s.a), ~bad
    else:
        ok = ~bad & np.isfinite(vd)
        _, mt, vt = tilted_batch(s.code, md, np.where(ok, vd, 1.0), s.a, s.c)
        good = ok & (vt > 0) & np.isfinite(mt)
        eng.skipped += int(np.count_nonzero(ok & ~good)) + int(np.count_nonzero(bad))
        ok = good
        with np.errstate(divide="ignore", invalid="ignore"):
            ld = np.where(ok, 1.0 / vt - 1.0 / vd, 0.0)
            hd = np.where(ok, mt / vt - md / vd, 0.0)
    vr = vfin.sum(axis=1, keepdims=True) - vfin
    vr = np.where((nflat[:, None] - flat) > 0, np.inf, vr)
    if vc.shape[1] == 1:
        vr = np.zeros_like(vr)
    mr = md[:, None] - mc
    with np.errstate(divide="ignore", invalid="ignore"):
        den = 1.0 + ld[:, None] * vr
        lam = np.where(np.isinf(vr), 0.0, ld[:, None] / den)
        h = np.where(np.isinf(vr), 0.0, (hd[:, None] - ld[:, None] * mr) / den)
    return lam, h, ok


def update_parallel(eng, s: Site, alpha: float) -> None:
    """All instances from the same q, damped; the step is halved until every q it touches is proper."""
    mc, vc, bad, vec = cavities(eng, s)
    lam, h, ok = targets(eng, s, mc, vc, bad)
    T = s.idx.shape[1]
    nz = np.c_[s.nz, np.ones((len(s.off), 1), bool)] if s.w is not None else s.nz
    old_l = np.c_[s.lam, s.lv] if s.w is not None else s.lam
    old_h = np.c_[s.h, s.hv] if s.w is not None else s.h
    keep = ok[:, None] & nz
    lam = (1.0 - alpha) * np.where(keep, lam, old_l) + alpha * old_l
    h = (1.0 - alpha) * np.where(keep, h, old_h) + alpha * old_h
    k = np.where(s.nz, s.coef, 0.0)
    J_rest = eng.vec[s.w.name][1] - s.current[1] if s.w is not None else None
    step = 1.0
    while True:
        dl, dh = step * (lam - old_l), step * (h - old_h)
        prec = eng.prec + np.bincount(s.idx.ravel(), (k * k * dl[:, :T]).ravel(), eng.prec.size)
        fine = np.all(prec[s.idx][s.nz] > 0)
        if s.w is not None and fine:
            Jn = (s.X.T * (s.lv + dl[:, T])) @ s.X
            fine = bool(np.all(np.linalg.eigvalsh(J_rest + Jn) > 0))
        if fine or step < 1e-9:
            break
        step *= 0.5
        eng.halved += 1
    eng.prec = prec
    eng.lin = eng.lin + np.bincount(s.idx.ravel(), (k * dh[:, :T]).ravel(), eng.lin.size)
    s.lam, s.h = s.lam + dl[:, :T], s.h + dh[:, :T]
    if s.w is not None:
        s.lv, s.hv = s.lv + dl[:, T], s.hv + dh[:, T]
        _move_vector(eng, s, (s.X.T @ s.hv, Jn))


def update_sequential(eng, s: Site, alpha: float) -> None:
    """The instances in order, q updated after each (``factors.kernels.ep_sites.sequential_site``)."""
    if s.w is not None:
        mu, sigma = eng._mu_sigma(s.w.name)
    else:
        mu, sigma = np.zeros(0), np.zeros((0, 0))
    _, skipped = sequential_site(s.code, s.idx, s.coef, s.off, s.a, s.c, s.h, s.lam, eng.lin, eng.prec, s.X,
                                 s.hv, s.lv, mu, sigma, alpha)
    eng.skipped += skipped
    if s.w is not None:
        _move_vector(eng, s, s.contribution())


def _move_vector(eng, s: Site, new: tuple) -> None:
    """Replace the site's message to w that q(w) holds by ``new`` = (Xᵀh, XᵀΛX) of its current messages (q(w)'s
    natural parameters are then exactly the sum of its messages, whatever round-off a sequential pass made)."""
    eng.vec[s.w.name][0] += new[0] - s.current[0]
    eng.vec[s.w.name][1] += new[1] - s.current[1]
    s.current = new


def site_evidence(eng, s: Site) -> float:
    """Σ_n [log Z_n + Σ_t (κ₁(cavity of s_t) − κ₁(q of s_t))] at the current messages."""
    mc, vc, _, vec = cavities(eng, s)
    md, vd = s.off + mc.sum(axis=1), vc.sum(axis=1)
    k = np.where(s.nz, s.coef, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lz = tilted_batch(s.code, md, vd, s.a, s.c)[0]
        qp = eng.prec[s.idx] / (k * k)
        ql = eng.lin[s.idx] / k
        total = float(np.sum(lz) + np.sum(np.where(s.nz, a1(ql - s.h, qp - s.lam) - a1(ql, qp), 0.0)))
        if vec is not None:
            vq, mq, pc, lc = vec
            total += float(np.sum(a1(lc, pc) - a1(mq / vq, 1.0 / vq)))
    return total
