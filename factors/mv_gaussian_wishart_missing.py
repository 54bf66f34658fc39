r"""Partly observed rows under a Wishart precision: the observed coordinates' marginal density, by NCVMP.

A row x with observed coordinates o (|o| = r) and missing ones m (|m| = k = D − r) keeps, in the
likelihood, the marginal density of what was seen,

.. math:: \log f = \log N(x_o \mid \mu_o, \Sigma_{oo}),\qquad \Sigma = \Lambda^{-1},

so a missing coordinate is integrated out exactly rather than imputed as a latent variable.  Under
q(Λ) = W(ν, V) (inverse scale V, E[Λ] = νV⁻¹) the observed block's precision is again Wishart: Σ_oo ~
IW(ν − k, V_oo⁻¹), i.e.

.. math:: \Sigma_{oo}^{-1} \sim W(\nu - k, V_{oo}),\quad
          E[\Sigma_{oo}^{-1}] = (\nu - k) V_{oo}^{-1},\quad
          E\log|\Sigma_{oo}^{-1}| = \psi_r(\tfrac{\nu-k}2) + r\log 2 - \log|V_{oo}|,

and with C = E[(x − μ)(x − μ)ᵀ] and Ã = V_oo⁻¹ embedded in D × D (zeros at the missing coordinates)

.. math:: S = E_q[\log f] = -\tfrac r2\log 2\pi + \tfrac12\bigl(\psi_r(\tfrac{\nu-k}2) + r\log 2
          - \log|V_{oo}|\bigr) - \tfrac{\nu-k}2\operatorname{tr}(\tilde A C).

S is not linear in the Wishart statistics (Λ, log|Λ|) unless k = 0, so the message to Λ is NCVMP's
(Knowles & Minka 2011): the gradient of S with respect to the mean parameters P = E[Λ] = νV⁻¹ and
L = E[log|Λ|] = ψ_D(ν/2) + D log 2 − log|V|.  From the partial derivatives

.. math:: G_V = -\tfrac12\tilde A + \tfrac{\nu-k}2\tilde A C\tilde A,\qquad
          G_\nu = \tfrac14\psi'_r(\tfrac{\nu-k}2) - \tfrac12\operatorname{tr}(\tilde A C),

the chain rule through dP = V⁻¹dν − νV⁻¹dV V⁻¹, dL = ½ψ'_D(ν/2)dν − tr(V⁻¹dV) gives the message
(B, c) to (Λ, log|Λ|):

.. math:: c = \frac{\tfrac14\psi'_r(\frac{\nu-k}2) - \frac r{2\nu} - \frac k{2\nu}\operatorname{tr}(\tilde AC)}
                   {\tfrac12\psi'_D(\frac\nu2) - \frac D\nu},\qquad
          B = -\frac{V G_V V + cV}{\nu}

(using tr(VÃ) = r and ÃVÃ = Ã).  A complete row (k = 0) gives the conjugate message (−½C, ½) exactly,
and a row with nothing observed gives 0.  The message to a Gaussian mean μ stays conjugate:
(E[Σ̃⁻¹]x, −½E[Σ̃⁻¹]) with E[Σ̃⁻¹] = (ν − k)Ã.

For a normal–Wishart block (μ, Λ) (``models.gaussian_mixture(covariance="full")``), μ | Λ ~ N(m, (βΛ)⁻¹),
E over μ | Λ adds tr(Σ_oo⁻¹Σ_oo)/β = r/β, so with d = x − m

.. math:: S = -\tfrac r2\log 2\pi + \tfrac12\bigl(\psi_r(\tfrac{\nu-k}2) + r\log 2 - \log|V_{oo}|\bigr)
          - \tfrac{\nu-k}2 d^\top\tilde A d - \tfrac r{2\beta},

and the block's statistics (Λμ, μᵀΛμ, Λ, log|Λ|) have mean parameters (νV⁻¹m, D/β + νmᵀV⁻¹m, νV⁻¹, L).
Their gradient message is η₂ = −r/(2D), η₁ = (ν − k)VÃd/ν + (r/D)m, η₄ = c and η₃ = B − sym(mη₁ᵀ) −
η₂mmᵀ, with (B, c) as above at C = ddᵀ.  A complete row gives (x, −½, −½xxᵀ, ½).

The rules recover q(Λ)'s (ν, V) from its statistics (``wishart_params``), as NCVMP's messages are
functions of the target's own q.  Rows are grouped by their missingness pattern: Ã and log|V_oo| are
computed once per (pattern, component) by one batched inverse of O V O + (I − O) (O = diag(o)), whose
inverse is Ṽ_oo⁻¹ ⊕ I, and gathered onto the factor instances.  The messages are formed per factor
instance (rows × components × D × D for a mixture).
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, polygamma

from distributions import GaussianWishart, MvGaussian, Wishart

from .base import LOG_2PI, FactorType, Moments, same_stats

LOG_2 = float(np.log(2.0))

MV_GAUSSIAN_WISHART_MISSING = FactorType("MvGaussianWishartMissing", conjugate=False, out=MvGaussian,
                                         mean=MvGaussian, precision=Wishart)
MV_GAUSSIAN_NORMAL_WISHART_MISSING = FactorType("MvGaussianNormalWishartMissing", conjugate=False, out=MvGaussian,
                                                params=GaussianWishart)


def missing_patterns(coords: np.ndarray) -> dict:
    """The factor parameters of a coordinate mask (plates + (D,), 1 = observed): the distinct patterns
    (P × D booleans) and each instance's pattern index (the mask's plate shape)."""
    c = np.asarray(coords) > 0
    patterns, index = np.unique(c.reshape(-1, c.shape[-1]), axis=0, return_inverse=True)
    return {"observed_coords": c, "patterns": patterns, "pattern_index": index.reshape(c.shape[:-1])}


def _sym(a: np.ndarray) -> np.ndarray:
    return 0.5 * (a + np.swapaxes(a, -1, -2))


def _multi(fn, a: np.ndarray, r: np.ndarray, D: int) -> np.ndarray:
    """Σᵢ₌₁ʳ fn(a + (1 − i)/2) for a per-element count r ≤ D (0 for r = 0)."""
    half = 0.5 * (1.0 - np.arange(1, D + 1))
    used = np.arange(1, D + 1) <= np.asarray(r)[..., None]
    arg = np.where(used, np.asarray(a)[..., None] + half, 1.0)
    return np.where(used, fn(arg), 0.0).sum(-1)


def _trigamma(x):
    return polygamma(1, x)


def wishart_params(P: np.ndarray, L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ν, V) of the Wishart with E[Λ] = P and E[log|Λ|] = L (V the inverse scale, E[Λ] = νV⁻¹).

    ν solves g(ν) = ψ_D(ν/2) − D log(ν/2) = L − log|P|, with g increasing from −∞ (ν → D − 1) to 0
    (g ≈ −D(D+1)/(2ν) for large ν), by safeguarded Newton steps in s = log(ν − D + 1); V = νP⁻¹.
    """
    P = _sym(np.asarray(P, float))
    D = P.shape[-1]
    sign, logdet = np.linalg.slogdet(P)
    target = np.asarray(L, float) - logdet
    if np.any(sign <= 0) or np.any(~(target < 0)):
        raise FloatingPointError("q(Λ): no Wishart has these statistics (E[Λ] not positive definite, or "
                                 "E[log|Λ|] ≥ log|E[Λ]|)")
    nu0 = np.maximum(-0.5 * D * (D + 1) / target, D - 1 + 1e-3)
    s = np.log(nu0 - D + 1.0)
    lo, hi = np.full_like(s, -745.0), np.full_like(s, 745.0)
    for _ in range(200):
        nu = D - 1.0 + np.exp(s)
        half = 0.5 * nu
        g = _multi(digamma, half, D, D) - D * np.log(half) - target
        dg = (0.5 * _multi(_trigamma, half, D, D) - D / nu) * np.exp(s)
        lo, hi = np.where(g < 0, s, lo), np.where(g > 0, s, hi)
        step = np.where(dg > 0, -g / np.where(dg > 0, dg, 1.0), 0.0)
        new = s + step
        new = np.where((new > lo) & (new < hi), new, 0.5 * (lo + hi))
        done = np.all(np.abs(new - s) <= 1e-15 * np.maximum(1.0, np.abs(s)))
        s = new
        if done:
            break
    nu = D - 1.0 + np.exp(s)
    return nu, nu[..., None, None] * np.linalg.inv(P)


