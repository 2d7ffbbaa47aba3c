"""A README section rewritten by ``python -m benchmarks.report`` from a tiny (quick) run's results."""

from benchmarks import report


def filled_section(out, tmp_path, start: str, end: str) -> str:
    """The text of a README holding only the section between ``start`` and ``end`` markers (and the
    workloads' table, from the committed toxic results), after the report rewrote it from the
    results in ``out``; the report first refuses them, as a quick run's, unless allowed."""
    readme = tmp_path / "README.md"
    readme.write_text(f"{report.START}\n{report.END}\nsection:\n{start}\nstale\n{end}\nend\n")
    (out / "toxic.json").write_text((report.ROOT / "benchmarks" / "results" / "toxic.json").read_text())
    assert report.main(["--results", str(out), "--readme", str(readme)]) == 2  # quick: refused
    assert report.main(["--results", str(out), "--readme", str(readme), "--allow-quick"]) == 0
    text = readme.read_text()
    assert "stale" not in text and text.endswith(f"{end}\nend\n")
    return text
