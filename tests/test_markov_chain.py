"""fg.markov_chain: exact forward–backward against hmmlearn, VB-HMM monotonicity, messages, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hmmlearn import hmm

import factorgraph as fg
from distributions import Dirichlet
from factors.markov_chain import MARKOV_CHAIN, chain_evidence, chain_posterior


def _random_hmm(rng, K, D):
    pi = rng.dirichlet(np.ones(K))
    A = rng.dirichlet(np.ones(K), size=K)
    mu = rng.normal(0.0, 2.0, (K, D))
    tau = rng.uniform(0.3, 2.0, (K, D))
    return pi, A, mu, tau


def _fixed_hmm(y, pi, A, mu, tau, lengths=None):
    """y: (N, T, D); emissions N(mu[z, d], 1/tau[z, d]) through constant gates, one factor per feature."""
    N, T, D = y.shape
    with fg.Model("fixed-hmm") as m:
        n = fg.plate("n", N)
        t = fg.plate("t", T)
        z = fg.markov_chain("z", initial=pi, transition=A, plates=[n, t], lengths=lengths)
        for d in range(D):
            fg.gaussian(f"y{d}", mean=fg.select(mu[:, d], z), precision=fg.select(tau[:, d], z), plates=[n, t],
                        observed=y[..., d])
    return m


@pytest.mark.parametrize("cov", ["diag", "spherical"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fixed_parameters_match_hmmlearn(cov, seed):
    """ELBO = log p(y) and the smoothed marginals equal hmmlearn's (score, predict_proba) to 1e-10."""
    rng = np.random.default_rng(seed)
    K, D = 2 + seed, 2
    pi, A, mu, tau = _random_hmm(rng, K, D)
    if cov == "spherical":
        tau = np.repeat(tau[:, :1], D, axis=1)
    lengths = np.array([80, 57, 31])
    T = lengths.max()
    h = hmm.GaussianHMM(K, covariance_type=cov, init_params="", params="")
    h.startprob_, h.transmat_, h.means_ = pi, A, mu
    h.covars_ = 1.0 / tau if cov == "diag" else 1.0 / tau[:, 0]
    X, _ = h.sample(int(lengths.sum()), random_state=seed)
    y = np.zeros((len(lengths), T, D))  # padding past each length: any finite filler
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for i, (s, L) in enumerate(zip(starts, lengths, strict=True)):
        y[i, :L] = X[s:s + L]
    r = fg.infer(_fixed_hmm(y, pi, A, mu, tau, lengths), max_iter=5)
    assert r.converged
    assert abs(r.elbo - h.score(X, lengths)) < 1e-10
    g = r.posterior("z").mean()
    got = np.concatenate([g[i, :L] for i, L in enumerate(lengths)])
    np.testing.assert_allclose(got, h.predict_proba(X, lengths), rtol=0, atol=1e-10)
    assert np.all(g[2, 31:] == 0.0)


def test_single_sequence_without_sequence_plate():
    rng = np.random.default_rng(5)
    pi, A, mu, tau = _random_hmm(rng, 3, 1)
    h = hmm.GaussianHMM(3, covariance_type="diag", init_params="", params="")
    h.startprob_, h.transmat_, h.means_, h.covars_ = pi, A, mu, 1.0 / tau
    X, _ = h.sample(200, random_state=3)
    with fg.Model("one") as m:
        t = fg.plate("t", 200)
        z = fg.markov_chain("z", initial=pi, transition=A, plates=[t])
        fg.gaussian("y", mean=fg.select(mu[:, 0], z), precision=fg.select(tau[:, 0], z), plates=[t],
                    observed=X[:, 0])
    r = fg.infer(m)
    assert abs(r.elbo - h.score(X)) < 1e-10
    np.testing.assert_allclose(r.posterior("z").mean(), h.predict_proba(X), atol=1e-10)


