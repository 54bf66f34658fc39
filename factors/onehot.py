"""Observed class labels as one-hot rows that are never formed: ``OneHot``.

An observed Categorical's statistics are one-hot rows u(x_n) = e_{x_n} (length K).  Stored densely they take
N × K numbers: for word tokens (LDA, K = the vocabulary) that is the whole corpus times the vocabulary.
``OneHot`` keeps the labels only (−1 for a missing row) and does the few things the engine asks of the
statistics without forming them:

* ``inner(b)``: Σ_k u_k b_k on the broadcast plates, a gather b[..., x_n] (E[log φ_{z, x_n}] for every row and
  component: LDA's evidence and its message to the topic labels);
* ``weighted_sum(w, src, dst, sizes)``: Σ over the summed plates of w · u, a weighted bincount of the labels
  (Σ_n q(z_n = k) e_{x_n}: the message to the topics);
* ``reshape`` (lining the rows up with a factor's plates).

Anything else sees a dense array (``__array__``, formed once and cached; arithmetic goes through it), so code
that does not know ``OneHot`` stays correct, at the dense cost it had before.  A missing row is NaN when
formed (``missing="nan"``: the stored data) or zeros (``"zero"``: the statistics, as ``np.nan_to_num``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class OneHot:
    """One-hot rows e_{labels} of length ``K``, held as their labels (−1: a missing row)."""

    __array_priority__ = 100.0  # numpy defers binary operators to the ones below

    def __init__(self, labels: np.ndarray, K: int, missing: str = "nan") -> None:
        self.labels = np.asarray(labels, dtype=np.intp)
        self.K = int(K)
        self.missing = missing
        self._dense: np.ndarray | None = None

    # ---------------------------------------------------------------------------- array protocol
    @property
    def shape(self) -> tuple[int, ...]:
        return self.labels.shape + (self.K,)

    @property
    def ndim(self) -> int:
        return self.labels.ndim + 1

    @property
    def size(self) -> int:
        return int(self.labels.size) * self.K

    dtype = np.dtype(float)

    def __len__(self) -> int:
        return self.shape[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if self._dense is None:
            out = (self.labels[..., None] == np.arange(self.K)).astype(float)
            if self.missing == "nan":
                out[self.labels < 0] = np.nan
            self._dense = out
        return self._dense if dtype is None else self._dense.astype(dtype, copy=False)

    def __getitem__(self, idx):
        return np.asarray(self)[idx]

    def __repr__(self) -> str:
        return f"OneHot(shape={self.shape}, missing rows={int((self.labels < 0).sum())})"

    def __getstate__(self) -> dict:
        return {"labels": self.labels, "K": self.K, "missing": self.missing}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["labels"], state["K"], state["missing"])

    __hash__ = None

    # ---------------------------------------------------------------------------- the engine's operations
    def zeroed(self) -> OneHot:
        """The same rows with a missing row as zeros (the statistics of observed labels)."""
        return OneHot(self.labels, self.K, "zero")

    def reshape(self, *shape) -> OneHot:
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else tuple(shape)
        if shape[-1] != self.K:
            raise ValueError(f"OneHot: cannot reshape {self.shape} to {shape} (the last axis is the {self.K} classes)")
        return OneHot(self.labels.reshape(shape[:-1]), self.K, self.missing)

    def inner(self, b: np.ndarray) -> np.ndarray:
        """Σ_k u_k · b_k on the broadcast of the rows' and b's batch shapes (0 at a missing row)."""
        b = np.asarray(b, dtype=float)
        nb = max(self.labels.ndim, b.ndim - 1)
        lab = self.labels.reshape((1,) * (nb - self.labels.ndim) + self.labels.shape)
        b = b.reshape((1,) * (nb + 1 - b.ndim) + b.shape)
        shape = np.broadcast_shapes(lab.shape, b.shape[:-1])
        lab = np.broadcast_to(lab, shape)
        out = np.take_along_axis(np.broadcast_to(b, shape + (self.K,)), np.maximum(lab, 0)[..., None], -1)[..., 0]
        return np.where(lab >= 0, out, 0.0)

    def weighted_sum(self, w: np.ndarray | None, src: Sequence[int], dst: Sequence[int],
                     sizes: Sequence[int]) -> np.ndarray:
        """Σ over the plates of ``src`` not in ``dst`` of w · u (w None: 1), on the plates of ``dst`` then the K
        classes: a weighted bincount of the labels.  A plate along which both the rows and w are singletons
        counts its size, as in ``plating.reduce``."""
        nb = len(src)
        lab = self.labels.reshape((1,) * (nb - self.labels.ndim) + self.labels.shape)
        w = np.ones((1,) * nb) if w is None else np.asarray(w, dtype=float)
        w = w.reshape((1,) * (nb - w.ndim) + w.shape)
        keep = [i for i, p in enumerate(src) if p in set(dst)]
        factor = float(np.prod([sizes[i] for i in range(nb) if i not in keep and lab.shape[i] == 1
                                and w.shape[i] == 1]))
        shape = np.broadcast_shapes(lab.shape, w.shape)
        lab, w = np.broadcast_to(lab, shape), np.broadcast_to(w, shape)
        kshape = [shape[i] for i in keep]
        cell = np.zeros(shape, dtype=np.intp)
        stride = 1
        for i in reversed(keep):  # the kept plates' flat index of each entry
            cell = cell + stride * np.arange(shape[i]).reshape((-1,) + (1,) * (nb - i - 1))
            stride *= shape[i]
        seen = lab >= 0
        out = np.bincount((cell * self.K + lab)[seen], weights=w[seen], minlength=stride * self.K)
        out = out.reshape(kshape + [self.K])
        return out * factor if factor != 1.0 else out


def _dense_op(name: str):
    def op(self, *other):
        return getattr(np.asarray(self), name)(*other)

    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
              "__neg__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__matmul__", "__rmatmul__",
              "__pow__"):  # arithmetic and comparisons see the dense rows
    setattr(OneHot, _name, _dense_op(_name))
del _name

__all__ = ["OneHot"]
