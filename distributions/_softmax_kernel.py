r"""One pass over a batch of categorical logits: normalised log-probabilities, probabilities and entropy.

For each row η (K entries), with m = max_k η_k,

.. math::

    \log p_k = (\eta_k - m) - \log\sum_j e^{\eta_j - m},\qquad p_k = e^{\log p_k},\qquad
    H = -\sum_k p_k \log p_k \quad (\text{terms with } p_k = 0 \text{ left out}).

The kernel reports whether every row had a finite maximum; a row that did not (all −inf, +inf or nan)
is left to the caller, which keeps scipy's conventions for it.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def softmax_rows(eta: np.ndarray, logp: np.ndarray, p: np.ndarray, h: np.ndarray) -> bool:
    """Fill ``logp``, ``p`` (both (n, K)) and ``h`` (n,) from the logits ``eta`` (n, K); False if some
    row's maximum is not finite (the outputs of that row are then undefined)."""
    n, k = eta.shape
    for i in range(n):
        top = eta[i, 0]
        for j in range(1, k):
            if eta[i, j] > top or math.isnan(eta[i, j]):
                top = eta[i, j]
        if not math.isfinite(top):
            return False
        s = 0.0
        for j in range(k):
            s += math.exp(eta[i, j] - top)
        log_s = math.log(s)
        ent = 0.0
        for j in range(k):
            lp = (eta[i, j] - top) - log_s  # shifted first: no cancellation when |η| is large
            pj = math.exp(lp)
            logp[i, j] = lp
            p[i, j] = pj
            if pj > 0.0:
                ent -= pj * lp
        h[i] = ent
    return True