def _vb_hmm(y, K, lengths=None):
    N, T = y.shape
    with fg.Model("vb-hmm") as m:
        n = fg.plate("n", N)
        t = fg.plate("t", T)
        k = fg.plate("k", K)
        pi = fg.dirichlet("pi", np.ones(K))
        A = fg.dirichlet("A", np.ones(K), plates=[k])
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        tau = fg.gamma("tau", 1.0, 1.0, plates=[k])
        z = fg.markov_chain("z", initial=pi, transition=A, plates=[n, t], lengths=lengths)
        fg.gaussian("y", mean=mu[z], precision=tau[z], plates=[n, t], observed=y)
    return m


def test_vb_hmm_elbo_never_decreases_and_recovers_states():
    K = 3
    h = hmm.GaussianHMM(K, covariance_type="diag", init_params="", params="")
    h.startprob_ = np.ones(K) / K
    h.transmat_ = np.full((K, K), 0.05) + 0.85 * np.eye(K)
    h.means_ = np.array([[-4.0], [0.0], [4.0]])
    h.covars_ = np.full((K, 1), 0.5)
    X, states = h.sample(400, random_state=2)
    y = X[:, 0].reshape(2, 200)
    r = fg.infer(_vb_hmm(y, K, lengths=[200, 170]), max_iter=300, tol=1e-10, seed=0)
    trace = r.elbo_trace
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    assert not r.warnings
    mu = np.sort(r.posterior("mu").mean())
    np.testing.assert_allclose(mu, [-4.0, 0.0, 4.0], atol=0.3)
    Ahat = r.posterior("A").mean()
    assert np.all(np.diag(Ahat) > 0.7)


def _structured_case(rng, N=2, T=6, K=3):
    """A forward–backward q for random potentials and Dirichlet parents, plus the moments it saw."""
    lpi = Dirichlet(concentration=rng.uniform(1, 3, K)).expected_stats()[0]
    la = Dirichlet(concentration=rng.uniform(1, 3, (K, K))).expected_stats()[0]
    m = {"initial": (lpi,), "transition": (la,)}
    p = {"lengths": np.array([T] + [T - 2] * (N - 1)), "state": {}}
    p["state"]["q"] = chain_posterior(m, p, rng.normal(size=(N, T, K)))
    return m, p


@pytest.mark.parametrize("edge", ["initial", "transition"])
def test_structured_messages_are_gradients(edge):
    """With q from forward–backward held fixed, the messages to π and A are ∂E[log f]/∂E[log π], ∂E[log A]."""
    m, p = _structured_case(np.random.default_rng(3))
    msg = MARKOV_CHAIN.rules()[(edge, "vmp", "default")](m, p)[0].sum(0)  # summed over the sequences
    s = m[edge][0]
    grad = np.zeros(s.shape)
    h = 1e-6
    for idx in np.ndindex(s.shape):
        up, dn = s.copy(), s.copy()
        up[idx] += h
        dn[idx] -= h
        e_up, e_dn = chain_evidence({**m, edge: (up,)}, p), chain_evidence({**m, edge: (dn,)}, p)
        grad[idx] = (e_up.sum() - e_dn.sum()) / (2 * h)
    np.testing.assert_allclose(msg, grad, rtol=1e-6, atol=1e-8)


def _enumerated_chain(seed, K, T):
    """A short chain's q by forward–backward, with every path, its exact probability and log Z by enumeration."""
    import itertools

    rng = np.random.default_rng(seed)
    m, p = _structured_case(rng, N=1, T=T, K=K)
    p["lengths"] = np.array([T])
    phi = rng.normal(size=(1, T, K))
    q = chain_posterior(m, p, phi)
    lpi, la = m["initial"][0], m["transition"][0]
    paths = np.array(list(itertools.product(range(K), repeat=T)))
    logw = lpi[paths[:, 0]] + la[paths[:, :-1], paths[:, 1:]].sum(1) + phi[0, np.arange(T), paths].sum(1)
    logz = np.logaddexp.reduce(logw)
    return q, paths, np.exp(logw - logz), logz, rng


