"""PyMC as a benchmark peer: logistic and softmax regression by ADVI (mean-field and full-rank) and by the
Laplace approximation of ``pymc_extras``, for ``benchmarks/ncvmp_vs_peers.py``.

The models are those of :mod:`benchmarks.peers.numpyro_peer` (one vector ``theta``; fixed prior precision λ):

- logistic: θ = w ∈ R^D, θ ~ N(0, λ⁻¹ I), y ~ Bernoulli(logit_p = X θ);
- softmax: θ = [W.ravel() (class-major), b], y ~ Categorical(p = softmax(X Wᵀ + b)).

**ADVI** (``pm.ADVI``, ``pm.FullRankADVI``): Adam (``pm.adam``) whose step size, a shared variable, decays
exponentially from ``lr`` to ``lr_end`` over a fixed number of ``steps``, with one Monte Carlo sample per
step (PyMC's default). ``seconds_cold`` covers building the model, the approximation and compiling the
step function (PyTensor, C backend) and the loop; ``seconds_warm`` is the loop alone (the ``steps`` calls of
the compiled step function). The ELBO PyMC itself gives is the loss history: ``elbo`` is the mean of the
last 500 one-sample estimates (−loss), ``elbo_se`` their standard error (ignoring autocorrelation).

**Laplace** (``pymc_extras.fit_laplace``, ``optimize_method="trust-ncg"``: ``scipy.optimize.minimize`` with
PyTensor gradients and Hessian-vector products, then the exact Hessian at the mode from those products):
the InferenceData's ``fit`` group holds ``mean_vector`` and ``covariance_matrix``. NB: with its default
``optimize_method="BFGS"`` the covariance is BFGS's running approximation of the inverse Hessian
(``OptimizeResult.hess_inv``), not the Hessian at the mode: on the N = 1e3 logistic problem its variances
were ~7 % off the exact Laplace ones, so the exact route is used. It runs twice; ``seconds_cold`` is the
first call (with compilation), ``seconds_warm`` the second (PyTensor's compiled-module cache is warm). It
also draws ``laplace_draws`` samples, as its API requires. No ELBO is reported for it.

Every function returns a dict like :mod:`benchmarks.peers.numpyro_peer`'s.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

METHODS = ("ADVI", "FullRankADVI", "Laplace")


def _version() -> str:
    from importlib.metadata import version

    return f"pymc {version('pymc')}, pytensor {version('pytensor')}, pymc-extras {version('pymc-extras')}"


def _model(kind, X, y, prior_prec, K=None):
    import pymc as pm

    N, D = X.shape
    sd = prior_prec**-0.5
    with pm.Model() as model:
        if kind == "logistic":
            th = pm.Normal("theta", 0.0, sd, shape=D)
            pm.Bernoulli("y", logit_p=pm.math.dot(X, th), observed=y)
        else:
            th = pm.Normal("theta", 0.0, sd, shape=K * (D + 1))
            W = th[: K * D].reshape((K, D))
            G = pm.math.dot(X, W.T) + th[K * D :]
            pm.Categorical("y", p=pm.math.softmax(G, axis=-1), observed=y)
    return model


def _advi(kind, X, y, prior_prec, K, full_rank, steps, lr, lr_end, seed):
    import pymc as pm
    import pytensor

    t0 = time.perf_counter()
    model = _model(kind, X, y, prior_prec, K)
    with model:
        inference = pm.FullRankADVI(random_seed=seed) if full_rank else pm.ADVI(random_seed=seed)
    lr_shared = pytensor.shared(np.float64(lr), name="lr")
    step = inference.objective.step_function(obj_optimizer=pm.adam(learning_rate=lr_shared), score=True)
    decay = (lr_end / lr) ** (1.0 / steps)
    losses = np.empty(steps)
    t1 = time.perf_counter()
    for i in range(steps):
        lr_shared.set_value(np.float64(lr * decay**i))
        losses[i] = step()
    end = time.perf_counter()
    approx = inference.approx
    mean = np.asarray(approx.mean.eval())
    if full_rank:
        cov = np.asarray(approx.cov.eval())
    else:
        cov = np.diag(np.asarray(approx.std.eval()) ** 2)
    tail = -losses[-500:]
    return {"method": "FullRankADVI" if full_rank else "ADVI", "seconds_cold": end - t0, "seconds_warm": end - t1,
            "elbo": float(tail.mean()), "elbo_se": float(tail.std(ddof=1) / np.sqrt(len(tail))),
            "elbo_kind": "MC, mean of last 500 1-sample losses", "mean": mean, "cov": cov,
            "var": np.diag(cov).copy(), "steps": steps, "final_loss_trace": losses[-100:], "version": _version()}


def _laplace(kind, X, y, prior_prec, K, seed, draws, optimize_method="trust-ncg"):
    import pymc_extras as pmx

    out = {}
    for label in ("seconds_cold", "seconds_warm"):
        t0 = time.perf_counter()
        model = _model(kind, X, y, prior_prec, K)
        idata = pmx.fit_laplace(model=model, optimize_method=optimize_method, progressbar=False, draws=draws,
                                random_seed=seed)
        out[label] = time.perf_counter() - t0
    mean = np.asarray(idata.fit["mean_vector"].values)
    cov = np.asarray(idata.fit["covariance_matrix"].values)
    out.update({"method": "Laplace", "elbo": None, "elbo_se": None, "elbo_kind": "none (MAP + Hessian)",
                "mean": mean, "cov": cov, "var": np.diag(cov).copy(), "steps": None, "version": _version()})
    return out


def _fit(kind, X, y, prior_prec, K, method, steps, lr, lr_end, seed, laplace_draws):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "Laplace":
            return _laplace(kind, X, y, prior_prec, K, seed, laplace_draws)
        return _advi(kind, X, y, prior_prec, K, method == "FullRankADVI", steps, lr, lr_end, seed)


def logistic(X, y, method: str, prior_prec: float = 1.0, steps: int = 10_000, lr: float = 0.05,
             lr_end: float = 5e-4, seed: int = 0, laplace_draws: int = 100) -> dict:
    """Fit the logistic model with ``method`` ∈ :data:`METHODS` (see the module docstring)."""
    X = np.asarray(X, float)
    return _fit("logistic", X, np.asarray(y, np.int64), float(prior_prec), None, method, steps, lr, lr_end, seed,
                laplace_draws)


def softmax(X, labels, K: int, method: str, prior_prec: float = 1.0, steps: int = 10_000, lr: float = 0.05,
            lr_end: float = 5e-4, seed: int = 0, laplace_draws: int = 100) -> dict:
    """Fit the softmax model (θ = [W.ravel(), b]) with ``method`` ∈ :data:`METHODS`."""
    X = np.asarray(X, float)
    return _fit("softmax", X, np.asarray(labels, np.int64), float(prior_prec), int(K), method, steps, lr, lr_end,
                seed, laplace_draws)
