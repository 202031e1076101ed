"""The open risks, read from where they are written, for the docs site's generated Open risks
page (docs_hooks/sessiongen_site.py): what the contract leaves undecided (its "Not decided
here" section), what a notebook says its evidence does not show, and every `UNCONFIRMED`
marker (a behaviour modelled without a source) in the docs and the code. Read at build time,
so the page cannot go stale; tests/docs/test_site.py counts the markers on its own and fails
when the page misses one. Internal: not part of the public surface.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from .traceability import CONTRACT_PATH

MARKER = "UNCONFIRMED"
UNDECIDED_HEADING = re.compile(r"^## (?:\d+\. )?Not decided here\s*$", re.M)
NOT_SHOWN = re.compile(r"what the evidence does not show", re.I)
"""The line under which a notebook lists what its evidence does not show (as markdown or as
printed output), one `- ` item a line."""
CODE_DIRS = ("reference_impl",)
CODE_SUFFIXES = frozenset({".py", ".json"})
_SENTENCE_END = re.compile(r"(?<=[.;])\s+(?=[A-Z(*`])")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*(?:\{\s*#([\w-]+)[^}]*\})?\s*$")


@dataclass(frozen=True)
class Marker:
    """One or more `UNCONFIRMED` markers in one sentence: where (a file relative to the
    repository root and its line; for a docs page, the section's heading and anchor) and the
    sentence that carries them."""

    path: str
    line: int
    text: str
    count: int
    section: str = ""
    anchor: str = ""


@dataclass(frozen=True)
class NotShown:
    """What a notebook says its evidence does not show: the section it says it in."""

    notebook: str
    section: str
    anchor: str
    items: tuple[str, ...]


def undecided_anchor(root: Path) -> str:
    """The anchor of the contract's "Not decided here" section on the rendered contract."""
    text = (root / CONTRACT_PATH).read_text(encoding="utf-8")
    found = UNDECIDED_HEADING.search(text)
    return _slug(found.group(0).removeprefix("## ").strip()) if found else ""


def undecided(root: Path) -> list[str]:
    """The contract's "Not decided here" items, as markdown (links relative to contract/)."""
    text = (root / CONTRACT_PATH).read_text(encoding="utf-8")
    found = UNDECIDED_HEADING.search(text)
    if found is None:
        return []
    section = text[found.end() :].split("\n## ", 1)[0]
    items: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            items.append(line[2:].strip())
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
    return items


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension gives a heading (its default slugify)."""
    from markdown.extensions.toc import slugify  # type: ignore[import-untyped]

    return str(slugify(heading, "-"))


LONG = 400
"""A sentence longer than this (a catalog's `_about`) is quoted as one window per marker."""
WINDOW = 160


def _sentences(paragraph: str) -> list[str]:
    text = " ".join(paragraph.split()).removeprefix("- ").removeprefix("* ")
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _excerpts(sentence: str) -> list[str]:
    """The sentence whole when it is short, else around each marker: up to WINDOW characters
    either side, never reaching the next marker, so each excerpt quotes exactly one."""
    if len(sentence) <= LONG:
        return [sentence]
    starts = [m.start() for m in re.finditer(MARKER, sentence)]
    excerpts = []
    for k, start in enumerate(starts):
        low = max(start - WINDOW, starts[k - 1] + len(MARKER) if k else 0)
        high = min(
            start + len(MARKER) + WINDOW, starts[k + 1] if k + 1 < len(starts) else len(sentence)
        )
        excerpts.append(
            ("…" if low else "")
            + sentence[low:high].strip()
            + ("…" if high < len(sentence) else "")
        )
    return excerpts


def _paragraphs(text: str) -> list[tuple[int, str, str, str]]:
    """A page's paragraphs and list items outside code blocks, each with its first line and
    the heading and anchor of the section it is in."""
    found: list[tuple[int, str, str, str]] = []
    section, anchor, first, in_code = "", "", 0, False
    lines: list[str] = []
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        heading = None if in_code else _HEADING.match(line)
        starts_item = line.lstrip().startswith(("- ", "* ", "| "))
        if lines and (heading or not line.strip() or starts_item):
            found.append((first, "\n".join(lines), section, anchor))
            lines = []
        if heading:
            section = heading.group(2)
            anchor = heading.group(3) or _slug(section)
        elif line.strip():
            first = number if not lines else first
            lines.append(line)
    return found


def docs_markers(root: Path, pages: list[Path]) -> list[Marker]:
    """The markers on the given docs pages, one per sentence, with the section each is in."""
    return [
        Marker(page.relative_to(root).as_posix(), line, text, text.count(MARKER), section, anchor)
        for page in pages
        for line, paragraph, section, anchor in _paragraphs(page.read_text(encoding="utf-8"))
        for sentence in _sentences(paragraph)
        if MARKER in sentence
        for text in _excerpts(sentence)
    ]


def code_markers(root: Path) -> list[Marker]:
    """The markers in the package's code and catalog data: the sentence of a line that
    carries one (or, in a catalog's long `_about`, the words around each)."""
    found: list[Marker] = []
    for directory in CODE_DIRS:
        for path in sorted(root.joinpath(directory).rglob("*")):
            if path.suffix not in CODE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if MARKER not in line:
                    continue
                sentences = [s for s in _sentences(line.strip(' #",')) if MARKER in s]
                found += [
                    Marker(rel, number, text, text.count(MARKER))
                    for sentence in sentences
                    for text in _excerpts(sentence)
                ]
    return found


def not_shown(root: Path) -> list[NotShown]:
    """Per notebook, the items listed under "What the evidence does not show", in its
    markdown or its stored printed output, and the section they are in."""
    found: list[NotShown] = []
    for path in sorted(root.joinpath("notebooks").glob("*.ipynb")):
        section = ""
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell.get("source", ""))
            if cell.get("cell_type") == "markdown":
                headings = re.findall(r"^##\s+(.+)$", source, re.M)
                section = headings[-1].strip() if headings else section
            texts = [source] + [
                "".join(o.get("text", "")) for o in cell.get("outputs", []) if "text" in o
            ]
            for text in texts:
                lines = text.splitlines()
                for k, line in enumerate(lines):
                    if not NOT_SHOWN.search(line):
                        continue
                    items = []
                    for item in lines[k + 1 :]:
                        if not item.startswith("- "):
                            break
                        items.append(item[2:].strip())
                    if items:
                        found.append(NotShown(path.name, section, _slug(section), tuple(items)))
    return found
