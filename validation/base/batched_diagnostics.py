"""Rank-normalized split R-hat and bulk/tail ESS (Vehtari et al. 2021) of many series at
once, numerically ArviZ's.

Why: certifying a posterior through ArviZ costs about 28 ms (an InferenceData, then
per-coordinate Python loops inside ``az.rhat`` / ``az.ess``). SBC of NUTS on an
accelerator computes 1,000 posteriors in about 28 s and then spent as long again
certifying them one by one. Here the same statistics are computed for a batch of B
scalar series, ``x`` of shape (B, chains, draws), with whole-array NumPy operations; the
only per-series loop left is the tail ESS's quantile (SciPy's ``mquantiles``, as ArviZ
calls it). ``tests/validation/base/test_batched_diagnostics.py`` checks every value against ArviZ 0.23 on
random, autocorrelated, tied, constant and NaN series.

The definitions, step by step as ArviZ implements them (``arviz/stats/diagnostics.py``):

* split chains: the first and the last ``draws // 2`` draws of every chain become two
  chains (all first halves, then all second halves);
* z-scale: ranks over all draws of a series (ties averaged), r -> Phi^-1((r - 3/8) /
  (S + 1/4)) for S draws (Blom's offsets);
* R-hat of (C, N): sqrt((N var(chain means) / mean(chain variances) + N - 1) / N), both
  variances with ddof 1; the rank R-hat is the larger of it on the z-scaled split draws
  and on the z-scaled split ``|draws - median|``;
* ESS of (C, N): autocovariances by FFT (length the next fast size of 2N), rho_t = 1 -
  (W - mean over chains of acov_t) / var_plus with W the within-chain variance and
  var_plus = W (N - 1) / N + var(chain means); Geyer's initial positive sequence (sum the
  pairs rho_{2k} + rho_{2k+1} while positive), then his initial monotone sequence (each
  pair at most the one before: a running minimum over the pairs), tau = -1 + 2 sum of the
  kept pairs + the last even term (if it was kept or is positive), at least 1 / log10(CN);
  ESS = CN / tau; a series whose values span less than float resolution has ESS CN;
* bulk ESS: the ESS of the z-scaled split draws; tail ESS: the smaller ESS of the split
  indicators I(x <= q_0.05) and I(x <= q_0.95), the quantiles R's type 7 over all draws.

Series with a NaN get NaN for all three (ArviZ's ``_not_valid``); R-hat needs 2 chains
and ESS 1, both at least 4 draws.
"""
from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.fftpack import next_fast_len
from scipy.stats.mstats import mquantiles

TAIL_PROBS = (0.05, 0.95)


def _split(x: np.ndarray) -> np.ndarray:
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, -half:]], axis=1)


def _z_scale(x: np.ndarray) -> np.ndarray:
    B = x.shape[0]
    flat = x.reshape(B, -1)
    ranks = stats.rankdata(flat, method="average", axis=1)
    size = flat.shape[1]
    return stats.norm.ppf((ranks - 3 / 8) / (size - 2 * 3 / 8 + 1)).reshape(x.shape)


def _rhat(x: np.ndarray) -> np.ndarray:
    n = x.shape[2]
    chain_mean = np.mean(x, axis=2)
    chain_var = np.var(x, axis=2, ddof=1)
    between = n * np.var(chain_mean, axis=1, ddof=1)
    within = np.mean(chain_var, axis=1)
    return np.sqrt((between / within + n - 1) / n)


