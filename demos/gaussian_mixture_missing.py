"""Wine with entries hidden at random: a full-covariance Gaussian mixture fitted three ways.

The 178 Italian wines of three cultivars (13 chemical measurements; UCI Wine, shipped in ``data/wine``) are
fitted by ``models.gaussian_mixture(X, 3, covariance="full")``: π ~ Dirichlet(1), z_n ~ Categorical(π),
(μ_k, Λ_k) ~ NormalWishart(m₀ = 0, β₀ = 1, ν₀ = 13, V₀ = I) on columns standardised by their observed
entries, x_n ~ N(μ_{z_n}, Λ_{z_n}⁻¹).  A fraction of the entries (10 %, 20 %, 30 %) is hidden completely at
random, their true values kept for scoring only (every fit is given NaN there), and three fits are compared:

* **exact**: ``mask=`` the (N, D) observation mask.  A row keeps the exact marginal density N(x_o | μ_o, Σ_oo)
  of its observed coordinates o; the missing ones are integrated out, not imputed (NCVMP, since that
  density's message to the normal–Wishart block is not conjugate);
* **complete case**: only the rows with nothing missing are fitted (a row is complete with probability
  (1 − f)¹³: about 25 %, 5 % and 1 % of the rows at f = 10 %, 20 %, 30 %); with fewer than K complete rows
  there is no fit ("n/a");
* **mean fill**: each missing entry is replaced by its column's observed mean and the table fitted as complete.

All three use the same priors (the default V₀ is computed from each method's own input, so V₀ = I — each
standardised column's variance — is passed to every fit to compare like with like) and ``n_init=`` starts; at 0 %
they are the same fit.  Each is scored on

* the **held-out log density** of the hidden entries given each row's observed entries, under the fit's
  posterior predictive (``models.mixture_predictive``: a mixture of multivariate Student-t's), summed over the
  rows and divided by the number of hidden entries (nats per entry, standardised units; see
  ``conditional_logpdf``).  For reference, the same for each hidden entry drawn from N(0, 1), the
  standardised column's observed mean and variance, is printed too;
* the **adjusted Rand index** of the MAP labels against the cultivars, over all 178 rows (a row a fit did not
  see — complete case — gets the component that is most probable given its observed entries under that fit's
  predictive).

The table prints the mean ± sd over several random masks per fraction, and a figure (held-out log density and
ARI against the missing fraction) goes to ``demos/out/``.

What was found (``python demos/gaussian_mixture_missing.py``: seed 0, 5 masks per fraction, 5 restarts, about
2.5 min) is in ``FINDINGS`` below, printed at the end of a full run with seed 0 (the runs are deterministic).
In short: marginalising exactly beats complete-case analysis clearly on the held-out density, but beats
filling in column means only slightly at 10 % hidden and not at 20-30 %; on ARI it does better than both on
average, with a large spread between masks (local optima of the mixture).

Run ``python demos/gaussian_mixture_missing.py [--small] [--seed S]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.special import gammaln, logsumexp  # noqa: E402

from factorgraph import models  # noqa: E402

try:
    from ._data import data_dir
except ImportError:  # run as a script: python demos/gaussian_mixture_missing.py
    from _data import data_dir

OUT = Path(__file__).resolve().parent / "out"
METHODS = ("exact", "complete case", "mean fill")
K = 3  # the number of cultivars

FINDINGS = """\
Found in the full run (seed 0; numbers in the table above):
* held-out log density: the exact fit beats complete-case analysis on every mask (by 0.11-0.15 nats per
  hidden entry on average; at 30 % hidden only 2 of 5 masks left K = 3 complete rows to fit at all).
  Against mean filling the difference is small and shrinks with the fraction hidden: exact higher by
  0.029 at 10 % (4 of 5 masks), 0.008 at 20 % (3 of 5), and mean fill higher by 0.006 at 30 % (3 of 5):
  no clear winner at 20-30 %.
