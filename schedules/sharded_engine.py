"""The driver's engine of a sharded fit: the globals updated here, the locals in their chunks.

``ShardedEngine`` presents the interface of ``engine.Engine`` that ``engine._iterate`` uses (``update``,
``elbo``, ``snapshot``/``restore``, the damping of backtracking) over the chunk states: an update of a global
sums the messages of the factors on the plate over the chunks' partial sums (those off the plate, its prior,
come from chunk 0), forms q and checks it as the engine does, and queues it for the chunks with the next batch
of commands; an update of a local variable is a command the chunks run on their rows.  A handled global is
fitted here against a ``ShardedTarget`` whose sites are the chunks' rows.
"""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy.linalg import block_diag

from distributions import MvGaussian

from .backtracking import raise_damping, relax_damping
from .errors import InferenceError
from .handlers import BlockTarget
from .updates import _summary


class _Factor(SimpleNamespace):
    """What ``_iterate`` reads of a compiled factor: its name, damping and kind."""


class ShardedTarget:
    """A handled global's ``BlockTarget`` whose sites are the chunks' rows: the Gaussian part (the rest of the
    graph's message) here, the site sums Σ_n log f_n, their gradients and Hessians (and Laplace's expansion) as
    reductions over the chunks, each a round trip that ships w and brings back D + D² numbers per chunk."""

    def __new__(cls, eng, name: str, eta1, eta2, prior):
        class _Sharded(BlockTarget):
            def _site_terms(self, W, scales, grads=True, skip_quadratic=False):
                parts = eng.ask(("site", name, "terms", W, scales, grads, skip_quadratic))
                val = sum(p[0] for p in parts)
                grad = None if not grads else sum(p[1] for p in parts)
                gs = None if not scales else sum(p[2] for p in parts)
                return val, grad, gs

            def hessian(self, w):
                return 2.0 * self.eta2 + sum(eng.ask(("site", name, "hessian", w)))

            def laplace_site_term(self, w, cov):
                return float(sum(eng.ask(("site", name, "laplace", w, cov))))

            def quadratic_site_term(self, mu, cov):
                return float(sum(eng.ask(("site", name, "quadratic", mu, cov))))

            @property
            def mc_sites(self):
                return any(eng.ask(("site", name, "mc")))

            def gaussian_part(self):
                e1, e2, c = self.eta1, self.eta2, float(self.prior_const)
                for b, q, a in eng.ask(("site", name, "natural")):
                    e1, e2, c = e1 + b, e2 + q, c + a
                return e1, e2, c

        return _Sharded(np.asarray(eta1, float), np.asarray(eta2, float), [], prior)


