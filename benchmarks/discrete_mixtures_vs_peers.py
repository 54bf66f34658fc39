"""Gated models against peers, from one run: mixtures of Bernoullis and of diagonal Gaussians against BayesPy, and
LDA against scikit-learn and BayesPy.

1. Mixture of Bernoullis on scikit-learn's ``load_digits`` binarised at pixel > 7 (N = 1797, D = 64; ``--small``:
   300 rows), K = 20, the model of ``demos/bernoulli_mixture_digits.py`` (``models.mixture_model("bernoulli", K,
   X)``: π ~ Dirichlet(1), p_kd ~ Beta(1, 1)) against BayesPy's ``Mixture(Z, Bernoulli, P)`` with the same priors.
   Both start from the same random responsibilities q(z) and update in BayesPy's order ``Q.update(P, π, Z)``
   (ours: p, π, z), so the iterates are the same: the bound difference after the timed sweeps checks it.
   The continuous counterpart on the same images: a mixture of diagonal Gaussians on the grey levels
   (``models.mixture_model("gaussian", K, X)``: x_nd ~ N(μ_kd, τ_kd⁻¹), μ_kd ~ N(0, 100), τ_kd ~ Gam(1, 1))
   against BayesPy's ``Mixture(Z, GaussianARD, μ, τ)``, likewise from the same responsibilities, order μ, τ, π, z;
   and the same model written as ``models.mixture_model("mv_gaussian", K, X)`` (a vector q(μ_k), a diagonal
   precision α_k; the same iterates), timed against the scalar family in the same run.
2. LDA on the corpus of ``demos/lda_topics.py`` (``make_corpus(200, 60, default_rng(0))``, V = 40; ``--small``:
   40 × 30), K = 4, φ_k ~ Dirichlet(0.5), θ_d ~ Dirichlet(1), one z per token (the demo's ``build``), against

   * scikit-learn's ``LatentDirichletAllocation(learning_method="batch", doc_topic_prior=1, topic_word_prior=0.5)``
     on the document × word count matrix.  Its batch VB has our mean-field fixed points: its q(z) is shared by the
     identical tokens of a document, which the per-token optimum is anyway.  Each EM iteration's E-step starts
     every document's γ afresh and iterates γ_d and q(z_d) to convergence (up to 100 inner steps) before the
     M-step, so one of its iterations does more than one of our sweeps.
   * BayesPy's LDA in the form of its ``bayespy/demos/lda.py`` (flat tokens, ``Categorical(Gate(documents,
     θ))``, ``Categorical(Gate(topics, φ))``; the φ prior 0.5 instead of its 1), from the same q(φ) and q(θ)
     (seeded random Dirichlet parameters) and in its demo's order (topics, φ, θ; ours: ``schedule=["z", "phi",
     "theta"]``), so that, again, the iterates are the same.

   To convergence, several seeds each (each fit on a freshly built model, building included): ours from the
   library's default start (``fg.infer(model, seed=s)``: with one word per label, q(z) is its update from random
   near-uniform topics, λ_kv ~ Gamma(100, 0.01), drawn from the seed), stopping when the ELBO changes by at most
   1e-9 relative; ours from scikit-learn's own start (q(φ) = Dirichlet(λ₀) with λ₀ the draw ``RandomState(seed)``
   makes in scikit-learn, q(θ) at its prior, z updated first); scikit-learn with
   ``evaluate_every=1`` and ``perp_tol`` set to the perplexity change that a relative bound change of 1e-9 makes
   at our best bound (perplexity = exp(−L/W), W tokens, so Δperplexity ≈ perplexity · 1e-9 · |L| / W);
   scikit-learn again for the same number of iterations without the check (its check, each iteration, is a
   second E-step from γ = 1 and a bound evaluated by a Python loop over the documents: here it costs more than
   the EM step itself); and scikit-learn's defaults (10 iterations, no convergence check).  Printed: each fit's
   iterations, seconds and bound, and the time of all the seeds' fits (best of the seeds by bound = the cost of
   all of them).

   The bounds are in the same units.  scikit-learn's ``_approx_bound`` is Σ_d Σ_w n_dw log Σ_k exp(E[log θ_dk] +
   E[log φ_kw]) plus the two Dirichlet terms E[log p(θ)] − E[log q(θ)] and E[log p(φ)] − E[log q(φ)], with no
   multinomial coefficient: our per-token ELBO with q(z) at its optimum given q(θ) and q(φ).  A fitted
   scikit-learn model is scored by ``score`` with its E-step run to ``mean_change_tol=1e-12`` (γ at its optimum
   given λ; the default 1e-3 moves the bound by about 1e-6 nats here).  Checked both ways in the run: the formula
   evaluated at our q(θ), q(φ) against our ELBO, and our ELBO at scikit-learn's q(θ), q(φ) after one z update
   (``warmup=["z"]``) against its score.

Per sweep = the median of single-sweep timings after the first: ours from ``fg.infer`` callbacks (each sweep's
updates and its ELBO), BayesPy's ``Q.update(...)`` calls (which compute its bound too), scikit-learn's
``_em_step`` (the call ``fit`` makes once per iteration, without a perplexity evaluation).  The machine is shared,
so timings are noisy.  Run ``python -m benchmarks.discrete_mixtures_vs_peers [--small]`` (BayesPy and
scikit-learn from the ``test`` extra; on a loaded machine with ``OPENBLAS_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import time
import warnings
from statistics import median

import numpy as np

import factorgraph as fg
from demos.bernoulli_mixture_digits import load as load_digits
from demos.lda_topics import build as build_lda
from demos.lda_topics import make_corpus
from distributions import Dirichlet
from factorgraph import models

from .peers.bayespy_peer import bernoulli_mixture_nodes, diagonal_gaussian_mixture_nodes, lda_nodes

TOL = 1e-9


def _sweeps_ours(model, sweeps: int, **kw) -> tuple[float, object]:
    """Median seconds of single sweeps (the first left out) and the result."""
    stamps = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fixed number of sweeps: unconverged on purpose
        r = fg.infer(model, max_iter=sweeps + 1, tol=None, progress=False,
                     callbacks=[lambda it, L, eng: stamps.append(time.perf_counter())], **kw)
    return median(np.diff(stamps)), r


def _timed_updates(Q, nodes, sweeps: int) -> float:
    times = []
    for _ in range(sweeps + 1):
        t = time.perf_counter()
        Q.update(*nodes, verbose=False)
        times.append(time.perf_counter() - t)
    return median(times[1:])


def _against_bayespy(out: dict, r, nodes, sweeps: int) -> dict:
    """BayesPy's per-sweep time on the model ``nodes()`` builds (started as ours was), and its bound after the same
    sweeps against ours (``r``); printed beside our time ``out["ours"]``."""
    t_ours = out["ours"]
    try:
        Q, bp_order = nodes()
    except ImportError:
        print(f"  per sweep: ours {t_ours * 1e3:.1f} ms; BayesPy is not installed (pip install -e .[test]): skipped")
        return out
    t_bp = _timed_updates(Q, bp_order, sweeps - 1)
    gap = abs(r.elbo - Q.compute_lowerbound())
    out.update({"bayespy": t_bp, "gap": gap})
    print(f"  per sweep: ours {t_ours * 1e3:.1f} ms, BayesPy {t_bp * 1e3:.1f} ms: ratio BayesPy/ours = "
          f"{t_bp / t_ours:.1f}; bounds after {sweeps} sweeps: ours {r.elbo:.6f}, |difference| {gap:.1e}")
    return out


# --------------------------------------------------------------------------------------------------
# mixture of Bernoullis


def bernoulli_mixture(small: bool, K: int = 20, sweeps: int = 20, seed: int = 0) -> dict:
    X, _ = load_digits(small, seed)
    N, D = X.shape
    resp = np.random.default_rng(seed).dirichlet(np.ones(K), N)
    order = ["p", "pi", "z"]
    print(f"Mixture of Bernoullis, digits binarised at > 7: N = {N}, D = {D}, K = {K}; {sweeps} sweeps from the "
          f"same responsibilities, order p, π, z")
    model = models.mixture_model("bernoulli", K, X)
    _sweeps_ours(model, 1, init={"z": resp}, schedule=order)  # warm-up (numba cache)
    t_ours, r = _sweeps_ours(model, sweeps - 1, init={"z": resp}, schedule=order)
    out = {"ours": t_ours, "elbo": r.elbo}
    return _against_bayespy(out, r, lambda: bernoulli_mixture_nodes(X, K, resp), sweeps)


def diagonal_gaussian_mixture(small: bool, K: int = 20, sweeps: int = 20, seed: int = 0) -> dict:
    """The continuous counterpart on the same images: ``models.mixture("gaussian", K, X)`` on the grey levels
    (x_nd ~ N(μ_kd, τ_kd⁻¹), μ_kd ~ N(0, 100), τ_kd ~ Gam(1, 1)) against BayesPy's ``Mixture(Z, GaussianARD, μ,
    τ)``, from the same responsibilities in the order μ, τ, π, z."""
    from sklearn.datasets import load_digits as sk_digits

    X = sk_digits().data[:300] if small else sk_digits().data
    N, D = X.shape
    resp = np.random.default_rng(seed).dirichlet(np.ones(K), N)
    order = ["mu", "tau", "pi", "z"]
    print(f"Mixture of diagonal Gaussians, digits' grey levels: N = {N}, D = {D}, K = {K}; {sweeps} sweeps from the "
          f"same responsibilities, order μ, τ, π, z")
    model = models.mixture_model("gaussian", K, X)
    _sweeps_ours(model, 1, init={"z": resp}, schedule=order)  # warm-up
    t_ours, r = _sweeps_ours(model, sweeps - 1, init={"z": resp}, schedule=order)
    out = {"ours": t_ours, "elbo": r.elbo}
    # the same model as a vector family: q(μ_k) a full-covariance Gaussian (diagonal here: the prior and the
    # precision are), α_k a diagonal precision; the same iterates, so the same bound
    mv = models.mixture_model("mv_gaussian", K, X)
    mv_order = ["mu", "alpha", "pi", "z"]
    _sweeps_ours(mv, 1, init={"z": resp}, schedule=mv_order)
    t_mv, r_mv = _sweeps_ours(mv, sweeps - 1, init={"z": resp}, schedule=mv_order)
    out.update({"mv": t_mv, "mv_gap": abs(r_mv.elbo - r.elbo)})
    print(f"  the same model as models.mixture('mv_gaussian'): {t_mv * 1e3:.1f} ms per sweep ({t_mv / t_ours:.2f}× the "
          f"scalar family's {t_ours * 1e3:.1f} ms), bound |difference| {abs(r_mv.elbo - r.elbo):.1e}")
    return _against_bayespy(out, r, lambda: diagonal_gaussian_mixture_nodes(X, K, resp), sweeps)


# --------------------------------------------------------------------------------------------------
# LDA


def _counts(words: np.ndarray, V: int) -> np.ndarray:
    Xc = np.zeros((words.shape[0], V))
    np.add.at(Xc, (np.repeat(np.arange(words.shape[0]), words.shape[1]), words.ravel()), 1.0)
    return Xc


def _sk_lda(K: int, seed: int, **kw):
    from sklearn.decomposition import LatentDirichletAllocation

    return LatentDirichletAllocation(n_components=K, learning_method="batch", doc_topic_prior=1.0,
                                     topic_word_prior=0.5, random_state=seed, **kw)


def _sk_tight(lda):
    """scikit-learn's own E-step run to its optimum for its fitted λ."""
    return lda.set_params(mean_change_tol=1e-12, max_doc_update_iter=100_000)


