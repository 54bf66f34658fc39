"""Hidden Markov models over many sequences given as dask arrays: sharded over the sequences (each chain's
forward–backward within its chunk, the chunks cut along the sequence axis only), the fit equals the in-memory fit
of the same sequences.  Run on Dask's threaded scheduler; the million-row run on a cluster is in
tests/test_dask_million.py."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

N, T, CHUNK = 2000, 10, 150  # 20 000 emissions, 14 chunks of sequences (the last one short)
RTOL = 1e-10


@pytest.fixture(autouse=True)
def threaded():
    with dask.config.set(scheduler="threads"):
        yield


def _states(n=N, seed=0):
    rng = np.random.default_rng(seed)
    A = np.array([[0.9, 0.1], [0.2, 0.8]])
    z = np.zeros((n, T), int)
    z[:, 0] = rng.integers(0, 2, n)
    for t in range(1, T):
        z[:, t] = rng.random(n) < A[z[:, t - 1], 1]
    return z, rng


def _sequences(emission):
    z, rng = _states()
    if emission == "gaussian":
        return np.array([-1.0, 1.5])[z] + rng.normal(size=z.shape)
    if emission == "poisson":
        return rng.poisson(np.array([1.0, 5.0])[z]).astype(float)
    return np.where(rng.random(z.shape) < 0.9, 2 * z, rng.integers(0, 4, z.shape)).astype(float)


def _same(r0, r1, names):
    assert r0.converged and r1.converged and r1.n_iter == r0.n_iter
    assert abs(r1.elbo - r0.elbo) <= RTOL * abs(r0.elbo)
    for name in names:
        for a, b in zip(r0.posterior(name).natural, r1.posterior(name).natural, strict=True):
            np.testing.assert_allclose(b, a, rtol=RTOL, atol=RTOL * np.max(np.abs(a)))
    q0, q1 = r0.posterior("z"), r1.posterior("z")
    np.testing.assert_allclose(q1.mean(), q0.mean(), atol=1e-9)
    np.testing.assert_allclose(q1.joint_entropy, q0.joint_entropy, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(q1.viterbi(), q0.viterbi())


@pytest.mark.parametrize("emission", ["gaussian", "poisson", "categorical"])
def test_hmm_of_dask_sequences_is_sharded_over_them_and_equals_the_in_memory_fit(emission):
    """The priors' data summaries come from one pass over the chunks, the sequences stay in them, every chunk runs
    forward–backward over its own sequences and the driver sums their counts into q(π), q(A) and the emissions'
    posteriors; the start (k-means++ over every step of every sequence) is the in-memory one."""
    Y = _sequences(emission)
    starts = 2 if emission == "gaussian" else 1  # the best of several starts of the same sharded data, once
    r0 = fg.models.hmm(Y, 2, emission, n_init=starts, tol=1e-12)
    r1 = fg.models.hmm(da.from_array(Y, chunks=(CHUNK, T)), 2, emission, n_init=starts, tol=1e-12)
    assert r1.sharding["plate"] == "n" and r1.sharding["chunks"] == -(-N // CHUNK)
    _same(r0, r1, ["pi", "A", {"gaussian": "mu", "poisson": "lam", "categorical": "B"}[emission]])


def _chain(Y, lengths=None):
    n_seq, n_steps = Y.shape
    with fg.Model("chain") as m:
        n, t, k = fg.plate("n", n_seq), fg.plate("t", n_steps), fg.plate("k", 2)
        z = fg.markov_chain("z", initial=fg.dirichlet("pi", np.ones(2)),
                            transition=fg.dirichlet("A", np.ones(2), plates=[k]), plates=[n, t], lengths=lengths)
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        fg.gaussian("y", mean=mu[z], precision=fg.gamma("tau", 1.0, 1.0, plates=[k])[z], plates=[n, t], observed=Y)
    return m


def test_markov_chain_of_sequences_of_different_lengths_cuts_the_lengths_with_the_chunks():
    """Each chunk's sequences keep their own lengths (the steps past them drop out, whatever their filler)."""
    Y = _sequences("gaussian")
    lengths = np.random.default_rng(3).integers(2, T + 1, N)
    r0 = fg.infer(_chain(Y, lengths), tol=1e-12, progress=False)
    r1 = fg.infer(_chain(da.from_array(Y, chunks=(CHUNK, T)), lengths), tol=1e-12, progress=False)
    _same(r0, r1, ["pi", "A", "mu", "tau"])
    assert np.all(r1.posterior("z").mean()[np.arange(T) >= lengths[:, None]] == 0.0)


def test_a_full_length_chain_sends_one_row_of_lengths_to_the_chunks():
    """Lengths all equal to the time plate travel to the chunks as one row, not one per sequence: the model each
    chunk receives does not grow with the number of sequences."""
    from schedules.sharding import find_sharding, skeleton

    sizes = []
    for n_seq in (1000, 8000):
        m = _chain(da.zeros((n_seq, T), chunks=(CHUNK, T)))
        sizes.append(len(skeleton(m, find_sharding(m))))
    assert sizes[1] - sizes[0] < 1000  # 7000 more lengths would be 56 000 bytes more


def test_data_chunked_along_the_time_plate_of_a_chain_is_refused_by_name():
    Y = _sequences("gaussian")
    with pytest.raises(fg.ModelError, match=r"MarkovChain\(z\).*runs along the sharded plate 't'.*sequence plates"):
        fg.infer(_chain(da.from_array(Y, chunks=(N, 5))), progress=False)


def test_sequences_sharded_along_a_plate_that_is_not_their_first_are_refused_by_name():
    """k-means++ draws its start over the labels' elements in order, which a chunk holds contiguously only when
    the sharded plate comes first."""
    Y = _sequences("gaussian").reshape(2, N // 2, T)
    with fg.Model("grouped") as m:
        g, n, t, k = fg.plate("g", 2), fg.plate("n", N // 2), fg.plate("t", T), fg.plate("k", 2)
        z = fg.markov_chain("z", initial=fg.dirichlet("pi", np.ones(2)),
                            transition=fg.dirichlet("A", np.ones(2), plates=[k]), plates=[g, n, t])
        fg.gaussian("y", mean=fg.gaussian("mu", 0.0, precision=0.1, plates=[k])[z], precision=1.0, plates=[g, n, t],
                    observed=da.from_array(Y, chunks=(2, CHUNK, T)))
    with pytest.raises(fg.ModelError, match=r"'z' are seeded by k-means\+\+.*sharded plate 'n' to be their first"):
        fg.infer(m, progress=False)
