"""Products of plated arrays that are summed at once, never formed over the broadcast plates.

A factor works in the union of its neighbours' plates.  In a gated factor such as the Gaussian
mixture likelihood N(x_n | μ_{z_n}, Λ_{z_n}⁻¹) the data carry the rows' plate (N, 1, ·) and the
components the categories' plate (1, K, ·), so a naive product of the two is an array over
rows × components × event (N × K × D × D for a scatter matrix).  Every quantity the rules need is
a sum over that broadcast space, and is computed here as one matrix product instead:

* ``pair_inner(a, b, k)`` = Σ over the last k axes of a·b, on the broadcast plates (for example
  tr(Λ_k x_n x_nᵀ) for all n, k as one (N × D²) @ (D² × K) product);
* ``pair_reduce(a, b, ...)`` = Σ over the summed plates of a ⊗ b (one event axis each), e.g.
  Σ_n r_nk x_n μ_kᵀ;
* ``Terms``: a message given as a sum of plain arrays, outer products ``a ⊗ b``, matrix–vector
  products ``M v`` and elementwise products ``a·b`` of arrays on different plates;
  ``factors.plating.reduce`` and ``weighted_reduce`` reduce it term by term with the products above
  (``np.asarray(terms)`` forms it, for small arrays and tests);
* ``plate_product(a, b)`` = a·b, kept as such a term when each operand has plates the other lacks
  (a gated Bernoulli's E[x_nd] E[log p_kd] over rows × components × pixels is then never formed:
  its sums over pixels, or over everything weighted by q(z), are one matrix product).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .onehot import OneHot


def _lift(a: np.ndarray, nb: int, ev: int) -> np.ndarray:
    """Prepend singleton plate axes so ``a`` has ``nb`` plate axes before its ``ev`` event axes."""
    a = np.asarray(a, dtype=float)
    missing = nb - (a.ndim - ev)
    return a.reshape((1,) * missing + a.shape) if missing > 0 else a


def _prod(xs) -> int:
    return int(np.prod(list(xs), dtype=np.int64)) if len(xs) else 1


def pair_inner(a: np.ndarray, b: np.ndarray, event_ndim: int) -> np.ndarray:
    """Σ over the last ``event_ndim`` axes of a·b, on the broadcast of the two batch shapes.

    The event shapes must be equal.  Batch axes present (non-singleton) in one operand only are
    kept apart and met in one batched matrix product, so the broadcast product is never formed.
    """
    if event_ndim == 1 and isinstance(a, OneHot) != isinstance(b, OneHot):  # observed labels: a gather
        return a.inner(b) if isinstance(a, OneHot) else b.inner(a)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ev_shape = a.shape[a.ndim - event_ndim:]
    if b.shape[b.ndim - event_ndim:] != ev_shape:
        raise ValueError(f"event shapes differ: {a.shape} and {b.shape} (last {event_ndim} axes)")
    nb = max(a.ndim, b.ndim) - event_ndim
    a, b = _lift(a, nb, event_ndim), _lift(b, nb, event_ndim)
    common = [i for i in range(nb) if a.shape[i] != 1 and b.shape[i] != 1]
    a_only = [i for i in range(nb) if a.shape[i] != 1 and b.shape[i] == 1]
    b_only = [i for i in range(nb) if b.shape[i] != 1 and a.shape[i] == 1]
    out_shape = tuple(max(a.shape[i], b.shape[i]) for i in range(nb))
    evs = list(range(nb, nb + event_ndim))
    if not a_only or not b_only:  # nothing to keep apart: a plain elementwise product is no larger than an input
        return (a * b).sum(axis=tuple(evs)).reshape(out_shape) if event_ndim else (a * b).reshape(out_shape)
    E = _prod(ev_shape)
    cshape = [a.shape[i] for i in common]
    rest_a = [i for i in range(nb) if i not in common and i not in a_only]
    rest_b = [i for i in range(nb) if i not in common and i not in b_only]
    A = np.transpose(a, common + a_only + rest_a + evs).reshape(cshape + [_prod([a.shape[i] for i in a_only]), E])
    B = np.transpose(b, common + b_only + rest_b + evs).reshape(cshape + [_prod([b.shape[i] for i in b_only]), E])
    out = A @ np.swapaxes(B, -1, -2)
    out = out.reshape(cshape + [a.shape[i] for i in a_only] + [b.shape[i] for i in b_only])
    order = common + a_only + b_only
    perm = [order.index(i) for i in sorted(order)]
    return np.transpose(out, perm).reshape(out_shape)


def pair_reduce(a: np.ndarray, ea: int, b: np.ndarray, eb: int, src: Sequence[int], dst: Sequence[int],
                sizes: Sequence[int]) -> np.ndarray:
    """Σ over the plates of ``src`` not in ``dst`` of a ⊗ b, as one batched matrix product.

    ``a`` and ``b`` live on the plates ``src`` (singleton axes allowed: a singleton stands for a value
    repeated along the plate) followed by ``ea`` and ``eb`` event axes.  The result has the plates of
    ``dst`` (⊂ ``src``, in ``src`` order), then a's event axes, then b's.
    """
    nb = len(src)
    a, b = _lift(a, nb, ea), _lift(b, nb, eb)
    dset = set(dst)
    keep = {i for i, p in enumerate(src) if p in dset}
    factor = float(_prod([sizes[i] for i in range(nb) if i not in keep and a.shape[i] == 1 and b.shape[i] == 1]))
    a_sum = tuple(i for i in range(nb) if i not in keep and a.shape[i] != 1 and b.shape[i] == 1)
    b_sum = tuple(i for i in range(nb) if i not in keep and b.shape[i] != 1 and a.shape[i] == 1)
    if a_sum:
        a = a.sum(axis=a_sum, keepdims=True)
    if b_sum:
        b = b.sum(axis=b_sum, keepdims=True)
    common = [i for i in range(nb) if i not in keep and a.shape[i] != 1 and b.shape[i] != 1]
    batch = [i for i in sorted(keep) if a.shape[i] != 1 and b.shape[i] != 1]
    a_keep = [i for i in sorted(keep) if a.shape[i] != 1 and b.shape[i] == 1]
    b_keep = [i for i in sorted(keep) if b.shape[i] != 1 and a.shape[i] == 1]
    a_ev, b_ev = list(a.shape[nb:]), list(b.shape[nb:])
    bshape = [a.shape[i] for i in batch]
    csize = _prod([a.shape[i] for i in common])
    rest_a = [i for i in range(nb) if i not in batch + common + a_keep]
    rest_b = [i for i in range(nb) if i not in batch + common + b_keep]
    ak, bk = [a.shape[i] for i in a_keep], [b.shape[i] for i in b_keep]
    A = np.transpose(a, batch + common + a_keep + rest_a + list(range(nb, a.ndim)))
    A = A.reshape(bshape + [csize, _prod(ak + a_ev)])
    B = np.transpose(b, batch + common + b_keep + rest_b + list(range(nb, b.ndim)))
    B = B.reshape(bshape + [csize, _prod(bk + b_ev)])
    out = (np.swapaxes(A, -1, -2) @ B).reshape(bshape + ak + a_ev + bk + b_ev)
    # axes: batch, a_keep, a_ev, b_keep, b_ev -> kept plates in src order, a_ev, b_ev
    nbt, nak, nae, nbk = len(batch), len(a_keep), len(a_ev), len(b_keep)
    pos = {i: j for j, i in enumerate(batch)}
    pos.update({i: nbt + j for j, i in enumerate(a_keep)})
    pos.update({i: nbt + nak + nae + j for j, i in enumerate(b_keep)})
    a_ev_pos = list(range(nbt + nak, nbt + nak + nae))
    b_ev_pos = list(range(nbt + nak + nae + nbk, out.ndim))
    out = np.transpose(out, [pos[i] for i in sorted(pos)] + a_ev_pos + b_ev_pos)
    out = out.reshape([max(a.shape[i], b.shape[i]) for i in sorted(keep)] + a_ev + b_ev)
    return out * factor if factor != 1.0 else out


def disjoint(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether each of two arrays (aligned on the right) has a non-singleton axis where the other has 1."""
    n = max(a.ndim, b.ndim)
    sa, sb = (1,) * (n - a.ndim) + a.shape, (1,) * (n - b.ndim) + b.shape
    return any(x != 1 and y == 1 for x, y in zip(sa, sb, strict=True)) and any(
        y != 1 and x == 1 for x, y in zip(sa, sb, strict=True))


