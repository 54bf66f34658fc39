"""Numerically stable elementary functions used by every kernel.

Scalar ``@njit`` helpers (names starting with ``_``) are meant to be called from other kernels; the
public functions are thin numpy wrappers around batch kernels that loop over a flat array.

Functions
---------
log1pexp(x)
    ``log(1 + exp(x))`` with the asymptotic branches of Mächler (2012).
sigmoid(x), log_sigmoid(x)
    ``σ(x) = 1 / (1 + exp(-x))`` and ``log σ(x) = -log1pexp(-x)``.
logsumexp(x, axis=-1), softmax(x, axis=-1)
    Max-shifted log-sum-exp and softmax over one axis.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._batch import as_flat, restore

SQRT2 = math.sqrt(2.0)
SQRT_PI = math.sqrt(math.pi)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
LOG2 = math.log(2.0)


# ----------------------------------------------------------------------------------------------------------
# scalar helpers (njit, inlined into other kernels)
# ----------------------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _log1pexp(x: float) -> float:
    """``log(1 + e^x)``: ``e^x`` for x ≤ −37, ``log1p(e^x)`` up to 18, ``x + e^{-x}`` up to 33.3, else x."""
    if x <= -37.0:
        return math.exp(x)
    if x <= 18.0:
        return math.log1p(math.exp(x))
    if x <= 33.3:
        return x + math.exp(-x)
    return x


@njit(cache=True, inline="always")
def _sigmoid(x: float) -> float:
    """``σ(x)`` evaluated without overflow on either side."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True)
def _erfcx(x: float) -> float:
    """Scaled complementary error function ``erfcx(x) = exp(x²) erfc(x)``.

    For ``x < 0.5`` the product is formed directly; for ``0.5 ≤ x < 10`` ``exp(x²)`` is formed from an
    exact split ``x = x_h + x_l`` (``x_h²`` exact in double precision) so that no accuracy is lost in the
    large exponent; for ``x ≥ 10`` the Laplace continued fraction
    ``erfcx(x) = π^{-1/2} / (x + (1/2)/(x + 1/(x + (3/2)/(x + …))))`` is evaluated backwards (10 levels,
    6 above 26: relative error < 5e-16).
    For ``x < 0`` uses ``erfcx(x) = 2 exp(x²) − erfcx(−x)`` (overflows to inf below x ≈ −26.6).
    """
    if x != x:
        return x
    if x < 0.0:
        if x < -26.6:
            return math.inf
        return 2.0 * math.exp(x * x) - _erfcx(-x)
    if x < 0.5:
        return math.exp(x * x) * math.erfc(x)
    if x < 10.0:
        xh = math.floor(x * 1048576.0) / 1048576.0
        xl = x - xh
        return math.exp(xh * xh) * math.exp(xl * (2.0 * xh + xl)) * math.erfc(x)
    if x > 1e8:
        return 1.0 / (SQRT_PI * x)
    f = x
    for k in range(10 if x < 26.0 else 6, 0, -1):
        f = x + 0.5 * k / f
    return 1.0 / (SQRT_PI * f)


@njit(cache=True, inline="always")
def _ndtr(z: float) -> float:
    """Standard normal CDF ``Φ(z) = ½ erfc(−z/√2)``, relatively accurate in the lower tail."""
    return 0.5 * math.erfc(-z / SQRT2)


@njit(cache=True, inline="always")
def _npdf(z: float) -> float:
    """Standard normal density ``φ(z)``."""
    return INV_SQRT_2PI * math.exp(-0.5 * z * z)


# ----------------------------------------------------------------------------------------------------------
# batch kernels
# ----------------------------------------------------------------------------------------------------------
@njit(cache=True)
def _log1pexp_batch(x, out):
    for i in range(x.size):
        out[i] = _log1pexp(x[i])


@njit(cache=True)
def _sigmoid_batch(x, out):
    for i in range(x.size):
        out[i] = _sigmoid(x[i])


@njit(cache=True)
def _log_sigmoid_batch(x, out):
    for i in range(x.size):
        out[i] = -_log1pexp(-x[i])


