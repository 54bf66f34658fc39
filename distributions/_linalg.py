"""Batched linear algebra for the Gaussian families: Cholesky factors with a per-element fallback.

numpy's ``linalg`` routines loop over the batch in C; they are preferred to scipy's batched
wrappers (a Python loop).  The covariance Σ = Λ⁻¹ is formed as L⁻ᵀL⁻¹ from the Cholesky factor
Λ = LLᵀ; log-determinants come from diag(L).
"""

from __future__ import annotations

import numpy as np

from ._checks import _describe, as_array


def sym(a: np.ndarray) -> np.ndarray:
    """Symmetric part ½(A + Aᵀ) of a batch of square matrices."""
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def cholesky(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower Cholesky factors of a batch of symmetric matrices and a mask of success.

    Elements that are not positive definite (or not finite) get a nan factor and ``ok`` False;
    the others are unaffected.
    """
    try:
        chol = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        chol = np.full(a.shape, np.nan)
        for idx in np.ndindex(a.shape[:-2]):
            try:
                chol[idx] = np.linalg.cholesky(a[idx])
            except np.linalg.LinAlgError:
                pass
    ok = np.isfinite(chol).all(axis=(-2, -1))
    return chol, ok


def inverse(a: np.ndarray, chol: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """A⁻¹ = L⁻ᵀL⁻¹ where the Cholesky factor exists; by LU elsewhere (nan if singular)."""
    if ok.all():
        linv = np.linalg.inv(chol)
        return sym(np.swapaxes(linv, -1, -2) @ linv)
    out = np.full(a.shape, np.nan)
    for idx in np.ndindex(a.shape[:-2]):
        try:
            if ok[idx]:
                linv = np.linalg.inv(chol[idx])
                out[idx] = linv.T @ linv
            elif np.isfinite(a[idx]).all():
                out[idx] = np.linalg.inv(a[idx])
        except np.linalg.LinAlgError:
            pass
    return sym(out)


def logdet_from_chol(chol: np.ndarray) -> np.ndarray:
    """log det(LLᵀ) = 2 Σ log L_ii."""
    return 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)


def matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Batched A x."""
    return np.einsum("...ij,...j->...i", a, x)


def quad(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Batched xᵀ A x."""
    return np.einsum("...i,...ij,...j->...", x, a, x)


def spd_matrix(owner: str, name: str, value, dim: int) -> np.ndarray:
    """A batch of symmetric positive definite D×D matrices from user input.

    A scalar s means s·I.  Otherwise the trailing two axes must be (D, D); the matrix must be
    symmetric (to a relative 1e-8) and positive definite.  Returns the matrices symmetrised.
    """
    a = as_array(owner, name, value)
    if a.ndim == 0:
        if not a > 0:
            raise ValueError(f"{owner}: {name} must be positive, got {a.item()!r}")
        return a * np.eye(dim)
    if a.ndim < 2 or a.shape[-2:] != (dim, dim):
        raise ValueError(f"{owner}: {name} must be a scalar or have trailing shape ({dim}, {dim}) to match "
                         f"the mean, got shape {a.shape}")
    asym = np.abs(a - np.swapaxes(a, -1, -2)) > 1e-8 * (np.abs(a) + np.abs(np.swapaxes(a, -1, -2)) + 1e-300)
    if asym.any():
        raise ValueError(f"{owner}: {name} must be symmetric, got entry {_describe(a, asym)} "
                         f"differing from its transpose")
    a = sym(a)
    _, ok = cholesky(a)
    if not ok.all():
        bad = ~ok
        if a.ndim == 2:
            raise ValueError(f"{owner}: {name} must be positive definite, got {a.tolist()!r}")
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{owner}: {name} must be positive definite; not so at batch index {idx}: "
                         f"{a[idx].tolist()!r}")
    return a
