r"""Gaussian expectations of a function with a sharp feature at a known place, by the trapezoid rule after a
sinh substitution.

For ``x ~ N(m, v)`` and a function ``g`` analytic near the real axis whose variation is concentrated around
``centre`` on the scale ``width`` (a step, a kink smoothed by a link), substitute ``x = centre + width·sinh(t)``
and apply the trapezoid rule in ``t`` over q's ``m ± 12√v``:

.. math:: \mathbb E[h(x)] \approx \sum_j \omega_j\, h(x_j), \qquad
          \omega_j = \mathcal N(x_j; m, v)\, \mathrm{width}\,\cosh(t_j)\, \Delta t \quad (\text{halved at the ends}).

The substitution spreads the feature over many nodes and compresses the tails, and the trapezoid rule converges
exponentially for analytic integrands, at any ratio of ``√v`` to ``width`` (Gauss–Hermite resolves a feature
of width ``d`` only once ``√v ≲ d``).  The derivatives in ``(m, v)`` follow from Bonnet's and Price's identities,
``∂E[g]/∂m = E[g′]`` and ``∂E[g]/∂v = ½E[g″]``, on the same nodes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def sinh_trapezoid_expectation(g: Callable, m: np.typing.ArrayLike, v: np.typing.ArrayLike,
                               centre: np.typing.ArrayLike, width: float = 0.5,
                               nodes: int = 240) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(E[g], E[g′], ½E[g″]) for x ~ N(m, v).

    Parameters
    ----------
    g : callable
        ``g(x)`` on an array of shape ``broadcast + (nodes,)`` returning ``(g, g′, g″)``.
    m, v, centre : array_like
        Means, variances (``v ≥ 0``) and the places of g's sharp features, broadcast together.
    width : float
        The scale of the substitution, about the width of the feature (smaller is safe, at more nodes' cost).
    nodes : int
        Trapezoid nodes per row.

    Returns
    -------
    value, d_dm, d_dv : ndarray
        ``E[g]``, ``∂E[g]/∂m = E[g′]`` and ``∂E[g]/∂v = ½E[g″]`` of the broadcast shape.
    """
    m, v, centre = np.broadcast_arrays(np.asarray(m, float), np.asarray(v, float), np.asarray(centre, float))
    sd = np.sqrt(np.maximum(v, 1e-300))[..., None]
    c = centre[..., None]
    lo = np.arcsinh((m[..., None] - 12.0 * sd - c) / width)
    hi = np.arcsinh((m[..., None] + 12.0 * sd - c) / width)
    t = lo + (hi - lo) * np.linspace(0.0, 1.0, nodes)
    x = c + width * np.sinh(t)
    z = (x - m[..., None]) / sd
    wts = np.exp(-0.5 * z * z - _LOG_SQRT_2PI) / sd * width * np.cosh(t) * (hi - lo) / (nodes - 1)
    wts[..., 0] *= 0.5
    wts[..., -1] *= 0.5
    val, d1, d2 = g(x)
    return (val * wts).sum(-1), (d1 * wts).sum(-1), 0.5 * (d2 * wts).sum(-1)
