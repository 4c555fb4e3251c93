"""The expected output of tests/gpu/column_sum_file.yaml, computed by NumPy: what `op: file` is for.

    python3 tests/gpu/file-reference/make.py    # writes X.npy and D_expected.npy beside this file
"""
import pathlib

import numpy as np

here = pathlib.Path(__file__).parent
rng = np.random.default_rng(16200)
x = rng.uniform(-1.0, 1.0, size=(16, 200)).astype(np.float32)
np.save(here / "X.npy", x)
np.save(here / "D_expected.npy", x.astype(np.float64).sum(axis=0))  # in f64, over the f32 inputs
