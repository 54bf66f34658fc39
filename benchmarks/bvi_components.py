"""Boosting VI: wall-clock time and KL(q‖p) against the number of mixture components.

* **Banana** (b = 0.1, normalised, log Z = 0): BVI from the broad N(0, 100 I) start, 60 components, with the
  default ε = 1e−4 and with ε = 1e−3.  KL(q_k‖p) of the mixture after k components by numerical
  integration (a tensor Gauss–Hermite rule per component, ``demos/bvi_targets.kl_numerical``), against the
  best single Gaussian's KL (minimised by the same rule).
* **Nodal** logistic regression (D = 6, prior N(0, I)): BVI on the model block through ``fg.infer`` from
  the Laplace start (the default) and from the broad start.  KL(q_k‖p) = log Z − ELBO(q_k), with log Z by
  importance sampling (10⁶ draws from a Student-t proposal around the Laplace solution, as in
  ``demos/bvi_nodal.py``) and ELBO(q_k) a stratified Monte Carlo estimate on 20 000 fresh draws (its
  standard error is printed): KL *by importance sampling*, not by moments.

Time is the handler's cumulative wall-clock time when the k-th component was added (``info["time_trace"]``),
so one run gives the whole curve.  Run ``python -m benchmarks.bvi_components [--quick]``; absolute times vary
with the machine's load.
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import numpy as np

import factorgraph as fg
from schedules.handlers.bvi import elbo_estimate


def _demo(name: str):
    return importlib.import_module(f"demos.{name}")  # run from the repository root (python -m benchmarks....)


def _checkpoints(n: int) -> list[int]:
    return sorted({k for k in (1, 2, 3, 5, 10, 15, 20, 30, 40, 60) if k <= n} | {n})


def banana(n_components: int, seed: int) -> dict:
    bt = _demo("bvi_targets")
    t = bt.banana()
    _, kl_best = bt.best_gaussian(t, [np.array([0.0, 10.0]), np.zeros(2), np.array([8.0, 3.0])])
    out = {"best_gaussian": kl_best, "runs": {}}
    for eps in (1e-4, 1e-3):
        r = fg.approximate(t.logp, t.x0, fg.BVI(n_components=n_components, init="broad", eps=eps, seed=seed),
                           grad=t.grad, vectorized=True)
        q, info = r.posterior, r.info
        ks = _checkpoints(q.n_components)
        out["runs"][f"ε = {eps:g}"] = {"k": ks, "time": info["time_trace"][np.array(ks) - 1],
                                       "kl": bt.kl_trace(q, t, ks, info["alpha_trace"]), "se": None,
                                       "stopped": info["stopped"]}
    return out


def nodal(n_components: int, seed: int) -> dict:
    nd = _demo("bvi_nodal")
    X, y = nd.load()
    m, logp = nd.model(X, y), nd.log_joint(X, y)
    la = fg.approximate(logp, np.zeros(X.shape[1]), fg.Laplace(), vectorized=True).posterior
    ref = nd.reference(logp, la.mean(), la.cov(), 1_000_000, seed)
    mf = fg.infer(m, handlers={"w": fg.VIDiag(seed=seed)})
    full = fg.infer(m, handlers={"w": fg.MVI("lr", seed=seed)})
    out = {"log_z": ref["log_z"], "ess": ref["ess"], "mean_field": ref["log_z"] - mf.elbo,
           "full_gaussian": ref["log_z"] - full.elbo, "runs": {}}
    target = _Values(logp)
    for init in ("laplace", "broad"):
        h = fg.BVI(n_components=n_components, init=init, seed=seed)
        fg.infer(m, handlers={"w": h})
        q, info = h.last_fit.q, h.last_fit.info
        ks = _checkpoints(q.n_components)
        rng = np.random.default_rng(seed + 7)
        est = [elbo_estimate(target, q.head(k, info["alpha_trace"]), 20_000, rng)[:2] for k in ks]
        out["runs"][init] = {"k": ks, "time": info["time_trace"][np.array(ks) - 1],
                             "kl": np.array([ref["log_z"] - e for e, _ in est]), "se": np.array([s for _, s in est]),
                             "stopped": info["stopped"]}
    return out


class _Values:
    """A log density as a handler target (values only are needed for the ELBO)."""

    def __init__(self, logp) -> None:
        self.logp = logp

    def logp_grad(self, W: np.ndarray):
        return self.logp(W), None


def _print(title: str, res: dict, extra: str) -> None:
    print(f"\n{title}  ({extra})")
    for name, run in res["runs"].items():
        print(f"  {name}: stopped after {run['stopped']}")
        print(f"    {'k':>4s} {'time (s)':>9s} {'KL(q_k‖p)':>11s}")
        for i, k in enumerate(run["k"]):
            se = "" if run["se"] is None else f" ± {run['se'][i]:.4f}"
            print(f"    {k:4d} {run['time'][i]:9.2f} {run['kl'][i]:11.4f}{se}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 components instead of 60")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    n = 21 if a.quick else 61
    t0 = time.perf_counter()
    b = banana(n, a.seed)
    _print("Banana (KL by 2-D numerical integration)", b, f"best single Gaussian KL {b['best_gaussian']:.4f}")
    nd = nodal(n, a.seed)
    _print("Nodal (KL = log Z − ELBO, log Z by importance sampling)", nd,
           f"log Z = {nd['log_z']:.4f}, ESS {nd['ess']:.0f}; mean-field KL {nd['mean_field']:.4f}, "
           f"full Gaussian (MVI-lr) KL {nd['full_gaussian']:.4f}")
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    return {"banana": b, "nodal": nd}


if __name__ == "__main__":
    main()
