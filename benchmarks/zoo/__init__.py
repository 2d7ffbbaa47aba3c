"""The zoo: pipelines written the way scikit-learn's examples and public notebooks write them, on
the real data sets, measured by ``python -m benchmarks zoo`` (issue 29).

Each family module's ``build(rows=None, random_state=0)`` returns its :class:`Entry` list; the
runner (:mod:`benchmarks.zoo.run`) decorates each entry's plain function itself."""

from benchmarks.zoo import lookups, tabular, text

FAMILIES = {"text": text, "tabular": tabular, "lookups": lookups}

__all__ = ["FAMILIES"]
