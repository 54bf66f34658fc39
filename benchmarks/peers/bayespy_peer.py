"""BayesPy as a benchmark peer: linear regression with ARD and a Gaussian mixture, fitted by BayesPy's VB.

Both functions build the model twice with BayesPy's own API:

1. per-iteration timing: a loop of ``Q.update(repeat=1, tol=tol)`` calls, each timed with
   ``time.perf_counter``; it runs until BayesPy reports convergence (or ``max_iter``), and on for at least
   ``min_timed_iters`` calls so that the median has enough samples (an iteration after convergence costs
   the same as one before it). ``sec_per_iter`` is the median of these times without the first call.
2. total time: a fresh model, one ``Q.update(repeat=max_iter, tol=tol)`` call, timed as a whole
   (``total_sec``); model construction, ``observe`` and ``VB(...)`` are timed apart (``build_sec``).
   Iteration count, lower bound and posterior summaries are taken from this second run.

What a BayesPy iteration contains: every node in the VB order is updated once and the lower bound is
computed (BayesPy always computes it, it cannot be switched off). ``tol`` is BayesPy's: the run stops when
the relative change of the bound, (L1 - L0) / (0.5 (|L0| + |L1|)), falls below ``tol`` (a decrease also
stops it). Printing is off (``verbose=False``).

``gmm_nodes``, ``pca_nodes``, ``bernoulli_mixture_nodes``, ``diagonal_gaussian_mixture_nodes`` and
``lda_nodes`` only build a model (its ``VB``
object, started as the caller says) for drivers that time their own sweeps against ours.

Run ``python -m benchmarks.peers.bayespy_peer`` from the repository root for the standard measurements.
"""

from __future__ import annotations

import gc
import time
import warnings
from statistics import median

import numpy as np

LINREG_VARIANTS = ("ard", "gaussian_gamma_ard", "gaussian_gamma")


def _bayespy_version() -> str:
    try:
        from importlib.metadata import version

        return version("bayespy")
    except Exception:  # pragma: no cover - metadata missing
        return "unknown"


def _timed_run(build, max_iter: int, tol: float, min_timed_iters: int):
    """Both runs described in the module docstring. ``build()`` returns (Q, summary), where ``summary(Q)``
    gives the posterior quantities of interest as a dict."""
    # 1. per-iteration timing
    Q, _ = build()
    times = []
    converged_at = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(max_iter):
            t0 = time.perf_counter()
            Q.update(repeat=1, tol=tol, verbose=False)
            times.append(time.perf_counter() - t0)
            if converged_at is None and Q.converged:
                converged_at = i + 1
            if converged_at is not None and i + 1 >= min_timed_iters:
                break
    del Q
    gc.collect()

    # 2. total time on a fresh model
    t0 = time.perf_counter()
    Q, summary = build()
    build_sec = time.perf_counter() - t0
    with warnings.catch_warnings(record=True) as caught2:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        Q.update(repeat=max_iter, tol=tol, verbose=False)
        total_sec = time.perf_counter() - t0
    n_iter = int(Q.iter)
    bound_warnings = sum("Lower bound decreased" in str(w.message) for w in list(caught) + list(caught2))
    out = {
        "library": "bayespy",
        "version": _bayespy_version(),
        "sec_per_iter": median(times[1:]) if len(times) > 1 else times[0],
        "first_iter_sec": times[0],
        "per_iter_sec": times,
        "timed_iterations_to_convergence": converged_at,
        "total_sec": total_sec,
        "build_sec": build_sec,
        "iterations": n_iter,
        "converged": bool(Q.converged),
        "lower_bound": float(Q.L[n_iter - 1]),
        "lower_bound_trace": np.asarray(Q.L[:n_iter]).copy(),
        "bound_decrease_warnings": bound_warnings,
    }
    out.update(summary(Q))
    return out


