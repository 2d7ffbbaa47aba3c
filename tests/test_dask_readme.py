"""The README's Dask recipe runs as written (a script of its own, a LocalCluster of its own) and
checks what it claims; it runs in the pass with pyarrow (``dask.dataframe`` needs it)."""

import pytest

from test_readme import cases, run_block


def test_the_readme_has_a_dask_recipe():
    assert cases(dask=True)


@pytest.mark.parametrize("block", cases(dask=True))
def test_readme_dask_block_runs(block, tmp_path, request, willump_dask):
    run_block(block, tmp_path, request)
