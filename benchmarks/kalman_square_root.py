"""The square-root Kalman smoother of ``fg.gaussian_markov_chain``: its time per sweep against the information-form
smoother it replaced, and its evidence on nearly deterministic dynamics.

Speed.  Both kernels smooth the same chains (T steps, D-dimensional states seen through D noisy coordinates,
one sequence) from the same node potentials; the old one is ``benchmarks/_kalman_information_form.py``.  The
time is the median of ``--repeat`` calls after a warm-up (numba's cache load), for T = 1e4 and D = 2, 10;
the ratio new/old is measured in the same run.

Accuracy.  A constant-velocity model (x_t = (position, velocity), A = [[1, 1], [0, 1]], T = 100, position
observed with unit noise, Q = qI) fitted by ``fg.infer`` with everything but the states known: the ELBO
against log p(y) from a covariance-form Kalman filter written here (the prediction-error decomposition), for
q = 1e0, 1e2, …, 1e12, next to the old kernel's ELBO where it still runs.

Run ``python -m benchmarks.kalman_square_root [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import factorgraph as fg
from benchmarks._kalman_information_form import kalman_smooth as information_smooth
from benchmarks.timing import median_time
from factors.kernels.kalman import covariance_root, kalman_smooth

_LOG_2PI = float(np.log(2.0 * np.pi))


def _chain(T: int, D: int, seed: int = 0):
    """A stable random chain and the potentials (h, J) of D noisy coordinates y_t = C x_t + ε_t, ε ~ N(0, I)."""
    rng = np.random.default_rng(seed)
    A = 0.95 * np.linalg.qr(rng.normal(size=(D, D)))[0]
    Q = np.diag(rng.uniform(0.5, 2.0, D))
    C = rng.normal(size=(D, D))
    x = np.zeros((T, D))
    for t in range(1, T):
        x[t] = A @ x[t - 1] + rng.normal(size=D) / np.sqrt(np.diag(Q))
    y = x @ C.T + rng.normal(size=(T, D))
    h = np.ascontiguousarray((y @ C)[None])
    J = np.ascontiguousarray(np.broadcast_to(C.T @ C, (1, T, D, D)))
    return A, Q, h, J


def speed(T: int, D: int, repeat: int) -> dict:
    """Seconds per smoothing sweep of the square-root and the information-form kernels."""
    A, Q, h, J = _chain(T, D)
    lengths = np.array([T], dtype=np.int64)
    P0, m0 = np.eye(D), np.zeros(D)
    U0 = np.eye(D)
    UQ = covariance_root(Q)[0]
    zero = np.zeros((D, D))
    new = lambda: kalman_smooth(h, J, lengths, m0, U0, A, UQ, zero)  # noqa: E731
    old = lambda: information_smooth(h, J, lengths, P0, P0 @ m0, Q, A.T @ Q @ A, Q @ A)  # noqa: E731
    mu_new, mu_old = new()[0], old()[0]  # warm-up (numba cache)
    t_new, t_old = median_time(new, repeat), median_time(old, repeat)
    diff = float(np.abs(mu_new - mu_old).max())
    print(f"T = {T:.0e}, D = {D:2d}: square-root {t_new * 1e3:8.2f} ms per sweep, information form "
          f"{t_old * 1e3:8.2f} ms, ratio new/old = {t_new / t_old:.2f} (smoothed means agree to {diff:.1e})")
    return {"new": t_new, "old": t_old, "ratio": t_new / t_old, "dmean": diff}


def _constant_velocity(y: np.ndarray, q: float):
    with fg.Model("constant-velocity") as m:
        t = fg.plate("t", len(y))
        x = fg.gaussian_markov_chain("x", initial_mean=np.zeros(2), initial_precision=1e-2,
                                     transition=np.array([[1.0, 1.0], [0.0, 1.0]]), noise_precision=q * np.eye(2),
                                     plates=[t])
        fg.gaussian("y", mean=fg.inner(np.array([1.0, 0.0]), x), precision=1.0, plates=[t], observed=y)
    return m


def _log_likelihood(y: np.ndarray, q: float) -> float:
    """log p(y) of the constant-velocity model by the covariance-form Kalman filter."""
    A, H = np.array([[1.0, 1.0], [0.0, 1.0]]), np.array([1.0, 0.0])
    m, P, ll = np.zeros(2), 100.0 * np.eye(2), 0.0
    for t, yt in enumerate(y):
        if t:
            m, P = A @ m, A @ P @ A.T + np.eye(2) / q
        s, v = H @ P @ H + 1.0, yt - H @ m
        ll -= 0.5 * (_LOG_2PI + np.log(s) + v * v / s)
        k = P @ H / s
        m, P = m + k * v, P - np.outer(k, k) * s
    return float(ll)


def _old_elbo(y: np.ndarray, q: float) -> float:
    """The same ELBO from the information-form kernel, by the evidence the factor formed from its moments
    (differences of second moments times Q), or nan where its filter fails."""
    T = len(y)
    A, P0, Q = np.array([[1.0, 1.0], [0.0, 1.0]]), 1e-2 * np.eye(2), q * np.eye(2)
    H = np.array([1.0, 0.0])
    h = np.ascontiguousarray((y[:, None] * H)[None])
    J = np.ascontiguousarray(np.broadcast_to(np.outer(H, H), (1, T, 2, 2)))
    mu, m2, pair, _, logdet, bad = information_smooth(h, J, np.array([T]), P0, np.zeros(2), Q, A.T @ Q @ A, Q @ A)
    if bad[0] >= 0:
        return float("nan")
    mu, m2, pair = mu[0], m2[0], pair[0]
    s11, s00, s10 = m2[1:].sum(0), m2[:-1].sum(0), pair[1:].sum(0)
    w = s11 - A @ s10.T - s10 @ A.T + A @ s00 @ A.T
    chain = (0.5 * np.linalg.slogdet(P0)[1] - 0.5 * np.trace(P0 @ m2[0]) + 0.5 * (T - 1) * np.linalg.slogdet(Q)[1]
             - 0.5 * np.trace(Q @ w) - T * _LOG_2PI)
    obs = -0.5 * T * _LOG_2PI - 0.5 * (y ** 2 - 2 * y * mu[:, 0] + m2[:, 0, 0]).sum()
    return float(chain + obs + T * (1.0 + _LOG_2PI) - 0.5 * logdet[0])


def accuracy() -> dict:
    """ELBO − log p(y) of the constant-velocity model, new kernel (through fg.infer) and old kernel."""
    rng = np.random.default_rng(0)
    y = 3.0 + 0.5 * np.arange(100) + rng.normal(size=100)
    gaps, old = {}, {}
    for e in range(0, 13, 2):
        q = 10.0 ** e
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            elbo = fg.infer(_constant_velocity(y, q), max_iter=3).elbo
        ref = _log_likelihood(y, q)
        gaps[q], old[q] = elbo - ref, _old_elbo(y, q) - ref
        print(f"noise precision 1e{e:<2d}: log p(y) = {ref:.10f}, ELBO − log p(y): square-root {gaps[q]: .1e}, "
              f"information form {old[q]: .1e}")
    worst = max(abs(g) for g in gaps.values())
    print(f"largest |ELBO − log p(y)| of the square-root smoother over 1e0…1e12: {worst:.1e}")
    return {"gaps": gaps, "old": old, "worst": worst}


def main(repeat: int = 5, T: int = 10_000, dims: tuple[int, ...] = (2, 10)) -> dict:
    out = {D: speed(T, D, repeat) for D in dims}
    out["accuracy"] = accuracy()
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    main(repeat=ap.parse_args().repeat)
