"""Non-conjugate VMP against NumPyro and PyMC, measured in the same run on the same arrays.

Problems (fixed prior precision 1, so every library fits the same posterior):

* logistic regression, D = 20, N ∈ {1e3, 1e4, 1e5}: ours is ``fg.mv_gaussian("w", precision=1.0)`` with
  ``fg.bernoulli_logit(method="quadrature")`` under ``fg.NCVMP()`` (full-covariance Gaussian q(w));
* softmax regression, K = 10, D = 20, N = 1e4: ours is one ``mv_gaussian`` weight vector per class and a
  ``gaussian`` bias per class, ``fg.categorical_softmax(method="tilted")`` under ``fg.NCVMP()``
  (q factorises over classes and between W and b).

Ours with a global handler on the weights (``--handlers``, by default at N ≤ 1e4 and for softmax):
``fg.Laplace()``, ``fg.MVI("mean" | "eig" | "lr")`` and ``fg.VIDiag()`` (S = 1000 fixed samples, seed 0; one
fit each, build included, numba's cache already loaded);
for softmax the bias is a last column of W (``X`` gets a column of ones; the same posterior) and the handler
takes the class-plated W as one joint K·(D+1) block.

Peers (``benchmarks/peers/``): NumPyro ``AutoNormal``, ``AutoMultivariateNormal`` (SVI) and
``AutoLaplaceApproximation``; PyMC ``ADVI``, ``FullRankADVI`` and the Laplace approximation of
``pymc_extras``. The reference posterior (``benchmarks/peers/reference.py``) is NUTS, or importance sampling
from the Laplace approximation at N = 1e5, with log p(y) by importance sampling; it is cached in
``benchmarks/out/``.

Printed per problem, one row per method:

* ``time``: ours, build + ``fg.infer`` to convergence (median of ``--repeats`` fits, after a warm-up fit
  on tiny data so that loading numba's cache is not counted); a peer, its optimisation alone with
  compilation excluded (``seconds_warm``, see the peer modules); ``cold``: a peer's time including model
  build, tracing and compilation;
* ``iters``: our sweeps, or a peer's optimisation steps;
* ``ELBO own``: the ELBO the method itself reports, with its kind (ours: exact by quadrature for
  logistic, the tilted lower bound for softmax; SVI/ADVI: Monte Carlo); ``ELBO common``: the ELBO of the
  method's Gaussian q(θ) under the same evaluator for every method (``reference.logistic_elbo``: exact by
  Gauss–Hermite; ``reference.softmax_elbo``: Monte Carlo with control variates, its standard error is
  printed under the table); ``gap``: log p(y) (reference) − ELBO common = KL(q ‖ posterior);
* ``max|Δμ|/sd``: max over parameters of |mean − reference mean| / reference sd; ``max|log var ratio|``:
  max over parameters of |log(var / reference var)|;
* below the table: the speed ratio fastest peer / ours (warm and cold), and our per-iteration time
  (median over a 20-sweep run, via a callback) divided by one pass of ``X.T @ (lam[:, None] * X)`` on the
  same X (median of repeats, timed in the same run).

Run: ``pip install -e ".[bench]" && python -m benchmarks.ncvmp_vs_peers`` (``--handlers ''`` leaves the
handler rows out; ``--quick``: logistic
N ∈ {1e3, 1e4} and softmax N = 2e3, fewer optimisation steps). A JSON record of every row is written to
``benchmarks/out/ncvmp_vs_peers[_quick][_logistic|_softmax].json``. Absolute times vary with the machine's load; the
ratios measured in the same run are the figures to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

import factorgraph as fg

from .peers import reference as ref
from .peers.data import make_logistic, make_softmax
from .timing import SweepTimer, median_time

D_DEFAULT = 20


def _xtlx_pass(X, seed: int = 0) -> float:
    lam = np.random.default_rng(seed).uniform(0.01, 0.25, size=len(X))
    return median_time(lambda: X.T @ (lam[:, None] * X), repeat=7)


# --------------------------------------------------------------------------------------------- ours


def _logistic_model(X, y):
    N, D = X.shape
    with fg.Model("logistic-bench") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=D)
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method="quadrature")
    return m


def _softmax_model(X, labels, K, method):
    N, D = X.shape
    with fg.Model("softmax-bench") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=1.0, plates=[k], dim=D)
        b = fg.gaussian("b", mean=0.0, precision=1.0, plates=[k])
        fg.categorical_softmax("y", logits=fg.inner(X, W, plates=[n]) + b, over=k, observed=labels,
                               method=method)
    return m


def _softmax_theta(r, K, D):
    W, b = r.posterior("W"), r.posterior("b")
    mean = np.concatenate([W.mean().reshape(-1), b.mean()])
    cov = np.zeros((K * D + K,) * 2)
    Wc = W.cov()
    for k in range(K):
        cov[k * D:(k + 1) * D, k * D:(k + 1) * D] = Wc[k]
    cov[K * D:, K * D:] = np.diag(b.var())
    return mean, cov


def _softmax_joint_model(X, labels, K):
    """The same posterior with the bias as a last column of W (a handler needs logits exactly Xᵀw_k)."""
    N, D = X.shape
    X1 = np.c_[X, np.ones(N)]
    with fg.Model("softmax-bench-joint") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=1.0, plates=[k], dim=D + 1)
        fg.categorical_softmax("y", logits=fg.inner(X1, W, plates=[n]), over=k, observed=labels)
    return m


def _softmax_theta_joint(r, K, D):
    """(mean, cov) in the peers' order (W row-major, then b) from the joint K·(D+1) block ``r.joint["W"]``."""
    q = r.joint["W"]
    idx = np.arange(K * (D + 1)).reshape(K, D + 1)
    order = np.concatenate([idx[:, :D].reshape(-1), idx[:, D]])
    return q.mean().reshape(-1)[order], q.cov()[np.ix_(order, order)]


