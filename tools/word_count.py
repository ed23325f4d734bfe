"""Count the words of prose in the lesson notebooks.

    .venv/bin/python tools/word_count.py                    # this working tree
    .venv/bin/python tools/word_count.py --rev c6c2ad4      # the lessons as committed at a revision
    .venv/bin/python tools/word_count.py --before c6c2ad4 --md docs/measured/word_count.md

A *word* is a whitespace-separated token of a markdown cell that contains at least one letter
or digit, so table rules (``|---|``), lone symbols (``×``, ``=``, ``|``) and bullet marks do not
count, while ``FLOP/s``, ``4.8`` and ``__syncthreads()`` each count once.  Code cells are not
prose and are not counted.  Text inside ``<details>…</details>`` (collapsed notes a learner
opens only if they want the provenance) is counted separately as *collapsed*: *visible* words
are the ones a learner reads on the way through.

``walkthrough.py`` uses :func:`notebook_words` for its reading-time estimate.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = "notebooks"

_WORD = re.compile(r"[0-9A-Za-z\u00C0-\u024F\u0370-\u03FF\u4E00-\u9FFF]")
_DETAILS = re.compile(r"<details>.*?</details>", re.S)


@dataclass(frozen=True)
class Words:
    visible: int
    collapsed: int

    @property
    def total(self) -> int:
        return self.visible + self.collapsed


def count_words(text: str) -> int:
    """Tokens of ``text`` that contain a letter or a digit."""
    return sum(1 for token in text.split() if _WORD.search(token))


def markdown_words(sources: list[str]) -> Words:
    """Visible and collapsed words of a list of markdown cell sources."""
    visible = collapsed = 0
    for src in sources:
        hidden = _DETAILS.findall(src)
        collapsed += sum(count_words(h) for h in hidden)
        visible += count_words(_DETAILS.sub(" ", src))
    return Words(visible, collapsed)


def _markdown_sources(notebook_json: str) -> list[str]:
    nb = json.loads(notebook_json)
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == "markdown"]


def notebook_words(path: Path) -> Words:
    """Words of one notebook file on disk."""
    return markdown_words(_markdown_sources(path.read_text(encoding="utf-8")))


def count_tree(rev: str | None = None) -> dict[str, Words]:
    """Words per lesson notebook, in the working tree or at git revision ``rev``."""
    if rev is None:
        return {p.stem: notebook_words(p) for p in sorted((ROOT / LESSONS).glob("*.ipynb"))}
    names = subprocess.run(["git", "ls-tree", "--name-only", rev, f"{LESSONS}/"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split()
    out = {}
    for name in sorted(n for n in names if n.endswith(".ipynb")):
        text = subprocess.run(["git", "show", f"{rev}:{name}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        out[Path(name).stem] = markdown_words(_markdown_sources(text))
    return out


def table(now: dict[str, Words], before: dict[str, Words] | None = None,
          before_label: str = "before") -> str:
    """A markdown table of the counts (and the change against ``before``)."""
    if before is None:
        lines = ["| notebook | visible | collapsed | total |", "|---|---:|---:|---:|"]
        for name, w in now.items():
            lines.append(f"| {name} | {w.visible:,} | {w.collapsed:,} | {w.total:,} |")
        tot = Words(sum(w.visible for w in now.values()), sum(w.collapsed for w in now.values()))
        lines.append(f"| **total** | **{tot.visible:,}** | **{tot.collapsed:,}** | **{tot.total:,}** |")
        return "\n".join(lines)
    lines = [f"| notebook | {before_label}: visible | total | after: visible | collapsed | total "
             "| change: visible | total |", "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def pct(a, b):  # one decimal, so that -24.9 % does not read as the -25 % it misses
        return f"{(a - b) / b:+.1%}" if b else "new"

    for name in sorted(set(now) | set(before)):
        b, a = before.get(name, Words(0, 0)), now.get(name, Words(0, 0))
        lines.append(f"| {name} | {b.visible:,} | {b.total:,} | {a.visible:,} | {a.collapsed:,} "
                     f"| {a.total:,} | {pct(a.visible, b.visible)} | {pct(a.total, b.total)} |")
    bv, bt = sum(w.visible for w in before.values()), sum(w.total for w in before.values())
    av, ac = sum(w.visible for w in now.values()), sum(w.collapsed for w in now.values())
    lines.append(f"| **total** | **{bv:,}** | **{bt:,}** | **{av:,}** | **{ac:,}** "
                 f"| **{av + ac:,}** | **{pct(av, bv)}** | **{pct(av + ac, bt)}** |")
    return "\n".join(lines)


def report(text: str, before: str | None) -> str:
    """The markdown document: what was counted, how, and the table."""
    against = (f" against the lessons as committed at `{before}` (before the editorial pass)"
               if before else "")
    return f"""# Words of prose in the lessons

Counted by `tools/word_count.py`{against}:
`python3 tools/word_count.py --before {before or 'REV'} --md docs/measured/word_count.md`.
A word is a whitespace-separated token of a markdown cell that contains a letter or a digit
(table rules and lone symbols do not count; code cells are not prose). *Visible* words are read
on the way through a lesson; *collapsed* words sit in `<details>` notes a learner opens only for
the provenance of a number (and, in lesson 10, the diagnoses a learner opens after deciding).
Notebook 10's mystery-kernel cells belong to the capstone work and grew with its corrections.

{text}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="count the lessons at this git revision instead of the tree")
    ap.add_argument("--before", help="git revision to compare against")
    ap.add_argument("--md", type=Path, help="also write the table to this file")
    args = ap.parse_args(argv)
    now = count_tree(args.rev)
    before = count_tree(args.before) if args.before else None
    text = table(now, before, f"before ({args.before})" if args.before else "before")
    print(text)
    if args.md:
        args.md.write_text(report(text, args.before), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