def linreg_ard(
    X,
    y,
    max_iter: int = 1000,
    tol: float = 1e-5,
    variant: str = "ard",
    a0: float = 1e-2,
    b0: float = 1e-4,
    min_timed_iters: int = 10,
) -> dict:
    """Bayesian linear regression y ~ N(X w, 1/tau) fitted with BayesPy.

    variant:
      - ``"ard"`` (default, the benchmark model): fully factorised q(w) q(alpha) q(tau) with
        ``alpha = Gamma(a0, b0, plates=(D,))``, ``w = GaussianARD(0, alpha, shape=(D,))``,
        ``tau = Gamma(a0, b0)``, ``Y = GaussianARD(SumMultiply('i,i', X, w), tau)``,
        ``VB(Y, w, alpha, tau)``.
      - ``"gaussian_gamma_ard"``: w and tau in one ``GaussianGamma`` node, so q(w, tau) q(alpha), with ARD
        through ``alpha.as_diagonal_wishart()``. NB: the prior is then w | tau, alpha ~ N(0, (tau diag
        alpha)^-1), i.e. scaled by the noise precision: a different model, whose lower bound is not
        comparable with ``"ard"``.
      - ``"gaussian_gamma"``: the form BayesPy's regression example recommends for accuracy ("Improving
        accuracy"): ``GaussianGamma(0, 1e-6 I, a0, b0)``, no ARD.

    Returns a dict with ``sec_per_iter`` (median, first iteration excluded), ``total_sec`` (fit to
    convergence on a fresh model, construction excluded), ``build_sec``, ``iterations``, ``converged``,
    ``lower_bound``, ``w_mean`` (D,), ``tau_mean`` and, for the ARD variants, ``alpha_mean`` (D,); plus the
    raw per-iteration times and the lower-bound trace.
    """
    from bayespy.inference import VB
    from bayespy.nodes import Gamma, GaussianARD, GaussianGamma, SumMultiply

    if variant not in LINREG_VARIANTS:
        raise ValueError(f"variant must be one of {LINREG_VARIANTS}, got {variant!r}")
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    N, D = X.shape

    def build():
        if variant == "ard":
            alpha = Gamma(a0, b0, plates=(D,))
            w = GaussianARD(0, alpha, shape=(D,))
            tau = Gamma(a0, b0)
            Y = GaussianARD(SumMultiply("i,i", X, w), tau)
            Y.observe(y)
            Q = VB(Y, w, alpha, tau)

            def summary(Q):
                return {
                    "w_mean": np.array(w.get_moments()[0]),
                    "tau_mean": float(tau.get_moments()[0]),
                    "alpha_mean": np.array(alpha.get_moments()[0]),
                }

        else:
            if variant == "gaussian_gamma_ard":
                alpha = Gamma(a0, b0, plates=(D,))
                wtau = GaussianGamma(np.zeros(D), alpha.as_diagonal_wishart(), a0, b0)
            else:
                alpha = None
                wtau = GaussianGamma(np.zeros(D), 1e-6 * np.identity(D), a0, b0)
            Y = GaussianARD(SumMultiply("i,i", X, wtau), 1)
            Y.observe(y)
            Q = VB(Y, wtau) if alpha is None else VB(Y, wtau, alpha)

            def summary(Q):
                u = wtau.get_moments()  # [E tau w, E tau w w^T, E tau, E log tau]
                out = {"w_mean": np.array(u[0]) / float(u[2]), "tau_mean": float(u[2])}
                if alpha is not None:
                    out["alpha_mean"] = np.array(alpha.get_moments()[0])
                return out

        return Q, summary

    out = _timed_run(build, max_iter, tol, min_timed_iters)
    out.update({"model": "linreg_ard", "variant": variant, "N": N, "D": D})
    return out


def gmm_nodes(X: np.ndarray, K: int, z_init: np.ndarray):
    """BayesPy's full-covariance VB mixture (Gaussian means, Wishart precisions, Dirichlet weights, all with
    1e-5 prior strength) on X, q(z) started at the labels ``z_init``: returns (VB, Z, mu)."""
    from bayespy.inference import VB
    from bayespy.nodes import Categorical, Dirichlet, Gaussian, Mixture, Wishart

    N, D = X.shape
    alpha = Dirichlet(1e-5 * np.ones(K))
    Z = Categorical(alpha, plates=(N,))
    mu = Gaussian(np.zeros(D), 1e-5 * np.identity(D), plates=(K,))
    Lam = Wishart(D, 1e-5 * np.identity(D), plates=(K,))
    Y = Mixture(Z, Gaussian, mu, Lam)
    Y.observe(X)
    Z.initialize_from_value(z_init)
    return VB(Y, mu, Lam, Z, alpha), Z, mu


