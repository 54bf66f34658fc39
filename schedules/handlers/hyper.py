"""Hyperparameters a handler learns with its block (Gianniotis et al., Mixed VI, §III-D; docs/maths.md §7).

A handler built with ``learn=("prior_precision", "scale")`` optimises, together with its block's q, the
log-hyperparameters h = (log c, log s₁, …, log s_J):

* ``"prior_precision"``: c > 0 multiplies the precision of the block's constant prior N(w | m₀, Λ₀⁻¹) (its
  mean stays), whose log density becomes log N(w | m₀, (cΛ₀)⁻¹), normaliser ½D log c included, so the
  objective is a type-II (evidence) objective:

      log p̃(w; h) = log p̃(w) + ½D log c − ½(c − 1)(w − m₀)ᵀΛ₀(w − m₀) + (site terms),
      ∂log p̃/∂log c = ½D − ½c (w − m₀)ᵀΛ₀(w − m₀);

* ``"scale"``: s_j, the scale of the j-th claimed site that has one (Laplace, Cauchy, Student-t).  These
  sites are location-scale densities f(u) = g((u − μ)/s)/s, so ∂log f/∂log s = −1 − (u − μ)(log f)′(u)
  (``Site.dlog_scale``: −1 + |r|/τ, −1 + 2r²/(γ² + r²), −1 + (ν + 1)r²/(νs² + r²) with r = u − μ).

Laplace maximises its evidence approximation over h with the mode recomputed at each h
(``laplace.laplace_hyper``); MVI and VI-diag start h there (h_LA) and move it jointly with q's parameters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from factorgraph.graph.nodes import ModelError

from .target import BlockTarget

LEARNABLE = ("prior_precision", "scale")


def learn_names(learn: str | Iterable[str] | None, who: str) -> tuple[str, ...]:
    """The validated ``learn=`` of a handler: names from ``LEARNABLE``, each once, in the order given."""
    if learn is None or isinstance(learn, str):
        names = () if learn is None else (learn,)
    elif isinstance(learn, list | tuple | set | frozenset):
        names = tuple(learn)
    else:
        raise ModelError(f"{who}: learn= must be a name or a list of names from {LEARNABLE}, got {learn!r}")
    for n in names:
        if not isinstance(n, str) or n not in LEARNABLE:
            raise ModelError(f"{who}: learn= has unknown hyperparameter {n!r}; choose from {LEARNABLE}")
    return tuple(dict.fromkeys(names))


class Hyper:
    """The log-hyperparameters h of a block target, and the target at any h.

    Parameters
    ----------
    target
        The block (a ``BlockTarget``; with ``"prior_precision"`` its ``prior`` must be given).
    learn
        Validated names (``learn_names``).
    who
        The handler's name, for error messages.
    """

    def __init__(self, target: Any, learn: tuple[str, ...], who: str) -> None:
        if not isinstance(target, BlockTarget):
            raise ModelError(f"{who}: learn={learn} needs a block of a model (fg.infer with handlers=); a plain "
                             "log density has no hyperparameters")
        self.base, self.learn = target, learn
        self.prior = "prior_precision" in learn
        if self.prior:
            if target.prior is None:
                raise ModelError(f"{who}: learning 'prior_precision' needs the block's constant Gaussian prior "
                                 "(BlockTarget.prior)")
            a1, a2 = target.prior
            self.lam0 = -2.0 * a2
            self.m0 = np.linalg.solve(self.lam0, a1)
            self.q0 = float(a1 @ self.m0)  # m₀ᵀΛ₀m₀
        self.scaled = [j for j, s in enumerate(target.sites) if s.scaled] if "scale" in learn else []
        if "scale" in learn and not self.scaled:
            raise ModelError(f"{who}: learning 'scale' needs a claimed site with a scale (Laplace, Cauchy or "
                             "Student-t); the block has none")
        self.h0 = np.array([0.0] * self.prior + [np.log(target.sites[j].params["scale"]) for j in self.scaled])
        self.size = len(self.h0)

    def start(self, warm: dict, key: str = "log_hyper") -> np.ndarray:
        """h from a previous fit of this block when it has one of the right size, else the model's values."""
        h = warm.get(key)
        return np.array(h, dtype=float) if h is not None and len(h) == self.size else self.h0.copy()

    def at(self, h: np.ndarray) -> BlockTarget:
        """The block at h: prior precision cΛ₀ (its normaliser shifted by ½D log c − ½(c − 1)m₀ᵀΛ₀m₀ from the
        base target's constant) and the scaled sites at their scales."""
        b = self.base
        eta1, eta2, const, sites = b.eta1, b.eta2, b.prior_const, list(b.sites)
        if self.prior:
            c = float(np.exp(h[0]))
            eta1, eta2 = eta1 + (c - 1.0) * b.prior[0], eta2 + (c - 1.0) * b.prior[1]
            const += 0.5 * b.dim * h[0] - 0.5 * (c - 1.0) * self.q0
        for j, hj in zip(self.scaled, h[int(self.prior):], strict=True):
            sites[j] = replace(sites[j], params={**sites[j].params, "scale": float(np.exp(hj))})
        t = BlockTarget(eta1, eta2, sites, b.prior)
        t.prior_const = const
        return t

    def value_grads(self, t: BlockTarget, W: np.ndarray, h: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """log p̃(w; h) at the rows of W (S, D) for t = ``at(h)``, its gradient in w, and ∂log p̃/∂h (S, size)."""
        W = np.atleast_2d(W)
        if self.scaled:
            v, g, gs = t.logp_grad_scales(W)
            cols = [gs[:, j] for j in self.scaled]
        else:
            v, g = t.logp_grad(W)
            cols = []
        if self.prior:
            R = W - self.m0
            quad = np.einsum("sd,sd->s", R @ self.lam0, R)
            cols.insert(0, 0.5 * t.dim - 0.5 * np.exp(h[0]) * quad)
        return v, g, np.stack(cols, -1)

    def expected_grad(self, h: np.ndarray, mean: np.ndarray, cov: np.ndarray, site_scale_grads: np.ndarray | None
                      ) -> np.ndarray:
        """E_q[∂log p̃/∂h] for q = N(mean, cov): the prior's column in closed form,
        ½D − ½c E_q[(w − m₀)ᵀΛ₀(w − m₀)], and the scales' columns from the sites' Monte Carlo means
        ``site_scale_grads`` (one entry per site, as ``BlockTarget.logp_grad_scales`` gives them)."""
        cols = [site_scale_grads[j] for j in self.scaled]
        if self.prior:
            r = mean - self.m0
            quad = float(np.sum(self.lam0 * cov) + r @ self.lam0 @ r)
            cols.insert(0, 0.5 * self.base.dim - 0.5 * np.exp(h[0]) * quad)
        return np.array(cols, dtype=float)

    def prior_shift(self, h: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
        """E_q[log N(w | m₀, (cΛ₀)⁻¹)] − E_q[log N(w | m₀, Λ₀⁻¹)] = ½D log c − ½(c − 1)E_q[(w − m₀)ᵀΛ₀(w − m₀)]
        for q = N(mean, cov): what the learned multiplier adds to the prior factor's term of the ELBO, which
        the engine evaluates at Λ₀ (0 when the prior precision is not learned)."""
        if not self.prior:
            return 0.0
        r = mean - self.m0
        quad = float(np.sum(self.lam0 * cov) + r @ self.lam0 @ r)
        return 0.5 * self.base.dim * float(h[0]) - 0.5 * (np.exp(h[0]) - 1.0) * quad

    def report(self, h: np.ndarray) -> dict[str, Any]:
        """The learned values: ``prior_precision`` α·c for an isotropic prior precision αI (else
        ``prior_precision_multiplier`` c), and ``scale`` by claimed factor name."""
        out: dict[str, Any] = {}
        if self.prior:
            c = float(np.exp(h[0]))
            a = self.lam0[0, 0]
            if np.allclose(self.lam0, a * np.eye(len(self.lam0)), rtol=1e-12, atol=0.0):
                out["prior_precision"] = float(a * c)
            else:
                out["prior_precision_multiplier"] = c
        if self.scaled:
            sites = self.base.sites
            out["scale"] = {sites[j].name or f"site {j}": float(np.exp(hj))
                            for j, hj in zip(self.scaled, h[int(self.prior):], strict=True)}
        return out

    def info(self, h: np.ndarray) -> dict[str, Any]:
        """The entries a handler adds to its ``BlockFit.info``."""
        return {"log_hyper": np.array(h, dtype=float), "hyperparameters": self.report(h)}