def test_chain_entropy_and_normaliser_by_enumeration():
    """log Z, the marginals, pair counts and H[q] of a short chain against brute-force enumeration."""
    K, T = 3, 4
    q, paths, w, logz, _ = _enumerated_chain(4, K, T)
    assert abs(q.log_normalizer[0] - logz) < 1e-12
    assert abs(q.joint_entropy[0] + (w * np.log(w)).sum()) < 1e-12
    marg = np.stack([np.bincount(paths[:, t], weights=w, minlength=K) for t in range(T)])
    np.testing.assert_allclose(q.marginals[0], marg, atol=1e-13)
    pairs = np.zeros((K, K))
    for t in range(1, T):
        np.add.at(pairs, (paths[:, t - 1], paths[:, t]), w)
    np.testing.assert_allclose(q.pair_counts[0], pairs, atol=1e-13)
    assert q.entropy().sum() == pytest.approx(q.joint_entropy[0])


def test_joint_draws_follow_the_chain_posterior_by_enumeration():
    """q.sample draws whole paths: their frequencies match the exact path probabilities of a short chain
    (a chi-square test over all K^T paths), not only the one-step marginals."""
    from scipy import stats

    K, T = 2, 4
    q, paths, w, _, rng = _enumerated_chain(7, K, T)
    S = 40000
    draws = q.sample(S, rng=3)
    assert draws.shape == (S, 1, T)
    code = (draws[:, 0, :] * K ** np.arange(T - 1, -1, -1)).sum(1)  # path index in itertools order
    observed = np.bincount(code, minlength=K ** T)
    assert stats.chisquare(observed, S * w).pvalue > 1e-3
    # the independent-steps approximation of the same marginals fails the same test (the test has power)
    indep = (rng.random((S, T)) < q.marginals[0, :, 1]).astype(int)
    code_i = (indep * K ** np.arange(T - 1, -1, -1)).sum(1)
    assert stats.chisquare(np.bincount(code_i, minlength=K ** T), S * w).pvalue < 1e-6


def test_draws_respect_lengths_and_posterior_sample_of_a_fit():
    """Steps past a sequence's length are −1 in posterior and prior draws; result.sample and fg.sample_prior
    both handle the chain."""
    rng = np.random.default_rng(2)
    pi, A, mu, tau = _random_hmm(rng, 3, 1)
    y = rng.normal(size=(2, 6, 1))
    m = _fixed_hmm(y, pi, A, mu, tau, lengths=np.array([6, 3]))
    r = fg.infer(m, progress=False)
    z = r.sample(200, seed=0)["z"]
    assert z.shape == (200, 2, 6)
    assert np.all(z[:, 1, 3:] == -1) and np.all((z[:, 1, :3] >= 0) & (z[:, 1, :3] < 3))
    assert np.all((z[:, 0] >= 0) & (z[:, 0] < 3))
    prior = fg.sample_prior(m, 300, seed=1)
    assert prior["z"].shape == (300, 2, 6) and np.all(prior["z"][:, 1, 3:] == -1)


def test_prior_draws_follow_pi_and_A():
    """fg.sample_prior on a chain with constant π and A: first-step and transition frequencies match, and with
    Dirichlet π and A one (π, A) is drawn per draw and the path follows it."""
    pi = np.array([0.2, 0.5, 0.3])
    A = np.array([[0.8, 0.1, 0.1], [0.2, 0.6, 0.2], [0.3, 0.3, 0.4]])
    with fg.Model("prior-chain") as m:
        n, t = fg.plate("n", 50), fg.plate("t", 40)
        fg.markov_chain("z", initial=pi, transition=A, plates=[n, t])
    z = fg.sample_prior(m, 40, seed=0)["z"].reshape(-1, 40)
    np.testing.assert_allclose(np.bincount(z[:, 0], minlength=3) / len(z), pi, atol=0.03)
    counts = np.zeros((3, 3))
    np.add.at(counts, (z[:, :-1].ravel(), z[:, 1:].ravel()), 1.0)
    np.testing.assert_allclose(counts / counts.sum(1, keepdims=True), A, atol=0.01)
    with fg.Model("prior-chain-dirichlet") as m2:
        k = fg.plate("k", 2)
        n, t = fg.plate("n", 1), fg.plate("t", 2000)
        P = fg.dirichlet("P", np.ones(2))
        T = fg.dirichlet("T", np.ones(2), plates=[k])
        fg.markov_chain("z", initial=P, transition=T, plates=[n, t])
    d = fg.sample_prior(m2, 30, seed=2)
    z2, T2 = d["z"][:, 0, :], d["T"]
    zscores = []  # each draw's path moves by its own A: stay frequencies against A[j, j], standardised
    for s in range(30):
        for j in range(2):
            frm = z2[s, :-1] == j
            if frm.sum() > 50:
                pj = T2[s, j, j]
                zscores.append(((z2[s, 1:][frm] == j).mean() - pj) / np.sqrt(pj * (1 - pj) / frm.sum()))
    from scipy import stats

    assert len(zscores) > 30
    assert stats.chi2.sf(np.sum(np.square(zscores)), len(zscores)) > 1e-3


