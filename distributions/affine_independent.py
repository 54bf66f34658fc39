r"""Affine independent densities (Challis & Barber 2012, docs/maths.md §9).

A D-vector w = Av + b, with A invertible and the components of v independent, v_d ~ q_v(· | θ_d):

.. math::

    q(w) = |\det A|^{-1} \prod_d q_v\big([A^{-1}(w - b)]_d \,\big|\, \theta_d\big),\qquad
    H[q] = \log|\det A| + \sum_d H[q_v(\cdot|\theta_d)].

The bases q_v are in ``distributions.affine_bases`` (their interface in ``distributions.affine_base_density``)
and the lattice marginals of projections xᵀw in ``distributions.affine_lattice``.
"""

from __future__ import annotations

import numpy as np

from .affine_base_density import BaseDensity
from .affine_bases import get_base
from .affine_lattice import component_lattice, convolve, fft_length, lattice_step, offsets, variance_fix
from .base import Distribution, RngLike, Shape, as_rng, as_shape, describe
from .mv_gaussian import MvGaussian


class AffineIndependent(Distribution):
    r"""w = Av + b with independent v_d ~ q_v(· | θ_d) (Challis & Barber 2012).

    .. math::

        \log q(w) = -\log|\det A| + \sum_d \log q_v([A^{-1}(w-b)]_d | \theta_d),\qquad
        E[w] = A\,E[v] + b,\quad \mathrm{Cov}[w] = A\,\mathrm{diag}(\mathrm{Var}\,v)A^\top,\\
        H[q] = \log|\det A| + \sum_d H[q_v(\cdot|\theta_d)].

    Parameters
    ----------
    A : (D, D) array
        Invertible mixing matrix.
    b : (D,) array
        Offset.
    base : str or BaseDensity
        ``"gaussian"``, ``"skew_normal"``, ``"gen_normal"``, ``"student_t"`` or ``"logistic"``.
    theta : array_like, optional
        Shape parameter per component (a scalar broadcasts); default the base's (Gaussian) default.

    Notes
    -----
    Not an exponential family: ``expected_stats()`` returns (E[w], E[wwᵀ]) for the engine, and the
    entropy is exact (closed form, or a 1-D quadrature for the skew-normal base).  Single (unbatched)
    distribution: ``batch_shape`` is ().
    """

    __slots__ = ("_A", "_b", "_base", "_theta")

    def __init__(self, A, b, base: str | BaseDensity = "gaussian", theta=None) -> None:
        A = np.asarray(A, dtype=float)
        b = np.asarray(b, dtype=float)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"AffineIndependent: A must be a square matrix, got shape {A.shape}")
        D = A.shape[0]
        if b.shape != (D,):
            raise ValueError(f"AffineIndependent: b must have shape ({D},), got {b.shape}")
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
            raise ValueError("AffineIndependent: A and b must be finite")
        sign, logdet = np.linalg.slogdet(A)
        if sign == 0 or not np.isfinite(logdet):
            raise ValueError("AffineIndependent: A must be invertible")
        self._base = get_base(base)
        th = np.full(D, self._base.default_theta) if theta is None else np.broadcast_to(
            np.asarray(theta, dtype=float), (D,)).copy()
        self._base.check(th)
        self._A, self._b, self._theta = A, b, th

    # ------------------------------------------------------------------------------ parameters
    @property
    def A(self) -> np.ndarray:
        return self._A

    @property
    def b(self) -> np.ndarray:
        return self._b

    @property
    def base(self) -> BaseDensity:
        return self._base

    @property
    def theta(self) -> np.ndarray:
        return self._theta

    @property
    def dim(self) -> int:
        return self._A.shape[0]

    @property
    def batch_shape(self) -> Shape:
        return ()

    @property
    def event_shape(self) -> Shape:
        return (self.dim,)

    # ------------------------------------------------------------------------------ moments
    def base_mean(self) -> np.ndarray:
        """E[v_d]."""
        return self._base.mean(self._theta)

    def base_var(self) -> np.ndarray:
        """Var[v_d]."""
        return self._base.var(self._theta)

    def mean(self) -> np.ndarray:
        """E[w] = A E[v] + b."""
        return self._A @ self.base_mean() + self._b

    def cov(self) -> np.ndarray:
        """Cov[w] = A diag(Var v) Aᵀ."""
        return (self._A * self.base_var()) @ self._A.T

    def var(self) -> np.ndarray:
        return np.diag(self.cov()).copy()

    def expected_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """(E[w], E[wwᵀ]) — what the engine passes to the rest of the graph."""
        m = self.mean()
        return m, self.cov() + np.outer(m, m)

    def entropy(self) -> float:
        """H[q] = log|det A| + Σ_d H[q_v(·|θ_d)] (exact)."""
        return float(np.linalg.slogdet(self._A)[1] + self._base.entropy(self._theta).sum())

    # ------------------------------------------------------------------------------ density
    def logpdf(self, x) -> np.ndarray:
        """log q(w) for w of shape (..., D)."""
        x = np.asarray(x, dtype=float)
        v = np.linalg.solve(self._A, (x - self._b).reshape(-1, self.dim).T).T
        lq = self._base.logpdf(v, self._theta).sum(-1) - np.linalg.slogdet(self._A)[1]
        return lq.reshape(x.shape[:-1])

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws w = Av + b of shape ``shape + (D,)``."""
        shape = as_shape(shape)
        rng = as_rng(rng)
        v = self._base.sample(self._theta, shape + (self.dim,), rng)
        return v @ self._A.T + self._b

    def to_gaussian(self):
        """The Gaussian with the same mean and covariance."""
        return MvGaussian(mean=self.mean(), cov=self.cov())

    # ------------------------------------------------------------------------------ projections
    def projection_lattice(self, X, n_lattice: int = 256, pad: int | None = 2,
                           chunk: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
        r"""Lattice marginals of the projections y_n = x_nᵀw (docs/maths.md §9).

        Parameters
        ----------
        X : (N, D)
            Projection vectors.
        n_lattice : int
            K = 2h: lattice intervals across each component's span ±W·σ_y (W from the base's tails).
        pad : int or None
            FFT length M = pad·K (circular), or None for the exact linear convolution (M ≥ D·K + 1).

        Returns
        -------
        y : (N, M)
            Lattice points β′_n + o_jΔ_n.
        pmf : (N, M)
            Their probabilities ρ_nj (Σ_j ρ_nj = 1).
        """
        X = np.atleast_2d(np.asarray(X, dtype=float))
        alpha = X @ self._A
        beta = X @ self.mean()
        half = n_lattice // 2
        step = lattice_step(self._base, alpha, self._theta, half)
        M = fft_length(self.dim, half, pad)
        n_chunk = max(1, chunk // (self.dim * M))
        var = alpha**2 * self.base_var()
        parts = []
        for i in range(0, len(X), n_chunk):
            sl = slice(i, i + n_chunk)
            pi = component_lattice(self._base, alpha[sl], self._theta, step[sl], half)
            parts.append(convolve(pi, M, variance_fix(pi, step[sl], var[sl])[0]))
        rho = np.concatenate(parts)
        return beta[:, None] + step[:, None] * offsets(M), rho

    def __repr__(self) -> str:
        return describe(self, ("base", "A", "b", "theta"))
