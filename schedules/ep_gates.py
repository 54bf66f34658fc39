"""EP sites on gated Gaussian factors: y ~ N(mean[z], 1/precision[z]) with known (constant or ``fg.select``ed)
precisions, the means linear forms of mean-field scalar Gaussians, z a Categorical or Bernoulli selector.

The tilted distribution of a row is a mixture over z; its projection keeps the mean and variance of each slot
(a distinct element of a scalar Gaussian the row's components read) and the selector's probabilities
(Minka & Winn 2008, gates under EP; maths §18).  The kernel is ``factors.kernels.ep_gates``.  The row's
messages: (h, λ) per slot in the element's own coordinate, ζ (K log-potentials, ζ_0 = 0) to the selector.
"""

from __future__ import annotations

import numpy as np

from distributions import Bernoulli, Categorical, Gaussian
from factorgraph.graph.nodes import FactorNode, Gate, Indexed, ModelError, Variable
from factors.kernels.ep_gates import gate_rows
from factors.plating import expand

from .ep_graph import _check_whole, linear_form
from .ep_sites import a1


def is_gated_gaussian(f: FactorNode) -> bool:
    """A Gaussian factor whose mean or precision is a gate ``x[z]`` / ``fg.select(values, z)``."""
    return f.ftype.name == "Gaussian" and any(isinstance(f.edges.get(e), Gate) for e in ("mean", "precision"))


def _refuse(f: FactorNode, why: str) -> ModelError:
    return ModelError(f"EP: {f.name} is a mixture (gated) that EP does not take: {why}. EP takes gated Gaussian "
                      "factors with an observed output, known precisions (constants or fg.select(values, z)) and "
                      "means that are linear forms of scalar Gaussians (v[z], (c * x)[z], fg.select(values, z))")


