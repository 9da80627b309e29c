"""What the lessons in ``notebooks/`` call so that their prose cannot drift from their runs.

A lesson's sentences state numbers: a sd off by some percentage, a verdict's threshold, the
draws a reference took. Typed by hand, such a number stays behind when the lesson is re-run on
another release or another data set. So a lesson never types one: the code cell that computes
it *quotes* it, formatted as the sentence will show it,

    quote(laplace_worst_sd=f"{worst['difference']:+.0%}", threshold=f"{v.threshold:.2f}")

and the markdown below marks where each quoted value stands with an HTML comment naming it,
which every notebook viewer hides::

    Laplace's worst sd is off by +68%<!--=laplace_worst_sd-->, against a threshold of ...

``notebooks/refresh.py`` executes the lesson, collects what it quoted (:func:`quoted`) and
writes each value in front of its mark, so the stored prose is always the last run's; the
test of the lessons fails when a markdown cell states a number without a mark (the few numbers
that are a lesson's own definitions - "a 90% interval" - are listed with a reason in the
notebook's metadata instead), and when a re-run quotes a value the stored prose does not show.

A sentence may also state what a run shows without a number - "both engines differ", "the
reference is certified". The code that computed it then checks it (:func:`claim`): while a lesson
is stored or checked, a run that no longer supports the sentence stops with the sentence named,
and the lesson cannot be stored until its prose says what the run shows; in a student's own run
(another JAX release, other draws) the same check warns and the lesson runs on.

A model lesson writes its model on the page as a plain NumPyro function with standard
distributions, and :func:`compare_log_densities` checks that it is the zoo's model: the same
latent sites and the same log joint density at points drawn from the model's prior.

The mark's syntax, ``VALUE<!--=name-->``, is :data:`QUOTE_MARK`; a newly written mark may stand
alone (``<!--=name-->``): the next refresh writes the value in front of it.
"""
from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass

import jax
import numpy as np
from numpyro import handlers
from numpyro.infer.util import log_density

from .models.base import as_jax

__all__ = ["QUOTE_MARK", "STRICT_CLAIMS_ENV", "ClaimNotSupported", "ClaimWarning", "LogDensityCheck", "claim", "compare_log_densities", "quote", "quoted",
           "forget_quotes"]

#: where a quoted value stands in a lesson's markdown: ``<!--=name-->`` right after the value
QUOTE_MARK = re.compile(r"<!--=([A-Za-z_][A-Za-z0-9_]*)-->")

_QUOTED: dict[str, str] = {}


def quote(**values) -> None:
    """Record values the lesson's prose states, each under its name, as the text the prose
    shows (a number is formatted by the caller: ``f"{x:.2f}"``; anything else is turned into
    text with ``str``). Quoting a name again replaces its value (a student re-running a cell)."""
    for name, value in values.items():
        if not QUOTE_MARK.fullmatch(f"<!--={name}-->"):
            raise ValueError(f"a quoted value needs a name made of letters, digits and _; got {name!r}")
        text = value if isinstance(value, str) else str(value)
        if not text.strip():
            raise ValueError(f"the quoted value {name!r} is empty: the prose would state nothing")
        if "<!--" in text or "\n" in text:
            raise ValueError(f"the quoted value {name!r} must be one line of prose without marks; got {text!r}")
        _QUOTED[name] = text


def quoted() -> dict[str, str]:
    """Every value quoted in this process so far, by name."""
    return dict(_QUOTED)


def forget_quotes() -> None:
    """Forget every quoted value (a fresh start for the next lesson in the same process)."""
    _QUOTED.clear()


class ClaimNotSupported(AssertionError):
    """A lesson's prose says something its own run no longer shows."""


class ClaimWarning(UserWarning):
    """A student's run does not show what the stored lesson's prose says (another JAX or ArviZ
    release, other draws): the prose was written from the stored run, the outputs are theirs."""


#: the environment variable under which :func:`claim` raises instead of warning; notebooks/refresh.py
#: sets it, so a lesson whose prose its run does not support cannot be stored
STRICT_CLAIMS_ENV = "ZOO_STRICT_CLAIMS"