def _lift(a: np.ndarray, nb: int, ev: int) -> np.ndarray:
    a = np.asarray(a, float)
    missing = nb - (a.ndim - ev)
    return a.reshape((1,) * missing + a.shape) if missing > 0 else a


def _gather(p: dict, batch: tuple[int, ...]) -> tuple:
    """Index arrays that pick, for every factor instance, its pattern's entry of an array over
    (patterns, *batch) (``batch``: q(Λ)'s plates lifted to the factor's, singletons allowed)."""
    idx = p["pattern_index"]
    nb = idx.ndim
    shape = np.broadcast_shapes(idx.shape, batch)
    rest = tuple(np.zeros(shape, int) if batch[i] == 1 else
                 np.broadcast_to(np.arange(batch[i]).reshape((-1,) + (1,) * (nb - i - 1)), shape) for i in range(nb))
    return (np.broadcast_to(idx, shape), *rest)


def _blocks(p: dict, nu: np.ndarray, V: np.ndarray) -> _Gathered:
    """Per factor instance, from q(Λ)'s (ν, V) (lifted to the factor's plates) and the missingness patterns:
    Ã (V_oo⁻¹ embedded), T = VÃ, Q = VÃV, ν, ν − k, r, k, the scatter-free part of S and of c's numerator
    (¼ψ'_r((ν−k)/2) − r/(2ν)) and c's denominator.  The special functions are evaluated once per
    (pattern, component), then gathered."""
    O = p["patterns"].astype(float)  # (P, D)
    D = O.shape[-1]
    Ob = O.reshape((O.shape[0],) + (1,) * (V.ndim - 2) + (D,))
    M = Ob[..., :, None] * V[None] * Ob[..., None, :] + np.eye(D) * (1.0 - Ob[..., None, :])
    A = Ob[..., :, None] * np.linalg.inv(M) * Ob[..., None, :]
    ld = np.linalg.slogdet(M)[1]
    r = np.broadcast_to(O.sum(-1).reshape((-1,) + (1,) * (V.ndim - 2)), ld.shape)
    k = D - r
    nus = np.broadcast_to(nu, ld.shape)
    nup = nus - k
    T = V @ A
    out = {"A": A, "T": T, "Q": T @ V, "nu": nus, "nup": nup, "r": r, "k": k,
           "log_norm": 0.5 * (_multi(digamma, 0.5 * nup, r, D) + r * LOG_2 - ld) - 0.5 * r * LOG_2PI,
           "a": 0.25 * _multi(_trigamma, 0.5 * nup, r, D) - r / (2 * nus),
           "den": np.broadcast_to(0.5 * _multi(_trigamma, 0.5 * nu, D, D) - D / nu, ld.shape)}
    return _Gathered(out, _gather(p, V.shape[:-2]))


