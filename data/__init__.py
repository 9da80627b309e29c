"""The data layer: the shipped data files, their parsers, seeded splits and the catalog of
named data sets - the first stage of the pipeline (data set -> basis -> model -> engine).

Modules, by job:

* ``files.py`` - the shipped files as package resources (:func:`open_text`,
  :func:`read_bytes`) and their checksums (:func:`verify`);
* ``parsers.py`` - each file read into arrays, with the encodings chosen for it;
* ``splits.py`` - version-stable seeded streams, stratified train/test splits,
  standardization, and the :class:`Split` every loader returns;
* ``generators.py`` - synthetic pools and the papers' simulation designs;
* ``catalog.py`` - the named data sets: :func:`load`, :func:`names`, :func:`describe`
  (``zoo datasets``).

The files keep their own licences, separate from the project's MIT licence; origins,
citations and licences are in ``PROVENANCE.md``, checksums in ``SHA256SUMS``. This layer
imports nothing from ``zoo.models``, ``zoo.inference`` or ``zoo.validation``.
"""
from __future__ import annotations

from .catalog import describe, load, load_libsvm, names
from .files import checksums, open_text, read_bytes, verify
from .generators import (CROSS_SD, GGIG_WEAK_WEIGHT, OVERLAP_MEANS, cross_sample, ggig_linear, horii_beta_star,
                         horii_synthetic, noise_features, flipped_labels, overlap_sample, spiral_points, waveform_pool)
from .parsers import EslMixture, load_esl_mixture
from .splits import PROJECT_SEED, Split, Standardization

__all__ = [
    "PROJECT_SEED", "Split", "Standardization", "EslMixture",
    "names", "load", "describe", "load_libsvm", "load_esl_mixture",
    "waveform_pool", "spiral_points", "cross_sample", "overlap_sample", "CROSS_SD", "OVERLAP_MEANS",
    "ggig_linear", "GGIG_WEAK_WEIGHT", "horii_synthetic", "horii_beta_star", "noise_features", "flipped_labels",
    "open_text", "read_bytes", "checksums", "verify",
]
