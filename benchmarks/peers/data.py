"""Seeded synthetic data shared by the benchmark peers and by our own side of the benchmarks.

Everything here is plain numpy so that every library in a comparison fits exactly the same arrays.
"""

from __future__ import annotations

import numpy as np


def make_linreg(N: int, D: int = 20, seed: int = 0, n_relevant: int | None = None, noise_sd: float = 0.5):
    """Linear regression data for the ARD benchmark.

    X ~ N(0, 1) of shape (N, D); the first ``n_relevant`` (default D // 2) true weights are N(0, 1), the
    rest are exactly zero, so ARD has something to prune; y = X w + noise_sd * N(0, 1).

    Returns (X, y, w_true).
    """
    if n_relevant is None:
        n_relevant = D // 2
    rng = np.random.default_rng(seed)
    w_true = np.zeros(D)
    w_true[:n_relevant] = rng.normal(size=n_relevant)
    X = rng.normal(size=(N, D))
    y = X @ w_true + noise_sd * rng.normal(size=N)
    return X, y, w_true


def make_gmm(N: int, K: int = 5, D: int = 2, seed: int = 0, radius: float = 10.0):
    """Well-separated Gaussian mixture data.

    Component means are spread on a circle (D == 2) or on random directions (D > 2) at distance
    ``radius`` from the origin; each covariance is a random rotation of diag(s1^2, s2^2, ...) with
    standard deviations in [0.5, 1.0]; weights are equal. For K = 5, D = 2 and radius 10 the nearest
    means are about 11.8 apart, more than 10 standard deviations.

    Returns (X, labels, means, covs).
    """
    rng = np.random.default_rng(seed)
    if D == 2:
        angles = 2 * np.pi * np.arange(K) / K
        means = radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    else:
        dirs = rng.normal(size=(K, D))
        means = radius * dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
    covs = np.empty((K, D, D))
    for k in range(K):
        Q, _ = np.linalg.qr(rng.normal(size=(D, D)))
        s = rng.uniform(0.5, 1.0, size=D)
        covs[k] = (Q * s**2) @ Q.T
    labels = rng.integers(0, K, size=N)
    chol = np.linalg.cholesky(covs)
    X = means[labels] + np.einsum("nij,nj->ni", chol[labels], rng.normal(size=(N, D)))
    return X, labels, means, covs


def initial_assignments(N: int, K: int, seed: int = 0, X: np.ndarray | None = None) -> np.ndarray:
    """Seeded hard initial assignments, identical for every library given the same arguments.

    Without ``X``: uniform random labels (default_rng(seed).integers). NB: for well-separated clusters this
    start sits on the symmetric saddle (every component sees a random fifth of all the data, so all means
    start near the global mean) and VB leaves it extremely slowly; BayesPy's relative-bound test then
    stops after a few iterations with every mean near the global mean.
    With ``X`` (shape (N, D)): K distinct data points drawn with default_rng(seed) act as centres and each
    point takes the label of its nearest centre (a seeded random partition that is not a saddle).
    """
    rng = np.random.default_rng(seed)
    if X is None:
        return rng.integers(0, K, size=N)
    X = np.asarray(X, dtype=float)
    centres = X[rng.choice(len(X), size=K, replace=False)]
    d2 = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=-1)
    return d2.argmin(axis=1)


def matched_accuracy(labels_true: np.ndarray, labels_pred: np.ndarray, K: int) -> float:
    """Fraction of points whose predicted cluster matches the truth under the best one-to-one relabelling
    (greedy on the confusion matrix, which is exact for well-separated clusters)."""
    C = np.zeros((K, K), dtype=np.int64)
    np.add.at(C, (labels_true, labels_pred), 1)
    total = 0
    C = C.copy()
    for _ in range(K):
        i, j = np.unravel_index(np.argmax(C), C.shape)
        total += C[i, j]
        C[i, :] = -1
        C[:, j] = -1
    return total / len(labels_true)


def make_logistic(N: int, D: int = 20, seed: int = 0, logit_sd: float = 2.0):
    """Logistic regression data for the NCVMP benchmark (no intercept).

    X ~ N(0, 1) of shape (N, D); w_true ~ N(0, (logit_sd² / D) I), so the true logits x_nᵀw_true have a
    standard deviation of about ``logit_sd``; y_n ~ Bernoulli(σ(x_nᵀw_true)) as 0/1 floats.

    Returns (X, y, w_true).
    """
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=D) * logit_sd / np.sqrt(D)
    X = rng.normal(size=(N, D))
    p = 1.0 / (1.0 + np.exp(-(X @ w_true)))
    y = (rng.random(N) < p).astype(float)
    return X, y, w_true


def make_softmax(N: int, D: int = 20, K: int = 10, seed: int = 0, logit_sd: float = 2.0):
    """Multinomial (softmax) regression data for the NCVMP benchmark.

    X ~ N(0, 1) of shape (N, D); W_true (K, D) ~ N(0, logit_sd² / D), b_true (K,) ~ N(0, 0.5²);
    labels y_n ~ Categorical(softmax(W_true x_n + b_true)) as integers 0..K−1 (inverse-CDF draws).

    Returns (X, labels, W_true, b_true).
    """
    rng = np.random.default_rng(seed)
    W_true = rng.normal(size=(K, D)) * logit_sd / np.sqrt(D)
    b_true = 0.5 * rng.normal(size=K)
    X = rng.normal(size=(N, D))
    g = X @ W_true.T + b_true
    p = np.exp(g - g.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random(N)
    labels = np.minimum((p.cumsum(axis=1) < u[:, None]).sum(axis=1), K - 1)
    return X, labels.astype(np.int64), W_true, b_true