def pca_nodes(X: np.ndarray, K: int, W0: np.ndarray, shape: float = 1e-3, rate: float = 1e-3, rotate: bool = False,
              mask: np.ndarray | None = None):
    """BayesPy's Bayesian PCA with ARD (its own ``demos/pca.py`` model: ``GaussianARD`` loadings W with
    Gamma(a₀, b₀) column precisions α, ``GaussianARD`` states, ``SumMultiply('i,i')``, one Gamma(a₀, b₀) noise
    precision τ; no mean) on X (N, D), the loadings' q started as a point mass at ``W0`` (D, K).

    Returns (VB, order, W, Z): ``Q.update(*order)`` is one sweep in the library's order (z, W, α, τ); with
    ``rotate`` its ``RotationOptimizer`` runs after each sweep (``Q.callback``).  ``mask`` (N, D), True =
    observed, is passed to BayesPy's ``observe`` (its missing values)."""
    from bayespy.inference import VB
    from bayespy.inference.vmp import transformations
    from bayespy.nodes import Gamma, GaussianARD, SumMultiply

    N, D = X.shape
    alpha = Gamma(shape, rate, plates=(K,))
    W = GaussianARD(0, alpha, shape=(K,), plates=(D, 1))
    Z = GaussianARD(0, 1, shape=(K,), plates=(1, N))
    tau = Gamma(shape, rate)
    Y = GaussianARD(SumMultiply("i,i", W, Z), tau)
    if mask is None:
        Y.observe(X.T)
    else:
        Y.observe(np.where(mask, X, 0.0).T, mask=mask.T)
    W.initialize_from_value(W0[:, None, :])
    Q = VB(Y, Z, W, alpha, tau)
    if rotate:
        R = transformations.RotationOptimizer(transformations.RotateGaussianARD(W, alpha),
                                              transformations.RotateGaussianARD(Z), K)
        Q.callback = R.rotate
    return Q, (Z, W, alpha, tau), W, Z


def bernoulli_mixture_nodes(X: np.ndarray, K: int, resp: np.ndarray):
    """A mixture of Bernoullis as in BayesPy's own example: π ~ Dirichlet(1), ``Z = Categorical(π, plates=(N, 1))``,
    ``P = Beta([1, 1], plates=(D, K))``, ``Mixture(Z, Bernoulli, P)`` observing the 0/1 array X (N, D); q(z)
    started at the responsibilities ``resp`` (N, K).  Returns (VB, order): ``Q.update(*order)`` is one sweep in
    the order P, π, Z."""
    from bayespy.inference import VB
    from bayespy.nodes import Bernoulli, Beta, Categorical, Dirichlet, Mixture

    N, D = X.shape
    pi = Dirichlet(np.ones(K))
    Z = Categorical(pi, plates=(N, 1))
    P = Beta([1.0, 1.0], plates=(D, K))
    Y = Mixture(Z, Bernoulli, P)
    Y.observe(np.asarray(X).astype(int))
    Z.initialize_from_parameters(resp[:, None, :])
    return VB(Y, P, pi, Z), (P, pi, Z)


def diagonal_gaussian_mixture_nodes(X: np.ndarray, K: int, resp: np.ndarray, m0: float = 0.0, l0: float = 1e-2,
                                    a0: float = 1.0, b0: float = 1.0):
    """A mixture of diagonal Gaussians with independent q(μ_kd) and q(τ_kd): π ~ Dirichlet(1), ``Z =
    Categorical(π, plates=(N, 1))``, ``mu = GaussianARD(m0, l0, plates=(D, K))``, ``tau = Gamma(a0, b0, plates=(D,
    K))``, ``Mixture(Z, GaussianARD, mu, tau)`` observing X (N, D); q(z) started at ``resp`` (N, K).  Returns (VB,
    order): ``Q.update(*order)`` is one sweep in the order μ, τ, π, Z."""
    from bayespy.inference import VB
    from bayespy.nodes import Categorical, Dirichlet, Gamma, GaussianARD, Mixture

    N, D = X.shape
    pi = Dirichlet(np.ones(K))
    Z = Categorical(pi, plates=(N, 1))
    mu = GaussianARD(m0, l0, plates=(D, K))
    tau = Gamma(a0, b0, plates=(D, K))
    Y = Mixture(Z, GaussianARD, mu, tau)
    Y.observe(np.asarray(X, dtype=float))
    Z.initialize_from_parameters(resp[:, None, :])
    return VB(Y, mu, tau, pi, Z), (mu, tau, pi, Z)


