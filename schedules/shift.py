"""The shift speed-up of a softmax over classes: a sweep hook (``Model.sweep_hooks``) that moves every class's
weights by one common vector, the move that maximises the bound, in closed form.

The probabilities softmax(g)_k of a label do not change when the same number is added to every class's score
g_k.  In multinomial regression, g_kn = w_kᵀx_n + b_k, adding one vector v to every w_k and one number c to every
b_k adds x_nᵀv + c to every score of row n and leaves the likelihood unchanged; only the priors see the move.
Coordinate ascent moves along that direction by the prior's pull alone, against the data's hold on each class in
turn: the common part of the weights decays by a factor close to 1 per sweep, closer the more rows there are (at
10⁴ rows a few thousand sweeps; at 10⁶ the run would never end).

After each sweep the hook moves the means of q(w_k) and q(b_k) by the common shift that maximises the bound,
keeping their covariances.  The bounds on E[log Σ_k exp g_k] of ``factors.softmax`` are invariant under the
shift (each at its optimal variational parameters: the tilted, log, Bouchard, Böhning and adaptive bounds, and
the Taylor expansion at softmax(m)), and so is every entropy, so only the priors' terms change.  With the same
prior N(μ₀, Λ⁻¹) on every class (K classes, means m_k),

    Σ_k −½(m_k + v − μ₀)ᵀΛ(m_k + v − μ₀)   is maximised at   v = μ₀ − (1/K) Σ_k m_k,

for any Λ: the shift makes the class means average to μ₀.  So the hook never lowers the bound, and at a fixed
point of the sweeps (where the bound is stationary along the shift, so the means already average to μ₀) it
does nothing: the fixed points are those of the plain sweeps.  Its cost does not depend on the number of rows,
and it touches only the class parameters, which a sharded run keeps on the driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ClassShift:
    """The common shift of the class parameters of a softmax, as a sweep hook (see the module docstring).

    Parameters
    ----------
    names
        The Gaussian (or multivariate Gaussian) variables plated over the classes (the first plate), each with
        the same prior for every class and entering the likelihood only through the softmax's scores: the
        weights w (K, D) and the intercepts b (K,) of a multinomial regression.
    prior_means
        μ₀ of each variable's prior (the same for every class), 0 by default.

    ``shifts`` records, per call, the largest |v| applied.
    """

    touches: tuple[str, ...]

    def __init__(self, names: tuple[str, ...], prior_means: tuple[Any, ...] | None = None) -> None:
        self.touches = tuple(names)
        self.prior_means = tuple(prior_means) if prior_means is not None else (0.0,) * len(self.touches)
        self.shifts: list[float] = []

    def __call__(self, eng: Any) -> float:
        largest = 0.0
        for name, mu0 in zip(self.touches, self.prior_means, strict=True):
            v = eng.c.model.variables[name]
            q = eng.q[name]
            m = np.asarray(q.mean(), dtype=float)
            delta = np.asarray(mu0, dtype=float) - m.mean(axis=0)  # v = μ₀ − mean_k m_k
            largest = max(largest, float(np.max(np.abs(delta), initial=0.0)))
            if not np.any(delta):
                continue
            eta1, eta2 = q.natural  # η₁ = Λm, η₂ = −½Λ: the mean m + δ has η₁ + Λδ = η₁ − 2η₂δ
            if np.ndim(eta2) > np.ndim(eta1):  # a vector per class: (K, D), (K, D, D)
                moved = eta1 - 2.0 * np.einsum("kij,j->ki", eta2, delta)
            else:
                moved = eta1 - 2.0 * eta2 * delta
            eng.set_posterior(v, v.family.from_natural(moved, eta2))
        self.shifts.append(largest)
        return largest


__all__ = ["ClassShift"]
