"""A mixture of Bernoullis on binarised handwritten digits, with K chosen by the evidence.

Data: scikit-learn's ``load_digits`` (1797 8×8 images, 16 grey levels; bundled with scikit-learn),
binarised at half intensity (pixel > 7).  The model, ``models.mixture("bernoulli", K, X)``:
π ~ Dirichlet(1), z_n ~ Categorical(π), p_kd ~ Beta(1, 1), x_nd ~ Bernoulli(p_{z_n d}): the pixel
probabilities are gated by the image's component (Bishop 2006 §9.3.3; its VB form as in Bishop §10.2).

For each K the demo keeps the best of a few restarts and scores it by the evidence lower bound plus
log K! (the bound of one of the K! equivalent labellings; Bishop 2006 §10.2.4).  It prints the bound per
K, the chosen K, the adjusted Rand index of the MAP assignment against the true digits (used only to
score), and draws the component means E[p_k] as images in ``demos/out/``.
Run ``python demos/bernoulli_mixture_digits.py [--small] [--seed S]``.
"""

from __future__ import annotations

import os

# many small (1797 × 64 by 64 × K) products: OpenBLAS's threads spin between them, and the default run took ten
# times the CPU time of one-thread BLAS on a shared two-core machine; OPENBLAS_NUM_THREADS set outside wins
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.special import gammaln  # noqa: E402

from factorgraph import models  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def load(small: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    X, y = (digits.data > 7).astype(float), digits.target
    if small:
        idx = np.random.default_rng(seed).choice(len(X), 300, replace=False)
        X, y = X[idx], y[idx]
    return X, y


def adjusted_rand_index(a: np.ndarray, b: np.ndarray) -> float:
    """Adjusted Rand index (Hubert & Arabie 1985)."""
    a = np.unique(a, return_inverse=True)[1]
    b = np.unique(b, return_inverse=True)[1]
    t = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(t, (a, b), 1.0)

    def pairs(x):
        return float(np.sum(x * (x - 1) / 2))

    n = a.size
    idx, sa, sb = pairs(t), pairs(t.sum(1)), pairs(t.sum(0))
    exp = sa * sb / (n * (n - 1) / 2)
    return (idx - exp) / (0.5 * (sa + sb) - exp)


def main(small: bool = False, seed: int = 0) -> dict:
    X, y = load(small, seed)
    Ks = range(2, 15, 3) if small else range(4, 25, 4)
    restarts = 2 if small else 3
    rows = []
    fits = {}
    for K in Ks:
        best = models.mixture("bernoulli", K, X, seed=seed, max_iter=1000, n_init=restarts)  # seeds seed, seed + 1, …
        fits[K] = best
        rows.append((K, best.elbo, best.elbo + gammaln(K + 1), best.n_iter))
        print(f"K = {K:2d}: ELBO {best.elbo:12.2f}   ELBO + log K! {best.elbo + gammaln(K + 1):12.2f}   "
              f"({best.n_iter} iterations)")
    K_best = max(rows, key=lambda r: r[2])[0]
    best = fits[K_best]
    assign = best.posterior("z").probs.argmax(-1)
    ari = adjusted_rand_index(assign, y)
    print(f"chosen K = {K_best} (largest ELBO + log K!); adjusted Rand index against the digits: {ari:.3f}")
    p = best.posterior("p").mean()
    weights = best.posterior("pi").mean()
    OUT.mkdir(exist_ok=True)
    order = np.argsort(-weights)
    fig, axes = plt.subplots(1, K_best, figsize=(1.3 * K_best, 1.8))
    for ax, k in zip(np.atleast_1d(axes), order, strict=True):
        ax.imshow(p[k].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
        ax.set_title(f"π={weights[k]:.2f}", fontsize=7)
        ax.axis("off")
    fig.suptitle(f"Bernoulli mixture on binarised digits: K = {K_best} by the evidence", fontsize=8)
    path = OUT / f"bernoulli_mixture_digits{'_small' if small else ''}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"figure: {path}")
    return {"rows": rows, "K": K_best, "ari": ari, "elbo_trace": best.elbo_trace, "weights": weights}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    main(args.small, args.seed)