def lda_nodes(words: np.ndarray, K: int, V: int, a_phi: np.ndarray, a_theta: np.ndarray, beta: float = 0.5,
              alpha: float = 1.0):
    """LDA in the form of BayesPy's ``bayespy/demos/lda.py`` (flat tokens: ``Categorical(Gate(documents, θ))``
    for the topics, ``Categorical(Gate(topics, φ))`` for the words), with priors φ_k ~ Dirichlet(beta) and
    θ_d ~ Dirichlet(alpha), on ``words`` (documents, tokens) of labels < V; q(φ) and q(θ) started at
    Dirichlet(a_phi) (K, V) and Dirichlet(a_theta) (documents, K).  Returns (VB, order): ``Q.update(*order)`` is
    one sweep in its demo's order, topics, φ, θ."""
    from bayespy import nodes
    from bayespy.inference import VB
    from bayespy.inference.vmp.nodes.categorical import CategoricalMoments
    from bayespy.inference.vmp.nodes.constant import Constant

    n_docs, length = words.shape
    p_topic = nodes.Dirichlet(np.full(K, float(alpha)), plates=(n_docs,), name="p_topic")
    p_word = nodes.Dirichlet(np.full(V, float(beta)), plates=(K,), name="p_word")
    documents = Constant(CategoricalMoments(n_docs), np.repeat(np.arange(n_docs), length), name="word_documents")
    topics = nodes.Categorical(nodes.Gate(documents, p_topic), plates=(n_docs * length,), name="topics")
    observed = nodes.Categorical(nodes.Gate(topics, p_word), name="words")
    observed.observe(np.asarray(words).ravel())
    p_topic.initialize_from_parameters(a_theta)
    p_word.initialize_from_parameters(a_phi)
    return VB(observed, topics, p_word, p_topic, documents), (topics, p_word, p_topic)


def gmm(
    X,
    K: int,
    max_iter: int = 1000,
    tol: float = 1e-5,
    seed: int = 0,
    min_timed_iters: int = 10,
    z_init=None,
    init: str = "centres",
) -> dict:
    """Gaussian mixture fitted with BayesPy, as in BayesPy's GMM example.

    ``alpha = Dirichlet(1e-5 * ones(K))``, ``Z = Categorical(alpha, plates=(N,))``,
    ``mu = Gaussian(zeros(D), 1e-5 I, plates=(K,))``, ``Lambda = Wishart(D, 1e-5 I, plates=(K,))``,
    ``Y = Mixture(Z, Gaussian, mu, Lambda)``, ``VB(Y, mu, Lambda, Z, alpha)`` (mu and Lambda are updated
    before Z, as the example wants with a random Z).

    Z starts from seeded hard assignments, so that another library can start from exactly the same ones:
    ``z_init`` if given, else ``benchmarks.peers.data.initial_assignments(N, K, seed, X)`` for
    ``init="centres"`` (nearest of K random data points, the default) or
    ``initial_assignments(N, K, seed)`` for ``init="uniform"`` (uniform random labels: a saddle for
    well-separated data, see that function).

    Returns the dict of :func:`linreg_ard` (without w/tau) plus ``assignments`` (argmax of q(z), shape
    (N,)), ``resp`` (q(z), (N, K)), ``counts`` (expected points per component), ``means`` (E mu, (K, D))
    and ``z_init``.
    """

    from .data import initial_assignments

    X = np.asarray(X, dtype=float)
    N, D = X.shape
    init_used = init if z_init is None else "given"
    if z_init is None:
        if init not in ("centres", "uniform"):
            raise ValueError(f"init must be 'centres' or 'uniform', got {init!r}")
        z_init = initial_assignments(N, K, seed, X if init == "centres" else None)
    z_init = np.asarray(z_init)

    def build():
        Q, Z, mu = gmm_nodes(X, K, z_init)

        def summary(Q):
            resp = np.array(Z.get_moments()[0])
            return {
                "assignments": resp.argmax(axis=1),
                "resp": resp,
                "counts": resp.sum(axis=0),
                "means": np.array(mu.get_moments()[0]),
            }

        return Q, summary

    out = _timed_run(build, max_iter, tol, min_timed_iters)
    out.update({"model": "gmm", "N": N, "D": D, "K": K, "seed": seed, "init": init_used, "z_init": z_init})
    return out


