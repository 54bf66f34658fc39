"""The state and sweeps of expectation propagation (``fg.EP``; the roles of factors: ``schedules.ep_graph``).

q(x) is the product of the messages into x.  Scalar Gaussians are held in one buffer of natural parameters
(linear coefficient, precision), a full-covariance weight vector as (h, J), any other family as its natural
parameters.  Exact factors send their message once; hybrid (VMP) factors send theirs each sweep from the
current q (through the message-passing engine's rules); each site updates its messages by moment matching,
in parallel over its instances (one vectorised step from the cavities of the current q) or sequentially (a
numba pass that updates q after each instance: ``factors.kernels.ep_sites``).  Site messages are kept in
the coordinate s_t of each term of the site's linear form (module ``ep_graph``).

An update that would make a cavity or q improper is refused: a sequential instance is skipped, a parallel
step is halved (at most 30 times) until every q it touches is proper, its instances with improper cavities
kept as they were; both are counted.
"""

from __future__ import annotations

import numpy as np

from distributions import Gaussian, MvGaussian
from factors.kernels.ep_sites import (
    SITE_GAUSS,
    sequential_scalar,
    sequential_vector,
    tilted_batch,
)
from factors.plating import weighted_total

from .binding import _bind
from .compiled import CFactor
from .ep_graph import Role, _known, classify
from .evidence import Evidence
from .messages import _Moments

_LOG_2PI = float(np.log(2.0 * np.pi))


class _Structure:
    """What ``MessagePassing`` reads of a compiled model, for the hybrid factors (direct edges only)."""

    def __init__(self, latent) -> None:
        self.consumers: dict = {}
        self.dropped: set = set()
        self.pruned: dict = {}
        self.latent = latent


