"""Evidence: the ELBO, Σ_f E_q[log f] + Σ_i H[q_i], from the factors' terms and the posteriors' entropies.

Each factor's E[log f] is summed over its instances, weighted by q(z = k) when gated and by 0 on the missing
entries of a partly observed output; a handled block adds its handler's site term, prior shift and entropy
in place of its claimed factors' terms and of H[q(w)].  Entries of a selector that no data reach (pruned)
and the observed entries of a partly observed variable add no entropy.
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import Gate, Variable
from factors.plating import weighted_total

from .compiled import CFactor
from .errors import InferenceError
from .messages import MessagePassing, _Moments


class Evidence(MessagePassing):
    """E[log f] per factor and the ELBO (a part of ``schedules.engine.Engine``); reads ``block``, the handlers'
    last fits, and ``_ev_cache``, conjugate factors' E[log f] keyed by their neighbours' versions."""

    _ev_cache: dict[str, tuple]
    block: dict

    def factor_evidence(self, f: CFactor) -> np.ndarray:
        """E[log f] per factor instance; a conjugate factor's (no kept state, every edge a variable) is
        cached until a neighbour's posterior changes, so a gated factor's selector message and the
        ELBO after the selector's update share one computation."""
        key = None
        if f.node.ftype.conjugate and not f.params.get("state"):
            nodes = [a.source if isinstance(a, Gate) else a for a in f.node.edges.values()]
            if all(type(n) is Variable for n in nodes):
                key = tuple((n.name, self.version.get(n.name), id(self.stats.get(n.name))) for n in nodes)
        if key is not None:
            hit = self._ev_cache.get(f.name)
            if hit is not None and hit[0] == key:
                return hit[1]
        e = f.evidence(_Moments(self, f), f.params)
        if key is not None:
            self._ev_cache[f.name] = (key, e)
        return e

    def elbo_terms(self) -> tuple[float, float]:
        """(Σ_f E[log f], Σ_i H[q_i]): the factors' expected log densities and the posteriors' entropies."""
        ef = 0.0
        for fit in self.block.values():
            ef += fit.site_term + fit.prior_shift
        for f in self.c.factors:
            if f.claimed_by is not None:
                continue
            ef += weighted_total(self.factor_evidence(f), self.instance_weights(f), f.plates, f.sizes)
        h = 0.0
        for v in self.c.latent:
            if v.name in self.block:
                h += self.block[v.name].entropy
                continue
            # H[q]; a scale on σ adds its prior's term too (factors/scale_sigma.py)
            ent = np.broadcast_to(self.q[v.name].elbo_term(), v.shape)
            if v.name in self.c.pruned:
                ent = ent * self.c.pruned[v.name]
            h += float(ent[~v.mask].sum()) if v.mask is not None else float(ent.sum())
        return ef, h

    def elbo(self, allow_minus_inf: bool = False) -> float:
        """The ELBO; a non-finite value raises, except −inf with ``allow_minus_inf`` (a q outside a factor's
        domain, e.g. a scale prior's E_q[log p(σ)] = −inf for a Gamma shape at or below its threshold, which
        backtracking undoes)."""
        ef, h = self.elbo_terms()
        value = ef + h
        if not np.isfinite(value) and not (allow_minus_inf and value == -np.inf):
            raise InferenceError(f"the ELBO is not finite ({value}); a posterior has become degenerate")
        return value


__all__ = ["Evidence"]
