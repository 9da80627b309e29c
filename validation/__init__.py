"""Validation: references, metrics, comparisons and reports - and the registry of models.

This package's own module is empty on purpose: importing ``zoo.validation`` (or any module
under it) fills no table and registers nothing. Each wing imports what it uses - a model's
record hands its own reference samplers to whoever runs them
(``records/model_record.py``: ``ModelRecord.reference_sampler``), and the registry of
models (``records/registry.py``) builds its table of the built-in records when it is
itself imported - so every module works when it is imported alone.
"""