def _ess(x: np.ndarray) -> np.ndarray:
    """ESS of each series of x (B, C, N), as ArviZ's ``_ess`` (relative=False)."""
    x = np.asarray(x, dtype=float)
    B, C, N = x.shape
    size = C * N
    centred = x - x.mean(axis=2, keepdims=True)
    m = next_fast_len(2 * N)
    f = np.fft.rfft(centred, n=m, axis=2)
    f *= np.conjugate(f)
    acov = np.fft.irfft(f, n=m, axis=2)[:, :, :N] / N
    chain_mean = x.mean(axis=2)
    mean_var = np.mean(acov[:, :, 0], axis=1) * N / (N - 1.0)
    var_plus = mean_var * (N - 1.0) / N
    if C > 1:
        var_plus = var_plus + np.var(chain_mean, axis=1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (mean_var[:, None] - np.mean(acov, axis=1)) / var_plus[:, None]  # (B, N)
    rho[:, 0] = 1.0
    # the positive sequence: iteration k (t = 1 + 2k, while t < N - 3) looks at the pair
    # Q_k = rho[2 + 2k] + rho[3 + 2k], keeps it if >= 0, and goes on while it is > 0;
    # it starts only if rho[0] + rho[1] > 0
    K = max(0, -(-(N - 4) // 2))
    pairs = rho[:, 2:2 + 2 * K].reshape(B, K, 2).sum(axis=2) if K else np.zeros((B, 0))
    first_pair = rho[:, 0] + rho[:, 1]
    stops = pairs <= 0  # NaN pairs compare False: a NaN series is set to NaN below
    first_stop = np.where(stops.any(axis=1), stops.argmax(axis=1), K) if K else np.zeros(B, dtype=int)
    runs = np.where(first_pair > 0, np.minimum(first_stop + 1, K), 0)  # iterations run
    tau = np.zeros(B)
    ran = runs > 0
    if K:
        # kept pairs: rho[0] + rho[1], then Q_0 .. Q_{runs-2}; made monotone by a running minimum
        all_pairs = np.concatenate([first_pair[:, None], pairs], axis=1)  # pair j = (2j, 2j+1)
        monotone = np.minimum.accumulate(all_pairs, axis=1)
        j = np.arange(K + 1)[None, :]
        kept_sum = np.where(j < runs[:, None], monotone, 0.0).sum(axis=1)
        last = np.clip(runs - 1, 0, K - 1)
        even_last = rho[np.arange(B), 2 + 2 * last]
        q_last = pairs[np.arange(B), last]
        last_even_term = np.where((q_last >= 0) | (even_last > 0), even_last, 0.0)
        tau = np.where(ran, -1.0 + 2.0 * kept_sum + last_even_term, tau)
    # no iteration: rho_t = [1, rho_1, 0, ...], max_t = -1: tau = -1 + rho_t[0] = 0
    tau = np.maximum(tau, 1.0 / np.log10(size))
    ess = size / tau
    # a NaN anywhere in the autocorrelations kept makes the ESS NaN, as in ArviZ
    used = np.arange(N)[None, :] <= np.where(ran, 2 * runs + 1, 1)[:, None]
    bad = np.any(np.isnan(rho) & used, axis=1)
    ess = np.where(bad, np.nan, ess)
    constant = (x.reshape(B, -1).max(axis=1) - x.reshape(B, -1).min(axis=1)) < np.finfo(float).resolution
    return np.where(constant, float(size), ess)


def rank_diagnostics(x) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank R-hat, bulk ESS, tail ESS) of each series of ``x`` (B, chains, draws), each (B,)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 3:
        raise ValueError(f"rank_diagnostics expects (series, chains, draws); got shape {x.shape}")
    B, C, N = x.shape
    nan = np.isnan(x).reshape(B, -1).any(axis=1)
    rhat = np.full(B, np.nan)
    bulk = np.full(B, np.nan)
    tail = np.full(B, np.nan)
    ok = ~nan
    if N < 4 or not ok.any():
        return rhat, bulk, tail
    xs = x[ok]
    split = _split(xs)
    if C >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            folded = np.abs(split - np.median(split.reshape(split.shape[0], -1), axis=1)[:, None, None])
            rhat[ok] = np.maximum(_rhat(_z_scale(split)), _rhat(_z_scale(folded)))
    bulk[ok] = _ess(_z_scale(split))
    flat = xs.reshape(xs.shape[0], -1)
    quantiles = np.array([mquantiles(row, TAIL_PROBS, alphap=1, betap=1) for row in flat])  # (B, 2)
    tails = [_ess(_split((xs <= quantiles[:, i, None, None]).astype(float))) for i in range(len(TAIL_PROBS))]
    tail[ok] = np.minimum(*tails)
    return rhat, bulk, tail


def summaries(draws_list, sites) -> list[dict]:
    """``adapter.summary_diagnostics`` of many runs at once: for each ``draws`` of
    ``draws_list`` (``{site: (chains, draws, *site.shape)}``, all of one shape), ``{"rhat_max",
    "ess_bulk_min", "ess_tail_min", "per_site": {name: {"rhat", "ess_bulk", "ess_tail"}}}``
    with per-site arrays shaped like the site, from one :func:`rank_diagnostics` call."""
    if not draws_list:
        return []
    blocks, layout = [], []
    for s in sites:
        shape = tuple(s.shape)
        size = int(np.prod(shape, dtype=int))
        layout.append((s.name, shape, size))
        # (runs, chains, draws, size) -> (runs, size, chains, draws)
        arr = np.stack([np.asarray(d[s.name], dtype=float) for d in draws_list])
        blocks.append(np.moveaxis(arr.reshape(arr.shape[:3] + (size,)), 3, 1))
    series = np.concatenate(blocks, axis=1)  # (runs, K, chains, draws)
    runs, K = series.shape[:2]
    rhat, bulk, tail = (v.reshape(runs, K) for v in rank_diagnostics(series.reshape((runs * K,) + series.shape[2:])))
    out = []
    for r in range(runs):
        per_site, start = {}, 0
        for name, shape, size in layout:
            sl = slice(start, start + size)
            per_site[name] = {"rhat": rhat[r, sl].reshape(shape), "ess_bulk": bulk[r, sl].reshape(shape),
                              "ess_tail": tail[r, sl].reshape(shape)}
            start += size
        out.append({"rhat_max": float(np.max(rhat[r])), "ess_bulk_min": float(np.min(bulk[r])),
                    "ess_tail_min": float(np.min(tail[r])), "per_site": per_site})
    return out


__all__ = ["rank_diagnostics", "summaries", "TAIL_PROBS"]
