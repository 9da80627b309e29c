"""An engine of your own, judged by the zoo like its own: a deliberately biased EP.

Any function with the fixed-spec contract

    fit(spec, Phi, y, *, config=None) -> Posterior

can be named where the zoo's engines are named, as ``module:function``:

    zoo compare --engines ep,examples.biased_ep:fit     # verdict against the certified NUTS
    zoo sbc --model pcvm --engine examples.biased_ep:fit  # simulation-based calibration

(run from the folder that holds ``examples/``; the command line imports from the current
folder first). In Python: ``compare(CompareConfig(engines=("ep", fit)))``.

This one takes PCVM's expectation propagation and spoils it the way a slip in a
hand derivation might: every mean moved up by 0.3 of its posterior sd and the covariance
shrunk to 0.8 of EP's (sds x 0.89). The verdict against the reference and SBC should both
call it wrong; with too few simulations SBC should say it cannot tell, not "calibrated".
"""
from __future__ import annotations

import dataclasses

import numpy as np

from zoo.inference import expectation_propagation

#: how the answer is spoiled: mean moved by this many posterior sds, covariance scaled by
MEAN_SHIFT_SD = 0.3
COVARIANCE_FACTOR = 0.8


def fit(spec, Phi, y, *, config=None):
    """PCVM's EP, then biased: a GaussianPosterior over the model's own sites."""
    exact = expectation_propagation.fit(spec, Phi, y, config=config)
    sd = np.sqrt(np.sum(np.asarray(exact.chol) ** 2, axis=1))
    return dataclasses.replace(exact, mean_vec=np.asarray(exact.mean_vec) + MEAN_SHIFT_SD * sd,
                               chol=np.asarray(exact.chol) * np.sqrt(COVARIANCE_FACTOR))