def plate_product(a: np.ndarray, b: np.ndarray) -> Terms | np.ndarray:
    """a·b (broadcast); a ``Terms`` product term when the broadcast is larger than both operands."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return Terms((1.0, "prod", a, b)) if disjoint(a, b) else a * b


def lazy_sum(*parts) -> Terms | np.ndarray:
    """The sum of arrays and ``Terms``: one ``Terms`` if any part is one, else the plain sum."""
    if not any(isinstance(x, Terms) for x in parts):
        total = parts[0]
        for x in parts[1:]:
            total = total + x
        return total
    terms = []
    for x in parts:
        terms += x.terms if isinstance(x, Terms) else [(1.0, x)]
    return Terms(*terms)


class Terms:
    """A factor-space message part given as a sum of terms, each kept in factored form:

    * ``(c, A)``: c·A, an array;
    * ``(c, "outer", a, b)``: c·a ⊗ b over the last axis (a[..., :, None] · b[..., None, :]);
    * ``(c, "matvec", M, v)``: c·M v (M[..., :, :] @ v[..., :]);
    * ``(c, "prod", a, b)``: c·a·b, elementwise with broadcasting (operands on different plates).

    ``factors.plating.reduce`` and ``weighted_reduce`` sum it over plates term by term, without forming
    the broadcast arrays.  ``np.asarray`` forms it.
    """

    def __init__(self, *terms: tuple) -> None:
        self.terms = list(terms)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        total = None
        for t in self.terms:
            c = t[0]
            if len(t) == 2:
                val = c * np.asarray(t[1], dtype=float)
            elif t[1] == "outer":
                val = c * (np.asarray(t[2])[..., :, None] * np.asarray(t[3])[..., None, :])
            elif t[1] == "prod":
                val = c * (np.asarray(t[2], dtype=float) * np.asarray(t[3], dtype=float))
            else:
                val = c * np.einsum("...ij,...j->...i", t[2], t[3])
            total = val if total is None else total + val
        return total if dtype is None else total.astype(dtype)

    @property
    def shape(self) -> tuple:
        return np.asarray(self).shape

    def scaled(self, c: float) -> Terms:
        return Terms(*((t[0] * c,) + tuple(t[1:]) for t in self.terms))
