"""Every ```python block of README.md runs as written and checks what it claims.

Each block is a script of its own (or, when its first line says ``# continues the block above``,
the previous block's script followed by its own), run in a new Python process from an empty
temporary directory: ``@willump.optimize`` reads the function's source from that file, and the
process imports the installed ``willump`` and sees nothing of the clone. A block that
reads ``REDIS_URL`` gets a real redis-server on an empty database.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
EXPECTED_BLOCKS = 4  # at least: the first example, lookups in Redis, fit, save and load
CONTINUES = "# continues the block above"
TIMEOUT = 300  # seconds per block: a cold numba cache compiles the kernels first

_FENCE = re.compile(r"^(```+|~~~+)(.*)$")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def readme_blocks(text: str) -> list[dict]:
    """The ```python blocks, in order: number, the heading above, the script it runs."""
    blocks, heading, fence, lines, script = [], "", None, [], ""
    for line in text.splitlines():
        if fence is None:
            opening = _FENCE.match(line)
            heading_match = _HEADING.match(line)
            if opening:
                fence, language, lines = opening.group(1), opening.group(2).strip(), []
            elif heading_match:
                heading = heading_match.group(1)
        elif line.rstrip() == fence:
            if language == "python":
                code = "\n".join(lines) + "\n"
                continues = lines[0].strip().lower().startswith(CONTINUES) if lines else False
                if continues and not blocks:
                    raise ValueError(f"the first python block of {README.name} says it continues another")
                script = (script + "\n" + code) if continues else code
                blocks.append({"number": len(blocks) + 1, "heading": heading, "script": script})
            fence = None
        else:
            lines.append(line)
    if fence is not None:
        raise ValueError(f"{README.name} has a code fence {fence!r} that is never closed")
    return blocks


def _case_id(block: dict) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", block["heading"].lower()).strip("-")
    return f"block{block['number']}-{words or 'top'}"


def uses_dask(block: dict) -> bool:
    """Blocks using Dask run in the pass with pyarrow, which dask.dataframe needs (test_dask_readme)."""
    return re.search(r"^\s*(import|from)\s+(dask|distributed)\b", block["script"], re.MULTILINE) is not None


def cases(dask: bool = False) -> list:
    """The README's blocks, those using Dask or the others."""
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    return [pytest.param(block, id=_case_id(block)) for block in blocks if uses_dask(block) == dask]


def _environment() -> dict:
    """The test's environment without a PYTHONPATH entry naming the clone: a block imports the
    installed ``willump``, as a user's script does (test_installed checks it is the one the tests use)."""
    clone = README.parent
    kept = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if entry and Path(entry).resolve() != clone]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(kept)}


def test_the_readme_has_its_blocks():
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= EXPECTED_BLOCKS, f"found {len(blocks)} python blocks in {README}"


def test_the_parser_reads_fences_headings_and_continuations():
    text = (
        "# Title\n\n```python\nx = 1\n# not a heading\n```\n\n```bash\n# a shell comment\n```\n\n"
        "    # an indented command\n\n```python\n# continues the block above\nassert x == 1\n```\n\n"
        "## Next part\n\n```python\ny = 2\n```\n"
    )
    first, second, third = readme_blocks(text)
    assert (first["number"], first["heading"], first["script"]) == (1, "Title", "x = 1\n# not a heading\n")
    assert second["heading"] == "Title"
    assert second["script"] == first["script"] + "\n# continues the block above\nassert x == 1\n"
    assert (third["number"], third["heading"], third["script"]) == (3, "Next part", "y = 2\n")
    with pytest.raises(ValueError, match="never closed"):
        readme_blocks("```python\nx = 1\n")


@pytest.mark.parametrize("block", cases())
def test_readme_block_runs(block, tmp_path, request):
    run_block(block, tmp_path, request)


def run_block(block: dict, tmp_path, request) -> None:
    """Run ``block`` as a script of its own in ``tmp_path``; fail with its output when it fails."""
    environment = _environment()
    if "REDIS_URL" in block["script"]:
        import redis

        host, port = request.getfixturevalue("redis_server")
        url = f"redis://{host}:{port}/0"
        with redis.Redis.from_url(url) as client:
            client.flushdb()
        environment["REDIS_URL"] = url
    script = tmp_path / f"readme_block_{block['number']}.py"
    script.write_text(block["script"], encoding="utf-8")
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=environment,
                              capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as stopped:
        pytest.fail(f"README block {block['number']} ran over {TIMEOUT} s\nstdout:\n{stopped.stdout}\n"
                    f"stderr:\n{stopped.stderr}")
    if done.returncode != 0:
        pytest.fail(f"README block {block['number']} (under {block['heading']!r}) exited with {done.returncode}\n"
                    f"--- script ---\n{block['script']}--- stdout ---\n{done.stdout}--- stderr ---\n{done.stderr}",
                    pytrace=False)
