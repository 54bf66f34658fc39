"""Forward samplers of the scalar Gaussian family and its heavy-tailed kin.

* ``Gaussian``: x = m + ε/√τ, ε ~ N(0, 1), with the mean m and precision τ of its edges at the draw.
* ``StudentT`` (``fg.student_t``, a scale mixture): y = m + ε/√(λτ), λ ~ Gam(ν/2, ν/2).
* Sites (``fg.laplace_site`` and kin), drawn as the observation model they define: location = x + noise,
  noise Laplace(0, b), b·Cauchy or b·t_ν.
* ``NormalGamma``: τ ~ Gam(a, b), w | τ ~ N(m₀, (τA)⁻¹) with A = αI or diag(α); w under the name, τ as
  ``"<name>.tau"``.  ``NormalGammaRegression``: y = Xw + ε/√τ with that block's (w, τ).
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, ModelError, Node, Plate, Variable
from factorgraph.posterior.samplers.forward import Draw, Forward, sampler


@sampler("Gaussian")
def _gaussian(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    m = s.arg(f.edges["mean"], frame, v.name)
    t = s.arg(f.edges["precision"], frame, v.name)
    m, t = np.broadcast_arrays(m, t)
    m, t = np.broadcast_to(m, full), np.broadcast_to(t, full)
    s.put(v, m + s.rng.standard_normal(full) / np.sqrt(t), full)


@sampler("StudentT")
def _student_t(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """y = mean + ε/√(λτ), λ ~ Gam(ν/2, ν/2): the scale mixture fg.student_t is built as (a learned ν from the fit)."""
    m = np.broadcast_to(s.arg(f.edges["mean"], frame, v.name), full)
    t = np.broadcast_to(s.arg(f.edges["precision"], frame, v.name), full)
    nu = float(s.hyper.get(v.name, {}).get("dof", f.params["dof"]))
    lam = s.rng.gamma(0.5 * nu, 2.0 / nu, full)
    s.put(v, m + s.rng.standard_normal(full) / np.sqrt(lam * t), full)


def _site(noise) -> Draw:
    """The sampler of a site potential: location = x + noise(rng, params, shape)."""

    def draw(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
        x = np.broadcast_to(s.arg(f.edges["x"], frame, v.name), full)
        s.put(v, x + noise(s.rng, f.params, full), full)

    return draw


sampler("LaplaceSite")(_site(lambda rng, p, shape: rng.laplace(0.0, p["scale"], shape)))
sampler("CauchySite")(_site(lambda rng, p, shape: p["scale"] * rng.standard_cauchy(shape)))
sampler("StudentTSite")(_site(lambda rng, p, shape: p["scale"] * rng.standard_t(p["dof"], shape)))


@sampler("NormalGamma")
def _normal_gamma(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """τ ~ Gam(a, b), w | τ ~ N(m₀, (τA)⁻¹): w under the name, τ as "<name>.tau"."""
    D = v.event_shape[0]
    p = f.params
    tau = s.rng.gamma(p["shape"], 1.0 / p["rate"], size=(s.S,))
    a = f.edges["precision"]
    if isinstance(a, Node):
        A = s.value(a).reshape(s.S, -1)  # (S, 1) for αI, (S, D) for ARD
    else:
        A = np.broadcast_to(np.asarray(a, float), (D,))[None, :]
    z = s.rng.standard_normal((s.S, D))
    w = np.broadcast_to(p["mean_raw"], (D,)) + z / np.sqrt(tau[:, None] * A)
    s.out[v.name] = w
    s.out[f"{v.name}.tau"] = tau


@sampler("NormalGammaRegression")
def _normal_gamma_regression(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                             full: tuple[int, ...]) -> None:
    """y = Xw + ε/√τ with (w, τ) the draws of the normal–gamma block w."""
    w = f.edges["w"]
    inner = [d for d in s.model.deterministics if d.op.name == "inner" and d.parents["w"] is w
             and tuple(d.plates) == tuple(frame)]
    if len(inner) != 1:
        raise ModelError(f"sampling: cannot tell which fg.inner(X, {w.name!r}) is the mean of {v.name!r}")
    mean = s.value(inner[0])
    tau = s.out[f"{w.name}.tau"].reshape((s.S,) + (1,) * len(frame))
    s.put(v, mean + s.rng.standard_normal(full) / np.sqrt(tau), full)
