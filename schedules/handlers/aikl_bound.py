r"""The AI-KL bound of a target as a function of (A, b, θ) on frozen lattices (docs/maths.md §9).

With q(w) = |det A|⁻¹ Π_d q_v([A⁻¹(w − b)]_d | θ_d) (``distributions.AffineIndependent``),

.. math::

    \mathcal B = \log|\det A| + \sum_d H[q_v(\cdot|\theta_d)] + E_q[\log N(w \mid \text{prior})]
                 + \sum_n E_q[\log f_n(x_n^\top w)] \;\le\; \log Z,

the prior's part, and that of any quadratic site (a Gaussian likelihood), from E[w] = A E[v] + b and
Cov[w] = A diag(Var v) Aᵀ in closed form, the other sites' expectations on the lattice
(``aikl_lattice``) with every site's spacing frozen between calls to ``freeze``, so that the bound is a
fixed differentiable function of (A, b, θ) with exact gradients.  The optimisation is in ``aikl_optimise``,
the handler in ``aikl``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions.affine_base_density import BaseDensity
from distributions.affine_bases import GaussianBase, get_base
from distributions.affine_lattice import component_support, fft_length, lattice_step
from factorgraph.graph.nodes import ModelError

from .aikl_lattice import SiteGroup, fft_terms, gauss_terms, tensor_terms

_GAUSS = GaussianBase()
# how far a projection's lattice step may move (as a ratio) from the frozen one before the lattice is
# rebuilt: 1.25 keeps ≥ 5.2 sd of every projection on its lattice, 0.25 keeps ≥ h/4 points across it
_COVERAGE = (0.25, 1.25)


class AIKLBound:
    r"""The AI-KL bound of a target as a function of (A, b, θ) on frozen lattices.

    Parameters
    ----------
    target
        A ``BlockTarget`` (prior η₁, η₂ and sites) or a ``DensityTarget`` (a plain log density, D ≤ 3).
    base
        Base family (name or instance).
    lattice
        K = 2h, the number of lattice intervals across a component's span.
    pad
        FFT length M = pad·K (circular) or None for the paper's exact zero padding (M ≥ D·K + 1).
    path
        "fft" (any base), "gauss" (Gaussian base: the marginal of y is Gaussian, no convolution) or
        "tensor" (plain densities).  Default: "tensor" for densities, else "fft".

    Notes
    -----
    ``freeze(A, b, θ)`` fixes the lattices; ``terms(A, b, θ)`` then returns the bound's parts and the
    gradients ∂B/∂A (without the log|det A| term, which the parameterisation adds), ∂B/∂b, ∂B/∂θ.
    """

    def __init__(self, target: Any, base: str | BaseDensity, lattice: int = 256, pad: int | None = 2,
                 path: str | None = None) -> None:
        self.target = target
        self.base = get_base(base)
        self.dim = int(target.dim)
        self.density = not hasattr(target, "sites")
        self.path = path or ("tensor" if self.density else "fft")
        if self.path == "gauss" and self.base.name != "gaussian":
            raise ValueError("the 'gauss' path needs the Gaussian base")
        if self.density and self.path != "tensor":
            raise ValueError("a plain log density is handled on the tensor lattice only")
        if lattice < 2 or lattice % 2:
            raise ModelError(f"AIKL: lattice must be an even integer ≥ 2, got {lattice!r}")
        self.lattice, self.pad = int(lattice), pad
        self.learn_theta = self.base.n_params > 0  # set False to skip ∂/∂θ when θ is fixed
        if not self.density:
            # a quadratic site (a Gaussian likelihood) has E_q[log f] in closed form from q's mean and covariance,
            # like the prior: on a lattice its error would grow with its curvature (large for many rows or big
            # inputs) and force ever finer lattices
            self.groups = [SiteGroup.from_site(s) for s in target.sites if not s.quadratic]
            self.eta1 = np.asarray(target.eta1, dtype=float)
            self.eta2 = np.asarray(target.eta2, dtype=float)
            self.proper = bool(target.has_prior)  # a Gaussian part to take expectations of
            self.const = float(target.prior_const)
            quad = [s.natural() for s in target.sites if s.quadratic]
            self.quadratic = tuple(sum(q[i] for q in quad) for i in range(3)) if quad else None
        self.steps: list[np.ndarray] | None = None

    @property
    def half(self) -> int:
        return self.lattice // 2

    def with_lattice(self, lattice: int) -> AIKLBound:
        """A copy on another lattice size (not frozen)."""
        new = object.__new__(AIKLBound)
        new.__dict__.update(self.__dict__)
        new.lattice, new.steps = int(lattice), None
        return new

    def freeze(self, A: np.ndarray, b: np.ndarray, theta: np.ndarray) -> None:
        """Fix every site's lattice spacing from the spread of its projection under (A, θ)."""
        h = self.half
        if self.path == "tensor":
            sd = np.sqrt(self.base.var(theta))
            self.steps = [sd * self.base.half_width(theta) / h]
        else:
            base = _GAUSS if self.path == "gauss" else self.base
            th = np.zeros(self.dim) if self.path == "gauss" else theta
            self.steps = [lattice_step(base, gr.X @ A, th, h) for gr in self.groups]
            self.supports = [component_support(base, gr.X @ A, th, st, h) for gr, st in zip(self.groups, self.steps,
                                                                                            strict=True)]

    def covers(self, A: np.ndarray, theta: np.ndarray) -> bool:
        """Whether the frozen lattices still represent every projection under (A, θ).

        A frozen lattice spans a fixed window: were a projection's spread to outgrow it, the truncated
        pmf would cap the variance the sites see while log|det A| kept growing, and the frozen objective
        would be unbounded above (the optimiser then runs off to a useless q).  ``terms`` re-freezes
        wherever this fails, so the objective is accurate everywhere and exact-gradient within a piece."""
        if self.path == "tensor":
            return True
        base = _GAUSS if self.path == "gauss" else self.base
        th = np.zeros(self.dim) if self.path == "gauss" else theta
        for gr, step, sup in zip(self.groups, self.steps, self.supports, strict=True):
            alpha = gr.X @ A
            ratio = lattice_step(base, alpha, th, self.half) / step
            if not np.all((ratio <= _COVERAGE[1]) & (ratio >= _COVERAGE[0])):
                return False
            if np.any(component_support(base, alpha, th, step, self.half, margin=1.0) > sup):
                return False
        return True

    def terms(self, A: np.ndarray, b: np.ndarray, theta: np.ndarray, grad: bool = True) -> dict:
        r"""Bound parts (``site``, ``prior``, ``entropy``, ``bound``) and, with ``grad``, ``dA``, ``db``,
        ``dtheta`` (``dA`` without the ∂log|det A|/∂A = A⁻ᵀ term)."""
        if self.steps is None or not self.covers(A, theta):
            self.freeze(A, b, theta)
        D = self.dim
        theta = np.asarray(theta, dtype=float)
        out = {"entropy": float(np.linalg.slogdet(A)[1] + self.base.entropy(theta).sum())}
        dA, db = np.zeros((D, D)), np.zeros(D)
        dth = self.base.dentropy(theta).astype(float) if grad else None
        if self.path == "tensor":
            t = tensor_terms(self.base, self.target.logp_grad, A, b, theta, self.steps[0], self.half, grad)
            out["site"], out["prior"] = 0.0, t["E"]  # the whole density is "prior" (no sites)
            if grad:
                dA += t["dA"]
                db += t["db"]
                dth = dth + t["dtheta"]
        else:
            site = 0.0
            site_n = []
            for gr, step, sup in zip(self.groups, self.steps, self.supports, strict=True):
                if self.path == "gauss":
                    t = gauss_terms(gr.X, gr.g, A, b, step, self.half, grad, gr.kink)
                else:
                    M = fft_length(D, self.half, self.pad)
                    t = fft_terms(self.base, gr.X, gr.g, A, b, theta, step, self.half, M, grad, self.learn_theta,
                                  sup, gr.kink)
                site += float(t["E"].sum())
                site_n.append(t["E"])
                if grad:
                    dA += gr.X.T @ t["dalpha"]
                    db += gr.X.T @ t["dbeta"]
                    if "dtheta" in t:
                        dth = dth + t["dtheta"].sum(0)
            out["prior"] = 0.0
            parts = [("prior", (self.eta1, self.eta2, self.const))] if self.proper else []
            if self.quadratic is not None:
                parts.append(("site", self.quadratic))
            for key, (e1, e2, c) in parts:  # η₁ᵀE[w] + tr(η₂E[wwᵀ]) + c, with E[w] = A E[v] + b
                m, var = self.base.mean(theta), self.base.var(theta)
                mu = A @ m + b
                ew2 = (A * var) @ A.T + np.outer(mu, mu)
                term = float(e1 @ mu + np.sum(e2 * ew2) + c)
                if key == "site":
                    site += term  # (``site_n`` keeps the per-row expectations of the lattice sites)
                else:
                    out["prior"] = term
                if grad:
                    gmu = e1 + 2.0 * e2 @ mu
                    dA += np.outer(gmu, m) + 2.0 * (e2 @ A) * var
                    db += gmu
                    dth = dth + (A.T @ gmu) * self.base.dmean(theta) + np.einsum(
                        "id,ij,jd->d", A, e2, A) * self.base.dvar(theta)
            out["site"], out["site_n"] = site, site_n
        out["bound"] = out["entropy"] + out["prior"] + out["site"]
        if grad:
            out["dA"], out["db"], out["dtheta"] = dA, db, dth
        return out

    def value(self, A, b, theta) -> float:
        return self.terms(A, b, theta, grad=False)["bound"]