class _Gathered(dict):
    """Per-(pattern, component) arrays, gathered onto the factor instances when first asked for."""

    def __init__(self, per_pattern: dict, at: tuple) -> None:
        super().__init__()
        self._src, self._at = per_pattern, at

    def __missing__(self, key: str) -> np.ndarray:
        self[key] = val = self._src[key][self._at]
        return val


def _precision_message(b: dict, V: np.ndarray, w: np.ndarray, extra, tr_ac: np.ndarray, C_complete) -> tuple:
    """(B, c) to (Λ, log|Λ|) (see the module docstring) for a scatter C with VÃCÃV = wwᵀ + ``extra`` and
    tr(ÃC) = ``tr_ac``: B = −(−½Q + ½(ν − k)VÃCÃV + cV)/ν; exactly (−½C, ½) on complete rows."""
    nu, k = b["nu"], b["k"]
    c = (b["a"] - k / (2 * nu) * tr_ac) / b["den"]
    VCV = w[..., :, None] * w[..., None, :] + (0.0 if extra is None else extra)
    B = -(-0.5 * b["Q"] + 0.5 * b["nup"][..., None, None] * VCV + c[..., None, None] * V) / nu[..., None, None]
    complete = k == 0
    return np.where(complete[..., None, None], -0.5 * C_complete, _sym(B)), np.where(complete, 0.5, c)


def _cached(p: dict, stats: tuple, compute):
    """``compute()`` once per q: the rules and the evidence of one factor see the same q(Λ) several times a sweep
    (its two messages, the ELBO), and (ν, V) by Newton plus the per-pattern blocks are the costly part."""
    state = p.get("state")
    hit = None if state is None else state.get("q(Λ)")
    if hit is not None and same_stats(hit[0], stats):
        return hit[1]
    out = compute()
    if state is not None:
        state["q(Λ)"] = (stats, out)
    return out


