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
from factorgraph.graph.nodes import Deterministic, Indexed, ModelError, Variable
from factors.deterministic import Inner
from factors.index import scatter
from factors.plating import move_event_to_plate, weighted_total

from .binding import _bind
from .compiled import CFactor
from .ep_gates import GateSite
from .ep_graph import Role, _known, classify
from .ep_sites import Site, a1, site_evidence, update_parallel, update_sequential
from .errors import InferenceError
from .evidence import Evidence
from .messages import _index_axes, _Moments

_LOG_2PI = float(np.log(2.0 * np.pi))


class _Structure:
    """What ``MessagePassing`` reads of a compiled model, for the exact and hybrid factors' messages (no
    consumers: ``EPEngine._pull`` takes a message back through expressions itself)."""

    def __init__(self, latent) -> None:
        self.consumers: dict = {}
        self.dropped: set = set()
        self.pruned: dict = {}
        self.latent = latent


def _latent(a) -> bool:
    return not _known(a)


class EPEngine(Evidence):
    """The EP state of a model (module docstring)."""

    def __init__(self, model, damping: float, parallel: bool, factor_damping: dict | None = None) -> None:
        self.model = model
        self.parallel = parallel
        self.roles = [classify(f) for f in model.factors]
        # a site's labels with missing entries: those rows drop out, and the labels get no posterior
        dropped = {r.factor.edges["out"].name for r in self.roles if r.rows is not None}
        self.latent = [v for v in model.variables.values() if v.is_latent and v.name not in dropped]
        self.c = _Structure(self.latent)
        self.c.dropped = dropped
        self.stats, self.version, self.q = {}, {}, {}
        self._det_cache, self._obs_stats, self._last, self._ev_cache, self.block = {}, {}, {}, {}, {}
        self._keep_last, self._updating = False, None
        unknown = sorted(set(factor_damping or {}) - {f.name for f in model.factors})
        if unknown:
            raise ModelError(f"damping given for unknown factors {unknown}; factors are "
                             f"{sorted(f.name for f in model.factors)}")
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
        # (factor, edge, variable) -> the exact or hybrid factor's current message to the variable
        self.msgs: dict[tuple[str, str, str], tuple] = {}
        self.sites = {}
        for r in self.roles:
            if r.kind == "exact":
                self._send(r, r.edge, damping=0.0)
        self.refresh_all()
        for r in self.roles:
            if r.kind == "site":
                self.sites[r.factor.name] = Site(r, self)
            elif r.kind == "gate":
                self.sites[r.factor.name] = GateSite(r.factor, self)

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

    def improper(self) -> list[str]:
        """The latent variables whose q is not a proper distribution."""
        return [v.name for v in self.latent if not self.proper(v)]

    def proper(self, v) -> bool:
        return bool(np.all(v.family.from_natural(*self.natural(v)).is_proper()))

    # ---------------------------------------------------------------------------- exact and hybrid factors
    def _send(self, role: Role, edge: str, damping: float) -> None:
        """The factor's VMP message along ``edge``, pulled back through deterministic nodes and indexed views to
        the variables (``MessagePassing``'s rules), damped, each variable's step halved until its q is proper."""
        cf = self.cfactor(role.factor)
        target = role.factor.edges[edge]
        own = target if isinstance(target, Variable) and role.factor.ftype.conjugate else None
        reached = [u for a in role.factor.edges.values() if _latent(a) for u in _roots(a)]
        if any(u is not own and not self.proper(u) for u in reached):
            return  # a neighbour's q is still flat or improper: the VMP message waits (see ``improper``)
        msgs: dict[str, tuple] = {}
        self._pull(target, self.factor_message(cf, edge), msgs)
        for name, new in msgs.items():
            v = self.model.variables[name]
            new = tuple(np.broadcast_to(m, z.shape).copy() for m, z in zip(new, self.natural(v), strict=True))
            key = (role.factor.name, edge, name)
            old = self.msgs.get(key)
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
            self.msgs[key] = new
            self.refresh(v)

    def _pull(self, node, msg: tuple, out: dict) -> None:
        """Add the message ``msg`` on ``node`` to ``out`` by variable: a deterministic node's is pulled back to its
        latent parents, an indexed view's summed back onto its source's elements."""
        if isinstance(node, Variable):
            if node.is_latent:
                out[node.name] = msg if node.name not in out else tuple(
                    a + b for a, b in zip(out[node.name], msg, strict=True))
            return
        if isinstance(node, Indexed):
            axis, dest, k = _index_axes(node)
            self._pull(node.source, tuple(scatter(m, node.labels, node.counts, axis, dest, k, e)
                                          for m, e in zip(msg, node.family.event_ndims, strict=True)), out)
            return
        inc = tuple(np.broadcast_to(a, node.shape) if np.ndim(a) == len(node.plates)
                    else np.asarray(a).reshape((1,) * (len(node.plates) - np.ndim(a)) + np.shape(a)) for a in msg)
        par = self._det_parent_stats(node)
        for role, p in node.parents.items():
            if isinstance(p, Variable | Deterministic | Indexed) and _roots(p):
                m = node.op.pullback(role, inc, par, node.params)
                if node.op is Inner and node.params["mean_field"]:
                    m = tuple(move_event_to_plate(a, [x.index for x in p.plates], node.params["consumed"].index, 0)
                              for a in m)
                self._pull(p, m, out)

    # ---------------------------------------------------------------------------- a sweep
    def sweep(self) -> None:
        for r in self.roles:
            if r.kind == "vmp":
                for edge in r.targets:
                    self._send(r, edge, self.damping[r.factor.name])
            elif r.kind == "site":
                s = self.sites[r.factor.name]
                (update_parallel if self.parallel else update_sequential)(self, s, self.damping[r.factor.name])
                for v in s.scalars + ([s.w] if s.w is not None else []):
                    self.refresh(v)
            elif r.kind == "gate":
                s = self.sites[r.factor.name]
                s.update(self, self.damping[r.factor.name], self.parallel)
                for v in s.scalars + ([] if s.fixed else [s.z]):
                    self.refresh(v)

    def _mu_sigma(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        h, J = self.vec[name]
        try:
            L = np.linalg.cholesky(J)
        except np.linalg.LinAlgError:
            raise InferenceError(f"EP: q({name}) is not a proper Gaussian (its precision matrix is not positive "
                                 f"definite): a site's cavity needs a proper q, so give {name!r} a proper prior "
                                 "(a flat prior, precision 0, leaves the first cavities flat)") from None
        Li = np.linalg.inv(L)
        sigma = Li.T @ Li
        return sigma @ h, sigma

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
                for (fname, _, name), msg in self.msgs.items():
                    if fname == r.factor.name:
                        total -= _inner(msg, self.stats[name])
            elif r.kind == "site":
                total += site_evidence(self, self.sites[r.factor.name])
            elif r.kind == "gate":
                total += self.sites[r.factor.name].evidence(self)
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


def _inner(msg: tuple, stats: tuple) -> float:
    """⟨η, E[u]⟩ summed over every element and event axis."""
    return float(sum(np.sum(np.broadcast_to(m, s.shape) * s) for m, s in zip(msg, stats, strict=True)))


def _roots(node) -> list:
    """The latent variables a node (a variable, an indexed view or a deterministic expression) reads."""
    if isinstance(node, Variable):
        return [node] if node.is_latent else []
    if isinstance(node, Indexed):
        return _roots(node.source)
    if isinstance(node, Deterministic):
        return [u for p in node.parents.values() if isinstance(p, Variable | Deterministic | Indexed)
                for u in _roots(p)]
    return []
