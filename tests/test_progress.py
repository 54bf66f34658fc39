"""Progress bars: shown in a pseudo-terminal (tqdm, sweeps and handler stages), silent otherwise."""

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import numpy as np
import factorgraph as fg
rng = np.random.default_rng(0)
X = rng.standard_normal((40, 2))
y = (X @ np.array([1.5, -1.0]) + 0.3 * rng.standard_normal(40) > 0).astype(float)
with fg.Model("tiny-logit") as m:
    n = fg.plate("n", 40)
    w = fg.mv_gaussian("w", 0.0, 1.0, dim=2)
    fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y)
r = fg.infer(m, handlers={"w": fg.%s}, max_iter=3%s)
print("DONE", r.n_iter, flush=True)
"""


def _run(handler: str, extra: str = "", tty: bool = True, env_extra: dict | None = None,
         code: str | None = None) -> tuple[str, str]:
    """Run the fit (or ``code``) in a subprocess with stderr a pseudo-terminal (or a pipe); returns (stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_extra or {})}
    code = code or SCRIPT % (handler, extra)
    if not tty:
        p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout, p.stderr
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif p.poll() is not None:
            break
    out = p.stdout.read().decode()
    p.wait(timeout=300)
    os.close(master)
    assert p.returncode == 0, b"".join(chunks).decode(errors="replace")
    return out, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("handler, stage", [("MVI('lr', n_samples=200)", "MVI iterations"),
                                            ("BVI(n_components=2, n_elbo_samples=200, n_final_samples=400)",
                                             "BVI components")])
def test_progress_bar_in_a_terminal(handler, stage):
    out, err = _run(handler)
    assert "DONE" in out
    assert "tiny-logit" in err and "sweep" in err and "ELBO" in err  # the tqdm bar of the sweeps
    assert stage in err  # the handler's own bar
    assert "|" in err and "%" in err  # drawn by tqdm, not the fallback line


def test_silent_when_stderr_is_not_a_terminal():
    out, err = _run("MVI('lr', n_samples=200)", tty=False)
    assert "DONE" in out
    assert err == ""


def test_progress_false_silences_a_terminal():
    out, err = _run("MVI('lr', n_samples=200)", extra=", progress=False")
    assert "DONE" in out
    assert "ELBO" not in err and "MVI iterations" not in err


EARLY = """
import numpy as np
import factorgraph as fg
with fg.Model("early") as m:
    n = fg.plate("n", 20)
    mu = fg.gaussian("mu", 0.0, precision=1e-2)
    fg.gaussian("x", mean=mu, precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=np.linspace(-1, 1, 20))
r = fg.infer(m, max_iter=200)
print("DONE", r.n_iter, r.converged, flush=True)
"""


def test_a_fit_that_converges_early_closes_its_bar_at_the_sweeps_made():
    """The bar of a fit that converges after a few of its 200 sweeps ends at n/n, 100 % (it stayed at
    "6 % | 12/200")."""
    out, err = _run("", code=EARLY)
    _, n, converged = out.split()
    assert converged == "True" and 1 < int(n) < 200
    final = err.replace("\r", "\n").strip().splitlines()[-1]
    assert f"{n}/{n}" in final and "100%" in final, final


@pytest.mark.slow
def test_progress_true_forces_it():
    out, err = _run("MVI('lr', n_samples=200)", extra=", progress=True", tty=False)
    assert "tiny-logit" in err and "MVI iterations" in err


@pytest.mark.slow
def test_fallback_line_without_tqdm(tmp_path):
    # a directory that shadows tqdm with a module that fails to import: the plain stderr line is used
    (tmp_path / "tqdm").mkdir()
    (tmp_path / "tqdm" / "__init__.py").write_text("raise ImportError('tqdm hidden for this test')\n")
    out, err = _run("MVI('lr', n_samples=200)", env_extra={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert "DONE" in out
    assert "tiny-logit: " in err and "ELBO" in err and "%|" not in err
    out, err = _run("", code=EARLY, env_extra={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    n = out.split()[1]
    assert err.replace("\r", "\n").strip().splitlines()[-1].startswith(f"early: {n}/{n}  ELBO")


def _logit_model():
    import numpy as np

    import factorgraph as fg

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2))
    y = (X @ np.array([1.5, -1.0]) + 0.3 * rng.standard_normal(30) > 0).astype(float)
    with fg.Model("tiny-logit") as m:
        n = fg.plate("n", 30)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y)
    return m


@pytest.mark.parametrize("handler, stage", [
    (lambda fg: fg.AIKL(base="skew_normal", lattice=64, maxiter=40, rounds=2), "AIKL lattice rounds"),
    (lambda fg: fg.Laplace(learn="prior_precision"), "hyperparameter search")])
def test_every_handler_stage_has_a_bar(handler, stage, capsys):
    import factorgraph as fg

    fg.infer(_logit_model(), handlers={"w": handler(fg)}, max_iter=2, progress=True)
    err = capsys.readouterr().err
    assert stage in err and "tiny-logit" in err
    fg.infer(_logit_model(), handlers={"w": handler(fg)}, max_iter=2)  # stderr is not a terminal
    assert capsys.readouterr().err == ""


def test_approximate_shows_the_handler_bar(capsys):
    import numpy as np

    import factorgraph as fg

    fg.approximate(lambda w: -0.5 * np.sum(w**2, -1), np.zeros(2), fg.MVI("lr", n_samples=100), progress=True)
    assert "MVI iterations" in capsys.readouterr().err
    fg.approximate(lambda w: -0.5 * np.sum(w**2, -1), np.zeros(2), fg.MVI("lr", n_samples=100))
    assert capsys.readouterr().err == ""
