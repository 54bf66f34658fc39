"""Updates: a latent variable's new posterior from the messages into it.

q(v) is the member of v's family with natural parameters η_v = Σ_f m_{f→v} (truncated where v has a bound,
tilted where v is a scale on σ).  A variable coupled across a plate (the weights of a mean-field inner
product) is updated one element at a time (Gauss–Seidel); a handled variable is fitted by its handler; a
variable whose prior factor is structured (a Markov chain) gets the q its prior computes from the other
messages.  Observed entries of a partly observed variable keep their point statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg import block_diag

from distributions import Bernoulli, Categorical, MvGaussian, TiltedScale, TruncatedGamma
from factorgraph.graph.nodes import Variable

from .compiled import CFactor
from .errors import InferenceError
from .handlers import BlockTarget, Site
from .messages import MessagePassing, _Moments, _rows


class PosteriorUpdates(MessagePassing):
    """Setting and updating posteriors (a part of ``schedules.engine.Engine``).

    ``set_posterior`` records q(v), its expected statistics and the largest relative change of its natural
    parameters, max |η_new − η_old| / (1 + |η_old|), in ``max_change`` and ``changes``.
    """

    max_change: float
    changes: dict[str, float]
    structured: dict[str, CFactor]
    block: dict[str, Any]
    joint: dict[str, Any]
    _updating: str

    def set_posterior(self, v: Variable, q: Any) -> None:
        if v.mask is not None and v.family in (Categorical, Bernoulli) and v.mask.any():
            q = _pin_observed(v, q)
        s = q.expected_stats()
        for a in s:
            if not np.all(np.isfinite(a)):
                raise InferenceError(f"the posterior of {v.name!r} has non-finite moments (natural parameters "
                                     f"{_summary(q.natural)}): the model may be improper or diverging")
        if v.mask is not None:
            obs = self.observed_stats(v)
            s = tuple(np.where(v.mask.reshape(v.mask.shape + (1,) * k), o, a)
                      for o, a, k in zip(obs, s, v.family.event_ndims, strict=True))
        old = self.q.get(v.name)
        if old is not None:
            # natural parameters where both have them; a handler's non-Gaussian q (a mixture, an
            # affine-independent density) is compared by its moments
            new_p, old_p = (q.natural, old.natural) if hasattr(q, "natural") and hasattr(old, "natural") else (
                s, self.stats[v.name])
            change = max(float(np.max(np.abs(a - b) / (1.0 + np.abs(b)), initial=0.0))
                         for a, b in zip(new_p, old_p, strict=True))
            self.max_change = max(self.max_change, change)
            self.changes[v.name] = max(self.changes.get(v.name, 0.0), change)
        self.q[v.name] = q
        self.stats[v.name] = s
        self.version[v.name] = self.version.get(v.name, 0) + 1

    def update(self, v: Variable) -> None:
        self._updating = v.name
        if v.name in self.c.handlers:
            self._update_block(v)
            return
        plate = self.c.sequential.get(v.name)
        if plate is not None:
            self._update_sequential(v, plate)
            return
        if v.name in self.structured:
            self._update_structured(v, self.structured[v.name])
            return
        nat = self.natural_sum(v)
        self._accept(v, nat)

    def _update_block(self, v: Variable) -> None:
        """Hand the block to its handler: the messages of every unclaimed factor form its Gaussian
        prior, the claimed factors its sites; the handler returns q(w) and the block's terms.

        A class-plated weight matrix (K rows of D) is one block of K·D weights, class-major: its
        prior is block-diagonal and its joint q is kept in ``self.joint``, while the rest of the
        graph sees the per-class marginals."""
        eta1, eta2 = self.natural_sum(v)
        K = v.shape[0] if v.plates else 0
        if K:
            eta1, eta2 = eta1.reshape(-1), block_diag(*eta2)
        sites = []
        for f in self.c.claimed[v.name]:
            edge = next(e for e in f.node.edges if e in f.node.ftype.pointwise)
            mom = _Moments(self, f)
            others = {e: tuple(_rows(a, f.sizes) for a in mom[e]) for e in f.node.edges if e != edge}
            X = f.node.edges[edge].params["X"]
            sites.append(Site(X.reshape(-1, X.shape[-1]), f.node.ftype.pointwise[edge], others, f.params, K, f.name))
        target = BlockTarget(np.asarray(eta1, float), np.asarray(eta2, float), sites, self.c.block_prior.get(v.name))
        warm = self.block.get(v.name)
        x0 = np.asarray(self.q[v.name].mean()).reshape(-1)
        fit = self.c.handlers[v.name].fit(target, x0, None if warm is None else warm.info)
        self.block[v.name] = fit
        if K:
            D = v.event_shape[0]
            cov = fit.q.cov().reshape(K, D, K, D)
            marginal = MvGaussian(mean=fit.q.mean().reshape(K, D), cov=np.stack([cov[k, :, k] for k in range(K)]))
            self.joint[v.name] = fit.q
            self.set_posterior(v, marginal)
        else:
            self.set_posterior(v, fit.q)

    def _update_structured(self, v: Variable, f: CFactor, start: bool = False) -> None:
        """A structured prior factor computes q(v) from the sum of every other message into v (its node
        potentials); with ``start`` it builds its starting q from v's current statistics instead."""
        pot = None
        if not start:
            # zeros as broadcast views: none is allocated unless another factor sends a message
            pot = [np.broadcast_to(0.0, v.shape + tuple(v.event_shape[:1]) * k) for k in v.family.event_ndims]
            for cons in self.c.consumers.get(id(v), []):
                if cons.factor is not f:
                    pot = [a + b for a, b in zip(pot, self.consumer_message(cons), strict=True)]
            if id(v) in self.c.selector_factors:
                pot[0] = pot[0] + self.selector_total(v)
            # a one-parameter family (a categorical chain) gets its log-potentials, others the tuple (η₁, η₂)
            pot = pot[0] if len(pot) == 1 else tuple(pot)
        try:
            q = f.node.ftype.structured(_Moments(self, f), f.params, pot)
        except FloatingPointError as e:
            raise InferenceError(f"the update of {v.name!r}: {e}") from None
        f.params["state"]["q"] = q
        self.set_posterior(v, q)

    def _update_sequential(self, v: Variable, plate) -> None:
        """Gauss–Seidel over the elements of a coupled plate: each element's update sees the others'
        latest posteriors, so every step is a coordinate-ascent step."""
        axis = [p.index for p in v.plates].index(plate.index)
        for j in range(plate.size):
            nat = self.natural_sum(v)
            cur = self.q[v.name].natural
            idx = (slice(None),) * axis + (j,)
            mixed = []
            for a, b in zip(cur, nat, strict=True):
                a = np.array(np.broadcast_to(a, b.shape))
                a[idx] = b[idx]
                mixed.append(a)
            self._accept(v, tuple(mixed))

    def _accept(self, v: Variable, nat: tuple) -> None:
        q = _from_natural(v, nat)
        proper = np.asarray(q.is_proper())
        if v.mask is not None:
            proper = proper | v.mask
        if not np.all(proper):
            raise InferenceError(f"the update of {v.name!r} gave an improper posterior (natural parameters "
                                 f"{_summary(nat)}); check that it has a proper prior or enough data")
        self.set_posterior(v, q)


def _from_natural(v: Variable, nat: tuple) -> Any:
    """q(v) from its summed natural parameters: its family's, truncated where the variable has a bound."""
    if v.lower is not None:
        return TruncatedGamma.from_natural(*nat, lower=v.lower)
    if v.base is not None:
        return TiltedScale.from_natural(*nat, prior=v.base)
    return v.family.from_natural(*nat)


def _pin_observed(v: Variable, q: Any) -> Any:
    """A partly observed label's posterior: a point mass at each observed entry (semi-supervised)."""
    obs = np.nan_to_num(v.value)
    if v.family is Bernoulli:
        return Bernoulli(probs=np.where(v.mask, obs, np.broadcast_to(q.probs, v.mask.shape)))
    return Categorical(probs=np.where(v.mask[..., None], obs, np.broadcast_to(q.probs, obs.shape)))


def _summary(nat: tuple) -> str:
    return ", ".join(f"[{np.min(a):.3g}, {np.max(a):.3g}]" for a in nat)


__all__ = ["PosteriorUpdates"]
