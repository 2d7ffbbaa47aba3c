"""The benchmark workloads, by name: each module's ``build(rows=None, random_state=0)``
returns a trained :class:`benchmarks.workloads.common.Workload`.

The paper's six (toxic, product, music, credit, price, tracking), then four written in the
styles of people outside the project (tweets, sms, loans, annuity: issue 28)."""

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
