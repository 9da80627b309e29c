"""Validation: references, metrics, comparisons and reports - and the registry of models.

Importing this package registers the built-in models (``registry.py``), and with them
their own reference samplers, so that every module below can name them.
"""
from .records import registry  # noqa: F401  (registers the models and their samplers)
