"""factorgraph.plots on the Agg backend: the plotted data are the fit's (trace, evidence, error bars, densities)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from scipy import stats  # noqa: E402

import factorgraph as fg  # noqa: E402
from factorgraph import plots  # noqa: E402


def _fit(name="a", prec=1.0, seed=0):
    x = np.random.default_rng(seed).normal(1.0, 1.0, size=20)
    with fg.Model(name) as m:
        n, g = fg.plate("n", 20), fg.plate("g", 2)
        mu = fg.gaussian("mu", 0.0, precision=prec)
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("b", 0.0, precision=1.0, plates=[g])
        fg.gaussian("x", mu, precision=tau, plates=[n], observed=x)
    return fg.infer(m)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_elbo_trace_lines_are_the_traces():
    a, b = _fit("a"), _fit("b", prec=100.0)
    ax = plots.elbo_trace({"a": a, "b": b})
    lines = ax.get_lines()
    assert [ln.get_label() for ln in lines] == ["a", "b"]
    for ln, r in zip(lines, (a, b), strict=True):
        np.testing.assert_array_equal(ln.get_ydata(), r.elbo_trace)
        np.testing.assert_array_equal(ln.get_xdata(), np.arange(1, len(r.elbo_trace) + 1))
    ax1 = plots.elbo_trace(a, relative=True)
    gap = a.elbo_trace[-1] - a.elbo_trace
    np.testing.assert_allclose(ax1.get_lines()[0].get_ydata(), gap[gap > 0])


def test_evidence_comparison_bars_and_error_bars():
    a, b = _fit("a"), _fit("b", prec=100.0)
    c = fg.compare({"a": a, "b": b})
    ax = plots.evidence_comparison(c)
    np.testing.assert_allclose([p.get_height() for p in ax.patches], [a.elbo, b.elbo])
    assert not any(isinstance(k, ErrorbarContainer) for k in ax.containers)  # exact figures: no error bars
    # a figure with a Monte Carlo standard error gets a bar of ± k se
    se = np.array([0.0, 0.3])
    c2 = fg.Comparison(["a", "b"], np.array([-10.0, -11.0]), ["lower bound"] * 2, np.array([0.0, -1.0]),
                       np.array([0.73, 0.27]), "", se)
    _, ax2 = plt.subplots()
    assert plots.evidence_comparison(c2, ax=ax2, k=2.0) is ax2
    np.testing.assert_allclose([p.get_height() for p in ax2.patches], [-10.0, -11.0])
    (eb,) = [k for k in ax2.containers if isinstance(k, ErrorbarContainer)]
    seg = eb.lines[2][0].get_segments()
    assert len(seg) == 1
    np.testing.assert_allclose(seg[0][:, 1], [-11.0 - 0.6, -11.0 + 0.6])
    ax3 = plots.evidence_comparison({"a": a, "b": b}, relative=True)
    np.testing.assert_allclose([p.get_height() for p in ax3.patches], c.log_bayes_factor)


def test_posterior_marginals_against_references():
    r = _fit()
    ref_draws = np.random.default_rng(1).normal(1.0, 0.3, size=5000)
    fig = plots.posterior_marginals(r, ["mu", "b"], reference={"mu": ref_draws, "b": (np.zeros(2), np.ones(2))})
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in axes] == ["mu", "b[0]", "b[1]"]
    q = r.posterior("mu")
    ln = axes[0].get_lines()[0]
    np.testing.assert_allclose(ln.get_ydata(), stats.norm.pdf(ln.get_xdata(), q.mean(), q.std()), rtol=1e-10)
    heights = np.array([p.get_height() for p in axes[0].patches])
    assert len(heights) == 40 and np.sum(heights * (axes[0].patches[0].get_width())) == pytest.approx(1.0)
    qb = r.posterior("b")
    for j in range(2):
        q_line, ref_line = axes[1 + j].get_lines()
        x = q_line.get_xdata()
        np.testing.assert_allclose(q_line.get_ydata(), stats.norm.pdf(x, qb.mean()[j], qb.std()[j]), rtol=1e-10)
        np.testing.assert_allclose(ref_line.get_ydata(), stats.norm.pdf(x, 0.0, 1.0), rtol=1e-10)
    # a density function as the reference
    fig2 = plots.posterior_marginals(r, "tau", reference={"tau": lambda x: stats.gamma.pdf(x, 2.0)})
    q_line, ref_line = fig2.axes[0].get_lines()
    qt = r.posterior("tau")
    np.testing.assert_allclose(q_line.get_ydata(), stats.gamma.pdf(q_line.get_xdata(), qt.shape, scale=qt.scale))
    np.testing.assert_allclose(ref_line.get_ydata(), stats.gamma.pdf(ref_line.get_xdata(), 2.0))


def test_posterior_marginals_of_a_sampled_marginal_and_bad_names():
    with fg.Model("sc") as m:
        n = fg.plate("n", 15)
        s = fg.half_cauchy("s", 1.0)
        fg.gaussian("x", 0.0, sd=s, plates=[n], observed=np.random.default_rng(3).normal(0, 2, 15))
    r = fg.infer(m, fg.NCVMP())
    fig = plots.posterior_marginals(r, ["s"], reference={"s": (2.0, 0.4)})
    q_line = fig.axes[0].get_lines()[0]
    draws = r.sample(4000, 0)["s"]
    np.testing.assert_allclose(q_line.get_ydata(), stats.gaussian_kde(draws)(q_line.get_xdata()))
    with pytest.raises(fg.ModelError, match="'nope' is not a latent variable"):
        plots.posterior_marginals(r, ["nope"])


def test_quickstart_plot_flag_saves_the_evidence_chart():
    from demos import quickstart

    out = quickstart.main(small=True, plot=True)
    assert out["figure"].exists() and out["figure"].stat().st_size > 0


def test_evidence_comparison_of_loo():
    a, b = _fit("a"), _fit("b", prec=100.0)
    c = fg.compare({"a": a, "b": b}, loo=True)
    ax = plots.evidence_comparison(c, loo=True, k=1.0)
    np.testing.assert_allclose([p.get_height() for p in ax.patches], c.elpd_loo)
    (eb,) = [x for x in ax.containers if isinstance(x, ErrorbarContainer)]
    seg = eb.lines[2][0].get_segments()
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in seg], 2.0 * c.elpd_loo_se)
    ax2 = plots.evidence_comparison({"a": a, "b": b}, loo=True, relative=True)
    np.testing.assert_allclose([p.get_height() for p in ax2.patches], c.elpd_loo - c.elpd_loo.max())
    with pytest.raises(fg.ModelError, match="loo=True"):
        plots.evidence_comparison(fg.compare({"a": a}), loo=True)


def test_agreement_marginals_draw_q_over_the_gibbs_histogram():
    """Each panel of plots.agreement_marginals holds q's density (the fit's own pdf on the grid) and the Gibbs draws'
    histogram (every chain's draws pooled, normalised to a density)."""
    y = np.random.default_rng(0).normal(1.0, 0.7, 30)
    with fg.Model("mean-and-precision") as m:
        n = fg.plate("n", len(y))
        mu = fg.gaussian("mu", 0.0, precision=0.1)
        tau = fg.gamma("tau", 2.0, 1.0)
        fg.gaussian("y", mu, precision=tau, plates=[n], observed=y)
    vmp = fg.infer(m)
    gibbs = fg.infer(m, algorithm=fg.Gibbs(draws=500, burn=100, chains=2, seed=0))
    fig = plots.agreement_marginals(vmp, gibbs)
    axes = [a for a in fig.axes if a.get_visible()]
    assert [a.get_title() for a in axes] == ["mu", "tau"]
    for a, name in zip(axes, ["mu", "tau"], strict=True):
        line = a.get_lines()[0]
        assert line.get_label() == "q"
        x, d = line.get_data()
        np.testing.assert_allclose(d, np.exp(vmp.posterior(name).logpdf(x)), rtol=1e-8)
        bars = [p for p in a.patches if p.get_height() > 0]
        assert len(bars) > 5
        assert sum(p.get_height() * p.get_width() for p in bars) == pytest.approx(1.0)  # a density
        draws = gibbs.draws[name].ravel()
        edges = [p.get_x() for p in a.patches]
        assert min(edges) == pytest.approx(draws.min()) and len(a.patches) == 40  # of every chain's draws
    plt.close(fig)
    with pytest.raises(fg.ModelError, match="no draws of"):
        plots.agreement_marginals(vmp, gibbs, names=["nope"])
