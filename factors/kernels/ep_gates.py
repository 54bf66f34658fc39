r"""Numba kernel of expectation propagation (EP) for a gated Gaussian site: a mixture with known precisions.

Row n of the site is f_n(x, z) = Π_k N(d_nk; 0, 1/a_nk)^[z = k], with d_nk = off_nk + Σ_s C_nks x_s a linear
form of the row's slots x_s (distinct elements of mean-field scalar Gaussians) and z a Categorical selector
(a Bernoulli is the two-category case).  With the cavities x_s ~ N(m_s, v_s) and z ~ π (π_k ∝ exp(ℓ_k)):

    μ_k = off_k + Σ_s C_ks m_s,   S_k = Σ_s C_ks² v_s + 1/a_k,   Z_k = N(0; μ_k, S_k),
    Z = Σ_k π_k Z_k,   r_k = π_k Z_k / Z,

and under component k the slot x_s has mean m_sk = m_s − C_ks v_s μ_k / S_k and variance
v_sk = v_s − C_ks² v_s² / S_k.  The tilted distribution's marginal of x_s is the mixture Σ_k r_k N(m_sk, v_sk),
whose mean M_s = Σ_k r_k m_sk and variance V_s = Σ_k r_k (v_sk + m_sk²) − M_s² the projection keeps; the
slot's new message is N(M_s, V_s) / N(m_s, v_s): precision 1/V_s − 1/v_s, linear coefficient M_s/V_s − m_s/v_s.
The tilted marginal of z is r, so the message to z is r/π ∝ Z_k: log-potentials ζ_k = log Z_k − log Z_0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_LOG_2PI = math.log(2.0 * math.pi)


@njit(cache=True)
def gate_rows(idx, C, off, a, h, lam, q_lin, q_prec, zi, zeta, zq, zfixed, damping, sequential,
              new_h, new_lam, new_zeta, log_z):
    """One EP pass over the rows of a gated Gaussian site (module docstring).

    ``idx`` (R, S): the element of each slot (in the engine's scalar buffer ``q_lin``, ``q_prec``);
    ``C`` (R, K, S): the slot's coefficient in component k (0: absent); ``off``, ``a`` (R, K); ``h``, ``lam``
    (R, S): the row's messages to its slots; ``zi`` (R,): the selector element of the row; ``zeta`` (R, K): the
    row's message to it (log-potentials, ζ_0 = 0); ``zq`` (Nz, K): q(z)'s log-potentials (or, with ``zfixed``,
    the observed selector's log one-hot).  ``sequential``: q (q_lin, q_prec, zq) and the messages are updated
    in place after each row; otherwise the damped new messages of every row, from the same q, are written to
    ``new_h``, ``new_lam``, ``new_zeta`` and nothing else changes.  ``log_z`` (R,) receives log Z of each row
    at its cavity (NaN where the row was not updated).  Returns the rows skipped because a cavity or an update
    was improper.
    """
    R, K, S = C.shape
    skipped = 0
    m = np.empty(S)
    v = np.empty(S)
    lc = np.empty(K)
    lz = np.empty(K)
    mu = np.empty(K)
    sk = np.empty(K)
    r = np.empty(K)
    nh = np.empty(S)
    nl = np.empty(S)
    nz = np.empty(K)
    for n in range(R):
        log_z[n] = math.nan
        for s in range(S):
            new_h[n, s], new_lam[n, s] = h[n, s], lam[n, s]
        for k in range(K):
            new_zeta[n, k] = zeta[n, k]
        bad = False
        flat = False
        for s in range(S):
            used = False
            for k in range(K):
                if C[n, k, s] != 0.0:
                    used = True
            if not used:
                m[s], v[s] = 0.0, 0.0
                continue
            g = idx[n, s]
            p = q_prec[g] - lam[n, s]
            if p < 0.0:
                bad = True
            elif p == 0.0:
                flat = True
            else:
                v[s] = 1.0 / p
                m[s] = (q_lin[g] - h[n, s]) * v[s]
        if bad:
            skipped += 1
            continue
        if flat:
            continue  # a flat cavity: the row waits for its slots' other messages
        top = -math.inf
        for k in range(K):
            lc[k] = zq[zi[n], k] - (0.0 if zfixed else zeta[n, k])
            top = max(top, lc[k])
        tot = 0.0
        for k in range(K):
            tot += math.exp(lc[k] - top)
        norm = top + math.log(tot)  # log Σ_k exp(ℓ_k): π_k = exp(ℓ_k − norm)
        best = -math.inf
        for k in range(K):
            mk = off[n, k]
            vk = 1.0 / a[n, k]
            for s in range(S):
                c = C[n, k, s]
                if c != 0.0:
                    mk += c * m[s]
                    vk += c * c * v[s]
            mu[k], sk[k] = mk, vk
            lz[k] = -0.5 * (_LOG_2PI + math.log(vk)) - 0.5 * mk * mk / vk
            r[k] = lc[k] - norm + lz[k]
            best = max(best, r[k])
        tot = 0.0
        for k in range(K):
            r[k] = math.exp(r[k] - best)
            tot += r[k]
        log_z[n] = best + math.log(tot)
        for k in range(K):
            r[k] /= tot
        for s in range(S):
            if v[s] == 0.0:
                nh[s], nl[s] = h[n, s], lam[n, s]
                continue
            mean = 0.0
            second = 0.0
            for k in range(K):
                c = C[n, k, s]
                ms = m[s] - c * v[s] * mu[k] / sk[k]
                vs = v[s] - c * c * v[s] * v[s] / sk[k]
                mean += r[k] * ms
                second += r[k] * (vs + ms * ms)
            var = second - mean * mean
            if not (var > 0.0):
                bad = True
                break
            nl[s] = (1.0 - damping) * (1.0 / var - 1.0 / v[s]) + damping * lam[n, s]
            nh[s] = (1.0 - damping) * (mean / var - m[s] / v[s]) + damping * h[n, s]
            if not (q_prec[idx[n, s]] + nl[s] - lam[n, s] > 0.0):
                bad = True
                break
        if bad:
            skipped += 1
            continue
        for k in range(K):
            nz[k] = 0.0 if zfixed else (1.0 - damping) * (lz[k] - lz[0]) + damping * zeta[n, k]
        for s in range(S):
            new_h[n, s], new_lam[n, s] = nh[s], nl[s]
        for k in range(K):
            new_zeta[n, k] = nz[k]
        if sequential:
            for s in range(S):
                if v[s] == 0.0:
                    continue
                g = idx[n, s]
                q_prec[g] += nl[s] - lam[n, s]
                q_lin[g] += nh[s] - h[n, s]
                lam[n, s], h[n, s] = nl[s], nh[s]
            if not zfixed:
                for k in range(K):
                    zq[zi[n], k] += nz[k] - zeta[n, k]
                    zeta[n, k] = nz[k]
    return skipped
