"""Latent Dirichlet allocation (Blei, Ng & Jordan 2003) on a generated corpus, by VMP.

Four topics over a 40-word vocabulary (sport, cooking, space, music: ten words each, plus leakage to
every word), documents with topic proportions θ_d ~ Dirichlet(0.3) and words drawn topic by topic.  The
model: φ_k ~ Dirichlet(0.5), θ_d ~ Dirichlet(1), z_dl ~ Categorical(θ_d), w_dl ~ Categorical(φ[z_dl]):
the word distribution is gated by the token's topic.  The demo prints each recovered topic's top words
beside the true topic it matches (Hungarian matching on the topics' word distributions), the total
variation distance between matched topics, and draws the recovered φ in ``demos/out/``.
Run ``python demos/lda_topics.py [--small] [--seed S]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402

import factorgraph as fg  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
TOPICS = {
    "sport": "goal match team score player coach league referee stadium season",
    "cooking": "oven flour butter recipe sauce garlic simmer knife onion taste",
    "space": "orbit rocket planet galaxy telescope launch comet lunar astronaut star",
    "music": "guitar melody chord concert rhythm drum singer album tempo piano",
}
VOCAB = [w for words in TOPICS.values() for w in words.split()]


def make_corpus(n_docs: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    K, V = len(TOPICS), len(VOCAB)
    phi = np.full((K, V), 0.02 / V)
    for k in range(K):
        phi[k, 10 * k:10 * k + 10] += rng.dirichlet(np.full(10, 2.0)) * 0.98
    phi /= phi.sum(1, keepdims=True)
    theta = rng.dirichlet(np.full(K, 0.3), n_docs)
    z = (rng.random((n_docs, length, 1)) > np.cumsum(theta, 1)[:, None, :]).sum(-1)
    z = np.minimum(z, K - 1)
    u = rng.random((n_docs, length, 1))
    words = (u > np.cumsum(phi[z], -1)).sum(-1)
    return np.minimum(words, V - 1), phi


def build(words: np.ndarray, K: int) -> fg.Model:
    n_docs, length = words.shape
    with fg.Model("lda") as m:
        k, doc, w = fg.plate("k", K), fg.plate("doc", n_docs), fg.plate("w", length)
        phi = fg.dirichlet("phi", np.full(len(VOCAB), 0.5), plates=[k])
        theta = fg.dirichlet("theta", np.ones(K), plates=[doc])
        z = fg.categorical("z", theta, plates=[doc, w], categories=k)
        fg.categorical("words", phi[z], plates=[doc, w], observed=words)
    return m


def main(small: bool = False, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n_docs, length = (40, 30) if small else (200, 60)
    words, phi_true = make_corpus(n_docs, length, rng)
    K = len(TOPICS)
    result = max((fg.infer(build(words, K), seed=seed + r, max_iter=1000, tol=1e-9) for r in range(4)),
                 key=lambda r: r.elbo)
    phi = result.posterior("phi").mean()
    tv = 0.5 * np.abs(phi[:, None, :] - phi_true[None, :, :]).sum(-1)
    rows, cols = linear_sum_assignment(tv)
    names = list(TOPICS)
    print(f"{n_docs} documents of {length} words, vocabulary {len(VOCAB)}; evidence lower bound {result.elbo:.2f} "
          f"({result.n_iter} iterations)")
    for k, j in zip(rows, cols, strict=True):
        top = [VOCAB[i] for i in np.argsort(-phi[k])[:6]]
        print(f"recovered topic {k} ~ {names[j]:8s} (total variation {tv[k, j]:.3f}): {' '.join(top)}")
    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 2.2))
    ax.imshow(phi[rows[np.argsort(cols)]], aspect="auto", cmap="viridis")
    ax.set_yticks(range(K), names)
    ax.set_xticks(range(len(VOCAB)), VOCAB, rotation=90, fontsize=6)
    ax.set_title("LDA by VMP: recovered topics E[φ_k] (rows matched to the true topics)", fontsize=8)
    path = OUT / f"lda_topics{'_small' if small else ''}.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    print(f"figure: {path}")
    return {"tv": tv[rows, cols], "elbo_trace": result.elbo_trace, "matched": cols}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    main(args.small, args.seed)
