"""The six benchmark workloads, by name: each module's ``build(rows=None, random_state=0)``
returns a trained :class:`benchmarks.workloads.common.Workload`."""

from benchmarks.workloads import annuity, credit, loans, music, price, product, sms, toxic, tracking, tweets

WORKLOADS = {
    "toxic": toxic,
    "product": product,
    "music": music,
    "credit": credit,
    "price": price,
    "tracking": tracking,
    "loans": loans,
    "annuity": annuity,
    "tweets": tweets,
    "sms": sms,
}

__all__ = ["WORKLOADS"]
