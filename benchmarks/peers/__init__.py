"""Other libraries' side of the benchmarks ("peers").

Each peer module builds a benchmark model with the other library's own API and returns timings and
results as a plain dict, so the benchmark drivers can put our figures and the peer's side by side.
Peer libraries are imported lazily inside the functions: importing this package never needs them.
They come with the ``bench`` extra (``pip install -e .[bench]``).

- :mod:`benchmarks.peers.bayespy_peer`: BayesPy (Bayesian linear regression with ARD, Gaussian mixture;
  the PCA, Bernoulli-mixture and LDA models of other drivers).
- :mod:`benchmarks.peers.data`: seeded synthetic data shared by every side of a comparison.
"""
