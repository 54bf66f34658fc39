"""NumPyro as a benchmark peer: logistic and softmax regression by SVI (AutoNormal, AutoMultivariateNormal)
and by the Laplace approximation (AutoLaplaceApproximation), for ``benchmarks/ncvmp_vs_peers.py``.

The models (fixed prior precision λ, the same posterior every library fits) keep all parameters in one
site ``theta``, so the guides' latent vector is θ itself:

- logistic: θ = w ∈ R^D, w ~ N(0, λ⁻¹ I), y_n ~ Bernoulli(logits = x_nᵀw);
- softmax: θ = [W.ravel() (class-major), b] ∈ R^{K·D+K}, all N(0, λ⁻¹), y_n ~ Categorical(logits = W x_n + b).

JAX runs in double precision (``jax_enable_x64``) on the CPU.

**SVI** (``AutoNormal``, ``AutoMultivariateNormal``): ``Trace_ELBO`` with one particle, Adam with a step size
decaying exponentially from ``lr`` to ``lr_end`` over a fixed number of ``steps``, the whole loop one jitted
``lax.scan``. It runs twice: the first call includes tracing and XLA compilation (``seconds_cold``, with
``svi.init``), the second, from the same initial state, is the optimisation alone (``seconds_warm``). The
reported ELBO is ``Trace_ELBO`` on the final parameters with ``elbo_particles`` particles (mean ± standard
error over batches of particles): a Monte Carlo estimate of the exact ELBO of the fitted Gaussian.

**Laplace**: ``AutoLaplaceApproximation`` (a delta guide, so deterministic gradients) fitted the same way
with ``laplace_steps`` Adam steps decaying to ``laplace_lr_end``, then ``guide.get_posterior`` (the Hessian
at the end point, jitted: eagerly it takes seconds), whose time is added to cold (first call, with
compilation) and warm (second call). NumPyro reports no ELBO for it. NB: the other
documented route, ``numpyro.optim.Minimize`` (``jax.scipy.optimize.minimize``, BFGS), stops with a
line-search failure (status 3) after ~10 iterations far from the mode on these problems (jax 0.10.2), so
it is not used.

All guides start at θ = 0 (``init_to_median``: the prior median).

Every function returns a dict: ``method``, ``seconds_cold``, ``seconds_warm``, ``elbo``, ``elbo_se``,
``elbo_kind``, ``mean`` (P,), ``cov`` (P, P), ``var`` (P,), ``steps``, ``version``.
"""

from __future__ import annotations

import time

import numpy as np

METHODS = ("AutoNormal", "AutoMultivariateNormal", "AutoLaplaceApproximation")


def _jax():
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def _version() -> str:
    from importlib.metadata import version

    return f"numpyro {version('numpyro')}, jax {version('jax')}"