class ShardedEngine:
    """The engine's interface over chunk states: globals updated here, locals in their chunks."""

    def __init__(self, backend, info: dict, algorithm, model, handlers: dict | None = None) -> None:
        self.backend = backend
        self.local = info["local"]
        self.sequential = info["sequential"]
        self.q: dict[str, Any] = dict(info["q"])
        self.variables = model.variables
        factors = [_Factor(name=n, node=SimpleNamespace(ftype=SimpleNamespace(conjugate=conj)), evidence_kind=kind,
                           damping=d, initial_damping=d, claimed_by=None, on_plate=loc)
                   for n, conj, kind, d, loc in info["factors"]]
        self.c = SimpleNamespace(model=model, algorithm=algorithm, factors=factors, handlers=dict(handlers or {}),
                                 order=[model.variables[n] for n in info["order"]], fused=info["fused"],
                                 claimed=info["claimed"], block_prior=info["block_prior"])
        for f in factors:
            f.claimed_by = next((k for k, names in info["claimed"].items() if f.name in names), None)
        self.max_change = 0.0
        self.changes: dict[str, float] = {}
        self.raised: dict[str, float] = {}
        self.abandoned = 0
        self.block: dict = {}
        self.joint: dict = {}
        self.trace: list[float] = []
        self.pending: list = []
        self.bytes_out = self.bytes_in = 0
        self.sweep_bytes: list[int] = []
        self._mark = 0
        self._snap = None
        self._damp_sent: dict[str, float] = {}

    # ------------------------------------------------------------------------------ the round trip
    def _send(self, final: tuple | None, answers: bool = False) -> list:
        """Ship the pending commands (and ``final``, whose answers are returned) to every chunk."""
        damp = {f.name: f.damping for f in self.c.factors}
        if damp != self._damp_sent:
            self.pending.insert(0, ("damp", damp))
            self._damp_sent = damp
        batches = []
        for i in range(len(self.backend_states())):
            b = list(self.pending)
            if final is not None:
                b.append(final if final[0] not in ("msg", "elbo") else final[:-1] + (i == 0,))
            batches.append(b)
        self.pending = []
        out = self.backend.call(batches)
        self.bytes_out += sum(len(pickle.dumps(b)) for b in batches)
        self.bytes_in += sum(len(pickle.dumps(o)) for o in out)
        return [o[-1] if o else None for o in out]

    def ask(self, cmd: tuple) -> list:
        """One request to every chunk (after the pending commands); their answers."""
        self.pending.append(cmd)
        return self._send(None, answers=True)

    def backend_states(self) -> list:
        return self.backend.states if hasattr(self.backend, "states") else self.backend.actors

    # ------------------------------------------------------------------------------ engine interface
    def update(self, v) -> None:
        if self.local[v.name]:
            self.pending.append(("update", v.name))
            return
        if v.name in self.c.handlers:
            self._update_block(v)
            return
        size = self.sequential.get(v.name)
        if size is None:
            self._accept(v, self._natural(v))
            return
        axis = [p.name for p in v.plates].index(next(p.name for p in v.plates if p.size == size))
        for j in range(size):  # Gauss–Seidel over a coupled plate, as the engine does
            nat = self._natural(v)
            idx = (slice(None),) * axis + (j,)
            mixed = []
            for a, b in zip(self.q[v.name].natural, nat, strict=True):
                a = np.array(np.broadcast_to(a, b.shape))
                a[idx] = b[idx]
                mixed.append(a)
            self._accept(v, tuple(mixed))

    def _update_block(self, v) -> None:
        """The handler fits the block on the driver against a target whose sites are the chunks' rows."""
        eta1, eta2 = self._natural(v)
        K = v.shape[0] if v.plates else 0
        if K:
            eta1, eta2 = eta1.reshape(-1), block_diag(*eta2)
        target = ShardedTarget(self, v.name, eta1, eta2, self.c.block_prior.get(v.name))
        warm = self.block.get(v.name)
        x0 = np.asarray(self.q[v.name].mean()).reshape(-1)
        fit = self.c.handlers[v.name].fit(target, x0, None if warm is None else warm.info)
        self.block[v.name] = fit
        q = fit.q
        if K:
            D = v.event_shape[0]
            cov = fit.q.cov().reshape(K, D, K, D)
            q = MvGaussian(mean=fit.q.mean().reshape(K, D), cov=np.stack([cov[k, :, k] for k in range(K)]))
            self.joint[v.name] = fit.q
        self._accept_q(v, q)

    def _natural(self, v) -> tuple:
        answers = self._send(("msg", v.name, False))
        zero = v.family._zero_natural(v.shape, v.event_shape)
        total = [z.copy() for z in zero]
        for i, a in enumerate(answers[0][1]):  # the factors off the plate (its prior), from chunk 0
            total[i] = total[i] + a
        for local, _ in answers:
            for i, a in enumerate(local):
                total[i] = total[i] + a
        return tuple(total)

    def _accept(self, v, nat: tuple) -> None:
        q = v.family.from_natural(*nat)
        if not np.all(np.asarray(q.is_proper())):
            raise InferenceError(f"the update of {v.name!r} gave an improper posterior (natural parameters "
                                 f"{_summary(nat)}); check that it has a proper prior or enough data")
        self._accept_q(v, q)

    def set_posterior(self, v, q) -> None:
        """A global's new q from a sweep hook (``Model.sweep_hooks`` whose ``touches`` are globals), as the
        engine's ``set_posterior``: checked, counted in the sweep's change, shipped to the chunks."""
        self._accept_q(v, q)

    def _accept_q(self, v, q) -> None:
        for a in q.expected_stats():
            if not np.all(np.isfinite(a)):
                raise InferenceError(f"the posterior of {v.name!r} has non-finite moments (natural parameters "
                                     f"{_summary(q.natural)}): the model may be improper or diverging")
        old = self.q[v.name]
        change = max(float(np.max(np.abs(a - b) / (1.0 + np.abs(b)), initial=0.0))
                     for a, b in zip(q.natural, old.natural, strict=True))
        self.max_change = max(self.max_change, change)
        self.changes[v.name] = max(self.changes.get(v.name, 0.0), change)
        self.q[v.name] = q
        self.pending.append(("set", v.name, q))

    def elbo(self, allow_minus_inf: bool = False) -> float:
        """The ELBO summed over the shards; as ``Engine.elbo`` (−inf allowed where backtracking will undo it)."""
        answers = self._send(("elbo", False))
        value = sum(a[0] + a[1] for a in answers) + answers[0][2] + answers[0][3]
        value += sum(fit.site_term + fit.prior_shift + fit.entropy for fit in self.block.values())
        total = self.bytes_out + self.bytes_in
        self.sweep_bytes.append(total - self._mark)
        self._mark = total
        if not np.isfinite(value) and not (allow_minus_inf and value == -np.inf):
            raise InferenceError(f"the ELBO is not finite ({value}); a posterior has become degenerate")
        return float(value)

    def snapshot(self) -> tuple:
        self.pending.append(("snap",))
        return (dict(self.q), {f.name: f.damping for f in self.c.factors})

    def restore(self, snap: tuple) -> None:
        self.q = dict(snap[0])
        self.pending.append(("restore",))

    def raise_damping(self) -> bool:
        return raise_damping(self.c.factors, self.raised)

    def relax_damping(self) -> None:
        relax_damping(self.c.factors)