* ARI: the exact fit's MAP labels match the cultivars better on average (0.66-0.78, against 0.26-0.51
  for the other two), but the spread between masks is large (sd 0.17-0.20) and bimodal: the restart with
  the highest ELBO is a different local optimum on different masks, not always the one that follows the
  cultivars."""


def load() -> tuple[np.ndarray, np.ndarray]:
    """The (178, 13) measurements and the cultivar labels 1..3."""
    X = np.genfromtxt(data_dir("wine") / "X.csv", delimiter=",", skip_header=1)
    y = np.genfromtxt(data_dir("wine") / "y.csv", delimiter=",", skip_header=1).astype(int)
    return X, y


def hide(shape: tuple[int, int], fraction: float, rng: np.random.Generator) -> np.ndarray:
    """An observation mask (True = observed) with each entry hidden independently with probability
    ``fraction`` (missing completely at random)."""
    return rng.random(shape) >= fraction


def standardise(raw: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Centre and scale each column by the mean and sd of its observed entries (the hidden ones are never
    looked at; they are transformed the same way, for scoring)."""
    n = seen.sum(0)
    mean = np.where(seen, raw, 0.0).sum(0) / n
    sd = np.sqrt(np.where(seen, (raw - mean) ** 2, 0.0).sum(0) / n)
    return (raw - mean) / sd


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985) of two labelings of the same items."""
    a = np.unique(np.asarray(a), return_inverse=True)[1].ravel()
    b = np.unique(np.asarray(b), return_inverse=True)[1].ravel()
    table = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(table, (a, b), 1.0)
    pairs = lambda x: float(np.sum(x * (x - 1.0) / 2.0))  # noqa: E731
    index, sum_a, sum_b = pairs(table), pairs(table.sum(1)), pairs(table.sum(0))
    expected = sum_a * sum_b / (a.size * (a.size - 1) / 2.0)
    top = 0.5 * (sum_a + sum_b)
    return 1.0 if top == expected else (index - expected) / (top - expected)


def _priors(D: int) -> dict:
    return {"mean_prior": np.zeros(D), "scale": np.eye(D)}


def fit_exact(X: np.ndarray, seen: np.ndarray, restarts: int, seed: int):
    """Missing entries marginalised exactly (``mask=``); X may hold anything (NaN here) at them."""
    return models.gaussian_mixture(X, K, "full", mask=seen, n_init=restarts, seed=seed,
                                   **_priors(X.shape[1]))


def fit_complete_case(X: np.ndarray, seen: np.ndarray, restarts: int, seed: int):
    """Only the complete rows (None when there are fewer than K of them)."""
    rows = seen.all(1)
    if rows.sum() < K:
        return None
    return models.gaussian_mixture(X[rows], K, "full", n_init=restarts, seed=seed, **_priors(X.shape[1]))


def fit_mean_fill(X: np.ndarray, seen: np.ndarray, restarts: int, seed: int):
    """Missing entries replaced by their column's observed mean, then fitted as complete."""
    mean = np.where(seen, X, 0.0).sum(0) / seen.sum(0)
    return models.gaussian_mixture(np.where(seen, X, mean), K, "full", n_init=restarts, seed=seed,
                                   **_priors(X.shape[1]))


def _t_logpdf(x: np.ndarray, loc: np.ndarray, prec: np.ndarray, dof: np.ndarray) -> np.ndarray:
    """log St(x | m_k, L_k, ν_k) for rows x (M, r), locations (K, r), precisions (K, r, r), dof (K,): (M, K).

    St(x | m, L, ν) = Γ((ν + r)/2) / Γ(ν/2) · |L|^½ / (νπ)^{r/2} · (1 + (x − m)ᵀL(x − m)/ν)^{−(ν + r)/2}."""
    r = x.shape[1]
    d = x[:, None, :] - loc
    quad = np.einsum("mki,kij,mkj->mk", d, prec, d)
    logdet = np.linalg.slogdet(prec)[1]
    return (gammaln(0.5 * (dof + r)) - gammaln(0.5 * dof) - 0.5 * r * np.log(dof * np.pi) + 0.5 * logdet
            - 0.5 * (dof + r) * np.log1p(quad / dof))