def models():
    """(logistic, softmax) NumPyro model functions; softmax takes K as its last argument."""
    _jax()
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def logistic(X, y, prior_prec):
        th = numpyro.sample("theta", dist.Normal(0.0, prior_prec**-0.5).expand([X.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=X @ th), obs=y)

    def softmax(X, labels, prior_prec, K):
        D = X.shape[1]
        th = numpyro.sample("theta", dist.Normal(0.0, prior_prec**-0.5).expand([K * (D + 1)]).to_event(1))
        G = X @ jnp.reshape(th[: K * D], (K, D)).T + th[K * D :]
        numpyro.sample("y", dist.Categorical(logits=G), obs=labels)

    return logistic, softmax


def _optimise(model, guide, args, steps, lr, lr_end, seed):
    """SVI with Adam (step size decaying exponentially from lr to lr_end) for ``steps`` steps in one jitted
    ``lax.scan``; returns (params, seconds_cold, seconds_warm, last losses)."""
    jax = _jax()
    import jax.numpy as jnp
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.optim import Adam

    decay = (lr_end / lr) ** (1.0 / steps)

    def schedule(i):
        return lr * decay**i

    t0 = time.perf_counter()
    svi = SVI(model, guide, Adam(schedule), Trace_ELBO())
    state0 = svi.init(jax.random.PRNGKey(seed), *args)

    def run(state, *a):
        def body(s, _):
            s, loss = svi.update(s, *a)
            return s, loss

        return jax.lax.scan(body, state, None, length=steps)

    static = tuple(i + 1 for i, v in enumerate(args) if not hasattr(v, "shape"))
    run_j = jax.jit(run, static_argnums=static)
    jargs = tuple(jnp.asarray(a) if hasattr(a, "shape") else a for a in args)
    state, losses = run_j(state0, *jargs)
    jax.block_until_ready(losses)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    state, losses = run_j(state0, *jargs)
    jax.block_until_ready(losses)
    warm = time.perf_counter() - t0
    return svi.get_params(state), cold, warm, np.asarray(losses[-100:]), jargs, static


def _svi(model, guide_cls, args, steps, lr, lr_end, seed, elbo_particles):
    jax = _jax()
    from numpyro.infer import Trace_ELBO
    from numpyro.infer.initialization import init_to_median

    # init_to_median: start the guide's means at the prior median θ = 0, like every method here
    guide = guide_cls(model, init_loc_fn=init_to_median)
    params, cold, warm, losses, jargs, static = _optimise(model, guide, args, steps, lr, lr_end, seed)
    if hasattr(guide, "get_posterior"):  # AutoMultivariateNormal: MultivariateNormal over θ
        post = guide.get_posterior(params)
        mean, cov = np.asarray(post.loc), np.asarray(post.covariance_matrix)
    else:  # AutoNormal: a Normal per site (one site, theta)
        loc, scale = np.asarray(params["theta_auto_loc"]), np.asarray(params["theta_auto_scale"])
        mean, cov = loc, np.diag(scale**2)
    # final ELBO: Trace_ELBO with many particles, in batches (memory), mean ± s.e. over the batches
    batch = 100
    nb = max(2, elbo_particles // batch)
    loss_fn = jax.jit(lambda k, *a: Trace_ELBO(num_particles=batch).loss(k, params, model, guide, *a),
                      static_argnums=static)
    keys = jax.random.split(jax.random.PRNGKey(seed + 1), nb)
    vals = np.array([-float(loss_fn(k, *jargs)) for k in keys])
    return {"method": guide_cls.__name__, "seconds_cold": cold, "seconds_warm": warm,
            "elbo": float(vals.mean()), "elbo_se": float(vals.std(ddof=1) / np.sqrt(nb)),
            "elbo_kind": f"MC, {nb * batch} particles", "mean": mean, "cov": cov, "var": np.diag(cov).copy(),
            "steps": steps, "final_loss_trace": losses, "version": _version()}


def _laplace(model, args, seed, steps, lr, lr_end):
    """AutoLaplaceApproximation: the MAP by Adam (deterministic gradients: a delta guide), then
    ``get_posterior`` (Hessian at the end point), jitted."""
    from numpyro.infer.autoguide import AutoLaplaceApproximation
    from numpyro.infer.initialization import init_to_median

    guide = AutoLaplaceApproximation(model, init_loc_fn=init_to_median)
    params, cold, warm, losses, _, _ = _optimise(model, guide, args, steps, lr, lr_end, seed)
    jax = _jax()

    def posterior(p):
        post = guide.get_posterior(p)
        return post.loc, post.covariance_matrix

    post_j = jax.jit(posterior)  # eager get_posterior takes seconds (an un-jitted Hessian)
    t0 = time.perf_counter()
    mean, cov = jax.block_until_ready(post_j(params))
    hess_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    mean, cov = jax.block_until_ready(post_j(params))
    hess_warm = time.perf_counter() - t0
    mean, cov = np.asarray(mean), np.asarray(cov)
    return {"method": "AutoLaplaceApproximation", "seconds_cold": cold + hess_cold, "seconds_warm": warm + hess_warm,
            "elbo": None, "elbo_se": None, "elbo_kind": "none (MAP + Hessian)", "mean": mean, "cov": cov,
            "var": np.diag(cov).copy(), "steps": steps, "final_loss_trace": losses, "version": _version()}


def logistic(X, y, method: str, prior_prec: float = 1.0, steps: int = 10_000, lr: float = 0.05,
             lr_end: float = 5e-4, seed: int = 0, elbo_particles: int = 2000, laplace_steps: int = 3000,
             laplace_lr_end: float = 1e-5) -> dict:
    """Fit the logistic model with ``method`` ∈ :data:`METHODS` (see the module docstring)."""
    lg, _ = models()
    args = (np.asarray(X, float), np.asarray(y, float), float(prior_prec))
    return _fit(lg, args, method, steps, lr, lr_end, seed, elbo_particles, laplace_steps, laplace_lr_end)


def softmax(X, labels, K: int, method: str, prior_prec: float = 1.0, steps: int = 10_000, lr: float = 0.05,
            lr_end: float = 5e-4, seed: int = 0, elbo_particles: int = 2000, laplace_steps: int = 3000,
             laplace_lr_end: float = 1e-5) -> dict:
    """Fit the softmax model (θ = [W.ravel(), b]) with ``method`` ∈ :data:`METHODS`."""
    _, sm = models()
    args = (np.asarray(X, float), np.asarray(labels, np.int64), float(prior_prec), int(K))
    return _fit(sm, args, method, steps, lr, lr_end, seed, elbo_particles, laplace_steps, laplace_lr_end)


def _fit(model, args, method, steps, lr, lr_end, seed, elbo_particles, laplace_steps, laplace_lr_end):
    from numpyro.infer import autoguide

    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "AutoLaplaceApproximation":
        return _laplace(model, args, seed, laplace_steps, lr, laplace_lr_end)
    return _svi(model, getattr(autoguide, method), args, steps, lr, lr_end, seed, elbo_particles)
