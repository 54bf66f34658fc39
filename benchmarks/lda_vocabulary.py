"""LDA at a realistic vocabulary: time per sweep and peak memory, against scikit-learn in the same run.

The model is the LDA demo's (``demos/lda_topics.py``): θ_d ~ Dirichlet(0.5), φ_k ~ Dirichlet(0.1) over V words,
z_dn ~ Categorical(θ_d), w_dn ~ Categorical(φ_{z_dn}), on a synthetic corpus of D documents × L tokens drawn from
K = 10 sparse topics (φ_k ~ Dirichlet(0.05)).  The observed words are held as labels (``factors.onehot``), so a
sweep costs O(N·K) and memory O(N·K): the one-hot rows × vocabulary matrix (N·V numbers, the previous storage) is
never formed; the script prints its would-be size beside the measured peak.

Printed per size: seconds per sweep (median of timed sweeps after a warm-up sweep), the peak memory the fit
allocates (``tracemalloc``: numpy's arrays included), and scikit-learn's
``LatentDirichletAllocation(learning_method="batch")`` seconds per iteration on the same corpus as a sparse
document × word count matrix (its own representation: one entry per distinct (document, word) pair, which is
why it needs less work per iteration than a per-token model), with the ratio.  Timings are shared-machine figures.

Run ``python -m benchmarks.lda_vocabulary [--small]``.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

import numpy as np

import factorgraph as fg


def corpus(D: int, L: int, V: int, K: int, seed: int = 0) -> np.ndarray:
    """(D, L) word labels from K sparse topics and per-document mixtures."""
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(V, 0.05), size=K)
    theta = rng.dirichlet(np.full(K, 0.3), size=D)
    z = (theta.cumsum(1)[:, None, :] < rng.uniform(size=(D, L, 1))).sum(-1).clip(0, K - 1)
    words = np.empty((D, L), dtype=int)
    for k in range(K):
        sel = z == k
        words[sel] = rng.choice(V, size=int(sel.sum()), p=phi[k])
    return words


def build(words: np.ndarray, V: int, K: int) -> fg.Model:
    D, L = words.shape
    with fg.Model("lda") as m:
        doc, w, k = fg.plate("doc", D), fg.plate("w", L), fg.plate("k", K)
        theta = fg.dirichlet("theta", np.full(K, 0.5), plates=[doc])
        phi = fg.dirichlet("phi", np.full(V, 0.1), plates=[k])
        z = fg.categorical("z", theta, plates=[doc, w], categories=k)
        fg.categorical("words", phi[z], plates=[doc, w], observed=words)
    return m


def ours(words: np.ndarray, V: int, K: int, sweeps: int) -> tuple[float, float]:
    """(median seconds per sweep, from the time between the ends of consecutive sweeps; peak MB allocated by
    building and fitting the model)."""
    tracemalloc.start()
    model = build(words, V, K)
    stamps: list[float] = []
    with warnings.catch_warnings():  # a fixed number of sweeps: not converged, by design
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        fg.infer(model, max_iter=sweeps + 1, tol=None, param_tol=None, seed=0,
                 callbacks=[lambda it, L, eng: stamps.append(time.perf_counter())])
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return float(np.median(np.diff(stamps))), peak


def sklearn_per_iteration(words: np.ndarray, V: int, K: int, iters: int) -> float | None:
    try:
        from scipy import sparse
        from sklearn.decomposition import LatentDirichletAllocation
    except ImportError:
        return None
    D, L = words.shape
    X = sparse.csr_matrix((np.ones(words.size), (np.repeat(np.arange(D), L), words.ravel())), shape=(D, V))
    X.sum_duplicates()
    times = []
    for n in (1, 1 + iters):
        lda = LatentDirichletAllocation(n_components=K, learning_method="batch", max_iter=n, doc_topic_prior=0.5,
                                        topic_word_prior=0.1, evaluate_every=-1, random_state=0, n_jobs=1)
        t0 = time.perf_counter()
        lda.fit(X)
        times.append(time.perf_counter() - t0)
    return (times[1] - times[0]) / iters


def main(small: bool = False) -> list[dict]:
    K, V = 10, 10_000
    sizes = [(200, 100)] if small else [(1000, 100), (2000, 500)]
    sweeps = 2 if small else 3
    rows = []
    print(f"LDA, K = {K} topics, V = {V} words (synthetic corpus); fg holds the words as labels")
    for D, L in sizes:
        words = corpus(D, L, V, K)
        N = D * L
        t, peak = ours(words, V, K, sweeps)
        sk = sklearn_per_iteration(words, V, K, sweeps)
        dense_gb = N * V * 8 / 1e9
        line = (f"N = {N:,} tokens ({D} docs × {L}): fg {t:.3f} s/sweep, peak {peak:.0f} MB "
                f"(one-hot rows would take {dense_gb:.1f} GB)")
        if sk is not None:
            line += f"; scikit-learn {sk:.3f} s/iteration, fg / scikit-learn = {t / sk:.2f}"
        print(line)
        rows.append({"N": N, "sec_per_sweep": t, "peak_mb": peak, "dense_gb": dense_gb, "sklearn": sk})
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true")
    main(small=ap.parse_args().small)
