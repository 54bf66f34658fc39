"""The start of a sharded plate's mixture selectors: the same as in memory, the chunks computing over their rows.

In memory ``seeding.categorical_init`` starts a selector by k-means++ on the standardised gated data (missing
entries at their column's observed mean), from random topics (tokens: a gated Categorical) or from Dirichlet(1)
rows, drawing from the run's random stream.  Sharded, the driver draws the same random numbers in the same
order (``seed_selectors``), and each chunk answers for its rows (``SelectorSeeding``, a part of
``chunk_state.ChunkState``): the column sums and moments behind the standardisation, the squared distances
D²(x_n) to the chosen centres (summed, or searched for the row where the cumulative sum passes the driver's
draw) and, at the end, its rows' responsibilities, 0.9 on the nearest centre and 0.1/K on each, the ties
broken by its rows' own draws of the noise (the stream advanced past the rows before the chunk); Dirichlet
rows and token topics likewise.  A selector whose components have distinct priors (``seeding.prior_led``)
starts in each chunk from its rows' update given the priors, as in memory; the driver sums how many rows each
component is the most probable label of (``lead_selectors``) and, when some component has none, draws the
start as above after the other selectors' draws and names its clusters after the priors from the chunks' sums
of agreement.  So a sharded fit starts where the in-memory one does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical
from factorgraph.graph.nodes import ModelError

from .seeding import (
    agreement,
    gated_rows,
    observed_centre,
    prior_names,
    token_responsibilities,
    token_selector,
    token_topics,
)
from .sharding import Sharding, is_local

_DRAW_BLOCK = 1 << 16  # rows of random draws made at a time when a chunk replays the stream before its rows


class SelectorSeeding:
    """The chunk's side of the seeding, a part of ``ChunkState`` (it reads the chunk's compiled model ``c``, its
    plate index ``p``, local ``init``, ``rows``, ``n_total``, ``plate_name`` and the cache ``_data``)."""

    def seeded(self) -> list[tuple[str, str, bool, bool]]:
        """The mixture selectors on the plate whose start the chunks must agree on (``seed_selectors``), in the order
        ``Engine.initialise`` draws their starts in memory, each with how it is drawn: "kmeans" (k-means++ on a
        gated observed output, missing entries at their column's observed mean), "tokens" (one-hot rows of a gated
        Categorical, one word per label: responsibilities from random topics the driver draws) or "dirichlet"
        (Dirichlet(1) rows); whether it starts from the components' distinct priors instead (``prior_led``, drawn
        only if that start leaves a component without a row) and whether this chunk observes some of its labels."""
        c = self.c
        self.eng.start_parameters({**self.options["init"], **self.init})  # the components' starts, for prior_led
        out = []
        for v in c.model.variables.values():
            if (v not in c.latent or not is_local(v, self.p) or v.name in self.init or v.name in c.dropped
                    or id(v) not in c.selector_factors or v.family not in (Categorical, Bernoulli)):
                continue
            tokens = token_selector(v, c.selector_factors[id(v)])
            kind = "tokens" if tokens else "kmeans" if self._raw(v.name) is not None else "dirichlet"
            out.append((v.name, kind, self.eng.prior_led(v), v.mask is not None and bool(v.mask.any())))
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
        if op in ("prior_support", "prior_scores", "set_start"):
            return self._prior_op(op, self.c.model.variables[name], cmd)
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
        # (m data rows per row of the plate: a chain's steps) take the draws from start·m·K on
        bits = np.random.PCG64()
        bits.state = cmd[4]
        K = D2.shape[1]
        bits.advance(self.rows[0] * (len(x) // (self.rows[1] - self.rows[0])) * K)
        D2 = D2 + np.random.Generator(bits).random(D2.shape) * 1e-9 * (1.0 + cmd[5])
        r = np.full(D2.shape, 0.1 / K)
        r[np.arange(len(x)), D2.argmin(-1)] += 0.9
        v = self.c.model.variables[name]
        return r.reshape(v.shape + (K,))[..., 1] if v.family is Bernoulli else r.reshape(v.shape + (K,))


    def _prior_op(self, op: str, v, cmd: tuple) -> Any:
        """A selector started from its components' distinct priors: "prior_support", how many of the chunk's rows
        each component is the most probable label of; "prior_scores", the rows' scores s_nk under the priors;
        "set_start", the drawn start that replaces it (``lead_selectors``)."""
        eng = self.eng
        if op == "set_start":
            eng._set_start(v, cmd[2])
            return None
        if op == "prior_scores":
            return eng.prior_scores(v)
        r = np.asarray(eng.q[v.name].mean())
        r = (r if v.family is Categorical else np.stack([1.0 - r, r], axis=-1)).reshape(-1, cmd[2])
        return np.bincount(r[r.sum(-1) > 0].argmax(-1), minlength=cmd[2])


def seed_selectors(backend, sh: Sharding, names: list[tuple], rng: np.random.Generator, model) -> list[dict]:
    """Start each mixture selector on the plate as ``seeding.categorical_init`` does in memory (k-means++ on
    the standardised gated data), the chunks computing their rows' distances and the driver drawing: the same
    random numbers in the same order, so the sharded fit starts where the in-memory one does.  Those that start
    from their components' distinct priors are left to the chunks (``lead_selectors``)."""
    seeds: list[dict] = [{} for _ in range(sh.n_chunks)]
    for name, kind, led, _ in names:
        if not led:
            for i, r in enumerate(_draw(backend, sh, name, kind, rng, model)):
                seeds[i][name] = r
    return seeds