HANDLERS = {"laplace": ("Laplace", lambda: fg.Laplace()), "mvi-mean": ("MVI-mean", lambda: fg.MVI("mean")),
            "mvi-eig": ("MVI-eig", lambda: fg.MVI("eig")), "mvi-lr": ("MVI-lr", lambda: fg.MVI("lr")),
            "vi-diag": ("VI-diag", lambda: fg.VIDiag())}


def _ours_handlers(names, var, build, post, repeats):
    """One row per handler on ``var``: fits to convergence (median of ``repeats``, build included)."""
    rows = []
    for name in names:
        label, make = HANDLERS[name]
        times, r = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = fg.infer(build(), algorithm=fg.NCVMP(), handlers={var: make()}, max_iter=200)
            times.append(time.perf_counter() - t0)
        mean, cov = post(r)
        rows.append({"method": f"ours {label} handler", "seconds_warm": float(np.median(times)),
                     "seconds_cold": float(max(times)), "seconds_all": times, "steps": r.n_iter,
                     "converged": bool(r.converged), "elbo": float(r.elbo), "elbo_se": r.elbo_se,
                     "elbo_kind": r.evidence_kind, "mean": mean, "cov": cov, "var": np.diag(cov).copy()})
    return rows


def _ours(build, post, infer_kw, repeats, timed_iters=20):
    """Fit to convergence ``repeats`` times (median time, build included) and time single sweeps."""
    times, r = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        m = build()
        r = fg.infer(m, algorithm=fg.NCVMP(), **infer_kw)
        times.append(time.perf_counter() - t0)
    timer = SweepTimer()
    fg.infer(build(), algorithm=fg.NCVMP(), max_iter=timed_iters, tol=None, param_tol=None, callbacks=[timer])
    mean, cov = post(r)
    return {"method": "ours NCVMP", "seconds_warm": float(np.median(times)), "seconds_cold": float(max(times)),
            "seconds_all": times, "steps": r.n_iter, "converged": bool(r.converged), "elbo": float(r.elbo),
            "elbo_se": None, "mean": mean, "cov": cov, "var": np.diag(cov).copy(), "per_iter": timer.per_iter()}


