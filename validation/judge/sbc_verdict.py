"""The SBC verdict of a set of ranks: calibrated, miscalibrated, or too few simulations to
call - with what the run could have seen (an array layer: ranks in, a verdict out).

The uniformity test (``rank_uniformity.py``) decides "miscalibrated" at its stated
false-alarm rate at any number of simulations S. Staying inside the bands is called
"calibrated" only when the run's power (``rank_power.py``) reaches
:data:`~zoo.validation.judge.rank_power.USELESS`: a run too small to have seen a mean one
posterior sd off or an sd halved is "too few simulations to call". The runners add what
only they know (how many fits failed, were redrawn or returned point estimates) to the
reason this module writes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..base.result_format import record_json
from .rank_power import POWER_PROBABILITY, SIMS_GRID, USELESS, RankPower, detectable_defects, simulations_needed
from .rank_uniformity import CALIBRATED, FALSE_ALARM, MISCALIBRATED, UniformityTest, describe_failure, uniformity

#: the ranks stayed inside their bands, but the run was too small to have seen a gross
#: defect (:data:`~zoo.validation.judge.rank_power.USELESS`): not a verdict of "calibrated"
TOO_FEW = "too few simulations to call"
#: no ranks to judge (point estimates, another model, too few successful fits): the reason says which
NOT_APPLICABLE = "not applicable"
#: the fewest ranked simulations the uniformity test is run on
MIN_RANKED = 10


@dataclass(frozen=True)
class RankVerdict:
    """The verdict of a set of ranks (:func:`rank_verdict`): ``status``, ``reason`` in words,
    the uniformity test that decided it and the run's power (with ``simulations_needed`` set
    where the run was too small)."""

    status: str
    reason: str
    uniformity: UniformityTest
    power: RankPower

    def to_json(self) -> dict[str, Any]:
        """The verdict as plain JSON, its fields in their declared order with the uniformity
        test and the power nested as objects (their own ``to_json`` forms)."""
        return record_json(self)


def rank_verdict(ranks, n_draws: int, names: list[str], *, false_alarm: float = FALSE_ALARM,
                 seed: int = 0) -> RankVerdict:
    """The verdict of (S, K) ranks in 0..``n_draws`` (S >= :data:`MIN_RANKED`): ``status``
    (:data:`~zoo.validation.judge.rank_uniformity.CALIBRATED`,
    :data:`~zoo.validation.judge.rank_uniformity.MISCALIBRATED` or :data:`TOO_FEW`), ``reason``
    in words, the uniformity test, and the run's power with ``simulations_needed`` (the S a
    useful run of this L and K needs, where the run was too small; else None). The reason does not end
    with the power line: the runner appends its own notes first, then ``power.line``."""
    ranks = np.asarray(ranks)
    S = len(ranks)
    if S < MIN_RANKED:
        raise ValueError(f"the uniformity test needs at least {MIN_RANKED} ranked simulations; got {S}")
    test = uniformity(ranks, n_draws, names=names, false_alarm=false_alarm, seed=seed)
    K = test.n_quantities
    power = detectable_defects(S, n_draws, K, false_alarm)
    inside = (f"the ranks of all {K} quantities stay inside their simultaneous {100 * test.band_level:.2f}% "
              f"bands over {S} simulations ({100 * false_alarm:g}% family-wise false-alarm rate)")
    needed = None
    if test.status == MISCALIBRATED:
        # a detection keeps its false-alarm rate at any S: it stands however small the run
        status = MISCALIBRATED
        reason = ("miscalibrated: " + "; ".join(describe_failure(q) for q in test.worst)
                  + f" ({sum(not q.inside for q in test.quantities)} of {K} quantities "
                  f"outside their bands over {S} simulations)")
    elif power.useful:
        status = CALIBRATED
        reason = f"calibrated: {inside}"
    else:
        status = TOO_FEW
        enough = simulations_needed(n_draws, K, false_alarm)
        needed = None if enough is None else enough.n_sims
        reason = (f"{TOO_FEW}: {inside}, but a run this small misses a mean off by "
                  f"{USELESS['mean_shift_sd']:g} posterior sd or an sd x{USELESS['sd_factor_narrow']:g} more than "
                  f"{100 * (1 - POWER_PROBABILITY):.0f}% of the time; "
                  + (f"{needed} simulations would be enough (they detect {' or '.join(enough.detected_sizes()[0])} "
                     f"{100 * POWER_PROBABILITY:.0f}% of the time)" if enough is not None else
                     f"not even {SIMS_GRID[-1]} simulations would be enough with {K} quantities"))
    return RankVerdict(status=status, reason=reason, uniformity=test, power=replace(power, simulations_needed=needed))


__all__ = ["rank_verdict", "RankVerdict", "CALIBRATED", "MISCALIBRATED", "TOO_FEW", "NOT_APPLICABLE", "MIN_RANKED"]
