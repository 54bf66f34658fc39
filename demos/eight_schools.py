"""Eight schools (Rubin 1981; Gelman et al., BDA3 §5.5) with a half-Cauchy(0, 5) prior on the group sd τ.

    μ ~ N(0, 5²),  τ ~ half-Cauchy(0, 5),  θ_j ~ N(μ, τ²),  y_j ~ N(θ_j, σ_j²),  j = 1..8

The library fits the mean-field posterior q(μ) q(τ) q(θ) by NCVMP (``fg.half_cauchy`` keeps q over τ⁻² a
Gamma; its prior term is an exact quadrature).  The demo prints posterior means and sds beside

* NUTS (PyMC, non-centred, 100 000 draws) and PyMC's mean-field ADVI on the same centred model, both read
  from ``data/eight_schools/reference.json`` (made once by ``benchmarks/eight_schools_reference.py``);
* the exact posterior, by 1-D quadrature over τ: given τ, μ and θ are jointly Gaussian (BDA3 §5.4), so
  p(τ | y) ∝ p(τ) N(y | 0, diag(σ² + τ²) + 25·11ᵀ) and the moments of μ and θ_j are τ-averages of
  closed forms.

and scores each fit by the largest |Δmean|/sd against NUTS over μ, τ and the θ_j.  Figures in ``demos/out/``:
posterior means ± sd of every fit, and q's marginal densities against NUTS (``factorgraph.plots``).

ADVI's family for τ is a Gaussian over log τ, the library's a Gamma over τ⁻².  To separate the family from
ADVI's Monte Carlo noise the demo also computes the exact optimum of the mean-field ELBO with ADVI's family,
q(μ) q(θ) N(log τ | m, v), deterministically (``lognormal_mean_field``: closed-form coordinate updates of
q(μ), q(θ) given E[τ⁻²] = exp(−2m + 2v), and (m, v) by BFGS with a 120-point Gauss–Hermite rule for the
prior term), and prints both families' scores and ELBOs.  This is a reference computation in the demo, not a
library family: the library does not offer a log-normal q for scale variables.  A non-centred
parametrisation (θ_j = μ + τ η_j) is not expressible either: a scale variable can only be the sd= of a
Gaussian, not a factor of a product.

Mean field cannot represent the funnel (small τ pulls every θ_j to μ): q(τ) is a Gamma over τ⁻²
independent of θ, so the demo also reports how far q(τ) is from the exact p(τ | y) (its mean, sd, and the
mass each puts below τ = 1).  A global handler on (θ, log τ), which would capture that dependence, is not
available: the library's handlers (Laplace, MVI, ...) take one Gaussian weight vector whose sites are
``fg.inner(X, w)``, and a scale variable cannot be part of such a block.

Run ``python demos/eight_schools.py [--small]`` (the same model either way: it takes a second).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import factorgraph as fg  # noqa: E402
from factorgraph import plots  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "eight_schools"
OUT = Path(__file__).resolve().parent / "out"
MU_SD, TAU_SCALE = 5.0, 5.0


def load() -> tuple[list[str], np.ndarray, np.ndarray]:
    """School letters, estimated effects y_j and their standard errors σ_j."""
    rows = [line.split(",") for line in (DATA / "data.csv").read_text().splitlines()[1:] if line.strip()]
    return [r[0] for r in rows], np.array([float(r[1]) for r in rows]), np.array([float(r[2]) for r in rows])


def build(y: np.ndarray, sigma: np.ndarray) -> fg.Model:
    """The centred eight-schools model."""
    with fg.Model("eight schools") as m:
        j = fg.plate("school", len(y))
        mu = fg.gaussian("mu", 0.0, sd=MU_SD)
        tau = fg.half_cauchy("tau", scale=TAU_SCALE)
        theta = fg.gaussian("theta", mean=mu, sd=tau, plates=[j])
        fg.gaussian("y", mean=theta, sd=sigma, plates=[j], observed=y)
    return m


def exact(y: np.ndarray, sigma: np.ndarray, n: int = 20_001) -> dict:
    """Posterior means and sds of μ, τ, θ_j, and P(τ < 1), by quadrature over u = log τ (given τ, μ and θ are
    Gaussian; the marginal N(y | 0, diag(σ² + τ²) + 25·11ᵀ) by the Sherman–Morrison formula).  The trapezoid
    rule on a wide uniform grid in u converges geometrically for this smooth, decaying integrand."""
    s2 = sigma**2
    u = np.linspace(-25.0, 12.0, n)
    t = np.exp(u)[:, None]
    v = s2 + t * t
    sv, syv = np.sum(1 / v, 1), np.sum(y / v, 1)
    c = 1 / MU_SD**2
    quad_form = np.sum(y * y / v, 1) - syv**2 / (c + sv)
    logdet = np.sum(np.log(v), 1) + np.log1p(sv / c)
    log_prior = np.log(2 / (np.pi * TAU_SCALE)) - np.log1p((t[:, 0] / TAU_SCALE) ** 2)
    logw = -0.5 * (quad_form + logdet) + log_prior + u  # dτ = τ du
    w = np.exp(logw - logw.max())
    log_evidence = float(logw.max() + np.log(w.sum() * (u[1] - u[0])) - 0.5 * len(y) * np.log(2 * np.pi))
    w /= w.sum()
    prec_mu = c + sv
    mu_hat = syv / prec_mu
    pj = 1 / s2 + 1 / (t * t)
    m_th = (y / s2 + mu_hat[:, None] / (t * t)) / pj
    v_th = 1 / pj + (1 / (t * t * pj)) ** 2 / prec_mu[:, None]
    tt = t[:, 0]

    def ms(m, m2):
        return [float(m), float(np.sqrt(m2 - m * m))]

    th_m, th_m2 = w @ m_th, w @ (m_th**2 + v_th)
    return {"mu": ms(w @ mu_hat, w @ (mu_hat**2 + 1 / prec_mu)), "tau": ms(w @ tt, w @ tt**2),
            "theta": [ms(a, b) for a, b in zip(th_m, th_m2, strict=True)], "p_tau_below_1": float(w[tt < 1].sum()),
            "log_evidence": log_evidence}


def lognormal_mean_field(y: np.ndarray, sigma: np.ndarray, tol: float = 1e-12) -> dict:
    """The optimum of the mean-field ELBO with q(log τ) = N(m, v) (ADVI's family), without Monte Carlo.

    Given κ = E[τ⁻²] = exp(−2m + 2v), q(θ_j) and q(μ) have their closed-form coordinate updates; given those,
    (m, v) maximise −8m − ½κ Σ_j E[(θ_j − μ)²] + E[log p(e^s) + s] + ½ log v (the prior term by a 120-point
    Gauss–Hermite rule, exact to rounding for this smooth integrand).  Alternating the two is coordinate
    ascent on the ELBO; it stops when (m, log v) move less than ``tol``."""
    from scipy import optimize

    s2 = sigma**2
    x, wts = np.polynomial.hermite_e.hermegauss(120)
    wts = wts / np.sqrt(2 * np.pi)

    def log_prior_s(s):  # log p_τ(e^s) + s: the half-Cauchy on the log scale
        return np.log(2 / (np.pi * TAU_SCALE)) - np.log1p(np.exp(2 * s) / TAU_SCALE**2) + s

    def given(m, v):
        kappa = np.exp(-2 * m + 2 * v)
        v_th = 1 / (1 / s2 + kappa)
        m_th, m_mu = y.copy(), 0.0
        for _ in range(10_000):  # q(θ) and q(μ) to their joint optimum given κ
            m_th = v_th * (y / s2 + kappa * m_mu)
            v_mu = 1 / (1 / MU_SD**2 + len(y) * kappa)
            new = v_mu * kappa * m_th.sum()
            if abs(new - m_mu) < 1e-15 * (1 + abs(m_mu)):
                break
            m_mu = new
        q = np.sum(v_th + m_th**2 - 2 * m_th * m_mu + v_mu + m_mu**2)
        return kappa, m_th, v_th, m_mu, v_mu, q

    m, lv = np.log(TAU_SCALE), np.log(0.1)
    sweeps = 0
    while sweeps < 10_000:
        sweeps += 1
        q = given(m, np.exp(lv))[-1]

        def neg(p, q=q):
            mm, lvv = p
            return -(-len(y) * mm - 0.5 * np.exp(-2 * mm + 2 * np.exp(lvv)) * q
                     + wts @ log_prior_s(mm + np.exp(0.5 * lvv) * x) + 0.5 * lvv)

        new = optimize.minimize(neg, [m, lv], method="BFGS", options={"gtol": 1e-12}).x
        done = np.max(np.abs(new - [m, lv])) < tol
        m, lv = new
        if done:
            break
    v = float(np.exp(lv))
    kappa, m_th, v_th, m_mu, v_mu, q = given(m, v)
    elbo = (np.sum(-0.5 * np.log(2 * np.pi * s2) - 0.5 * ((y - m_th) ** 2 + v_th) / s2)
            + len(y) * (-0.5 * np.log(2 * np.pi) - m) - 0.5 * kappa * q
            - 0.5 * np.log(2 * np.pi * MU_SD**2) - 0.5 * (m_mu**2 + v_mu) / MU_SD**2
            + wts @ log_prior_s(m + np.sqrt(v) * x)
            + 0.5 * np.log(2 * np.pi * np.e * v) + 0.5 * np.log(2 * np.pi * np.e * v_mu)
            + np.sum(0.5 * np.log(2 * np.pi * np.e * v_th)))
    from scipy.stats import norm

    t_mean = np.exp(m + v / 2)
    return {"mu": [float(m_mu), float(np.sqrt(v_mu))], "tau": [float(t_mean), float(t_mean * np.sqrt(np.expm1(v)))],
            "theta": [[float(a), float(np.sqrt(b))] for a, b in zip(m_th, v_th, strict=True)],
            "p_tau_below_1": float(norm.cdf(-m / np.sqrt(v))), "log_tau": [float(m), float(np.sqrt(v))],
            "elbo": float(elbo), "sweeps": sweeps, "converged": bool(done)}


def summary(r: fg.Result) -> dict:
    """Posterior means and sds of μ, τ (on the σ scale) and θ_j from a library fit."""
    mu, tau, th = r.posterior("mu"), r.posterior("tau"), r.posterior("theta")
    return {"mu": [float(mu.mean()), float(mu.std())], "tau": [float(tau.mean()), float(tau.std())],
            "theta": [[float(m), float(s)] for m, s in zip(th.mean(), th.std(), strict=True)],
            "p_tau_below_1": float(tau.cdf(1.0))}


def gaps(fit: dict, nuts: dict) -> dict[str, float]:
    """|mean − NUTS mean| / NUTS sd for μ, τ and each θ_j."""
    pairs = [("mu", fit["mu"], nuts["mu"]), ("tau", fit["tau"], nuts["tau"])]
    pairs += [(f"theta[{j}]", f, n) for j, (f, n) in enumerate(zip(fit["theta"], nuts["theta"], strict=True))]
    return {k: abs(f[0] - n[0]) / n[1] for k, f, n in pairs}


def score(fit: dict, nuts: dict) -> tuple[float, str]:
    """max |mean − NUTS mean| / NUTS sd over μ, τ and θ_j, and where it is attained."""
    g = gaps(fit, nuts)
    worst = max(g, key=g.get)
    return g[worst], worst


def main(small: bool = False, seed: int = 0) -> dict:
    schools, y, sigma = load()
    r = fg.infer(build(y, sigma), fg.NCVMP(), max_iter=2000)
    lib = summary(r)
    ref = json.loads((DATA / "reference.json").read_text())
    nuts, advi = ref["nuts"], ref["advi"]
    ex = exact(y, sigma)
    ln = lognormal_mean_field(y, sigma)
    cols = [("NUTS", nuts), ("exact", ex), ("fg mean field", lib), ("ADVI mean field", advi),
            ("lognormal optimum", ln)]
    names = ["mu", "tau"] + [f"theta[{s}]" for s in schools]

    def row(d, i):
        return d["mu"] if i == 0 else d["tau"] if i == 1 else d["theta"][i - 2]

    print(f"Eight schools, half-Cauchy(0, {TAU_SCALE:g}) on tau: posterior mean (sd)")
    print(f"{'':10}" + "".join(f"{c:>20}" for c, _ in cols))
    print(f"{'':10}" + "".join(f"{c:>20}" for c in ("", "(quadrature)", "Gamma over tau^-2", "(PyMC, stochastic)",
                                                   "N(log tau), exact")))
    for i, n in enumerate(names):
        print(f"{n:10}" + "".join(f"{row(d, i)[0]:>11.3f} ({row(d, i)[1]:5.2f})" for _, d in cols))
    s_lib, s_advi = score(lib, nuts), score(advi, nuts)
    print(f"\nlargest |Δmean|/sd against NUTS: fg mean field {s_lib[0]:.3f} (at {s_lib[1]}), "
          f"ADVI {s_advi[0]:.3f} (at {s_advi[1]})")
    g_lib, g_advi = gaps(lib, nuts), gaps(advi, nuts)
    closer = [k for k in g_lib if g_lib[k] < g_advi[k]]
    print(f"fg is closer to NUTS than ADVI on {len(closer)} of {len(g_lib)} means"
          + (f"; not on {[k for k in g_lib if k not in closer]}" if len(closer) < len(g_lib) else ""))
    s_ln = score(ln, nuts)
    print(f"ADVI's family at its exact optimum (N(log tau | {ln['log_tau'][0]:.4f}, {ln['log_tau'][1]:.4f}^2); ADVI's "
          f"stochastic fit: N({advi['log_tau'][0]:.4f}, {advi['log_tau'][1]:.4f}^2)): {s_ln[0]:.3f} (at {s_ln[1]}), "
          f"ELBO {ln['elbo']:.6f} vs the Gamma family's {r.elbo:.6f} "
          f"({'higher' if ln['elbo'] > r.elbo else 'lower'} by {abs(ln['elbo'] - r.elbo):.4f} nats)")
    holds = s_lib[0] <= s_advi[0]
    print(f"The issue's criterion (fg's largest |Δmean|/sd <= ADVI's) {'HOLDS' if holds else 'does NOT hold'}: "
          f"{s_lib[0]:.3f} vs {s_advi[0]:.3f}.  Neither mean-field family meets it deterministically "
          f"(Gamma {s_lib[0]:.3f}, log-normal {s_ln[0]:.3f}); ADVI's {s_advi[0]:.3f} comes from a noisy fit whose "
          f"mu ({advi['mu'][0]:.2f}) is {abs(advi['mu'][0] - ln['mu'][0]) / ln['mu'][1]:.2f} sd from its own "
          f"family's optimum ({ln['mu'][0]:.2f}).")
    print(f"NUTS: {nuts['draws']} draws, {nuts['divergences']} divergences, max R-hat {nuts['max_rhat']:.4f}; "
          f"ADVI: {advi['steps']} steps ({ref['pymc']})")
    print(f"fg: {r.n_iter} NCVMP sweeps, {r.time:.2f} s, ELBO {r.elbo:.6f} ({r.evidence_kind}); ADVI's ELBO "
          f"(mean of its last 1000 one-sample estimates) {advi['final_elbo_mean_last_1000']:.3f}; exact log evidence "
          f"{ex['log_evidence']:.6f}")
    print("\nThe funnel: mean field makes q(tau) independent of theta.  Against the exact p(tau | y):")
    print(f"  E[tau]  exact {ex['tau'][0]:.3f}, fg {lib['tau'][0]:.3f}, ADVI {advi['tau'][0]:.3f}")
    print(f"  sd[tau] exact {ex['tau'][1]:.3f}, fg {lib['tau'][1]:.3f}, ADVI {advi['tau'][1]:.3f}")
    print(f"  E[tau] log-normal optimum {ln['tau'][0]:.3f}, sd {ln['tau'][1]:.3f}")
    print(f"  P(tau < 1) exact {ex['p_tau_below_1']:.4f}, fg {lib['p_tau_below_1']:.4f}, "
          f"log-normal optimum {ln['p_tau_below_1']:.4f}")
    print(f"  KL(q || p) = log p(y) - ELBO = {ex['log_evidence'] - r.elbo:.3f} nats for the fg fit (the most any "
          "richer q could gain in the bound)")
    print("  A global handler on (theta, log tau) is not available (handlers take one Gaussian weight vector\n"
          "  whose sites are fg.inner(X, w)), so what it would gain is not shown.")
    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 4))
    for k, (label, d) in enumerate(cols):
        m = np.array([row(d, i)[0] for i in range(len(names))])
        s = np.array([row(d, i)[1] for i in range(len(names))])
        ax.errorbar(np.arange(len(names)) + 0.15 * (k - 2), m, yerr=s, fmt="o", ms=4, capsize=2, label=label)
    ax.set_xticks(range(len(names)), names, rotation=30)
    ax.set_ylabel("posterior mean ± sd")
    ax.set_title("Eight schools, half-Cauchy(0, 5) on τ")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "eight_schools.png", dpi=120)
    plt.close(fig)
    # q's marginals against NUTS (drawn as Gaussians of NUTS's posterior mean and sd: the reference file keeps those)
    fig = plots.posterior_marginals(r, ["mu", "tau", "theta"], reference={k: nuts[k] for k in ("mu", "tau", "theta")},
                                    reference_label="NUTS (mean, sd)")
    fig.suptitle("Eight schools: mean-field q against NUTS")
    fig.tight_layout()
    fig.savefig(OUT / "eight_schools_marginals.png", dpi=110)
    plt.close(fig)
    return {"result": r, "fg": lib, "nuts": nuts, "advi": advi, "exact": ex, "score_fg": s_lib[0],
            "score_advi": s_advi[0], "gaps_fg": g_lib, "gaps_advi": g_advi, "lognormal": ln,
            "score_lognormal": s_ln[0], "criterion_holds": holds}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="accepted for uniformity (the model is small)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.small, args.seed)