# ------------------------------------------------------------------------------ Wishart precision, mean μ
def _wishart_parts(m: Moments, p: dict) -> tuple:
    """The blocks, V per instance, x (0 at missing coordinates), e = x − E[μ] and Cov[μ]."""
    coords = p["observed_coords"]
    nb = coords.ndim - 1
    def compute():
        P, L = m["precision"]
        nu, V = wishart_params(_lift(P, nb, 2), _lift(L, nb, 0))
        return V, _blocks(p, nu, V)

    V, b = _cached(p, m["precision"], compute)
    x = np.where(coords, _lift(m["out"][0], nb, 1), 0.0)
    mu, mumu = _lift(m["mean"][0], nb, 1), _lift(m["mean"][1], nb, 2)
    cov_mu = mumu - mu[..., :, None] * mu[..., None, :]
    shape = b["nu"].shape
    return b, np.broadcast_to(V, shape + V.shape[-2:]), x, np.broadcast_to(x - mu, shape + x.shape[-1:]), cov_mu


def _scatter_terms(b: dict, e: np.ndarray, cov_mu: np.ndarray) -> tuple:
    """tr(ÃC) and VÃCÃV − wwᵀ (w = VÃe) for C = eeᵀ + Cov[μ]."""
    Ae = np.einsum("...ij,...j->...i", b["A"], e)
    tr_ac = np.einsum("...i,...i->...", e, Ae) + np.einsum("...ij,...ij->...", b["A"], cov_mu)
    T = b["T"]
    extra = T @ cov_mu @ np.swapaxes(T, -1, -2)
    return tr_ac, extra, np.einsum("...ij,...j->...i", T, e)


@MV_GAUSSIAN_WISHART_MISSING.rule("precision", "ncvmp")
def mvwm_to_precision(m: Moments, p: dict) -> tuple:
    b, V, _, e, cov_mu = _wishart_parts(m, p)
    tr_ac, extra, w = _scatter_terms(b, e, cov_mu)
    return _precision_message(b, V, w, extra, tr_ac, e[..., :, None] * e[..., None, :] + cov_mu)


@MV_GAUSSIAN_WISHART_MISSING.rule("mean", "vmp")
def mvwm_to_mean(m: Moments, p: dict) -> tuple:
    b, _, x, _, _ = _wishart_parts(m, p)
    prec = b["nup"][..., None, None] * b["A"]
    return (np.einsum("...ij,...j->...i", prec, x), -0.5 * prec)


@MV_GAUSSIAN_WISHART_MISSING.evidence(kind="exact")
def mvwm_evidence(m: Moments, p: dict) -> np.ndarray:
    b, _, _, e, cov_mu = _wishart_parts(m, p)
    Ae = np.einsum("...ij,...j->...i", b["A"], e)
    tr_ac = np.einsum("...i,...i->...", e, Ae) + np.einsum("...ij,...ij->...", b["A"], cov_mu)
    return b["log_norm"] - 0.5 * b["nup"] * tr_ac


# ------------------------------------------------------------------------------ normal–Wishart block (μ, Λ)
def _nw_parts(m: Moments, p: dict) -> tuple:
    """The blocks, V, x (0 at missing coordinates), d = x − m, the location m and β, per instance."""
    coords = p["observed_coords"]
    nb = coords.ndim - 1
    D = coords.shape[-1]
    def compute():
        lm, q, P, L = m["params"]
        lm, q, P, L = _lift(lm, nb, 1), _lift(q, nb, 0), _lift(P, nb, 2), _lift(L, nb, 0)
        nu, V = wishart_params(P, L)
        mean = np.linalg.solve(_sym(P), lm[..., None])[..., 0]
        return V, _blocks(p, nu, V), mean, D / (q - np.einsum("...i,...i->...", lm, mean))

    V, b, mean, beta = _cached(p, m["params"], compute)
    x = np.where(coords, _lift(m["out"][0], nb, 1), 0.0)
    shape = b["nu"].shape
    return (b, np.broadcast_to(V, shape + (D, D)), x, np.broadcast_to(x - mean, shape + (D,)),
            np.broadcast_to(mean, shape + (D,)), np.broadcast_to(beta, shape))