# ---------------------------------------------------------------------------------- bad input
def _build(**kw):
    args = {"initial": np.ones(2) / 2, "transition": np.eye(2) * 0.5 + 0.25}
    args.update(kw)
    with fg.Model("bad"):
        n = fg.plate("n", 2)
        t = fg.plate("t", 5)
        fg.markov_chain("zz", plates=[n, t], **args)


def test_bad_transition_row_names_variable():
    with pytest.raises(fg.ModelError, match=r"'zz'.*row 1 .*sums to 1\.2"):
        _build(transition=np.array([[0.5, 0.5], [0.6, 0.6]]))


def test_negative_or_zero_lengths():
    with pytest.raises(fg.ModelError, match=r"'zz': lengths must be integers in 1\.\.5.*-1"):
        _build(lengths=[5, -1])
    with pytest.raises(fg.ModelError, match=r"'zz': lengths.*got 0"):
        _build(lengths=[0, 3])
    with pytest.raises(fg.ModelError, match=r"'zz': lengths.*got 6"):
        _build(lengths=[6, 3])


def test_mismatched_state_dimensions():
    with pytest.raises(fg.ModelError, match=r"'zz': initial has 3 states but transition has 2"):
        _build(initial=np.ones(3) / 3)
    with fg.Model("bad2"):
        t = fg.plate("t", 5)
        k = fg.plate("k", 3)
        A = fg.dirichlet("A", np.ones(2), plates=[k])
        with pytest.raises(fg.ModelError, match=r"'zz': transition 'A' must be a Dirichlet over 2 states plated"):
            fg.markov_chain("zz", initial=np.ones(2) / 2, transition=A, plates=[t])


def test_time_plate_must_come_last():
    with fg.Model("bad3"):
        t = fg.plate("t", 5)
        n = fg.plate("n", 2)
        with pytest.raises(fg.ModelError, match=r"'zz': the time plate 't' must be declared after"):
            fg.markov_chain("zz", initial=np.ones(2) / 2, transition=np.eye(2), plates=[n, t])


@pytest.mark.parametrize("seed", range(6))
def test_viterbi_kernel_is_the_best_path_by_enumeration(seed):
    """The kernel's path maximises log p̃(z) over all K^L paths of small random chains (lengths below T, a
    transition that forbids some moves), and its score is that maximum."""
    import itertools

    from factors.kernels.viterbi import viterbi

    rng = np.random.default_rng(seed)
    K, T = 2 + seed % 3, 5
    lengths = np.array([T, 3, 1, 4])
    phi = rng.normal(0.0, 2.0, (len(lengths), T, K))
    log_pi = np.log(rng.dirichlet(np.ones(K)))
    A = rng.dirichlet(np.ones(K), size=K)
    A[0, -1] = 0.0  # a forbidden move
    with np.errstate(divide="ignore"):
        log_A = np.log(A / A.sum(1, keepdims=True))
    path, score = viterbi(phi, log_pi, log_A, lengths)
    for n, L in enumerate(lengths):
        paths = np.array(list(itertools.product(range(K), repeat=int(L))))
        logw = log_pi[paths[:, 0]] + phi[n, np.arange(L), paths].sum(1)
        if L > 1:
            logw = logw + log_A[paths[:, :-1], paths[:, 1:]].sum(1)
        np.testing.assert_array_equal(path[n, :L], paths[np.argmax(logw)])
        assert np.all(path[n, L:] == -1)
        assert score[n] == pytest.approx(logw.max(), rel=1e-13, abs=1e-12)