def lead_selectors(backend, sh: Sharding, names: list[tuple], rng: np.random.Generator, model) -> dict[str, str]:
    """After the chunks' start: each selector that started from its components' distinct priors keeps that start
    if every component is the most probable label of some row (summed over the chunks), else starts from the
    draw of ``seed_selectors`` (from ``rng``, after the other selectors' draws, as in memory) whose clusters are
    named after the priors (``seeding.prior_names`` on the chunks' summed agreement) unless labels are observed.
    Returns how each selector started (``Engine.starts``)."""
    n = sh.n_chunks
    starts = {}
    for name, kind, led, observed in names:
        starts[name] = "drawn"
        if not led:
            continue
        v = model.variables[name]
        K = v.event_shape[0] if v.event_shape else 2
        counts = sum(o[0] for o in backend.call([[("prior_support", name, K)]] * n))
        if np.all(counts > 0):
            starts[name] = "priors"
            continue
        rs = [r if v.family is Categorical else np.stack([1.0 - r, r], axis=-1)
              for r in _draw(backend, sh, name, kind, rng, model)]
        if not observed:
            scores = [o[0] for o in backend.call([[("prior_scores", name)]] * n)]
            order = prior_names(sum(agreement(r, s) for r, s in zip(rs, scores, strict=True)))
            rs = [r[..., order] for r in rs]
            starts[name] = "drawn, named after the priors"
        backend.call([[("set_start", name, r)] for r in rs])
    return starts


def _draw(backend, sh: Sharding, name: str, kind: str, rng: np.random.Generator, model) -> list[np.ndarray]:
    """Each chunk's rows of the drawn start of selector ``name`` (``kind``: see ``SelectorSeeding.seeded``), from
    ``rng`` as ``seeding.categorical_init`` draws it in memory (a Bernoulli selector: q(True))."""
    n = sh.n_chunks

    def ask(cmd: tuple, only: int | None = None) -> list:
        out = backend.call([[cmd] if only is None or i == only else [] for i in range(n)])
        return [o[0] if o else None for o in out]

    v = model.variables[name]
    K = v.event_shape[0] if v.event_shape else 2
    # the data rows are v's elements in C order (a chain's z: every step of every sequence); with the sharded
    # plate first, chunk i holds the rows a·m … b·m − 1 (m elements per row of the plate)
    m = int(np.prod(v.shape, dtype=int)) // sh.plate.size
    bounds = [(a * m, b * m) for a, b in sh.bounds]

    def row(idx: int, scale: np.ndarray) -> np.ndarray:
        i = next(k for k, (a, b) in enumerate(bounds) if a <= idx < b)
        return ask(("row", name, scale, idx - bounds[i][0]), only=i)[i]

    if kind == "tokens":  # random topics drawn here as in memory, each chunk's rows' responsibilities from them
        lam = token_topics(rng, K, ask(("width", name), only=0)[0])
        return ask(("tokens", name, lam))
    if kind == "dirichlet":  # rng.dirichlet(ones(K), size=v.shape) in memory: the chunks take their rows
        out = ask(("dirichlet", name, rng.bit_generator.state))
        size = int(np.prod(v.shape, dtype=int))
        for a in range(0, size, _DRAW_BLOCK):  # the driver's stream moves past the same draws
            rng.dirichlet(np.ones(K), size=min(_DRAW_BLOCK, size - a))
        return out
    if m > 1 and v.plates[0] is not sh.plate:
        raise ModelError(f"the labels {name!r} are seeded by k-means++ over their elements in order, which needs the "
                         f"sharded plate {sh.plate.name!r} to be their first plate; they have plates "
                         f"{[p.name for p in v.plates]}: declare {sh.plate.name!r} first, or give init={{{name!r}: …}}")
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
            idx = bounds[i][0] + min(j, bounds[i][1] - bounds[i][0] - 1)
        else:
            idx = int(rng.integers(N))
        centres.append(row(idx, scale))
    top = max(ask(("d2max", name, scale, centres)))
    state = rng.bit_generator.state
    rng.bit_generator.advance(N * K)  # the draws of the tie-breaking noise, taken by the chunks
    return ask(("assign", name, scale, centres, state, top))