@MV_GAUSSIAN_NORMAL_WISHART_MISSING.rule("params", "ncvmp")
def mvnwm_to_params(m: Moments, p: dict) -> tuple:
    b, V, x, d, mean, _ = _nw_parts(m, p)
    D = d.shape[-1]
    Ad = np.einsum("...ij,...j->...i", b["A"], d)
    w = np.einsum("...ij,...j->...i", V, Ad)  # VÃd: VÃCÃV = wwᵀ for C = ddᵀ
    B, c = _precision_message(b, V, w, None, np.einsum("...i,...i->...", d, Ad), d[..., :, None] * d[..., None, :])
    r, k = b["r"], b["k"]
    eta2 = -r / (2.0 * D)
    eta1 = (b["nup"] / b["nu"])[..., None] * w + (r / D)[..., None] * mean
    outer = mean[..., :, None] * eta1[..., None, :]
    mm = mean[..., :, None] * mean[..., None, :]
    eta3 = B - 0.5 * (outer + np.swapaxes(outer, -1, -2)) - eta2[..., None, None] * mm
    complete = k == 0
    eta1 = np.where(complete[..., None], x, eta1)
    eta3 = np.where(complete[..., None, None], -0.5 * x[..., :, None] * x[..., None, :], eta3)
    return (eta1, np.where(complete, -0.5, eta2), eta3, c)


@MV_GAUSSIAN_NORMAL_WISHART_MISSING.evidence(kind="exact")
def mvnwm_evidence(m: Moments, p: dict) -> np.ndarray:
    b, _, _, d, _, beta = _nw_parts(m, p)
    dAd = np.einsum("...i,...ij,...j->...", d, b["A"], d)
    return b["log_norm"] - 0.5 * b["nup"] * dAd - 0.5 * b["r"] / beta


# ------------------------------------------------------------------------------ the first message
def _completed(p: dict, P: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ê, R): the observed residual e (zeros at the missing coordinates) completed by its conditional mean
    under the plug-in precision P = E[Λ], ê_m = −P_mm⁻¹P_mo e_o, and R = P_mm⁻¹ embedded in D × D (the
    conditional covariance of the missing coordinates), per factor instance."""
    O = p["patterns"].astype(float)
    idx = p["pattern_index"]
    nb, D = idx.ndim, O.shape[-1]
    Mb = 1.0 - O.reshape((O.shape[0],) + (1,) * nb + (D,))  # missing indicators
    M = Mb[..., :, None] * P[None] * Mb[..., None, :] + np.eye(D) * (1.0 - Mb[..., None, :])
    R_all = Mb[..., :, None] * np.linalg.inv(M) * Mb[..., None, :]
    R = R_all[_gather(p, P.shape[:-2])]
    return e - np.einsum("...ij,...j->...i", R, np.einsum("...ij,...j->...i", P, e)), R


@MV_GAUSSIAN_WISHART_MISSING.initial("precision")
def mvwm_first_to_precision(m: Moments, p: dict) -> tuple:
    """The first message, before the NCVMP gradient (which at a q far from the data can be too large to
    leave q(Λ) proper): the conjugate message (−½E[(x − μ)(x − μ)ᵀ], ½) of the row completed under the
    current E[Λ], as if its missing coordinates were latent with q(x_m) their conditional Gaussian."""
    coords = p["observed_coords"]
    nb = coords.ndim - 1
    P = _sym(_lift(m["precision"][0], nb, 2))
    mu, mumu = _lift(m["mean"][0], nb, 1), _lift(m["mean"][1], nb, 2)
    e = np.where(coords, _lift(m["out"][0], nb, 1) - mu, 0.0)
    ehat, R = _completed(p, P, e)
    cov_mu = mumu - mu[..., :, None] * mu[..., None, :]
    C = ehat[..., :, None] * ehat[..., None, :] + R + cov_mu
    return (-0.5 * C, np.full(C.shape[:-2], 0.5))


@MV_GAUSSIAN_NORMAL_WISHART_MISSING.initial("params")
def mvnwm_first_to_params(m: Moments, p: dict) -> tuple:
    """The first message: the conjugate (x̂, −½, −½(x̂x̂ᵀ + R), ½) of the row completed under the current
    block's E[Λ] and location (see ``mvwm_first_to_precision``)."""
    coords = p["observed_coords"]
    nb = coords.ndim - 1
    lm, _, P, _ = m["params"]
    lm, P = _lift(lm, nb, 1), _sym(_lift(P, nb, 2))
    mean = np.linalg.solve(P, lm[..., None])[..., 0]
    e = np.where(coords, _lift(m["out"][0], nb, 1) - mean, 0.0)
    ehat, R = _completed(p, P, e)
    x = ehat + mean
    return (x, np.full(x.shape[:-1], -0.5), -0.5 * (x[..., :, None] * x[..., None, :] + R), np.full(x.shape[:-1], 0.5))