@njit(cache=True)
def _erfcx_batch(x, out):
    for i in range(x.size):
        out[i] = _erfcx(x[i])


@njit(cache=True)
def _lse_rows(x, out):
    n, k = x.shape
    for i in range(n):
        mx = -math.inf
        for j in range(k):
            if x[i, j] > mx:
                mx = x[i, j]
        if mx == -math.inf or mx == math.inf or mx != mx:
            out[i] = mx
            continue
        s = 0.0
        for j in range(k):
            s += math.exp(x[i, j] - mx)
        out[i] = mx + math.log(s)


@njit(cache=True)
def _softmax_rows(x, out):
    n, k = x.shape
    for i in range(n):
        mx = -math.inf
        for j in range(k):
            if x[i, j] > mx:
                mx = x[i, j]
        s = 0.0
        for j in range(k):
            e = math.exp(x[i, j] - mx)
            out[i, j] = e
            s += e
        for j in range(k):
            out[i, j] /= s


def _elementwise(kernel, x):
    flat, shape = as_flat(x)
    out = np.empty_like(flat)
    kernel(flat, out)
    return restore(out, shape)


def log1pexp(x: np.typing.ArrayLike) -> np.ndarray:
    r"""Softplus ``log(1 + eˣ)`` without overflow or underflow.

    .. math:: \log(1+e^x) = \begin{cases} e^x & x \le -37 \\ \operatorname{log1p}(e^x) & x \le 18 \\
              x + e^{-x} & x \le 33.3 \\ x & \text{otherwise} \end{cases}

    Parameters
    ----------
    x : array_like

    Returns
    -------
    ndarray
        Same shape as ``x`` (0-d input gives a 0-d array), float64.
    """
    return _elementwise(_log1pexp_batch, x)


def sigmoid(x: np.typing.ArrayLike) -> np.ndarray:
    r"""Logistic function ``σ(x) = 1 / (1 + e^{−x})``, evaluated without overflow.

    Parameters
    ----------
    x : array_like

    Returns
    -------
    ndarray
    """
    return _elementwise(_sigmoid_batch, x)


def log_sigmoid(x: np.typing.ArrayLike) -> np.ndarray:
    r"""``log σ(x) = −log(1 + e^{−x})``.

    Parameters
    ----------
    x : array_like

    Returns
    -------
    ndarray
    """
    return _elementwise(_log_sigmoid_batch, x)


def erfcx(x: np.typing.ArrayLike) -> np.ndarray:
    r"""Scaled complementary error function ``erfcx(x) = e^{x²} erfc(x)`` (numba implementation).

    Parameters
    ----------
    x : array_like

    Returns
    -------
    ndarray
    """
    return _elementwise(_erfcx_batch, x)


def _rows(x, axis):
    a = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    shape = a.shape
    return np.ascontiguousarray(a.reshape(-1, shape[-1])), shape


def logsumexp(x: np.typing.ArrayLike, axis: int = -1) -> np.ndarray:
    r"""Max-shifted log-sum-exp over one axis.

    .. math:: \operatorname{lse}(x) = x^* + \log \sum_k e^{x_k - x^*}, \qquad x^* = \max_k x_k

    Parameters
    ----------
    x : array_like
    axis : int, default -1
        Axis reduced over.

    Returns
    -------
    ndarray
        ``x`` with ``axis`` removed.
    """
    rows, shape = _rows(x, axis)
    out = np.empty(rows.shape[0])
    if shape[-1] == 0:
        out[:] = -np.inf
    else:
        _lse_rows(rows, out)
    return out.reshape(shape[:-1])


def softmax(x: np.typing.ArrayLike, axis: int = -1) -> np.ndarray:
    r"""Softmax over one axis, ``s_k = e^{x_k − x^*} / Σ_j e^{x_j − x^*}``.

    Parameters
    ----------
    x : array_like
    axis : int, default -1

    Returns
    -------
    ndarray
        Same shape as ``x``.
    """
    rows, shape = _rows(x, axis)
    out = np.empty_like(rows)
    if rows.size:
        _softmax_rows(rows, out)
    return np.moveaxis(out.reshape(shape), -1, axis)
