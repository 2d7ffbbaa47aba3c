"""Statistically-aware optimizations: end-to-end cascades and top-K filter models (paper §4.2-4.3)."""
