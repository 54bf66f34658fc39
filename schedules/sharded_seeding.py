"""The start of a sharded plate's mixture selectors: the same as in memory, the chunks computing over their rows.

In memory ``seeding.categorical_init`` starts a selector by k-means++ on the standardised gated data (missing
entries at their column's observed mean), from random topics (tokens: a gated Categorical) or from Dirichlet(1)
rows, drawing from the run's random stream.  Sharded, the driver draws the same random numbers in the same
order (``seed_selectors``), and each chunk answers for its rows (``SelectorSeeding``, a part of
``chunk_state.ChunkState``): the column sums and moments behind the standardisation, the squared distances
D²(x_n) to the chosen centres (summed, or searched for the row where the cumulative sum passes the driver's
draw) and, at the end, its rows' responsibilities, 0.9 on the nearest centre and 0.1/K on each, the ties
broken by its rows' own draws of the noise (the stream advanced past the rows before the chunk); Dirichlet
rows and token topics likewise.  So a sharded fit starts where the in-memory one does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical

from .seeding import gated_rows, observed_centre, token_responsibilities, token_selector, token_topics
from .sharding import Sharding, is_local

_DRAW_BLOCK = 1 << 16  # rows of random draws made at a time when a chunk replays the stream before its rows


class SelectorSeeding:
    """The chunk's side of the seeding, a part of ``ChunkState`` (it reads the chunk's compiled model ``c``, its
    plate index ``p``, local ``init``, ``rows``, ``n_total``, ``plate_name`` and the cache ``_data``)."""

    def seeded(self) -> list[tuple[str, str]]:
        """The mixture selectors on the plate whose start the chunks must agree on (``seed_selectors``), in the order
        ``Engine.initialise`` draws their starts in memory, each with how: "kmeans" (k-means++ on a gated
        observed output, missing entries at their column's observed mean), "tokens" (one-hot rows of a gated
        Categorical, one word per label: responsibilities from random topics the driver draws) or "dirichlet"
        (Dirichlet(1) rows)."""
        c = self.c
        out = []
        for v in c.model.variables.values():
            if (v not in c.latent or not is_local(v, self.p) or v.name in self.init or v.name in c.dropped
                    or id(v) not in c.selector_factors or v.family not in (Categorical, Bernoulli)):
                continue
            tokens = token_selector(v, c.selector_factors[id(v)])
            out.append((v.name, "tokens" if tokens else "kmeans" if self._raw(v.name) is not None else "dirichlet"))
        return out

    def _raw(self, name: str) -> np.ndarray | None:
        if name not in self._data:
            v = self.c.model.variables[name]
            self._data[name] = gated_rows(v, self.c.selector_factors[id(v)])
        return self._data[name]

    def _dirichlet(self, name: str, state: dict) -> np.ndarray:
        """This chunk's rows of the Dirichlet(1) start ``seeding.categorical_init`` draws for all rows in memory
        (``rng.dirichlet(ones(K), size=v.shape)``, row after row from ``state``): the draws of the rows before
        the chunk are made and dropped, a block of rows at a time (a gamma draw takes a variable number of
        random numbers, so the stream cannot be advanced by a count)."""
        v = self.c.model.variables[name]
        K = v.event_shape[0] if v.event_shape else 2
        bits = np.random.PCG64()
        bits.state = state
        rng = np.random.Generator(bits)
        axis = v.plates.index(self.c.model.plates[self.plate_name])
        shape = list(v.shape)
        shape[axis] = self.n_total
        rest = int(np.prod(shape[1:], dtype=int))
        if axis == 0:  # the rows before the chunk, then the chunk's
            skip = self.rows[0] * rest
            for a in range(0, skip, _DRAW_BLOCK):
                rng.dirichlet(np.ones(K), size=min(_DRAW_BLOCK, skip - a))
            r = rng.dirichlet(np.ones(K), size=tuple(v.shape))
        else:
            r = np.take(rng.dirichlet(np.ones(K), size=tuple(shape)), np.arange(*self.rows), axis=axis)
        return r[..., 1] if v.family is Bernoulli else r

    def seed_op(self, cmd: tuple) -> Any:
        op, name = cmd[0], cmd[1]
        if op == "dirichlet":
            return self._dirichlet(name, cmd[2])
        x = self._raw(name)
        if op == "width":
            return x.shape[1]
        if op == "tokens":  # the rows' responsibilities from the driver's random topics, as in memory
            v = self.c.model.variables[name]
            r = token_responsibilities(x, cmd[2]).reshape(v.shape + (cmd[2].shape[0],))
            return r[..., 1] if v.family is Bernoulli else r
        if op == "observed_sums":  # per column: how many entries are observed, and their sum
            seen = ~np.isnan(x)
            return seen.sum(0), np.where(seen, x, 0.0).sum(0)
        if op == "fill":  # missing entries at the columns' observed means over all chunks, as in memory
            self._data[name] = x = np.where(np.isnan(x), cmd[2], x)
            return None
        if op == "moments":
            return len(x), x.sum(0)
        if op == "centred":
            return ((x - cmd[2]) ** 2).sum(0)
        x = x / cmd[2]
        if op == "row":
            return x[cmd[3]]
        d2 = np.min([((x - c) ** 2).sum(-1) for c in cmd[3]], axis=0)
        if op == "d2":
            return d2.sum()
        if op == "pick":
            cdf = np.cumsum(d2 / cmd[4])
            return int(np.searchsorted(cdf, cmd[5], side="right"))
        D2 = np.stack([((x - c) ** 2).sum(-1) for c in cmd[3]], axis=-1)
        if op == "d2max":
            return D2.max()
        # "assign": the in-memory tie-breaking noise is rng.random((N, K)) in row order; this chunk's rows
        # take the draws from start·K on
        bits = np.random.PCG64()
        bits.state = cmd[4]
        K = D2.shape[1]
        bits.advance(self.rows[0] * K)
        D2 = D2 + np.random.Generator(bits).random(D2.shape) * 1e-9 * (1.0 + cmd[5])
        r = np.full(D2.shape, 0.1 / K)
        r[np.arange(len(x)), D2.argmin(-1)] += 0.9
        v = self.c.model.variables[name]
        return r.reshape(v.shape + (K,))[..., 1] if v.family is Bernoulli else r.reshape(v.shape + (K,))


def seed_selectors(backend, sh: Sharding, names: list[tuple[str, str]], rng: np.random.Generator, model) -> list[dict]:
    """Start each mixture selector on the plate as ``seeding.categorical_init`` does in memory (k-means++ on
    the standardised gated data), the chunks computing their rows' distances and the driver drawing: the same
    random numbers in the same order, so the sharded fit starts where the in-memory one does."""
    n = sh.n_chunks
    seeds: list[dict] = [{} for _ in range(n)]

    def ask(cmd: tuple, only: int | None = None) -> list:
        out = backend.call([[cmd] if only is None or i == only else [] for i in range(n)])
        return [o[0] if o else None for o in out]

    def row(idx: int, scale: np.ndarray) -> np.ndarray:
        i = next(k for k, (a, b) in enumerate(sh.bounds) if a <= idx < b)
        return ask(("row", name, scale, idx - sh.bounds[i][0]), only=i)[i]

    for name, kind in names:
        v = model.variables[name]
        K = v.event_shape[0] if v.event_shape else 2
        if kind == "tokens":  # random topics drawn here as in memory, each chunk's rows' responsibilities from them
            lam = token_topics(rng, K, ask(("width", name), only=0)[0])
            for i, r in enumerate(ask(("tokens", name, lam))):
                seeds[i][name] = r
            continue
        if kind == "dirichlet":  # rng.dirichlet(ones(K), size=v.shape) in memory: the chunks take their rows
            for i, r in enumerate(ask(("dirichlet", name, rng.bit_generator.state))):
                seeds[i][name] = r
            size = int(np.prod(v.shape, dtype=int))
            for a in range(0, size, _DRAW_BLOCK):  # the driver's stream moves past the same draws
                rng.dirichlet(np.ones(K), size=min(_DRAW_BLOCK, size - a))
            continue
        sums = ask(("observed_sums", name))  # missing entries stand at their column's observed mean
        centre = observed_centre(sum(c for c, _ in sums), sum(t for _, t in sums))
        ask(("fill", name, centre))
        moments = ask(("moments", name))
        N = sum(m[0] for m in moments)
        mean = sum(m[1] for m in moments) / N
        std = np.sqrt(sum(ask(("centred", name, mean))) / N)
        scale = np.where(std > 0, std, 1.0)
        centres = [row(int(rng.integers(N)), scale)]
        for _ in range(1, K):
            sums = np.array(ask(("d2", name, scale, centres)))
            total = sums.sum()
            if total > 0:
                cum = np.cumsum(sums / total)
                t = rng.random() * cum[-1]
                i = min(int(np.searchsorted(cum, t, side="right")), n - 1)
                base = cum[i - 1] if i else 0.0
                j = ask(("pick", name, scale, centres, total, t - base), only=i)[i]
                idx = sh.bounds[i][0] + min(j, sh.bounds[i][1] - sh.bounds[i][0] - 1)
            else:
                idx = int(rng.integers(N))
            centres.append(row(idx, scale))
        top = max(ask(("d2max", name, scale, centres)))
        state = rng.bit_generator.state
        rng.bit_generator.advance(N * K)  # the draws of the tie-breaking noise, taken by the chunks
        for i, r in enumerate(ask(("assign", name, scale, centres, state, top))):
            seeds[i][name] = r
    return seeds
