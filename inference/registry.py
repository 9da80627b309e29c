"""Which engines exist for which model, under which CLI names.

Two ways to call an engine:

* ``fixed``: ``fit(spec, Phi, y, config=None) -> Posterior`` at the spec's frozen
  hyper-parameters. ``zoo compare`` uses it, so every engine is measured on the same
  posterior p(w | y, alpha) as the NUTS reference.
* ``end_to_end``: ``fit(Phi_all, y, *, seed) -> EndToEndFit`` - the engine as its paper
  runs it, selecting its own hyper-parameters and basis functions from all candidate
  columns. The classifier and the benchmarks use it.

Engine modules are imported lazily so that importing the registry stays cheap.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable

from .contracts import EndToEndFit  # noqa: F401  (engines still import it from here)


@dataclass(frozen=True)
class EngineEntry:
    name: str
    kind: str  # "gaussian" | "point" | "draws"
    description: str
    fixed: str  # "module:function"
    end_to_end: str | None = None
    # keyword arguments bound into both functions: one engine module can serve several
    # named engines (GGSM's mm module runs the ggig, lap, gj and stu rules)
    options: tuple[tuple[str, Any], ...] = ()
    # None: the engine approximates the posterior of the spec it is given. Otherwise it
    # fits a different model (another prior) and this says which; `zoo compare` then
    # reports its distance to the spec's reference as that, not as approximation error.
    other_model: str | None = None

    def _resolve(self, target: str) -> Callable:
        module, func = target.split(":")
        fn = getattr(importlib.import_module(f"zoo.inference.{module}"), func)
        return functools.partial(fn, **dict(self.options)) if self.options else fn

    def fit(self) -> Callable:
        return self._resolve(self.fixed)

    def fit_end_to_end(self) -> Callable:
        if self.end_to_end is None:
            raise ValueError(f"engine {self.name!r} has no end-to-end mode")
        return self._resolve(self.end_to_end)


#: one engine for every model: it needs only the spec's NumPyro model
AUTO_LAPLACE_DESCRIPTION = (
    "Generic Laplace in NumPyro's unconstrained space from the model alone (Newton mode of the "
    "log joint incl. log-Jacobian, Gaussian there, drawn and pushed to the supports - positive "
    "sites log-normal); fails, saying so, where -H is not positive definite"
)

ENGINES: dict[str, dict[str, EngineEntry]] = {
    "pcvm": {
        "em": EngineEntry(
            "em", "point",
            "PCVM EM (Chen, Tino & Yao 2009): MAP of the truncated-prior probit model",
            "em:fit", "em:fit_end_to_end",
        ),
        "laplace": EngineEntry(
            "laplace", "gaussian",
            "EPCVM Laplace (Chen, Tino & Yao 2014): Gaussian at the mode of the surrogate model",
            "laplace:fit", "laplace:fit_end_to_end",
        ),
        "ep": EngineEntry(
            "ep", "gaussian",
            "EPCVM EP (Chen, Tino & Yao 2014): likelihood and truncation sites",
            "expectation_propagation:fit", "expectation_propagation:fit_end_to_end",
        ),
        "auto-laplace": EngineEntry(
            "auto-laplace", "draws", AUTO_LAPLACE_DESCRIPTION, "generic_laplace:fit",
        ),
    },
    "ggsm-probit": {
        "mm": EngineEntry(
            "mm", "point",
            "GGIG (Liu, Wu & Zhou): MM/EM over the latent z and lambda, generalized normal prior",
            "mm:fit", "mm:fit_end_to_end", (("rule", "ggig"),),
        ),
        "mm-laplace": EngineEntry(
            "mm-laplace", "draws",
            "Laplace approximation at the GGIG MM mode over the weights MM kept (pruned weights "
            "exactly 0, conditioning on MM's sparsity pattern; lambda drawn from its exact "
            "conditional); fails, saying so, where the Hessian is not negative definite",
            "mm_laplace:fit", "mm_laplace:fit_end_to_end",
        ),
        "lap": EngineEntry(
            "lap", "point",
            "LAP (Figueiredo 2003): Laplace prior with a fixed rate gamma - GGIG at q = 1, a >> n",
            "mm:fit", "mm:fit_end_to_end", (("rule", "lap"),),
            other_model="Laplace prior with fixed rate gamma (default 1) - GGSM only in the limit "
                        "q = 1, a -> inf, b = a / gamma",
        ),
        "gj": EngineEntry(
            "gj", "point",
            "GJ (Figueiredo 2003): Gaussian-Jeffreys prior - the q -> 0 limit of GGIG",
            "mm:fit", "mm:fit_end_to_end", (("rule", "gj"),),
            other_model="Gaussian-Jeffreys prior (parameter-free) - GGSM only in the limit q -> 0",
        ),
        "stu": EngineEntry(
            "stu", "point",
            "STU (Chen, Tino & Yao 2009): one Gamma(c, d) precision per weight (Student-t); "
            "not a special case of GGIG",
            "mm:fit", "mm:fit_end_to_end", (("rule", "stu"),),
            other_model="Student-t prior: one Gamma(c, d) precision per weight - not a GGSM",
        ),
        "auto-laplace": EngineEntry(
            "auto-laplace", "draws", AUTO_LAPLACE_DESCRIPTION, "generic_laplace:fit",
        ),
    },
    "gig-logistic": {
        "vb": EngineEntry(
            "vb", "gaussian",
            "Horii's mean-field VB (Algorithm 1): Jaakkola-Jordan bound, q(beta) q(tau) q(a), "
            "a-update as a quotient",
            "gig_vb:fit", "gig_vb:fit_end_to_end",
        ),
        "laplace": EngineEntry(
            "laplace", "draws", AUTO_LAPLACE_DESCRIPTION, "generic_laplace:fit",
            options=(("name", "laplace"),),
        ),
    },
}


def get_engine(model: str, engine: str) -> EngineEntry:
    if model not in ENGINES:
        raise ValueError(f"unknown model {model!r}; known: {', '.join(sorted(ENGINES))}")
    engines = ENGINES[model]
    if engine not in engines:
        raise ValueError(
            f"model {model!r} has no engine {engine!r}; available: {', '.join(engines)}"
        )
    return engines[engine]