def marginal_component_logpdf(pred, x: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """log p_k(x_o) of rows x (M, D) on the coordinates ``coords`` (D booleans), each component's predictive
    St(m_k, L_k, ν_k) marginalised onto them: (M, K).

    The marginal of a multivariate t on a subset o is again a t with the same dof and location m_o, and scale
    matrix the sub-block (L⁻¹)_oo, i.e. precision ((L⁻¹)_oo)⁻¹.  With no coordinates it is 0 (density 1)."""
    o = np.flatnonzero(coords)
    if o.size == 0:
        return np.zeros((len(x), len(pred.weights)))
    sigma = np.linalg.inv(pred.scale_precision)[:, o[:, None], o]
    return _t_logpdf(x[:, o], pred.location[:, o], np.linalg.inv(sigma), pred.dof)


def conditional_logpdf(pred, x: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """log p(x_h | x_o) of each row's hidden entries h given its observed ones o, under the posterior
    predictive p(x) = Σ_k w_k St(x | m_k, L_k, ν_k) of a full-covariance fit: (N,), 0 for a complete row.

    Exact, as a difference of two mixtures of t's:

        log p(x_h | x_o) = log Σ_k w_k St(x | m_k, L_k, ν_k) − log Σ_k w_k St(x_o | m_k,o, ((L_k⁻¹)_oo)⁻¹, ν_k),

    which is the same as conditioning each component (weights updated to w_k St_k(x_o) / Σ_j w_j St_j(x_o);
    each component's conditional a t with ν_k + |o| dof).  The predictive is the fit's density for a new
    row, so the row's own observed entries enter the fit and then again here (as for any imputation)."""
    logw = np.log(pred.weights)
    out = np.zeros(len(x))
    full = logsumexp(pred.component_logpdf(x) + logw, axis=1)
    patterns, index = np.unique(seen, axis=0, return_inverse=True)
    for p, coords in enumerate(patterns):
        rows = np.flatnonzero(index.ravel() == p)
        if coords.all():
            continue
        obs = logsumexp(marginal_component_logpdf(pred, x[rows], coords) + logw, axis=1)
        out[rows] = full[rows] - obs
    return out


def map_labels(result, pred, x: np.ndarray, seen: np.ndarray, fitted_rows: np.ndarray) -> np.ndarray:
    """MAP components: argmax q(z_n) for the rows the fit saw; for the others, the component most probable
    given the row's observed entries under the predictive (w_k St_k(x_o))."""
    labels = np.empty(len(x), int)
    labels[fitted_rows] = result.posterior("z").probs.argmax(-1)
    rest = np.flatnonzero(~fitted_rows)
    patterns, index = np.unique(seen[rest], axis=0, return_inverse=True)
    for p, coords in enumerate(patterns):
        rows = rest[index.ravel() == p]
        lc = marginal_component_logpdf(pred, x[rows], coords) + np.log(pred.weights)
        labels[rows] = lc.argmax(-1)
    return labels


def evaluate(raw: np.ndarray, y: np.ndarray, fraction: float, restarts: int, seed: int,
             rng: np.random.Generator) -> dict:
    """Hide ``fraction`` of the entries, fit the three ways, score each."""
    N, D = raw.shape
    seen = hide((N, D), fraction, rng)
    truth = standardise(raw, seen)
    X = np.where(seen, truth, np.nan)  # what the fits get
    n_hidden = int((~seen).sum())
    out = {"n_hidden": n_hidden, "n_complete": int(seen.all(1).sum()), "seen": seen,
           "reference": float(np.sum(-0.5 * truth[~seen] ** 2 - 0.5 * np.log(2 * np.pi)) / max(n_hidden, 1))}
    fits = {"exact": (fit_exact(X, seen, restarts, seed), np.ones(N, bool)),
            "complete case": (fit_complete_case(X, seen, restarts, seed), seen.all(1)),
            "mean fill": (fit_mean_fill(X, seen, restarts, seed), np.ones(N, bool))}
    for name, (res, rows) in fits.items():
        if res is None:
            out[name] = None
            continue
        pred = models.mixture_predictive(res, "full")
        lpd = float(conditional_logpdf(pred, truth, seen).sum() / n_hidden) if n_hidden else float("nan")
        labels = map_labels(res, pred, truth, seen, rows)
        out[name] = {"lpd": lpd, "ari": adjusted_rand_index(labels, y), "elbo_trace": np.asarray(res.elbo_trace),
                     "n_iter": res.n_iter, "converged": res.converged, "n_rows": int(rows.sum())}
    return out


def _summary(values: list[float]) -> str:
    if not values:
        return "n/a"
    v = np.asarray(values)
    return f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" if v.size > 1 else f"{v[0]:.3f}"


def main(small: bool = False, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    raw, y = load()
    N, D = raw.shape
    fractions = (0.1, 0.3) if small else (0.1, 0.2, 0.3)
    masks = 1 if small else 5
    restarts = 1 if small else 5
    rng = np.random.default_rng(seed)
    print(f"Wine: N = {N}, D = {D}, K = {K} cultivars; fractions hidden {list(fractions)}, {masks} random "
          f"mask(s) each, {restarts} restart(s) per fit; priors m0 = 0, beta0 = 1, nu0 = {D}, V0 = I")
    base = models.gaussian_mixture(standardise(raw, np.ones_like(raw, bool)), K, "full", n_init=restarts,
                                   seed=seed, **_priors(D))
    ari0 = adjusted_rand_index(base.posterior("z").probs.argmax(-1), y)
    print(f"nothing hidden (the three fits coincide): ARI {ari0:.3f}")

    runs = {f: [evaluate(raw, y, f, restarts, seed, rng) for _ in range(masks)] for f in fractions}
    header = (f"{'hidden':>6}  {'complete rows':>13}  {'method':<13}  {'held-out log density / entry':>28}  "
              f"{'minus exact, paired':>24}  {'ARI':>13}  {'sweeps':>6}")
    print("\n" + header + "\n" + "-" * len(header))
    table = {}
    for f in fractions:
        n_complete = np.mean([r["n_complete"] for r in runs[f]])
        ref = [r["reference"] for r in runs[f]]
        for m in METHODS:
            ok = [r[m] for r in runs[f] if r[m] is not None]
            lpd, ari = [o["lpd"] for o in ok], [o["ari"] for o in ok]
            diff = [r[m]["lpd"] - r["exact"]["lpd"] for r in runs[f] if r[m] is not None]
            table[(f, m)] = {"lpd": lpd, "ari": ari, "minus_exact": diff}
            paired = "" if m == "exact" or not diff else \
                f"{np.mean(diff):+.3f} (higher {sum(d > 0 for d in diff)}/{len(diff)})"
            fitted = f"{len(ok)}/{len(runs[f])} fitted" if len(ok) < len(runs[f]) else ""
            sweeps = f"{np.mean([o['n_iter'] for o in ok]):.0f}" if ok else "-"
            print(f"{f:>6.0%}  {n_complete:>13.1f}  {m:<13}  {_summary(lpd):>28}  {paired:>24}  {_summary(ari):>13}  "
                  f"{sweeps:>6}  {fitted}".rstrip())
        print(f"{'':>6}  {'':>13}  {'N(0, 1) ref.':<13}  {_summary(ref):>28}")
    print("(mean ± sd over the masks; log density in nats per hidden entry, standardised units; 'minus exact':\n"
          " the method's log density minus the exact fit's on the same mask, and on how many masks it was higher)")

    traces = [o["elbo_trace"] for f in fractions for r in runs[f] for m in METHODS if (o := r[m]) is not None]
    fall = max(0.0, max(float(np.max(-np.diff(t) / np.abs(t[1:]))) for t in traces if len(t) > 1))
    print(f"ELBO traces: {len(traces)} fits, largest fall between sweeps relative to the ELBO {fall:.1e}; "
          f"all converged: {all(o['converged'] for f in fractions for r in runs[f] for m in METHODS if (o := r[m]))}")

    OUT.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    xs = 100 * np.asarray(fractions)
    for j, m in enumerate(METHODS):
        for ax, key in zip(axes, ("lpd", "ari"), strict=True):
            pts = [(x, v) for x, f in zip(xs, fractions, strict=True) for v in table[(f, m)][key]]
            if not pts:
                continue
            px, pv = np.asarray(pts).T
            ax.plot(px + (j - 1) * 0.6, pv, "o", color=f"C{j}", alpha=0.35, markersize=4)
            have = [(x, np.mean(table[(f, m)][key])) for x, f in zip(xs, fractions, strict=True)
                    if table[(f, m)][key]]
            ax.plot(*np.asarray(have).T, "-", color=f"C{j}", label=m)
    refs = [np.mean([r["reference"] for r in runs[f]]) for f in fractions]
    axes[0].plot(xs, refs, ":", color="grey", label="N(0, 1) per entry")
    axes[0].set(xlabel="entries hidden (%)", ylabel="held-out log density per hidden entry (nats)",
                title="hidden entries given the observed ones", xticks=xs)
    axes[1].axhline(ari0, color="grey", ls=":", label="nothing hidden")
    axes[1].set(xlabel="entries hidden (%)", ylabel="adjusted Rand index vs cultivar", title="clustering",
                xticks=xs)
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = OUT / "gaussian_mixture_missing.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    if not small and seed == 0:  # the recorded reading of this very configuration (the runs are deterministic)
        print("\n" + FINDINGS)
    print(f"figure: {path}  ({time.perf_counter() - t0:.1f} s)")
    return {"runs": runs, "table": table, "ari_complete": ari0, "traces": traces, "figure": path,
            "fractions": fractions}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="a small, fast run")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    main(small=a.small, seed=a.seed)