def _warm_up():
    """One tiny fit of each kind: loads numba's on-disk cache, so that the timed fits do not include it."""
    X, y, _ = make_logistic(64, 3, seed=123)
    fg.infer(_logistic_model(X, y), algorithm=fg.NCVMP(), max_iter=3)
    X, lab, _, _ = make_softmax(64, 3, 3, seed=123)
    fg.infer(_softmax_model(X, lab, 3, "tilted"), algorithm=fg.NCVMP(), max_iter=3)


# --------------------------------------------------------------------------------------------- peers


def _peers(kind, X, y, K, steps, laplace_steps, skip):
    out = []
    try:
        from .peers import numpyro_peer
    except ImportError:  # pragma: no cover - bench extra missing
        numpyro_peer = None
    try:
        from .peers import pymc_peer
    except ImportError:  # pragma: no cover
        pymc_peer = None
    jobs = []
    skip_method = {name.split(":", 1)[1] for name in skip if ":" in name}
    if numpyro_peer is not None and "numpyro" not in skip:
        for meth in numpyro_peer.METHODS:
            kw = {"steps": steps, "laplace_steps": laplace_steps}
            fn = numpyro_peer.logistic if kind == "logistic" else numpyro_peer.softmax
            jobs.append(("numpyro", meth, fn, kw))
    if pymc_peer is not None and "pymc" not in skip:
        for meth in pymc_peer.METHODS:
            fn = pymc_peer.logistic if kind == "logistic" else pymc_peer.softmax
            jobs.append(("pymc", meth, fn, {"steps": steps}))
    for lib, meth, fn, kw in jobs:
        if meth in skip_method:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = fn(X, y, meth, **kw) if kind == "logistic" else fn(X, y, K, meth, **kw)
        except Exception as e:  # a peer failing must not stop the run
            print(f"  ! {lib} {meth} failed: {type(e).__name__}: {e}", flush=True)
            continue
        r["method"] = f"{lib} {meth}"
        out.append(r)
    return out


# --------------------------------------------------------------------------------------------- table


def _score(rows, reference, common_elbo):
    sd = np.sqrt(reference["var"])
    for r in rows:
        r["dmean"] = float(np.max(np.abs(r["mean"] - reference["mean"]) / sd))
        r["dlogvar"] = float(np.max(np.abs(np.log(r["var"] / reference["var"]))))
        r["elbo_common"], r["elbo_common_se"] = common_elbo(r["mean"], r["cov"])
        r["gap"] = reference["log_evidence"] - r["elbo_common"]


