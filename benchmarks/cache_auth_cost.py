"""What authenticating a reference cache entry adds to reading it: the private copy and
SHA-256 of the netCDF file (validation/references/cache.py, ``_authenticated_netcdf``)
against parsing that copy (``from_netcdf``, which every read pays), on the smallest, the
median and the largest entry of a cache folder; the median of 11 reads each.

    python benchmarks/cache_auth_cost.py --cache-dir ~/.cache/sparse-bayes-zoo
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import tempfile
import time

import zoo  # noqa: F401  (float64)
from zoo.validation.base import arviz_adapter as adapter
from zoo.validation.base.signing import file_sha256
from zoo.validation.references import cache


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache-dir", default=zoo.cache_dir(), help="a reference cache folder (default: the zoo's)")
    p.add_argument("--repeats", type=int, default=11)
    args = p.parse_args(argv)
    files = sorted(glob.glob(os.path.join(args.cache_dir, "*.nc")), key=os.path.getsize)
    if not files:
        print(f"no entries in {args.cache_dir}")
        return 1
    for nc in dict.fromkeys([files[0], files[len(files) // 2], files[-1]]):
        record = {"netcdf": os.path.basename(nc), "netcdf_sha256": file_sha256(nc)}
        auth, parse = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as private:
                t0 = time.perf_counter()
                copy = cache._authenticated_netcdf(record, nc, private)
                t1 = time.perf_counter()
                adapter.from_netcdf(copy)
                auth.append(t1 - t0)
                parse.append(time.perf_counter() - t1)
        print(f"{os.path.getsize(nc) / 1e6:.2f} MB: copy and hash {statistics.median(auth) * 1e3:.2f} ms, "
              f"parse {statistics.median(parse) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
