"""The six benchmark workloads, by name: each module's ``build(rows=None, random_state=0)``
returns a trained :class:`benchmarks.workloads.common.Workload`."""

from benchmarks.workloads import credit, music, price, product, toxic, tracking

WORKLOADS = {
    "toxic": toxic,
    "product": product,
    "music": music,
    "credit": credit,
    "price": price,
    "tracking": tracking,
}

__all__ = ["WORKLOADS"]