def _print_table(title, rows, reference, xtlx, extra_unit=None):
    print(f"\n{title}   [load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores]")
    ess = (f"NUTS, {reference['n_draws']} draws, min ESS {reference['ess_min']:.0f}, divergences "
           f"{reference['divergences']}" if reference["method"] == "nuts"
           else f"IS from Laplace, {reference['n_draws']} draws, ESS {reference['ess_min']:.0f}")
    print(f"reference: {ess}; log p(y) = {reference['log_evidence']:.3f} ± {reference['log_evidence_se']:.3f} "
          f"(IS, ESS {reference['is_ess']:.0f}/{reference['is_samples']})"
          f"{' [cached]' if reference.get('cached') else ''}")
    head = (f"{'method':<36} {'time s':>8} {'cold s':>8} {'iters':>6} {'ELBO own':>12} {'kind':<38} "
            f"{'ELBO common':>12} {'gap':>7} {'max|Δμ|/sd':>10} {'max|logvr|':>10}")
    print(head)
    for r in rows:
        own = "—" if r["elbo"] is None else f"{r['elbo']:.3f}"
        kind = r["elbo_kind"] + (f" ± {r['elbo_se']:.3f}" if r["method"].startswith("ours") and r["elbo_se"] else "")
        print(f"{r['method']:<36} {r['seconds_warm']:8.3f} {r['seconds_cold']:8.3f} {str(r['steps']):>6} {own:>12} "
              f"{kind:<38} {r['elbo_common']:12.3f} {r['gap']:7.3f} {r['dmean']:10.3f} {r['dlogvar']:10.3f}")
    ours = rows[0]
    peers = [r for r in rows if not r["method"].startswith("ours")]
    se = [r["elbo_common_se"] for r in rows if r["elbo_common_se"]]
    if se:
        print(f"  (ELBO common: Monte Carlo, standard error ≤ {max(se):.3f})")
    if peers:
        fw = min(peers, key=lambda r: r["seconds_warm"])
        fc = min(peers, key=lambda r: r["seconds_cold"])
        print(f"  fastest peer (warm): {fw['method']} {fw['seconds_warm']:.3f} s -> speed ratio fastest-peer/ours = "
              f"{fw['seconds_warm'] / ours['seconds_warm']:.2f}; cold: {fc['method']} {fc['seconds_cold']:.3f} s -> "
              f"{fc['seconds_cold'] / ours['seconds_cold']:.2f}")
        best = max(peers, key=lambda r: r["elbo_common"])
        print(f"  ELBO common, ours − best peer ({best['method']}): {ours['elbo_common'] - best['elbo_common']:+.3f}")
    line = (f"  ours per iteration {ours['per_iter']:.3e} s; one X.T @ (lam[:, None] * X) pass {xtlx:.3e} s; "
            f"ratio {ours['per_iter'] / xtlx:.2f}")
    if extra_unit:
        line += f" ({extra_unit[0]}: {ours['per_iter'] / (xtlx * extra_unit[1]):.2f})"
    print(line, flush=True)


def _record(rows, **kw):
    keep = ("method", "seconds_warm", "seconds_cold", "steps", "elbo", "elbo_se", "elbo_kind", "elbo_common",
            "elbo_common_se", "gap", "dmean", "dlogvar", "per_iter", "converged", "version")
    return [{**kw, **{k: r.get(k) for k in keep if k in r}} for r in rows]


# --------------------------------------------------------------------------------------------- problems


def logistic(N, D, seed, steps, laplace_steps, repeats, skip, handlers=()):
    X, y, _ = make_logistic(N, D, seed)
    reference = ref.logistic_reference(X, y, seed=seed)
    xtlx = _xtlx_pass(X)
    ours = _ours(lambda: _logistic_model(X, y), lambda r: (r.posterior("w").mean(), r.posterior("w").cov()),
                 {"max_iter": 500}, repeats)
    ours["method"] = "ours NCVMP (quadrature)"
    ours["elbo_kind"] = "exact (quadrature)"
    rows = [ours] + _ours_handlers(handlers, "w", lambda: _logistic_model(X, y),
                                   lambda r: (r.posterior("w").mean(), r.posterior("w").cov()), 1)
    rows += _peers("logistic", X, y, None, steps, laplace_steps, skip)
    _score(rows, reference, lambda mu, cov: (ref.logistic_elbo(X, y, mu, cov), None))
    _print_table(f"Logistic regression, D = {D}, N = {N:.0e} (seed {seed})", rows, reference, xtlx)
    return _record(rows, problem="logistic", N=N, D=D, K=None, xtlx=xtlx,
                   reference={k: reference[k] for k in ("method", "log_evidence", "log_evidence_se", "ess_min",
                                                        "is_ess")})