def claim(holds, says: str) -> None:
    """Check a statement the lesson's prose makes about this run (``says``, in the prose's
    words). When ``holds`` is false: raise :class:`ClaimNotSupported` naming it while a lesson
    is being stored or checked (env ZOO_STRICT_CLAIMS=1, set by notebooks/refresh.py); in a
    student's own run - another release of JAX draws other MCMC draws, and an outcome near a
    threshold can turn - warn with :class:`ClaimWarning` instead, so the lesson runs on and the
    student reads their own numbers against the sentence."""
    if bool(holds):
        return
    if os.environ.get(STRICT_CLAIMS_ENV) == "1":
        raise ClaimNotSupported(f"the lesson says {says!r}, and this run does not show it: rewrite that sentence")
    warnings.warn(f"the lesson's text says {says!r}, and your run does not show it (the text was written from "
                  "the stored run; another JAX or ArviZ release draws other numbers): read your own outputs here",
                  ClaimWarning, stacklevel=2)


@dataclass(frozen=True)
class LogDensityCheck:
    """The written model against the zoo's at ``n_points`` parameter values drawn from the zoo
    model's prior: their log joint densities (``numpyro.infer.util.log_density``, the observed
    labels included) and the largest difference. ``same``: equal to round-off (``rtol`` of the
    largest absolute log density, ``scale``); ``same_up_to_constant``: the differences all equal - the written
    model drops a normalizing constant, which changes no posterior."""

    sites: tuple[str, ...]
    n_points: int
    max_abs_difference: float
    difference_spread: float
    scale: float
    rtol: float

    @property
    def same(self) -> bool:
        """The two log densities agree to round-off at every point."""
        return self.max_abs_difference <= self.rtol * max(self.scale, 1.0)

    @property
    def same_up_to_constant(self) -> bool:
        """The two log densities differ by the same amount at every point (a dropped constant)."""
        return self.difference_spread <= self.rtol * max(self.scale, 1.0)

    @property
    def line(self) -> str:
        """One sentence a lesson prints: same, same up to a constant, or different, and by how much.
        Equal densities are reported against the tolerance, not by their round-off difference (which
        moves with the machine's floating-point order of operations)."""
        where = f"at {self.n_points} draws from the prior (sites {', '.join(self.sites)})"
        if self.same:
            return f"the same log density {where}: every difference within {self.rtol:g} of their size"
        if self.same_up_to_constant:
            return f"the same log density up to a constant {where}: every difference {self.max_abs_difference:.3g}"
        return f"DIFFERENT log densities {where}: differences up to {self.max_abs_difference:.3g}"


def compare_log_densities(written, spec, Phi, y, *, n_points: int = 10, seed: int = 0,
                          rtol: float = 1e-9) -> LogDensityCheck:
    """Is ``written`` - a NumPyro function ``written(Phi, y=None)`` - the model ``spec.model``
    of the zoo? Both are traced at ``n_points`` values of the zoo model's latent sites drawn from
    its prior (given Phi), and their log joint densities with the labels ``y`` observed are
    compared. A ValueError names the sites when the two models do not sample the same latent
    sites. ``rtol``: float64 round-off of sums of a few hundred terms, far below any change of a
    prior or a likelihood."""
    Phi, y = as_jax(Phi), as_jax(y)

    def latent(model, key, substitute=None):
        seeded = handlers.seed(model, key)
        if substitute is not None:
            seeded = handlers.substitute(seeded, data=substitute)
        trace = handlers.trace(seeded).get_trace(Phi, y)
        return {name: site["value"] for name, site in trace.items()
                if site["type"] == "sample" and not site["is_observed"]}

    diffs, sizes, names = [], [], None
    for key in jax.random.split(jax.random.PRNGKey(seed), n_points):
        params = latent(spec.model, key)
        try:
            mine = latent(written, key, substitute=params)
        except NotImplementedError:
            # a site the zoo's model lacks, with a distribution that cannot be drawn (a factor's
            # ImproperUniform): the names differ
            raise ValueError(f"the written model samples a latent site the zoo's model lacks; the zoo's latent "
                             f"sites are {sorted(params)}: name them alike") from None
        if set(mine) != set(params):
            raise ValueError(f"the written model samples the latent sites {sorted(mine)}, the zoo's "
                             f"{sorted(params)}: name them alike")
        names = tuple(sorted(params))
        ours = float(log_density(spec.model, (Phi, y), {}, params)[0])
        theirs = float(log_density(written, (Phi, y), {}, params)[0])
        diffs.append(theirs - ours)
        sizes += [abs(ours), abs(theirs)]
    diffs = np.asarray(diffs)
    return LogDensityCheck(sites=names, n_points=int(n_points), max_abs_difference=float(np.max(np.abs(diffs))),
                           difference_spread=float(np.ptp(diffs)), scale=float(np.max(sizes)), rtol=float(rtol))
