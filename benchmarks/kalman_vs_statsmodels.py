"""A Kalman smoother (T steps, D-dimensional state, P observed coordinates): the library against statsmodels.

Both smooth the same linear-Gaussian state-space model with fixed parameters (A, Q, C, diagonal R) and a known
initial state prior, and return the log-likelihood, the smoothed means and covariances (and, for the library, the
lag-one covariances too).  The library's path is ``fg.infer`` on the model ``fg.gaussian_markov_chain`` +
``fg.gaussian(mean=fg.inner(C, x))`` for one sweep (the observation messages, the information-form filter and
RTS smoother of ``factors/kernels/kalman.py``, and the ELBO, which here is the log-likelihood); statsmodels' is
``KalmanSmoother.smooth()`` (its compiled filter and smoother, asked for the smoothed states and their
covariances only).  Best of ``--repeat`` runs each, after a warm-up; the ratio is printed with the largest
differences of the results.  ``--small``: T = 1e4.

Run ``python -m benchmarks.kalman_vs_statsmodels [--small]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg


def _problem(T: int, D: int, P: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(D, D)))
    A = 0.95 * q
    Q = np.diag(rng.uniform(0.5, 2.0, D))
    C = rng.normal(size=(P, D))
    r = rng.uniform(0.5, 2.0, P)
    x = np.zeros((T, D))
    noise = rng.normal(size=(T, D)) / np.sqrt(np.diag(Q))
    for t in range(1, T):
        x[t] = A @ x[t - 1] + noise[t]
    y = x @ C.T + rng.normal(size=(T, P)) / np.sqrt(r)
    return A, Q, C, r, y


def _library(A, Q, C, r, y, m0, P0):
    T, P = y.shape
    with fg.Model("kalman") as m:
        t, p = fg.plate("t", T), fg.plate("p", P)
        x = fg.gaussian_markov_chain("x", initial_mean=m0, initial_precision=np.linalg.inv(P0), transition=A,
                                     noise_precision=Q, plates=[t])
        fg.gaussian("y", mean=fg.inner(C, x, plates=[p]), precision=np.broadcast_to(r, y.shape), plates=[t, p],
                    observed=y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one sweep: "not converged" is expected
        res = fg.infer(m, max_iter=1, tol=None)
    q = res.posterior("x")
    return res.elbo, q.mean(), q.cov()


def _statsmodels(A, Q, C, r, y, m0, P0):
    from statsmodels.tsa.statespace.kalman_smoother import SMOOTHER_STATE, SMOOTHER_STATE_COV, KalmanSmoother

    T, P = y.shape
    D = A.shape[0]
    ks = KalmanSmoother(k_endog=P, k_states=D, k_posdef=D, smoother_output=SMOOTHER_STATE | SMOOTHER_STATE_COV)
    ks.bind(np.asfortranarray(y.T))
    ks["design"], ks["obs_cov"], ks["transition"] = C, np.diag(1.0 / r), A
    ks["selection"], ks["state_cov"] = np.eye(D), np.linalg.inv(Q)
    ks.initialize_known(m0, P0)
    out = ks.smooth()
    return out.llf, out.smoothed_state.T, np.moveaxis(out.smoothed_state_cov, -1, 0)


def _best(fn, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(small: bool = False, repeat: int = 3, D: int = 4, P: int = 4) -> dict:
    T = 10_000 if small else 100_000
    A, Q, C, r, y = _problem(T, D, P)
    m0, P0 = np.zeros(D), 10.0 * np.eye(D)
    ours = lambda: _library(A, Q, C, r, y, m0, P0)  # noqa: E731
    theirs = lambda: _statsmodels(A, Q, C, r, y, m0, P0)  # noqa: E731
    ours(), theirs()  # warm-up (numba cache load, statsmodels' first call)
    t_ours, (ll, mu, cov) = _best(ours, repeat)
    t_theirs, (ll2, mu2, cov2) = _best(theirs, repeat)
    dll, dmu, dcov = abs(ll - ll2), np.abs(mu - mu2).max(), np.abs(cov - cov2).max()
    print(f"Kalman smoother, T = {T:.0e}, D = {D}, P = {P}: library {t_ours * 1e3:.1f} ms, statsmodels "
          f"{t_theirs * 1e3:.1f} ms, ratio library/statsmodels = {t_ours / t_theirs:.2f}")
    print(f"log-likelihood {ll:.6f} vs {ll2:.6f} (difference {dll:.1e}); max difference of smoothed means {dmu:.1e}, "
          f"of smoothed covariances {dcov:.1e}")
    return {"ours": t_ours, "statsmodels": t_theirs, "ratio": t_ours / t_theirs, "dll": dll, "dmu": dmu,
            "dcov": dcov}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true")
    main(small=ap.parse_args().small)
