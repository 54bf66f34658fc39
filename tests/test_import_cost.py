"""``import factorgraph`` loads what building a model needs, not what fitting, summarising or drawing needs:
networkx (model.graph, model.draw), scipy.stats (summary()) and the numba ufuncs of the Gaussian factor (built on
their first call) wait for their first use.  benchmarks/import_time.py prints the time and where it goes."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CODE = """
import sys
import numpy as np
import factorgraph as fg
from factors.kernels import elementwise
late = ("networkx", "scipy.stats")
print([m for m in late if m in sys.modules], elementwise.gaussian_sq_dev.ufunc is None)
with fg.Model("m") as m:
    n = fg.plate("n", 5)
    mu = fg.gaussian("mu", 0.0, precision=1.0)
    fg.gaussian("y", mean=mu, precision=1.0, plates=[n], observed=np.arange(5.0))
print([m for m in late if m in sys.modules], elementwise.gaussian_sq_dev.ufunc is None)
r = fg.infer(m)
print(elementwise.gaussian_log_density.ufunc is None, r.posterior("mu").mean(), type(m.graph).__module__)
"""


def test_heavy_imports_wait_for_their_first_use():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout.splitlines()
    assert out[0] == "[] True"  # after the import
    assert out[1] == "[] True"  # after building a model
    built, mean, graph = out[2].split()
    assert built == "False" and float(mean) == 10.0 / 6.0  # the fit built the ufuncs; N(0,1) prior, 5 rows
    assert graph.startswith("networkx")
