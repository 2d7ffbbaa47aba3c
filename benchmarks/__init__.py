"""Benchmark workloads for willump: real-data stand-ins for the paper's six inference pipelines.

``benchmarks.workloads.WORKLOADS`` maps each workload's name to its module, whose
``build(rows=None, random_state=0)`` returns a trained :class:`benchmarks.workloads.common.Workload`.
The data are read in place from ``$WILLUMP_DATA`` (default ``<repo>/../shared/datasets``), see
:mod:`benchmarks.data`.
"""