# --------------------------------------------------------------------------------------------------
# Standard measurements: python -m benchmarks.peers.bayespy_peer [--quick]
# Each case runs in its own subprocess so that its peak memory (ru_maxrss) is its own.


def _case(args) -> dict:
    import resource

    from .data import make_gmm, make_linreg, matched_accuracy

    if args.case == "linreg":
        X, y, w_true = make_linreg(args.N, args.D, seed=args.seed)
        r = linreg_ard(X, y, max_iter=args.max_iter, tol=args.tol, variant=args.variant)
        extra = {"w_rmse": float(np.sqrt(np.mean((r["w_mean"] - w_true) ** 2)))}
    else:
        X, labels, _, _ = make_gmm(args.N, args.K, args.D, seed=args.seed)
        r = gmm(X, args.K, max_iter=args.max_iter, tol=args.tol, seed=args.seed, init=args.init)
        extra = {
            "accuracy": matched_accuracy(labels, r["assignments"], args.K),
            "used_components": int(np.sum(r["counts"] > 0.5)),
        }
    keep = (
        "model",
        "variant",
        "init",
        "N",
        "D",
        "K",
        "sec_per_iter",
        "first_iter_sec",
        "total_sec",
        "build_sec",
        "iterations",
        "timed_iterations_to_convergence",
        "converged",
        "lower_bound",
        "bound_decrease_warnings",
        "version",
    )
    out = {k: r[k] for k in keep if k in r}
    out.update(extra)
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def main(argv=None) -> None:
    import argparse
    import json
    import subprocess
    import sys
    from pathlib import Path

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--case", choices=("linreg", "gmm"), help="run one case in this process, print JSON")
    p.add_argument("--N", type=int, default=1000)
    p.add_argument("--D", type=int, default=20)
    p.add_argument("--K", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variant", default="ard", choices=LINREG_VARIANTS)
    p.add_argument("--init", default="centres", choices=("centres", "uniform"), help="GMM initial z")
    p.add_argument("--max-iter", type=int, default=1000)
    p.add_argument("--tol", type=float, default=1e-5)
    p.add_argument("--quick", action="store_true", help="standard set without N = 1e6")
    p.add_argument("--variants", default="ard", help="comma-separated linreg variants for the standard set")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per case in the standard set")
    args = p.parse_args(argv)

    if args.case:
        print(json.dumps(_case(args)))
        return

    Ns = [10**3, 10**4, 10**5] + ([] if args.quick else [10**6])
    cases = [
        ["--case", "linreg", "--N", str(n), "--D", "20", "--variant", v] for v in args.variants.split(",") for n in Ns
    ]
    cases.append(["--case", "gmm", "--N", str(10**4), "--D", "2", "--K", "5", "--init", args.init])
    common = ["--seed", str(args.seed), "--max-iter", str(args.max_iter), "--tol", str(args.tol)]
    for c in cases:
        cmd = [sys.executable, "-m", "benchmarks.peers.bayespy_peer", *c, *common]
        try:
            res = subprocess.run(
                cmd, capture_output=True, text=True, timeout=args.timeout, cwd=Path(__file__).resolve().parents[2]
            )
        except subprocess.TimeoutExpired:
            print(json.dumps({"case": c, "error": f"timeout after {args.timeout} s"}), flush=True)
            continue
        if res.returncode != 0:
            tail = (res.stderr or "").strip().splitlines()[-3:]
            print(json.dumps({"case": c, "error": f"exit {res.returncode}", "stderr": tail}), flush=True)
        else:
            print(res.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