class GateSite:
    """A gated Gaussian factor's constants and messages (module docstring)."""

    def __init__(self, f: FactorNode, eng) -> None:
        self.factor = f
        gates = [g for g in (f.edges.get("mean"), f.edges.get("precision")) if isinstance(g, Gate)]
        if len({id(g.selector) for g in gates}) > 1 or len({g.plate.index for g in gates}) > 1:
            raise _refuse(f, "its gates have different selectors or category plates")
        gate = gates[0]
        z = gate.selector
        if isinstance(z, Indexed):
            raise _refuse(f, f"its selector {z.name!r} is an indexed view")
        if z.family not in (Bernoulli, Categorical):
            raise _refuse(f, f"its selector {z.name!r} is {z.family.__name__}")
        out = f.edges["out"]
        if not isinstance(out, Variable) or out.is_latent:
            raise _refuse(f, "its output is latent or partly observed")
        prec = f.edges["precision"]
        fplates = [p.index for p in f.plates]
        fshape = tuple(p.size for p in f.plates)
        ax = f.plates.index(gate.plate)
        K = fshape[ax]
        mean = f.edges["mean"]
        form = linear_form(out, fplates, fshape, f.name).add(
            linear_form(mean.source if isinstance(mean, Gate) else mean, fplates, fshape, f.name), -1.0)
        if form.vector:
            raise _refuse(f, "its mean reads a weight vector (fg.inner with an MvGaussian)")
        for v, _, _ in form.scalar:
            if v.family is not Gaussian:
                raise _refuse(f, f"its mean reads {v.name!r} ({v.family.__name__})")
            _check_whole(v, f.name)

        def rows(arr: np.ndarray) -> np.ndarray:  # (N_all,) on the factor's plates -> (R, K), categories last
            return np.ascontiguousarray(np.moveaxis(np.asarray(arr).reshape(fshape), ax, -1).reshape(-1, K))

        pv = _known_precision(f, prec, fplates)
        a = np.broadcast_to(pv, fshape).astype(float)
        if not np.all(np.isfinite(a) & (a > 0)):
            raise ModelError(f"EP: {f.name}: the precisions must be finite and > 0, got {np.unique(a)[:5]}")
        self.a = rows(a)
        self.off = rows(form.offset)
        R = self.off.shape[0]
        # slots: the distinct elements a row's components read (a term that is in several components is one slot)
        T = len(form.scalar)
        el = np.stack([eng.start[v.name] + i for v, i, _ in form.scalar], -1) if T else np.zeros((R * K, 0), int)
        co = np.stack([c for _, _, c in form.scalar], -1) if T else np.zeros((R * K, 0))
        el = np.moveaxis(el.reshape(fshape + (T,)), ax, -2).reshape(R, K * T)
        co = np.moveaxis(co.reshape(fshape + (T,)), ax, -2).reshape(R, K * T)
        el = np.where(co != 0.0, el, -1)  # an absent term reads nothing
        order = np.argsort(el, axis=1, kind="stable")
        es = np.take_along_axis(el, order, 1)
        first = np.ones_like(es, dtype=bool)
        first[:, 1:] = es[:, 1:] != es[:, :-1]
        first &= es >= 0
        slot_sorted = np.cumsum(first, axis=1) - 1
        slot = np.empty_like(slot_sorted)
        np.put_along_axis(slot, order, slot_sorted, 1)
        S = int(first.sum(axis=1).max(initial=0))
        self.idx = np.zeros((R, S), dtype=np.int64)
        r_i, c_i = np.nonzero(first)
        self.idx[r_i, slot_sorted[r_i, c_i]] = es[r_i, c_i]
        self.C = np.zeros((R, K, S))
        live = el >= 0
        rr, jj = np.nonzero(live)
        np.add.at(self.C, (rr, jj // T, slot[rr, jj]), co[rr, jj])
        self.scalars = list({id(v): v for v, _, _ in form.scalar}.values())
        # the selector: the element of each row, its q's log-potentials (K per element)
        zsh = tuple(p.size for p in z.plates)
        zidx = np.arange(int(np.prod(zsh, dtype=np.int64))).reshape(zsh)
        rest = [p.index for p in f.plates if p is not gate.plate]
        if any(p.index not in fplates for p in z.plates):
            raise _refuse(f, f"its selector {z.name!r} has plates the factor does not")
        zb = np.broadcast_to(expand(zidx, [p.index for p in z.plates], rest, 0),
                             tuple(p.size for p in f.plates if p is not gate.plate))
        self.zi = np.ascontiguousarray(zb.reshape(-1), dtype=np.int64)
        self.z, self.K = z, K
        self.fixed = not z.is_latent
        if self.fixed and z.mask is not None and not np.all(z.mask):
            raise _refuse(f, f"its selector {z.name!r} is partly observed")
        self.fixed_lp = None
        if self.fixed:
            val = np.asarray(z.value, dtype=float)  # a Categorical's observed labels are one-hot rows
            lab = (np.argmax(val, -1) if val.ndim > len(z.plates) else val).reshape(-1).astype(np.int64)
            self.fixed_lp = np.where(np.arange(K) == lab[:, None], 0.0, -np.inf)
        self.h, self.lam = np.zeros((R, S)), np.zeros((R, S))
        self.zeta = np.zeros((R, K))

    # ---------------------------------------------------------------------------- q(z) as (Nz, K) log-potentials
    def zq(self, eng) -> np.ndarray:
        if self.fixed:
            return self.fixed_lp
        (eta,) = eng.natural(self.z)
        eta = np.asarray(eta, dtype=float)
        if self.z.family is Bernoulli:
            e = eta.reshape(-1)
            return np.ascontiguousarray(np.c_[np.zeros_like(e), e])
        return np.ascontiguousarray(eta.reshape(-1, self.K))

    def set_zq(self, eng, lp: np.ndarray) -> None:
        (eta,) = eng.natural(self.z)
        if self.z.family is Bernoulli:
            new = (lp[:, 1] - lp[:, 0]).reshape(np.shape(eta))
        else:
            new = lp.reshape(np.shape(eta))
        eng.other[self.z.name] = [new]

    def _run(self, eng, alpha: float, sequential: bool, lin=None, prec=None):
        R, S = self.h.shape
        out = np.empty((R, S)), np.empty((R, S)), np.empty((R, self.K)), np.empty(R)
        zq = self.zq(eng).copy()
        lin = eng.lin if lin is None else lin
        prec = eng.prec if prec is None else prec
        skipped = gate_rows(self.idx, self.C, self.off, self.a, self.h, self.lam, lin, prec, self.zi, self.zeta,
                            zq, self.fixed, alpha, sequential, *out)
        return skipped, zq, out

    def update(self, eng, alpha: float, parallel: bool) -> None:
        """One pass over the rows: sequential (q after each row) or parallel (every row from the same q, the step
        halved until every q it touches is proper)."""
        if not parallel:
            skipped, zq, _ = self._run(eng, alpha, True)
            eng.skipped += skipped
            if not self.fixed:
                self.set_zq(eng, zq)
            return
        skipped, zq, (nh, nl, nz, _) = self._run(eng, alpha, False)
        eng.skipped += skipped
        step = 1.0
        while True:
            dl, dh = step * (nl - self.lam), step * (nh - self.h)
            prec = eng.prec + np.bincount(self.idx.ravel(), dl.ravel(), eng.prec.size)
            if np.all(prec[self.idx][self.C.any(axis=1)] > 0) or step < 1e-9:
                break
            step *= 0.5
            eng.halved += 1
        eng.prec = prec
        eng.lin = eng.lin + np.bincount(self.idx.ravel(), dh.ravel(), eng.lin.size)
        self.lam, self.h = self.lam + dl, self.h + dh
        if not self.fixed:
            dz = step * (nz - self.zeta)
            np.add.at(zq, self.zi, dz)
            self.zeta = self.zeta + dz
            self.set_zq(eng, zq)

    def evidence(self, eng) -> float:
        """Σ_n [log Z_n + Σ_s (κ₁(cavity of x_s) − κ₁(q of x_s))] + Σ_n (κ(cavity of z) − κ(q of z)), κ of a
        Categorical the log-sum-exp of its log-potentials."""
        _, _, (_, _, _, lz) = self._run(eng, 0.0, False, eng.lin.copy(), eng.prec.copy())
        used = self.C.any(axis=1)
        qp, ql = eng.prec[self.idx], eng.lin[self.idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            total = float(np.sum(lz) + np.sum(np.where(used, a1(ql - self.h, qp - self.lam) - a1(ql, qp), 0.0)))
        if not self.fixed:
            zq = self.zq(eng)[self.zi]
            total += float(np.sum(_lse(zq - self.zeta) - _lse(zq)))
        return total


def _known_precision(f: FactorNode, prec, fplates: list[int]) -> np.ndarray:
    """The precisions on the factor's plates: constants, ``fg.select(values, z)``, or an observed (fixed) Gamma
    variable, gated ``tau[z]`` or not; a latent precision is refused."""
    src = prec.source if isinstance(prec, Gate) else prec
    if isinstance(src, np.ndarray) and isinstance(prec, Gate):
        return expand(src, [p.index for p in prec.value_plates()], fplates, 0)
    if isinstance(src, Variable):
        if src.is_latent:
            raise _refuse(f, f"its precision {src.name!r} is random")
        return expand(np.asarray(src.value, dtype=float), [p.index for p in src.plates], fplates, 0)
    if isinstance(src, Indexed) or not isinstance(src, np.ndarray | float | int | np.floating):
        raise _refuse(f, f"its precision {getattr(src, 'name', src)!r} is not a constant or an observed variable")
    return np.asarray(src, dtype=float)


def _lse(x: np.ndarray) -> np.ndarray:
    top = np.max(x, axis=-1, keepdims=True)
    return (top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True)))[..., 0]
