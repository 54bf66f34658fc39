"""Poisson regression with exposure, D = 20, N = 1e5: ours against the Laplace approximations of PyMC and NumPyro
(where installed), measured in the same run on the same arrays.

Model (fixed prior precision 1, so every method fits the same posterior): w ~ N(0, I),
y_n ~ Poisson(e_n exp(x_nᵀw)).  Data: X ~ N(0, 1), w_true ~ N(0, 0.15²), log e_n ~ U(−1, 1), seed 0.

Rows:

* ours, NCVMP: ``fg.mv_gaussian`` + ``fg.poisson_log`` under ``fg.NCVMP()`` (full-covariance q(w));
* ours, Laplace handler: the same model with ``handlers={"w": fg.Laplace()}``;
* PyMC Laplace (if ``pymc`` imports): ``pm.find_MAP`` (L-BFGS-B, PyMC's default) and the Hessian of the log
  density at the mode (``model.compile_d2logp``); ``pymc_extras.fit_laplace`` is used instead when installed;
* NumPyro Laplace (if ``numpyro`` imports): ``AutoLaplaceApproximation`` with the ``Minimize`` (BFGS)
  optimiser to the mode, in double precision.

``time``: build + fit (ours: median of ``--repeats`` fits after a warm-up on tiny data, so loading numba's
cache is not counted; PyMC: the second of two fits, so its compilation is mostly cached; ``cold`` is the first).
``ELBO``: the Gaussian-family ELBO of the method's q(w) = N(μ, Σ), evaluated in closed form for every method
(E_q[log p(y | w)] = Σ_n y_n m_n − e_n exp(m_n + v_n/2) − log y_n! + y_n log e_n, plus E_q[log N(w | 0, I)]
+ H[q]), so the figures are comparable.  Below the table: the ratio of the fastest peer's time to ours.
Absolute times vary with the machine's load; quote the ratios measured in one run.

Run: ``python -m benchmarks.poisson_vs_peers [--N 100000] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.special import gammaln

import factorgraph as fg

from .timing import median_time


def make_data(N: int, D: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    w = rng.normal(0.0, 0.15, D)
    e = np.exp(rng.uniform(-1.0, 1.0, N))
    y = rng.poisson(e * np.exp(X @ w))
    return X, y, e


def gaussian_elbo(X, y, e, mu, cov, prior_prec: float = 1.0) -> float:
    """The closed-form ELBO of q(w) = N(mu, cov) for the Poisson regression with prior N(0, prior_prec⁻¹I)."""
    D = len(mu)
    m = X @ mu
    v = np.einsum("nd,de,ne->n", X, cov, X)
    lik = np.sum(y * (m + np.log(e)) - e * np.exp(m + 0.5 * v) - gammaln(y + 1.0))
    prior = 0.5 * D * np.log(prior_prec / (2 * np.pi)) - 0.5 * prior_prec * (mu @ mu + np.trace(cov))
    ent = 0.5 * D * (1.0 + np.log(2 * np.pi)) + 0.5 * np.linalg.slogdet(cov)[1]
    return float(lik + prior + ent)


def model(X, y, e):
    N, D = X.shape
    with fg.Model("poisson-bench") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=D)
        fg.poisson_log("y", fg.inner(X, w, plates=[n]), exposure=e, plates=[n], observed=y)
    return m


def ours(X, y, e, handler: bool, repeats: int) -> dict:
    kw = {"handlers": {"w": fg.Laplace()}} if handler else {"algorithm": fg.NCVMP()}
    Xs, ys, es = X[:200], y[:200], e[:200]
    fg.infer(model(Xs, ys, es), **kw)  # warm-up: numba's cache and imports
    out = {}

    def fit():
        out["r"] = fg.infer(model(X, y, e), max_iter=500, **kw)

    t = median_time(fit, repeat=repeats)
    r = out["r"]
    q = r.posterior("w")
    return {"method": "ours, " + ("Laplace handler" if handler else "NCVMP"), "time": t, "cold": None,
            "iters": r.n_iter, "mean": q.mean(), "cov": q.cov(), "converged": r.converged}


def pymc_laplace(X, y, e) -> dict:
    import pymc as pm

    try:
        import pymc_extras as pmx
    except ImportError:
        pmx = None
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        with pm.Model() as pmodel:
            w = pm.Normal("w", 0.0, 1.0, shape=X.shape[1])
            pm.Poisson("y", mu=e * pm.math.exp(pm.math.dot(X, w)), observed=y)
        if pmx is not None:
            idata = pmx.fit_laplace(model=pmodel, progressbar=False, draws=100, random_seed=0)
            mu = np.asarray(idata.fit["mean_vector"].values)
            cov = np.asarray(idata.fit["covariance_matrix"].values)
        else:
            with pmodel:
                mp = pm.find_MAP(progressbar=False)
            with warnings.catch_warnings():  # PyMC warns that the sign convention will change
                warnings.simplefilter("ignore", FutureWarning)
                H = pmodel.compile_d2logp(vars=[w], negate_output=True)({"w": mp["w"]})  # Hessian of −log p
            mu, cov = np.asarray(mp["w"]), np.linalg.inv(np.asarray(H))
        times.append(time.perf_counter() - t0)
    how = "pymc_extras.fit_laplace" if pmx is not None else "find_MAP + d2logp"
    return {"method": f"PyMC Laplace ({how})", "time": times[1], "cold": times[0], "iters": None, "mean": mu,
            "cov": cov, "converged": True}


def numpyro_laplace(X, y, e) -> dict:
    """NumPyro's Laplace approximation as its documentation sets it up: ``AutoLaplaceApproximation`` with the
    ``Minimize`` optimiser (BFGS to the mode in one SVI step; the loss of the delta guide is deterministic),
    in double precision (``numpyro.enable_x64``; in JAX's default single precision the mode of a 1e5-row
    log likelihood is not resolved), started at w = 0 like ours (from the default ``init_to_median`` of
    the prior, BFGS's first step overflows exp(Xw) and it stops far from the mode).  JAX's BFGS may stop
    short of the mode: the ELBO and max|Δμ| columns show how far."""
    import jax
    import numpyro

    numpyro.enable_x64()
    import jax.numpy as jnp
    import numpyro.distributions as dist
    from numpyro.infer import SVI, Trace_ELBO, init_to_value
    from numpyro.infer.autoguide import AutoLaplaceApproximation

    def npmodel(X, e, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Poisson(e * jnp.exp(X @ w)), obs=y)

    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        guide = AutoLaplaceApproximation(npmodel, init_loc_fn=init_to_value(values={"w": np.zeros(X.shape[1])}))
        svi = SVI(npmodel, guide, numpyro.optim.Minimize(method="BFGS"), Trace_ELBO())
        args = (jnp.asarray(X), jnp.asarray(e), jnp.asarray(y))
        state = svi.init(jax.random.PRNGKey(0), *args)
        state, _ = svi.update(state, *args)
        params = svi.get_params(state)
        post = guide.get_transform(params)
        mu = np.asarray(guide.median(params)["w"])
        L = np.asarray(post.scale_tril)  # the Laplace posterior is a lower-Cholesky affine transform
        cov = L @ L.T
        times.append(time.perf_counter() - t0)
    return {"method": "NumPyro Laplace (AutoLaplace, BFGS)", "time": times[1], "cold": times[0],
            "iters": None, "mean": mu, "cov": cov, "converged": True}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--N", type=int, default=100_000)
    ap.add_argument("--D", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    X, y, e = make_data(args.N, args.D)
    print(f"Poisson regression with exposure: N = {args.N}, D = {args.D}, prior N(0, I); {y.sum()} counts")
    rows = [ours(X, y, e, False, args.repeats), ours(X, y, e, True, args.repeats)]
    peers = []
    for name, fn in (("pymc", pymc_laplace), ("numpyro", numpyro_laplace)):
        try:
            __import__(name)
        except ImportError:
            print(f"{name}: not installed, no {name} row")
            continue
        row = fn(X, y, e)
        rows.append(row)
        peers.append(row)
    print(f"{'method':44s} {'time s':>8s} {'cold s':>8s} {'iters':>6s} {'ELBO':>16s} {'max|Δμ| vs NCVMP':>17s}")
    base = rows[0]["mean"]
    for r in rows:
        elbo = gaussian_elbo(X, y, e, r["mean"], r["cov"])
        cold = f"{r['cold']:8.3f}" if r["cold"] is not None else f"{'':8s}"
        iters = f"{r['iters']:6d}" if r["iters"] is not None else f"{'':6s}"
        dmu = np.max(np.abs(r["mean"] - base))
        print(f"{r['method']:44s} {r['time']:8.3f} {cold} {iters} {elbo:16.4f} {dmu:17.2e}")
    if peers:
        best = min(peers, key=lambda r: r["time"])
        print(f"speed: fastest peer ({best['method']}) / ours NCVMP = {best['time'] / rows[0]['time']:.1f}x (warm)"
              + (f", {best['cold'] / rows[0]['time']:.1f}x (cold)" if best["cold"] is not None else ""))
    else:
        print("no peer installed: only our own figures are printed")


if __name__ == "__main__":
    main()
