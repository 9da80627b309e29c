"""Validation: NUTS references and their certification, metrics, comparisons, data sets."""