def test_viterbi_path_is_not_the_steps_modes():
    """q(0,1) = q(0,2) = 0.3, q(1,0) = 0.4: the steps' modes (0, 0) are a path of probability 0; Viterbi gives
    (1, 0)."""
    from factors.kernels.forward_backward import forward_backward
    from factors.kernels.viterbi import viterbi

    with np.errstate(divide="ignore"):
        log_pi = np.log([0.6, 0.4, 0.0])
        log_A = np.log([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    phi, lengths = np.zeros((1, 2, 3)), np.array([2])
    gamma, _, _ = forward_backward(phi, log_pi, log_A, lengths)
    assert gamma[0].argmax(-1).tolist() == [0, 0]
    path, score = viterbi(phi, log_pi, log_A, lengths)
    assert path[0].tolist() == [1, 0] and score[0] == pytest.approx(np.log(0.4))


def test_result_viterbi_matches_hmmlearn_and_enumeration():
    """With π, A and the Gaussian emissions fixed, q(z) = p(z | y) and result.viterbi("z") is hmmlearn's Viterbi
    path, sequence by sequence, with log q(z*) = its log-probability minus log p(y); for a short sequence also the
    best of all K^T paths of q."""
    import itertools

    rng = np.random.default_rng(5)
    K, D = 3, 1
    pi, A, mu, tau = _random_hmm(rng, K, D)
    lengths = np.array([60, 35, 6])
    T = lengths.max()
    h = hmm.GaussianHMM(K, covariance_type="diag", init_params="", params="")
    h.startprob_, h.transmat_, h.means_, h.covars_ = pi, A, mu, 1.0 / tau
    X, _ = h.sample(int(lengths.sum()), random_state=3)
    y = np.zeros((len(lengths), T, D))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    for i, (s, L) in enumerate(zip(starts, lengths, strict=True)):
        y[i, :L] = X[s:s + L]
    r = fg.infer(_fixed_hmm(y, pi, A, mu, tau, lengths), max_iter=5)
    path, logq = r.viterbi("z", return_log_prob=True)
    assert path.shape == (3, T) and np.all(path[1, 35:] == -1) and np.all(path[2, 6:] == -1)
    q = r.posterior("z")
    for i, (s, L) in enumerate(zip(starts, lengths, strict=True)):
        best_logp, best = h.decode(X[s:s + L], algorithm="viterbi")
        np.testing.assert_array_equal(path[i, :L], best)
        assert logq[i] == pytest.approx(best_logp - h.score(X[s:s + L]), abs=1e-8)
    # the short sequence by enumeration of q: log q(z) = log p(z, y) − log p(y)
    x = y[2, :6, 0]
    paths = np.array(list(itertools.product(range(K), repeat=6)))
    ll = -0.5 * tau[paths, 0] * (x - mu[paths, 0]) ** 2 + 0.5 * np.log(tau[paths, 0] / (2 * np.pi))
    logw = np.log(pi[paths[:, 0]]) + np.log(A[paths[:, :-1], paths[:, 1:]]).sum(1) + ll.sum(1)
    np.testing.assert_array_equal(path[2, :6], paths[np.argmax(logw)])
    assert np.exp(logq[2]) == pytest.approx(np.exp(logw.max() - np.logaddexp.reduce(logw)), rel=1e-9)
    assert q.viterbi().tolist() == path.tolist()
    with pytest.raises(fg.ModelError, match=r"viterbi: 'mu' is not a hidden Markov chain"):
        with fg.Model("plain") as m:
            fg.gaussian("x", fg.gaussian("mu", 0.0, precision=1.0), precision=1.0, observed=0.5)
        fg.infer(m).viterbi("mu")