def softmax(N, D, K, seed, steps, laplace_steps, repeats, skip, tol, handlers=()):
    X, labels, _, _ = make_softmax(N, D, K, seed)
    reference = ref.softmax_reference(X, labels, K, seed=seed)
    xtlx = _xtlx_pass(X)
    ours = _ours(lambda: _softmax_model(X, labels, K, "tilted"), lambda r: _softmax_theta(r, K, D),
                 {"max_iter": 500, "tol": tol, "param_tol": None}, repeats)
    ours["method"] = f"ours NCVMP (tilted, tol {tol:g})"
    ours["elbo_kind"] = "lower bound (tilted)"
    rows = [ours] + _ours_handlers(handlers, "W", lambda: _softmax_joint_model(X, labels, K),
                                   lambda r: _softmax_theta_joint(r, K, D), 1)
    rows += _peers("softmax", X, labels, K, steps, laplace_steps, skip)
    _score(rows, reference, lambda mu, cov: ref.softmax_elbo(X, labels, mu, cov, K, seed=seed + 7))
    _print_table(f"Softmax regression, K = {K}, D = {D}, N = {N:.0e} (seed {seed})", rows, reference, xtlx,
                 extra_unit=(f"per {K} passes, one per class", K))
    return _record(rows, problem="softmax", N=N, D=D, K=K, xtlx=xtlx,
                   reference={k: reference[k] for k in ("method", "log_evidence", "log_evidence_se", "ess_min",
                                                        "is_ess")})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="logistic N ∈ {1e3, 1e4}, softmax N = 2e3, fewer steps")
    ap.add_argument("--only", choices=("logistic", "softmax"), help="run one problem family")
    ap.add_argument("--N", type=int, nargs="*", help="logistic sizes (default 1e3 1e4 1e5)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, help="SVI/ADVI steps (default 10000, quick 3000)")
    ap.add_argument("--laplace-steps", type=int, help="NumPyro Laplace Adam steps (default 3000, quick 1500)")
    ap.add_argument("--repeats", type=int, default=3, help="our fits to convergence per problem (median)")
    ap.add_argument("--softmax-tol", type=float, default=1e-8,
                    help="our softmax stopping rule: relative ELBO change per sweep")
    ap.add_argument("--skip", default="",
                    help="comma-separated peer libraries (numpyro,pymc) or methods (method:ADVI) to leave out")
    ap.add_argument("--handlers", default="laplace,mvi-mean,mvi-eig,mvi-lr,vi-diag",
                    help=f"comma-separated handler rows of ours (of {','.join(HANDLERS)}; '' for none)")
    ap.add_argument("--handlers-max-N", type=int, default=10_000, help="logistic sizes above this skip them")
    args = ap.parse_args(argv)
    steps = args.steps or (3000 if args.quick else 10_000)
    lsteps = args.laplace_steps or (1500 if args.quick else 3000)
    sizes = args.N or ([1_000, 10_000] if args.quick else [1_000, 10_000, 100_000])
    skip = set(filter(None, args.skip.split(",")))
    handlers = [h for h in filter(None, args.handlers.split(","))]
    for h in handlers:
        if h not in HANDLERS:
            ap.error(f"--handlers: unknown handler {h!r} (choose from {', '.join(HANDLERS)})")
    print(f"steps: SVI/ADVI {steps}, NumPyro Laplace {lsteps}; our fits: median of {args.repeats}", flush=True)
    _warm_up()
    records = []
    if args.only in (None, "logistic"):
        for N in sizes:
            records += logistic(N, D_DEFAULT, args.seed, steps, lsteps, args.repeats, skip,
                                handlers if N <= args.handlers_max_N else ())
    if args.only in (None, "softmax"):
        records += softmax(2_000 if args.quick else 10_000, D_DEFAULT, 10, args.seed, steps, lsteps, args.repeats,
                           skip, args.softmax_tol, handlers)
    ref.OUT.mkdir(parents=True, exist_ok=True)
    path = ref.OUT / f"ncvmp_vs_peers{'_quick' if args.quick else ''}{'_' + args.only if args.only else ''}.json"
    path.write_text(json.dumps(records, indent=1, default=float))
    print(f"\nrecord: {path}")


if __name__ == "__main__":
    main()