def _sk_per_iteration(Xc: np.ndarray, K: int, iters: int, seed: int) -> float:
    from sklearn.utils.parallel import Parallel

    lda = _sk_lda(K, seed)
    lda._init_latent_vars(Xc.shape[1], dtype=Xc.dtype)
    times = []
    with Parallel(n_jobs=1) as parallel:
        for _ in range(iters + 1):
            t = time.perf_counter()
            lda._em_step(Xc, total_samples=len(Xc), batch_update=True, parallel=parallel)
            times.append(time.perf_counter() - t)
    return median(times[1:])


def _fit_rows(label: str, fits: list[tuple[int, int, float, float]], best: float) -> None:
    near = sum(L > best - 1.0 for _, _, _, L in fits)
    print(f"    {label}: {sum(t for _, _, t, _ in fits):.2f} s for {len(fits)} seeds, {near} within 1 nat of the best")
    for s, n, t, L in fits:
        print(f"        seed {s}: {n:5d} iterations {t:7.2f} s   bound {L:.6f}")


def lda(small: bool, K: int = 4, seeds: int = 4, sweeps: int = 20, seed: int = 0) -> dict:
    n_docs, length = (40, 30) if small else (200, 60)
    words, _ = make_corpus(n_docs, length, np.random.default_rng(seed))
    V = 40
    Xc = _counts(words, V)
    W = int(Xc.sum())
    print(f"LDA, the corpus of demos/lda_topics.py: {n_docs} documents × {length} tokens, V = {V}, K = {K}")
    out = {}

    # per sweep, and BayesPy from the same q(φ), q(θ) in its demo's order
    rng = np.random.default_rng(seed + 1)
    a_phi = 0.5 + rng.gamma(100.0, 0.01, (K, V))
    a_theta = 1.0 + rng.gamma(100.0, 0.01, (n_docs, K))
    start = {"init": {"phi": Dirichlet(a_phi), "theta": Dirichlet(a_theta)}, "schedule": ["z", "phi", "theta"]}
    _sweeps_ours(build_lda(words, K), 1, **start)  # warm-up (numba cache)
    t_ours, r = _sweeps_ours(build_lda(words, K), sweeps - 1, **start)
    t_sk = _sk_per_iteration(Xc, K, sweeps, seed)
    out.update({"ours": t_ours, "sklearn": t_sk})
    line = (f"  per sweep: ours {t_ours * 1e3:.1f} ms, scikit-learn {t_sk * 1e3:.1f} ms per EM iteration (ratio "
            f"{t_sk / t_ours:.1f})")
    try:
        Q, bp_order = lda_nodes(words, K, V, a_phi, a_theta)
    except ImportError:
        print(line + "; BayesPy is not installed (pip install -e .[test]): skipped")
    else:
        t_bp = _timed_updates(Q, bp_order, sweeps - 1)
        gap = abs(r.elbo - Q.compute_lowerbound())
        out.update({"bayespy": t_bp, "bayespy_gap": gap})
        print(line + f", BayesPy {t_bp * 1e3:.1f} ms (ratio BayesPy/ours = {t_bp / t_ours:.1f})")
        print(f"  BayesPy from the same q(φ), q(θ), order z, φ, θ: bounds after {sweeps} sweeps: ours {r.elbo:.6f}, "
              f"|difference| {gap:.1e}")

    # to convergence, several seeds each
    def ours(s: int, sk_start: bool):
        kw = {}
        if sk_start:  # scikit-learn's λ₀: the first draw of its RandomState(seed)
            lam0 = np.random.RandomState(s).gamma(100.0, 0.01, (K, V))
            kw = {"init": {"phi": Dirichlet(lam0)}, "schedule": ["z", "theta", "phi"]}
        t = time.perf_counter()
        res = fg.infer(build_lda(words, K), seed=s, max_iter=5000, tol=TOL, progress=False, **kw)
        return res, (s, res.n_iter, time.perf_counter() - t, res.elbo)

    runs = [ours(s, False) for s in range(seeds)]
    mine = [f for _, f in runs]
    best_r = max(runs, key=lambda x: x[0].elbo)[0]
    mine_sk = [ours(s, True)[1] for s in range(seeds)]
    L_best = best_r.elbo
    perp_tol = float(np.exp(-L_best / W) * TOL * abs(L_best) / W)

    def sklearn(s: int, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = _sk_lda(K, s, **kw)
            t = time.perf_counter()
            m.fit(Xc)
            t = time.perf_counter() - t
        # n_iter_ leaves out the iteration after which the perplexity check stopped the loop
        n = m.n_iter_ + (m.n_iter_ < m.max_iter)
        return m, (s, n, t, float(_sk_tight(m).score(Xc)))

    sk_runs = [sklearn(s, max_iter=5000, evaluate_every=1, perp_tol=perp_tol) for s in range(seeds)]
    sk_fits = [f for _, f in sk_runs]
    sk_best = max(sk_runs, key=lambda x: x[1][3])[0]
    sk_bare = [sklearn(s, max_iter=n)[1] for s, n, _, _ in sk_fits]
    sk_default = [sklearn(s)[1] for s in range(seeds)]
    best = max(f[3] for f in mine + mine_sk + sk_fits + sk_bare + sk_default)
    print(f"  to convergence, seeds 0–{seeds - 1}, each on a freshly built model (iterations: our sweeps or "
          f"scikit-learn's EM iterations):")
    _fit_rows(f"ours, the default start (z from random near-uniform topics), tol {TOL:.0e}", mine, best)
    _fit_rows("ours, scikit-learn's starting q(φ), z first", mine_sk, best)
    _fit_rows(f"scikit-learn, evaluate_every=1, perp_tol={perp_tol:.1e}", sk_fits, best)
    _fit_rows("scikit-learn, as many iterations without the check (max_iter = the row above's)", sk_bare, best)
    _fit_rows("scikit-learn's defaults (max_iter=10, no convergence check)", sk_default, best)
    tot = {k: sum(f[2] for f in v) for k, v in {"ours": mine, "ours_sk_start": mine_sk, "sklearn": sk_fits,
                                                 "sklearn_bare": sk_bare, "sklearn_default": sk_default}.items()}
    out.update({f"total_{k}": v for k, v in tot.items()})
    print(f"  all {seeds} seeds' time, scikit-learn (with its check) / ours = {tot['sklearn'] / tot['ours']:.2f} "
          f"(default start), {tot['sklearn'] / tot['ours_sk_start']:.2f} (scikit-learn's start); without its check "
          f"{tot['sklearn_bare'] / tot['ours']:.2f} and {tot['sklearn_bare'] / tot['ours_sk_start']:.2f}")

    # the bounds are in the same units: checked both ways
    chk = _sk_lda(K, 0)
    chk._init_latent_vars(V)
    chk.components_ = best_r.posterior("phi").concentration
    at_ours = float(chk._approx_bound(Xc, best_r.posterior("theta").concentration, sub_sampling=False))
    sk_score = float(sk_best.score(Xc))
    gamma = sk_best.transform(Xc, normalize=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r_at_sk = fg.infer(build_lda(words, K), init={"phi": Dirichlet(sk_best.components_),
                                                     "theta": Dirichlet(gamma)},
                           schedule=["z", "phi", "theta"], warmup=["z"], max_iter=1, tol=None, progress=False)
    ours_at_sk = float(r_at_sk.elbo_trace[0])
    out.update({"best_ours": L_best, "best_sklearn": sk_score, "check_formula_at_ours": abs(at_ours - L_best),
                "check_ours_at_sklearn": abs(ours_at_sk - sk_score)})
    print(f"  same units: scikit-learn's _approx_bound at our best q {at_ours:.6f} (our ELBO {L_best:.6f}, "
          f"|difference| {abs(at_ours - L_best):.1e}); our ELBO at its best q(φ), q(θ) {ours_at_sk:.6f} (its score "
          f"{sk_score:.6f}, |difference| {abs(ours_at_sk - sk_score):.1e})")
    return out


def main(small: bool = False, seeds: int | None = None, sweeps: int = 20) -> dict:
    out = {"mixture": bernoulli_mixture(small, sweeps=sweeps),
           "gaussian_mixture": diagonal_gaussian_mixture(small, sweeps=sweeps)}
    out["lda"] = lda(small, seeds=seeds or (2 if small else 4), sweeps=sweeps)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="300 digits; LDA on 40 documents × 30 tokens, 2 seeds")
    ap.add_argument("--seeds", type=int, default=None, help="LDA seeds per method (default 4; --small 2)")
    ap.add_argument("--sweeps", type=int, default=20, help="timed sweeps of each model")
    a = ap.parse_args()
    main(a.small, a.seeds, a.sweeps)
