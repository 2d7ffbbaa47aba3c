"""Compiled kernels, one module per operator family, and their registry."""
