"""docs/live.md quotes `--quick` runs of live-fidelity made when its quick form was another: each
quote that describes a quick run's jobs either describes the quick form that
docs/reproductions.md gives for the experiment now, or says that it was the quick form then."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
_JOBS = re.compile(r"(\d+) jobs of (\d+)-(\d+) s")


def _current_quick_form() -> tuple[str, str, str]:
    text = (DOCS / "reproductions.md").read_text()
    section = text[text.index("## live-fidelity") :]
    quick = section[section.index("`--quick` is a smoke test") :]
    found = _JOBS.search(quick)
    assert found, "docs/reproductions.md no longer states live-fidelity's quick form as 'N jobs of A-B s'"
    return found.groups()


def test_quick_runs_quoted_in_live_docs_are_of_the_quick_form_they_name():
    current = _current_quick_form()
    text = " ".join((DOCS / "live.md").read_text().split())
    fidelity = text[text.index("## Fidelity") :]
    quotes = [m.start() for m in re.finditer(r"`--quick` run", fidelity)]
    assert quotes, "docs/live.md's Fidelity section quotes no --quick run"
    for start in quotes:
        sentence = fidelity[start : start + 200]
        jobs = _JOBS.search(sentence)
        if jobs is None or jobs.groups() == current:
            continue
        # A figure of an earlier quick form is honest only when it says so.
        assert "then" in sentence[: jobs.start()], (
            f"docs/live.md: {sentence!r} describes a quick form of {jobs.group(0)}, not today's"
        )


def test_live_docs_quote_a_run_of_the_current_quick_form():
    current = _current_quick_form()
    text = " ".join((DOCS / "live.md").read_text().split())
    fidelity = text[text.index("## Fidelity") :]
    assert any(m.groups() == current for m in _JOBS.finditer(fidelity)), (
        f"docs/live.md gives no figure of live-fidelity's quick form now ({current[0]} jobs of {current[1]}-{current[2]} s)"
    )