def a1(lin: np.ndarray, prec: np.ndarray) -> np.ndarray:
    """The log partition of a 1-d Gaussian in natural form exp(L s − ½P s²): L²/(2P) − ½log P + ½log 2π."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return lin * lin / (2.0 * prec) - 0.5 * np.log(prec) + 0.5 * _LOG_2PI


class Site:
    """A site factor's constants and messages (one row per instance, one column per term)."""

    def __init__(self, role: Role, eng: EPEngine) -> None:
        f, form = role.factor, role.form
        cf = eng.cfactor(f)
        self.role, self.cf = role, cf
        m = {e: _Moments(eng, cf)[e] for e, a in f.edges.items() if not _latent(a)}
        self.code, a, self.c = role.rule.site(m, cf.params)
        n = form.offset.shape[0]
        fshape = tuple(p.size for p in f.plates)
        self.a = np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=float), fshape).reshape(n))
        self.off = np.ascontiguousarray(form.offset, dtype=float)
        self.vector = bool(form.vector)
        if self.vector:
            self.w, X = form.vector[0]
            self.X = np.ascontiguousarray(X)
            self.h, self.lam = np.zeros(n), np.zeros(n)
        else:
            self.idx = np.stack([eng.start[v.name] + i for v, i, _ in form.scalar], axis=1).astype(np.int64)
            self.coef = np.ascontiguousarray(np.stack([k for _, _, k in form.scalar], axis=1).astype(float))
            self.nz = self.coef != 0.0  # a term with coefficient 0 is absent from its row
            self.h, self.lam = np.zeros(self.idx.shape), np.zeros(self.idx.shape)

    # ---------------------------------------------------------------------------- vector (x_nᵀw)
    def vector_cavity(self, mu: np.ndarray, sigma: np.ndarray):
        XS = self.X @ sigma
        vq = np.einsum("nd,nd->n", XS, self.X)
        mq = self.X @ mu
        return vq, mq, 1.0 / vq - self.lam, mq / vq - self.h

    def contribution(self, lam=None, h=None) -> tuple:
        """This site's message to its weight vector, (Xᵀh, XᵀΛX)."""
        lam = self.lam if lam is None else lam
        h = self.h if h is None else h
        return self.X.T @ h, (self.X.T * lam) @ self.X

    # ---------------------------------------------------------------------------- scalar terms
    def scalar_cavity(self, lin: np.ndarray, prec: np.ndarray):
        k = np.where(self.nz, self.coef, 1.0)
        ps = np.where(self.nz, prec[self.idx] / (k * k) - self.lam, 1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            vc = np.where(ps > 0, 1.0 / ps, np.inf)
            mc = np.where(ps > 0, (lin[self.idx] / k - self.h) * vc, 0.0)
        return ps, np.where(self.nz, mc, 0.0), np.where(self.nz, vc, 0.0)

    def log_z(self, mc, vc) -> np.ndarray:
        return tilted_batch(self.code, mc, vc, self.a, self.c)[0]


def _latent(a) -> bool:
    return not _known(a)


class EPEngine(Evidence):
    """The EP state of a model (module docstring)."""

    def __init__(self, model, damping: float, parallel: bool, factor_damping: dict | None = None) -> None:
        self.model = model
        self.parallel = parallel
        self.latent = [v for v in model.variables.values() if v.is_latent]
        self.c = _Structure(self.latent)
        self.stats, self.version, self.q = {}, {}, {}
        self._det_cache, self._obs_stats, self._last, self._ev_cache, self.block = {}, {}, {}, {}, {}
        self._keep_last, self._updating = False, None
        self.roles = [classify(f) for f in model.factors]
        self.damping = {r.factor.name: (factor_damping or {}).get(r.factor.name, damping) for r in self.roles}
        self.skipped = 0  # instances whose cavity or update was improper
        self.halved = 0  # parallel steps halved to keep q proper
        self.start: dict[str, int] = {}
        g = 0
        for v in self.latent:
            if v.family is Gaussian and not v.event_shape:
                self.start[v.name] = g
                g += int(np.prod(v.shape, dtype=np.int64))
        self.lin, self.prec = np.zeros(g), np.zeros(g)
        self.vec: dict[str, list] = {}
        self.other: dict[str, list] = {}
        for v in self.latent:
            if v.name in self.start:
                continue
            if v.family is MvGaussian and not v.plates:
                D = v.event_shape[0]
                self.vec[v.name] = [np.zeros(D), np.zeros((D, D))]
            else:
                self.other[v.name] = [z.copy() for z in v.family._zero_natural(v.shape, v.event_shape)]
        self._cf: dict[str, CFactor] = {}
        self.msgs: dict[tuple[str, str], tuple] = {}  # (factor, edge) -> its current message (exact and hybrid)
        self.sites = {}
        for r in self.roles:
            if r.kind == "exact":
                self._send(r, r.edge, damping=0.0)
        self.refresh_all()
        for r in self.roles:
            if r.kind == "site":
                self.sites[r.factor.name] = Site(r, self)

    # ---------------------------------------------------------------------------- compiled factors
    def cfactor(self, f) -> CFactor:
        cf = self._cf.get(f.name)
        if cf is None:
            rules = {}
            for edge, arg in f.edges.items():
                if _latent(arg):
                    try:
                        rules[edge] = f.ftype.get_rule(edge, "ncvmp", f.method)
                    except LookupError:
                        pass
            try:
                evidence, kind = f.ftype.get_evidence(f.method)
            except LookupError:
                evidence, kind = None, "exact"
            cf = CFactor(f, tuple(p.index for p in f.plates), (), {}, rules, evidence, kind, {})
            _bind(cf)
            self._cf[f.name] = cf
        return cf

    # ---------------------------------------------------------------------------- q and its statistics
    def natural(self, v) -> tuple:
        """q(v)'s natural parameters in its family's form."""
        if v.name in self.start:
            s, n = self.start[v.name], int(np.prod(v.shape, dtype=np.int64))
            return self.lin[s:s + n].reshape(v.shape), -0.5 * self.prec[s:s + n].reshape(v.shape)
        if v.name in self.vec:
            h, J = self.vec[v.name]
            return h, -0.5 * J
        return tuple(self.other[v.name])

    def add(self, v, msg: tuple, sign: float = 1.0) -> None:
        if v.name in self.start:
            s, n = self.start[v.name], int(np.prod(v.shape, dtype=np.int64))
            self.lin[s:s + n] += sign * np.broadcast_to(msg[0], v.shape).reshape(-1)
            self.prec[s:s + n] += -2.0 * sign * np.broadcast_to(msg[1], v.shape).reshape(-1)
        elif v.name in self.vec:
            self.vec[v.name][0] += sign * msg[0]
            self.vec[v.name][1] += -2.0 * sign * msg[1]
        else:
            st = self.other[v.name]
            for i, m in enumerate(msg):
                st[i] = st[i] + sign * np.broadcast_to(m, st[i].shape)

    def refresh(self, v) -> None:
        q = v.family.from_natural(*self.natural(v))
        self.q[v.name] = q
        self.stats[v.name] = q.expected_stats() if np.all(q.is_proper()) else self.stats.get(v.name)
        self.version[v.name] = self.version.get(v.name, 0) + 1

    def refresh_all(self) -> None:
        for v in self.latent:
            self.refresh(v)

    def proper(self, v) -> bool:
        return bool(np.all(v.family.from_natural(*self.natural(v)).is_proper()))

    # ---------------------------------------------------------------------------- exact and hybrid factors
    def _send(self, role: Role, edge: str, damping: float) -> None:
        cf = self.cfactor(role.factor)
        v = role.factor.edges[edge]
        for u in role.factor.edges.values():
            if _latent(u) and u.name not in self.stats:
                self.refresh(u)
        new = self.factor_message(cf, edge)
        new = tuple(np.broadcast_to(m, z.shape).copy() for m, z in zip(new, self.natural(v), strict=True))
        old = self.msgs.get((role.factor.name, edge))
        if old is not None and damping > 0.0:
            new = tuple((1.0 - damping) * a + damping * b for a, b in zip(new, old, strict=True))
        if old is not None:
            self.add(v, old, -1.0)
        self.add(v, new)
        step = 1.0
        while old is not None and not self.proper(v) and step > 1e-9:
            self.add(v, new, -1.0)
            step *= 0.5
            new = tuple(b + step * (a - b) for a, b in zip(new, old, strict=True))
            self.add(v, new)
            self.halved += 1
        if not self.proper(v) and old is not None:
            self.add(v, new, -1.0)
            self.add(v, old)
            self.skipped += 1
            new = old
        self.msgs[(role.factor.name, edge)] = new
        self.refresh(v)

    # ---------------------------------------------------------------------------- a sweep
    def sweep(self) -> None:
        for r in self.roles:
            if r.kind == "vmp":
                for edge in r.targets:
                    self._send(r, edge, self.damping[r.factor.name])
            elif r.kind == "site":
                s = self.sites[r.factor.name]
                alpha = self.damping[r.factor.name]
                if s.vector:
                    self._vector_site(s, alpha)
                else:
                    self._scalar_site(s, alpha)

    def _mu_sigma(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        h, J = self.vec[name]
        L = np.linalg.cholesky(J)
        Li = np.linalg.inv(L)
        sigma = Li.T @ Li
        return sigma @ h, sigma

    def _vector_site(self, s: Site, alpha: float) -> None:
        v = s.w
        h0, J0 = s.contribution()
        if not self.parallel:
            mu, sigma = self._mu_sigma(v.name)
            _, skipped = sequential_vector(s.code, s.X, s.off, s.a, s.c, s.h, s.lam, mu, sigma, alpha)
            self.skipped += skipped
        else:
            mu, sigma = self._mu_sigma(v.name)
            vq, mq, pc, lc = s.vector_cavity(mu, sigma)
            ok = pc > 0
            vc = np.where(ok, 1.0 / np.where(ok, pc, 1.0), 1.0)
            mc = lc * vc + s.off
            _, mt, vt = tilted_batch(s.code, mc, vc, s.a, s.c)
            ok &= (vt > 0) & np.isfinite(mt)
            with np.errstate(divide="ignore", invalid="ignore"):
                lam = np.where(ok, 1.0 / vt - pc, s.lam)
                h = np.where(ok, mt / vt - mc / vc - lam * s.off, s.h)
            self.skipped += int(np.count_nonzero(~ok))
            lam = (1.0 - alpha) * lam + alpha * s.lam
            h = (1.0 - alpha) * h + alpha * s.h
            old_l, old_h = s.lam.copy(), s.h.copy()
            step = 1.0
            while True:
                s.lam, s.h = old_l + step * (lam - old_l), old_h + step * (h - old_h)
                hn, Jn = s.contribution()
                if np.all(np.linalg.eigvalsh(self.vec[v.name][1] - J0 + Jn) > 0) or step < 1e-9:
                    break
                step *= 0.5
                self.halved += 1
        h1, J1 = s.contribution()
        self.vec[v.name][0] += h1 - h0
        self.vec[v.name][1] += J1 - J0
        self.refresh(v)

    def _scalar_site(self, s: Site, alpha: float) -> None:
        if not self.parallel:
            _, skipped = sequential_scalar(s.code, s.idx, s.coef, s.off, s.a, s.c, s.h, s.lam, self.lin,
                                           self.prec, alpha)
            self.skipped += skipped
        else:
            lam, h, ok = self._scalar_targets(s)
            lam = (1.0 - alpha) * lam + alpha * s.lam
            h = (1.0 - alpha) * h + alpha * s.h
            old_l, old_h = s.lam.copy(), s.h.copy()
            k = np.where(s.nz, s.coef, 0.0)
            step = 1.0
            while True:
                dl = step * np.where(ok[:, None], lam - old_l, 0.0)
                dh = step * np.where(ok[:, None], h - old_h, 0.0)
                new_prec = self.prec + np.bincount(s.idx.ravel(), (k * k * dl).ravel(), self.prec.size)
                if np.all(new_prec[s.idx] > 0) or step < 1e-9:
                    break
                step *= 0.5
                self.halved += 1
            self.prec = new_prec
            self.lin = self.lin + np.bincount(s.idx.ravel(), (k * dh).ravel(), self.lin.size)
            s.lam, s.h = old_l + dl, old_h + dh
        for v, _, _ in s.role.form.scalar:
            self.refresh(v)

    def _scalar_targets(self, s: Site):
        """Every instance's new messages to its terms from the cavities of the current q (parallel EP)."""
        ps, mc, vc = s.scalar_cavity(self.lin, self.prec)
        proper = np.all(ps >= 0, axis=1)
        flat = np.isinf(vc)
        nflat = flat.sum(axis=1)
        vfin = np.where(flat, 0.0, vc)
        md = s.off + mc.sum(axis=1)
        vd = np.where(nflat > 0, np.inf, vfin.sum(axis=1))
        if s.code == SITE_GAUSS:
            ld, hd = s.a.copy(), np.zeros_like(s.a)
            ok = proper
        else:
            ok = proper & np.isfinite(vd)
            _, mt, vt = tilted_batch(s.code, md, np.where(ok, vd, 1.0), s.a, s.c)
            good = ok & (vt > 0) & np.isfinite(mt)
            self.skipped += int(np.count_nonzero(ok & ~good)) + int(np.count_nonzero(~proper))
            ok = good
            with np.errstate(divide="ignore", invalid="ignore"):
                ld = np.where(ok, 1.0 / vt - 1.0 / vd, 0.0)
                hd = np.where(ok, mt / vt - md / vd, 0.0)
        vr = vfin.sum(axis=1, keepdims=True) - vfin
        vr = np.where((nflat[:, None] - flat) > 0, np.inf, vr)
        if s.idx.shape[1] == 1:
            vr = np.zeros_like(vr)
        mr = md[:, None] - mc
        with np.errstate(divide="ignore", invalid="ignore"):
            den = 1.0 + ld[:, None] * vr
            lam = np.where(np.isinf(vr), 0.0, ld[:, None] / den)
            h = np.where(np.isinf(vr), 0.0, (hd[:, None] - ld[:, None] * mr) / den)
        keep = ok[:, None] & s.nz
        return np.where(keep, lam, np.where(s.nz, s.lam, 0.0)), np.where(keep, h, np.where(s.nz, s.h, 0.0)), ok

    # ---------------------------------------------------------------------------- evidence
    def log_evidence(self) -> float:
        """log Z_EP = Σ_exact, hybrid c_f + Σ_sites Σ_n [log Z_n + Σ_t (κ(cavity_t) − κ(q_t))] + Σ_v κ(q_v)."""
        total = 0.0
        for r in self.roles:
            if r.kind in ("exact", "vmp", "constant"):
                cf = self.cfactor(r.factor)
                if cf.evidence is None:
                    continue
                total += weighted_total(cf.evidence(_Moments(self, cf), cf.params), None, cf.plates, cf.sizes)
                for edge in ((r.edge,) if r.kind == "exact" else r.targets):
                    v = r.factor.edges[edge]
                    total -= _inner(self.msgs[(r.factor.name, edge)], self.stats[v.name])
            elif r.kind == "site":
                total += self._site_evidence(self.sites[r.factor.name])
        for v in self.latent:
            if v.name in self.start:
                lin, prec = self.natural(v)
                total += float(a1(lin, -2.0 * prec).sum())
            elif v.name in self.vec:
                mu, sigma = self._mu_sigma(v.name)
                D = mu.shape[0]
                total += 0.5 * float(self.vec[v.name][0] @ mu) + 0.5 * np.linalg.slogdet(sigma)[1] \
                    + 0.5 * D * _LOG_2PI
            else:
                total += float(np.sum(self.q[v.name].log_partition()))
        return float(total)

    def _site_evidence(self, s: Site) -> float:
        if s.vector:
            mu, sigma = self._mu_sigma(s.w.name)
            vq, mq, pc, lc = s.vector_cavity(mu, sigma)
            with np.errstate(divide="ignore", invalid="ignore"):
                vc = 1.0 / pc
                lz = s.log_z(lc * vc + s.off, vc)
                return float(np.sum(lz + a1(lc, pc) - a1(mq / vq, 1.0 / vq)))
        ps, mc, vc = s.scalar_cavity(self.lin, self.prec)
        k = np.where(s.nz, s.coef, 1.0)
        md = s.off + mc.sum(axis=1)
        vd = vc.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            lz = tilted_batch(s.code, md, vd, s.a, s.c)[0]
            qp = self.prec[s.idx] / (k * k)
            ql = self.lin[s.idx] / k
            terms = np.where(s.nz, a1(ql - s.h, ps) - a1(ql, qp), 0.0)
        return float(np.sum(lz) + np.sum(terms))


def _inner(msg: tuple, stats: tuple) -> float:
    """⟨η, E[u]⟩ summed over every element and event axis."""
    return float(sum(np.sum(np.broadcast_to(m, s.shape) * s) for m, s in zip(msg, stats, strict=True)))
