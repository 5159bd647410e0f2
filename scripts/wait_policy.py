"""The OpenMP wait policy of the benchmark scripts; import this before torch (OpenMP reads OMP_WAIT_POLICY once,
when torch loads it).

Unset, OMP_WAIT_POLICY becomes PASSIVE: idle OpenMP threads sleep at once, which keeps timings steady on a shared
machine but slows the many small per-step kernels of an LSTM (the figures of benchmarks/RESULTS.md say by how much).
`OMP_WAIT_POLICY=default` removes the variable, so OpenMP's own default applies (threads spin a while, then sleep):
what a user who sets nothing gets. ACTIVE (spin) is passed through as it is.
"""

import os

POLICY = os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
if POLICY.lower() == "default":
    os.environ.pop("OMP_WAIT_POLICY", None)
else:
    os.environ["OMP_WAIT_POLICY"] = POLICY
