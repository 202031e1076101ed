"""The documentation site: built strictly, offline by construction, true to the code, and
looked at in a real headless Chromium the way a reviewer reads it.

Reviewers read the contract in the rendered site, often with no network, so a page that
silently pulls a font, a script or an image from elsewhere would look different (or hang) for
them. Three layers guard that: `mkdocs build --strict` (broken links, missing snippets), a
static scan of every built file for external resources, and the browser, which records every
request a page makes. The pages that restate code (errors, emulator admin, notebooks) are
checked against the code so they cannot drift.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from .. import _background

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CHROMIUM = Path("/usr/bin/chromium")
# What a reviewer's browser would be, minus everything that phones home on its own: no QUIC,
# no background/component/sync traffic, no proxy between the browser and loopback.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",
]
INSTALL_HINT = (
    "no Chromium for the browser tests: install Debian's with "
    "`apt-get update && apt-get install -y chromium` (as root; .ci/run does this in CI), or "
    "Playwright's build with `uv run playwright install chromium`. "
    "With SESSIONGEN_REQUIRE_BROWSER=1 (set by .ci/run) a missing browser fails instead."
)
REQUIRE_BROWSER = "SESSIONGEN_REQUIRE_BROWSER"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
BUILD_TIMEOUT = 900.0  # a guard against a hang: the build shares the machine with the suite
# One decision record per question of docs/questions.md, in its order.
DECISIONS = (
    "purpose",
    "tools-policy",
    "preparation-parity",
    "return-shape",
    "failure-modes",
    "warming",
    "fidelity",
    "real-agents",
)
"""The decision records, one per question of docs/questions.md, in its order (the seed's six
and our seventh and eighth); tests/test_workbench.py reads them from here."""
PAGE_TIMEOUT_MS = 15_000


# --- building and serving ------------------------------------------------------------------


@dataclass(frozen=True)
class BuiltSite:
    root: Path
    output: str


@pytest.fixture(scope="module")
def site() -> BuiltSite:
    """The site built once, exactly as CI and a reviewer would build it (a child process with
    this interpreter, from the repository root so snippet paths resolve), started when
    collection finishes (tests/_background.py) so it builds while other tests run."""
    proc = _background.result(
        "site", _background.SITE_BUILD, env=_background.SITE_ENV, timeout=BUILD_TIMEOUT
    )
    out = _background.SITE_DIR
    output = proc.stdout
    if proc.returncode != 0:
        hint = ""
        if "not found among documentation files" in output:
            hint = (
                "\nHint: docs/contract.md includes contract/session-generate.md verbatim, so a "
                "relative link there to a file outside docs/ (a test, the package) breaks the "
                "strict build; cite such files as code (`tests/...::test_name`) instead."
            )
        pytest.fail(f"mkdocs build --strict failed ({proc.returncode}):\n{output}{hint}")
    return BuiltSite(out, output)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the built site; keeps the access log out of the test output."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base_url(site: BuiltSite) -> Iterator[str]:
    """The built site over HTTP on a free loopback port, as `mkdocs serve` would show it (the
    search worker cannot start from file://)."""
    handler = functools.partial(_QuietHandler, directory=str(site.root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="docs-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_site_builds_strict(site: BuiltSite) -> None:
    """Every nav page is built; strict mode already turned any warning into a failure."""
    pages = ("index", "contract", "emulator", "errors", "notebooks", "benchmarks", "questions")
    for page in (*pages, "traceability", "api", *(f"decisions/{d}" for d in DECISIONS)):
        assert (site.root / f"{page}.html").is_file(), f"{page}.html was not built"
    assert "WARNING" not in site.output


# --- clause anchors, traceability, notebooks, API --------------------------------------------


def _clauses() -> list[Any]:
    from sessiongen_tooling import traceability

    return traceability.contract_clauses(ROOT)


def test_contract_has_an_anchor_per_clause(site: BuiltSite) -> None:
    """Each clause heading on the rendered contract is an element with `id="sg-…"` and a
    permalink to itself, so a review comment can link to `contract.html#sg-warm-1`; a clause
    id mentioned elsewhere on the page links there too."""
    text = (site.root / "contract.html").read_text(encoding="utf-8")
    clauses = _clauses()
    assert len(clauses) >= 20
    for clause in clauses:
        anchor = clause.id.lower()
        assert re.search(rf'<p id="{anchor}" class="sg-clause"><strong[^>]*>{clause.id}\b', text), (
            f"no anchor for {clause.id}"
        )
        assert f'href="#{anchor}"' in text, f"no permalink for {clause.id}"
    # "One logged request each (SG-INV-3)." in SG-FAIL-6: a mention becomes a link.
    assert re.search(r'<a class="sg-clause-ref" href="#sg-inv-3"[^>]*>SG-INV-3</a>', text)
    warming = (site.root / "warming.html").read_text(encoding="utf-8")
    assert 'href="contract.html#sg-inv-1"' in warming, "a mention on another page is not linked"


def _trace_sections(text: str) -> dict[str, str]:
    """anchor of a clause -> its section of the traceability page."""
    return dict(
        re.findall(
            r'<details class="sg-trace" id="trace-(sg-[a-z]+-\d+)">(.*?)</details>', text, re.S
        )
    )


def test_traceability_page_lists_every_clause_with_its_tests(site: BuiltSite) -> None:
    """The generated traceability page has one section per contract clause, linking the
    clause and each test marked with it to a line of the test's source (shipped with the
    site), and each link lands on the line of a test's `def`."""
    from sessiongen_tooling import traceability

    text = (site.root / "traceability.html").read_text(encoding="utf-8")
    sections = _trace_sections(text)
    marked = traceability.marked_tests(ROOT)
    missing = [c.id for c in _clauses() if c.anchor not in sections]
    assert not missing, f"clauses missing from the traceability page: {missing}"
    for clause in _clauses():
        section = sections[clause.anchor]
        assert f'href="contract.html#{clause.anchor}"' in section, clause.id
        links = re.findall(r'href="source/(tests/[^"#]+\.py)\.html#L-(\d+)"', section)
        assert links, f"{clause.id}: no test link with a line number"
        assert {(p, int(n)) for p, n in links} == {(t.path, t.line) for t in marked[clause.id]}
        for path, line in links:
            source = (ROOT / path).read_text(encoding="utf-8").splitlines()
            assert re.search(r"def test", source[int(line) - 1]), (clause.id, path, line)
            page = site.root / "source" / f"{path}.html"
            assert f'id="L-{line}"' in page.read_text(encoding="utf-8"), (path, line)
    assert 'href="notebooks/03-cache-ttl-warming.html"' in sections["sg-keep-1"]


def test_each_clause_on_the_contract_links_the_tests_that_prove_it(site: BuiltSite) -> None:
    """Under each clause of the rendered contract, the tests marked with it, each a link to
    its line, and a link to the clause's section of the traceability page: generated from
    the markers, so the contract page and the trace test cannot disagree."""
    from sessiongen_tooling import traceability

    text = (site.root / "contract.html").read_text(encoding="utf-8")
    marked = traceability.marked_tests(ROOT)
    for clause in _clauses():
        found = re.search(
            rf'<p id="{clause.anchor}" class="sg-clause">.*?</p>'
            r'<details class="sg-clause-tests">(.*?)</details>',
            text,
            re.S,
        )
        assert found, f"{clause.id}: no tests under the clause"
        links = re.findall(r'href="source/(tests/[^"#]+\.py)\.html#L-(\d+)"', found.group(1))
        assert {(p, int(n)) for p, n in links} == {(t.path, t.line) for t in marked[clause.id]}
        assert f'href="traceability.html#trace-{clause.anchor}"' in found.group(1), clause.id


def _marker_count(paths: list[Path]) -> int:
    return sum(p.read_text(encoding="utf-8").count("UNCONFIRMED") for p in paths)


def test_open_risks_page_collects_every_marker_and_undecided_item(site: BuiltSite) -> None:
    """One page of open risks, counted here independently of the code that writes it: every
    `UNCONFIRMED` of the docs and of the package quoted once, each docs one linked to a
    section that exists; every item of the contract's "Not decided here"; what notebook 03
    says its evidence does not show. The contract and each page with a marker link to it."""
    text = (site.root / "risks.html").read_text(encoding="utf-8")
    quoted = "".join(re.findall(r"<li>(.*?)</li>", text, re.S))
    docs = sorted(DOCS.rglob("*.md"))
    code = [
        p
        for p in sorted((ROOT / "reference_impl").rglob("*"))
        if p.suffix in (".py", ".json") and p.is_file()
    ]
    expected = _marker_count(docs) + _marker_count(code)
    assert expected > 50
    assert quoted.count("UNCONFIRMED") == expected, (quoted.count("UNCONFIRMED"), expected)
    for page, anchor in set(re.findall(r'href="([\w/-]+\.html)#([\w-]+)"', text)):
        target = (site.root / page).read_text(encoding="utf-8")
        assert f'id="{anchor}"' in target, f"risks.html links {page}#{anchor}, which is not there"
    contract = (ROOT / "contract" / "session-generate.md").read_text(encoding="utf-8")
    undecided = contract.split("Not decided here", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^- ", undecided, re.M)
    section = text.split('id="not-decided-by-the-contract"', 1)[1].split("<h2", 1)[0]
    assert len(items) >= 3 and section.count("<li>") == len(items)
    assert 'href="notebooks/03-cache-ttl-warming.html#' in text
    assert 'href="risks.html"' in (site.root / "contract.html").read_text(encoding="utf-8")
    for page in docs:
        if "UNCONFIRMED" in page.read_text(encoding="utf-8"):
            built = site.root / page.relative_to(DOCS).with_suffix(".html")
            assert 'risks.html"' in built.read_text(encoding="utf-8"), f"{page.name}: no link"


def test_notebooks_are_rendered_with_their_outputs(site: BuiltSite) -> None:
    """Every notebook is a page of the site with its stored outputs (nothing is executed at
    build time), figures as inline PNGs, and the Notebooks page links to each."""
    listing = (site.root / "notebooks.html").read_text(encoding="utf-8")
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        built = site.root / "notebooks" / f"{notebook.stem}.html"
        assert built.is_file(), f"{notebook.name} was not rendered"
        assert f'href="notebooks/{notebook.stem}.html"' in listing, notebook.name
        stored = json.loads(notebook.read_text(encoding="utf-8"))
        pngs = sum(
            "image/png" in output.get("data", {})
            for cell in stored["cells"]
            for output in cell.get("outputs", [])
        )
        html = built.read_text(encoding="utf-8")
        assert html.count('src="data:image/png;base64,') >= pngs, notebook.name
    figures = (site.root / "notebooks" / "03-cache-ttl-warming.html").read_text("utf-8")
    assert "data:image/png;base64," in figures, "notebook 03's figures are not rendered"


def test_each_question_has_a_decision_record_with_figures_and_tests(site: BuiltSite) -> None:
    """A reviewer answers each question from the site alone: the Questions page
    links each to its decision record, and each record links back to its question, shows at
    least one figure (a file of the site, extracted from a notebook), links a notebook
    section and the traceability rows that list the clause's tests, and names the clauses it
    decides (linked to the contract)."""
    questions = (site.root / "questions.html").read_text(encoding="utf-8")
    anchors = re.findall(r'id="(q\d-[a-z-]+)"', questions)
    assert len(anchors) == len(DECISIONS) == 8, anchors
    for anchor, name in zip(anchors, DECISIONS, strict=True):
        assert f'href="decisions/{name}.html"' in questions, name
        page = (site.root / "decisions" / f"{name}.html").read_text(encoding="utf-8")
        assert f'href="../questions.html#{anchor}"' in page, f"{name}: no link to its question"
        for section in ("Options", "Evidence", "Decision", "Consequences"):
            assert re.search(rf"<h2[^>]*>{section}", page), f"{name}: no {section} section"
        figures = re.findall(r'<img[^>]*src="\.\./(figures/[^"]+\.png)"', page)
        assert figures, f"{name}: no figure"
        for figure in figures:
            assert (site.root / figure).is_file(), f"{name}: {figure} was not built"
        assert re.search(r'href="\.\./notebooks/\d\d-[\w-]+\.html#', page), name
        assert re.search(r'href="\.\./traceability\.html#trace-sg-', page), name
        assert 'class="sg-clause-ref"' in page, f"{name}: names no clause"
    trace = (site.root / "traceability.html").read_text(encoding="utf-8")
    for clause in _clauses():
        assert f'id="trace-{clause.anchor}"' in trace, clause.id


def _clause_ids(text: str) -> list[str]:
    """The clause ids a line names, ranges (`SG-FAIL-1 to SG-FAIL-6`) spelt out."""
    ids = re.findall(r"SG-[A-Z]+-\d+", text)
    for first, last in re.findall(r"(SG-[A-Z]+-\d+) to (SG-[A-Z]+-\d+)", text):
        stem, low, high = (
            first.rsplit("-", 1)[0],
            int(first.rsplit("-", 1)[1]),
            int(last.rsplit("-", 1)[1]),
        )
        assert last.startswith(stem + "-"), f"a range across kinds: {first} to {last}"
        ids += [f"{stem}-{n}" for n in range(low, high + 1)]
    return ids


def test_each_question_has_a_one_line_answer_naming_its_clauses() -> None:
    """Under each question of the Questions page, one `**Answer:**` line that names clauses
    of the contract, every one of which exists."""
    known = {c.id for c in _clauses()}
    text = (ROOT / "docs" / "questions.md").read_text(encoding="utf-8")
    sections = re.split(r"^## \d+\. ", text, flags=re.M)[1:]
    assert len(sections) == len(DECISIONS)
    for section in sections:
        answers = [line for line in section.splitlines() if line.startswith("**Answer:**")]
        assert len(answers) == 1, f"{section.splitlines()[0]}: {len(answers)} answer lines"
        named = _clause_ids(answers[0])
        assert named and set(named) <= known, f"{answers[0]}: unknown {set(named) - known}"


def test_the_contract_opens_with_every_decision_on_one_screen() -> None:
    """One table row per question of docs/questions.md, in its order, before the first
    clause, each naming clauses that exist, among them every clause the question's answer
    names; every clause of its kind is covered by the failure and warming rows (a new
    SG-KEEP-5 must join its row)."""
    known = {c.id for c in _clauses()}
    text = (ROOT / "contract" / "session-generate.md").read_text(encoding="utf-8")
    glance = text.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    assert text.index("## At a glance") < text.index("**SG-")
    rows = [r for r in glance.splitlines() if re.match(r"\| \d\. ", r)]
    questions = (ROOT / "docs" / "questions.md").read_text(encoding="utf-8")
    sections = re.split(r"^## (\d+)\. ", questions, flags=re.M)[1:]
    answers = {
        int(number): next(line for line in body.splitlines() if line.startswith("**Answer:**"))
        for number, body in zip(sections[::2], sections[1::2], strict=True)
    }
    assert len(rows) == len(answers) == len(DECISIONS), (len(rows), len(answers))
    named: set[str] = set()
    for number, row in enumerate(rows, start=1):
        assert row.startswith(f"| {number}. "), row
        ids = set(_clause_ids(row.rsplit("|", 2)[-2]))
        assert ids and ids <= known, f"{row}: unknown {ids - known}"
        answered = set(_clause_ids(answers[number]))
        assert answered <= ids, f"question {number}: the answer names {answered - ids} too"
        named |= ids
    for kind in ("FAIL", "KEEP", "REPLAY", "AGENTS"):  # the rows that claim a whole kind
        missing = {c for c in known if c.startswith(f"SG-{kind}-")} - named
        assert not missing, f"the {kind} row leaves out {sorted(missing)}"
    spelt = ("zero one two three four five six seven eight nine ten").split()[len(rows)]
    assert f"## At a glance: the {spelt} decisions" in text, "the heading miscounts the rows"
    assert len(glance.splitlines()) <= 20, "no longer one screen"


PROPER_NAMES = frozenset(
    {
        "Anthropic", "Bedrock", "Chat", "Claude", "Code", "Codex", "Completions", "Converse",
        "Errors", "Gemini", "Messages", "Mooncake", "OpenAI", "Python", "Responses", "Tracking",
        "Learned", "Cloudflare", "Google", "AWS",
    }
)  # fmt: skip
"""Capitalised words the contract may use mid-sentence without defining them: providers,
their APIs, clients, data sets, and class names said in words."""


def test_the_contract_defines_its_own_words() -> None:
    """A word the contract capitalises mid-sentence is one of its terms (Step, Session,
    Drain...) and has a row under Terms, unless it is a proper name; every term is used."""
    text = (ROOT / "contract" / "session-generate.md").read_text(encoding="utf-8")
    terms_section = text.split("## Terms", 1)[1].split("\n## ", 1)[0]
    terms = {
        word.strip().lower() for row in _table_rows(terms_section)[1:] for word in row[0].split(",")
    }
    prose = re.sub(r"```.*?```|`[^`]*`|\]\([^)]*\)|--8<-- \"[^\"]*\"", "", text, flags=re.S)
    prose = prose.replace(terms_section, "")
    used = {m.group(1) for m in re.finditer(r"(?<=[a-z,;:(] )([A-Z][a-z]+)\b", prose)}
    undefined = sorted(
        w
        for w in used
        if w not in PROPER_NAMES
        and w.lower().removesuffix("s") not in terms
        and w.lower() not in terms
    )
    assert "step" in terms and "session" in terms
    assert not undefined, f"define these under Terms (or add a proper name): {undefined}"
    unused = sorted(t for t in terms if t not in prose.lower())
    assert not unused, f"terms the contract never uses: {unused}"


def test_the_contract_has_a_version_and_a_changelog() -> None:
    """The version the contract states at its top is its changelog's newest entry; entries
    go newest first, versions and dates both descending."""
    text = (ROOT / "contract" / "session-generate.md").read_text(encoding="utf-8")
    stated = re.search(r"^Version \*\*(\d+\.\d+)\*\* \((\d{4}-\d\d-\d\d)\)", text, re.M)
    assert stated, "no `Version **X.Y** (YYYY-MM-DD)` line"
    log = text.split("\n## Changelog", 1)[1]
    entries = re.findall(r"^- \*\*(\d+)\.(\d+)\*\* \((\d{4}-\d\d-\d\d)\):", log, re.M)
    assert len(entries) >= 2
    assert (f"{entries[0][0]}.{entries[0][1]}", entries[0][2]) == stated.groups()
    versions = [(int(a), int(b)) for a, b, _ in entries]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    dates = [d for _, _, d in entries]
    assert dates == sorted(dates, reverse=True)


DECISION_STATUSES = ("proposed", "accepted", "superseded")


def test_each_decision_record_has_a_status_and_a_date() -> None:
    """Under its question, each decision record states its status and the date it was
    decided (and last revised, when it was): `**Status:** accepted · **Decided:** ...`."""
    import datetime

    for name in DECISIONS:
        text = (DOCS / "decisions" / f"{name}.md").read_text(encoding="utf-8")
        found = re.search(
            r"^\*\*Status:\*\* (\w+)(?: \([^)]*\))? · \*\*Decided:\*\* (\d{4}-\d\d-\d\d)"
            r"(?: · \*\*Revised:\*\* (\d{4}-\d\d-\d\d))?\.?$",
            text,
            re.M,
        )
        assert found, f"{name}: no status line"
        assert found.group(1) in DECISION_STATUSES, (name, found.group(1))
        decided = datetime.date.fromisoformat(found.group(2))
        revised = datetime.date.fromisoformat(found.group(3) or found.group(2))
        assert decided <= revised <= datetime.date.today(), name
        assert text.index("**Status:**") < text.index("## Options"), f"{name}: status too low"


def test_notebooks_open_with_the_question_and_end_with_the_answer() -> None:
    """Numbered without gaps; each opens with its question, and its last section is the
    answer, in markdown, with no code after it; questions cite docs/questions.md, never a
    document outside the repository."""
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    numbers = [int(p.name[:2]) for p in notebooks]
    assert numbers == list(range(len(numbers))), numbers
    for path in notebooks:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        first = "".join(cells[0]["source"])
        assert cells[0]["cell_type"] == "markdown" and "**Question" in first, path.name
        text = "\n".join("".join(c["source"]) for c in cells)
        headings = re.findall(r"^## (.+)$", text, flags=re.M)
        assert headings and "Answer" in headings[-1], (
            f"{path.name}: the last section is not an answer"
        )
        assert cells[-1]["cell_type"] == "markdown", f"{path.name} ends with code"
        assert "seed issue" not in text.lower(), f"{path.name} cites the seed issue"
        assert "../docs/questions.md" in text, f"{path.name} does not link its question"


def test_api_page_documents_the_public_surface(site: BuiltSite) -> None:
    """The API reference has an entry for every name of `sessiongen.__all__` and of the
    public modules' `__all__` (for `sessiongen.errors`, which has none, every exception it
    defines)."""
    import importlib

    text = (site.root / "api.html").read_text(encoding="utf-8")
    missing = []
    for name in ("sessiongen", "sessiongen.warming", "sessiongen.client", "sessiongen.errors"):
        module = importlib.import_module(name)
        public = getattr(module, "__all__", None) or [
            n
            for n, v in vars(module).items()
            if isinstance(v, type) and v.__module__ == name and not n.startswith("_")
        ]
        for member in public:
            # A function named like the submodule defining it is documented from there.
            ids = (f'id="{name}.{member}"', f'id="{name}.{member}.{member}"')
            if not any(i in text for i in ids):
                missing.append(f"{name}.{member}")
    plugins = importlib.import_module("sessiongen.plugins")
    missing += [
        f"sessiongen.plugins.{m}"
        for m in plugins.__all__
        if f'id="sessiongen.plugins.{m}"' not in text
    ]
    assert not missing, f"not on the API page: {missing}"


# --- no external resources in the built files ---------------------------------------------

# An absolute or protocol-relative URL: what a browser would fetch from another host.
_EXTERNAL = r"(?:https?:)?//[^\s\"'`)]+"
_CSS_LOADS = re.compile(
    rf"@import\s+(?:url\(\s*)?[\"']?({_EXTERNAL})|url\(\s*[\"']?({_EXTERNAL})", re.I
)
# In JavaScript: a call whose first argument is an absolute URL (fetch, importScripts, a
# script loader), a src/href assignment, or an import from a URL. Licence comments and
# messages that merely mention a URL are not loads.
_JS_LOADS = re.compile(
    r"[\w$.]+\(\s*[\"'`](https?://[^\"'`]+)"
    r"|\b(?:src|href)\s*[=:]\s*[\"'`](https?://[^\"'`]+)"
    r"|\bimport\s*(?:[\w${},*\s]+from\s*)?[\"'`](https?://[^\"'`]+)",
    re.I,
)
_FONT_HOSTS = re.compile(r"fonts\.(?:googleapis|gstatic)\.com|use\.typekit\.net", re.I)
# Loads that Material's JavaScript bundle holds but never performs with this configuration;
# the condition that would wake each one is asserted absent in the test below.
DORMANT_JS_LOADS = {
    "https://unpkg.com/mermaid": "only for a page with a .mermaid element",
    "https://unpkg.com/resize-observer-polyfill": "only in browsers without ResizeObserver",
}
# <link rel> values that name a relation rather than fetch something.
_NAVIGATIONAL_RELS = frozenset(
    {"canonical", "alternate", "prev", "next", "author", "license", "help", "search", "me"}
)
_SRC_ATTRS = frozenset({"src", "srcset", "poster", "data", "background", "imagesrcset"})


class _ResourceScanner(HTMLParser):
    """Collects every external URL an HTML page would load by itself, and the inline
    scripts and styles to scan as JavaScript and CSS."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.loads: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.classes: set[str] = set()
        self.components: set[str] = set()
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.classes.update(values.get("class", "").split())
        if "data-md-component" in values:
            self.components.add(values["data-md-component"])
        for name, value in values.items():
            # A data: URI (a notebook's figure) is inline; a `//` inside its base64 is no URL.
            if name in _SRC_ATTRS and not value.lstrip().lower().startswith("data:"):
                self.loads += [u for u in re.findall(_EXTERNAL, value)]
        href = values.get("href") or values.get("xlink:href") or ""
        if tag == "link":
            rels = set(values.get("rel", "").lower().split())
            if not rels or not rels <= _NAVIGATIONAL_RELS:
                self.loads += re.findall(rf"^\s*({_EXTERNAL})", href)
        elif tag in ("image", "use", "script", "feimage"):
            self.loads += re.findall(rf"^\s*({_EXTERNAL})", href)
        if tag == "meta" and values.get("http-equiv", "").lower() == "refresh":
            self.loads += re.findall(_EXTERNAL, values.get("content", ""))
        if "style" in values:
            self.styles.append(values["style"])
        if tag in ("script", "style"):
            self._in = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "style":
            self.styles.append(data)


def _css_loads(text: str) -> list[str]:
    return [a or b for a, b in _CSS_LOADS.findall(text)]


def _js_loads(text: str) -> list[str]:
    found = [next(g for g in groups if g) for groups in _JS_LOADS.findall(text)]
    return [u for u in found if not any(u.startswith(d) for d in DORMANT_JS_LOADS)]


def test_no_external_resources(site: BuiltSite) -> None:
    """No built page, stylesheet or script loads anything from another host; links a reader
    clicks (<a href>) may point anywhere."""
    offenders: list[str] = []
    classes: set[str] = set()
    components: set[str] = set()
    for path in sorted(site.root.rglob("*")):
        if path.suffix not in (".html", ".css", ".js"):
            continue
        rel = path.relative_to(site.root)
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{rel}: mentions {m}" for m in _FONT_HOSTS.findall(text)]
        if path.suffix == ".css":
            offenders += [f"{rel}: CSS loads {u}" for u in _css_loads(text)]
        elif path.suffix == ".js":
            offenders += [f"{rel}: JS loads {u}" for u in _js_loads(text)]
        else:
            scanner = _ResourceScanner()
            scanner.feed(text)
            scanner.close()
            offenders += [f"{rel}: HTML loads {u}" for u in scanner.loads]
            offenders += [
                f"{rel}: inline CSS loads {u}" for s in scanner.styles for u in _css_loads(s)
            ]
            offenders += [
                f"{rel}: inline JS loads {u}" for s in scanner.scripts for u in _js_loads(s)
            ]
            classes |= scanner.classes
            components |= scanner.components
    assert not offenders, "external resources in the built site:\n" + "\n".join(offenders)
    # The dormant loads above stay dormant: no mermaid diagram, no repository widget (which
    # would call GitHub's or GitLab's API).
    assert "mermaid" not in classes, "a .mermaid element makes Material fetch mermaid from unpkg"
    assert "source" not in components, "repo_url adds a widget that calls a forge's API"


# --- pages that restate code ----------------------------------------------------------------


def _table_rows(markdown: str) -> list[list[str]]:
    """Cells of every Markdown table row (header separators skipped)."""
    rows = []
    for line in markdown.splitlines():
        line = line.strip()
        if line.startswith("|") and not re.fullmatch(r"\|[\s:|-]+\|", line):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_errors_page_lists_every_problem_type() -> None:
    """Every error class with a problem+json type has a row in docs/errors.md with its HTTP
    status and exact `type`, is in the tree with its status, and no row names a class that
    is gone: the page is written by hand, this keeps it from drifting."""
    from sessiongen import errors

    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    problem_types = text.split("## Problem types", 1)[1].split("\n## ", 1)[0]
    rows = {r[0].strip("`"): r for r in _table_rows(problem_types) if len(r) == 3}
    with_problem = {
        name: obj
        for name, obj in vars(errors).items()
        if isinstance(obj, type) and hasattr(obj, "problem")
    }
    classes: dict[str, type[errors.SessiongenError]] = {
        name: obj for name, obj in with_problem.items() if issubclass(obj, errors.SessiongenError)
    }
    assert classes == with_problem, "a `problem` class outside the SessiongenError hierarchy"
    assert classes, "sessiongen.errors has no class with a `problem` attribute"
    problems = []
    for name, cls in classes.items():
        row = rows.get(name)
        expected = [f"`{name}`", str(cls.problem_status), f"`{cls.problem_type()}`"]
        if row != expected:
            problems.append(f"{name}: expected row {expected}, found {row}")
        if not re.search(rf"(?:^|[─ ]){name}\s+{cls.problem_status}\b", text, re.M):
            problems.append(f"{name}: missing from the exception tree (with {cls.problem_status})")
    stale = sorted(n for n in rows if n not in classes and n != "class")
    assert not problems, "docs/errors.md is out of date:\n" + "\n".join(problems)
    assert not stale, f"docs/errors.md lists classes that no longer exist: {stale}"


def test_errors_page_status_mapping() -> None:
    """The provider-status table in docs/errors.md is what `provider_error_for_status` does."""
    from sessiongen.errors import provider_error_for_status

    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    section = text.split("## From provider status to error", 1)[1]
    rows = [r for r in _table_rows(section) if len(r) == 2 and r[0] != "provider status"]
    assert rows, "no status table under 'From provider status to error'"
    for cell, raised in rows:
        message = "prompt is too long: 1 > 0" if "prompt is too long" in cell else "boom"
        for status in map(int, re.findall(r"\b\d{3}\b", cell)):
            error = provider_error_for_status(status, message)
            assert f"`{type(error).__name__}`" == raised, (status, message, raised)


def test_notebooks_page_lists_every_notebook() -> None:
    """Each notebooks/*.ipynb has a row on the Notebooks page, so a new notebook cannot be
    left out of the site."""
    listed = {r[0].strip("`") for r in _table_rows((DOCS / "notebooks.md").read_text("utf-8"))}
    missing = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb") if p.name not in listed)
    assert not missing, f"add a row for each to docs/notebooks.md: {missing}"


def _admin_sections() -> list[tuple[str, str]]:
    """(heading, body) of each `###` section of docs/emulator.md."""
    text = (DOCS / "emulator.md").read_text(encoding="utf-8")
    parts = re.split(r"^### (.+)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_emulator_page_documents_every_admin_endpoint() -> None:
    """Every `/_emulator` route (method and path) has its own heading, and every field of a
    fault and a script entry has a table row, so the admin reference cannot drift."""
    from fastapi.routing import APIRoute
    from sessiongen.emulator import FaultSpec, ScriptedResponse, create_app

    headings = " ".join(h for h, _ in _admin_sections())
    text = (DOCS / "emulator.md").read_text(encoding="utf-8")
    missing = [
        f"{method} {route.path}"
        for route in create_app().routes
        if isinstance(route, APIRoute) and route.path.startswith("/_emulator")
        for method in sorted(route.methods or ())
        if f"{method} {route.path}" not in headings
    ]
    for model in (FaultSpec, ScriptedResponse):
        missing += [
            f"{model.__name__}.{name}" for name in model.model_fields if f"| `{name}` |" not in text
        ]
    assert not missing, f"undocumented in docs/emulator.md: {missing}"


def _http(url: str, body: Any = None) -> tuple[int, Any]:
    """One JSON request with no proxy in between; (status, parsed body), errors included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method="GET" if body is None else "POST",
        headers={"content-type": "application/json"},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def _keys(value: Any) -> Any:
    """The shape of a JSON value: its keys, recursively through the first list item."""
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items() if k not in ("body", "headers")}
    if isinstance(value, list) and value:
        return [_keys(value[0])]
    return None


def test_emulator_page_examples_run() -> None:
    """The JSON examples on the Emulator page are what the emulator accepts and answers:
    each request body under a POST heading gets a 200, and each GET example has the keys of
    the real answer."""
    from sessiongen.emulator import BackgroundServer

    cacheable = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 8,
        "system": [{"type": "text", "text": "x " * 3000, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    checked = 0
    with BackgroundServer() as server:
        for heading, body in _admin_sections():
            endpoints = re.findall(r"`(GET|POST) (/_emulator/\w+)`", heading)
            examples = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", body, re.S)]
            post = [path for method, path in endpoints if method == "POST"]
            for example in examples:
                assert _http(server.url + "/_emulator/reset", {})[0] == 200
                if post:
                    status, answer = _http(server.url + post[0], example)
                    assert status == 200, (heading, example, answer)
                else:
                    assert _http(server.url + "/v1/messages", cacheable)[0] == 200
                    status, answer = _http(server.url + endpoints[0][1])
                    assert status == 200, (heading, answer)
                    assert _keys(example) == _keys(answer), heading
                checked += 1
    assert checked >= 10, f"only {checked} examples found on the Emulator page"


# --- in the browser -------------------------------------------------------------------------


@dataclass
class Browser:
    """One headless Chromium context and everything its pages asked the network for."""

    context: Any
    shots: Path
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def external_requests(self) -> list[str]:
        return [u for u in self.requests if not _is_local(u)]


def _is_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome-error", "file"):
        return True
    return (parts.hostname or "") in LOOPBACK_HOSTS or (parts.hostname or "").startswith("127.")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Debian's Chromium (else the build `uv run playwright install chromium` put in
    Playwright's cache) driven by Playwright, with a fresh profile. Any request to a host
    that is not loopback is recorded and then aborted, so a regression fails fast instead of
    waiting on a timeout."""
    from playwright.sync_api import Route, sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    shots = tmp_path_factory.mktemp("screenshots")
    with sync_playwright() as playwright:
        executable = _chromium(playwright)
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(executable),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1366, "height": 900},
            service_workers="block",
        )
        probe = Browser(context, shots)

        def guard(route: Route) -> None:
            if _is_local(route.request.url):
                route.continue_()
            else:
                route.abort("blockedbyclient")

        context.on("request", lambda request: probe.requests.append(request.url))
        context.on("weberror", lambda error: probe.errors.append(str(error.error)))
        context.route("**/*", guard)
        try:
            yield probe
        finally:
            context.close()


def _chromium(playwright: Any) -> Path:
    """The browser to drive: Debian's, else Playwright's own build; when neither is
    installed the test skips with how to install one, or fails when the environment says
    a browser is required (CI)."""
    if CHROMIUM.exists():
        return CHROMIUM
    bundled = Path(playwright.chromium.executable_path)
    if bundled.exists():
        return bundled
    if os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(INSTALL_HINT)
    pytest.skip(INSTALL_HINT)


def _open(browser: Browser, url: str) -> Any:
    page = browser.context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.on(
        "console",
        lambda message: browser.errors.append(message.text) if message.type == "error" else None,
    )
    page.goto(url, wait_until="load")
    return page


def test_pages_render_and_navigate_offline(request: pytest.FixtureRequest, base_url: str) -> None:
    """Home, then the Contract through the navigation, then Errors, in a real browser: the
    titles and headings a reviewer sees, working navigation and search, no request to any
    host but loopback and no script error. Screenshots land in the test's tmp dir.

    Without Chromium this skips, saying how to install it; CI sets
    SESSIONGEN_REQUIRE_BROWSER=1, which turns the skip into a failure, so a broken install
    step cannot hide behind a skip."""
    from playwright.sync_api import expect

    browser: Browser = request.getfixturevalue("browser")
    started = time.monotonic()
    page = _open(browser, base_url + "/index.html")
    try:
        expect(page).to_have_title("sessiongen")
        expect(page.locator("h1")).to_have_text(re.compile(r"sessiongen"))
        expect(page.get_by_text("uv run sessiongen demo")).to_be_visible()
        page.screenshot(path=browser.shots / "home.png", full_page=True)

        # The search index and worker ship with the site, so search works offline.
        search = page.locator("input.md-search__input")
        search.click()
        search.press_sequentially("problem")  # Material searches on key events, not fill()
        expect(page.locator(".md-search-result__item").first).to_be_visible()
        page.keyboard.press("Escape")

        nav = page.locator("nav.md-nav--primary a.md-nav__link")
        nav.filter(has_text=re.compile(r"^\s*Contract\s*$")).click()
        expect(page).to_have_url(re.compile(r"/contract\.html$"))
        expect(page).to_have_title("Contract - sessiongen")
        expect(page.locator("article h1")).to_contain_text("session.generate")
        page.screenshot(path=browser.shots / "contract.png", full_page=True)

        page.goto(base_url + "/errors.html", wait_until="load")
        expect(page).to_have_title("Errors - sessiongen")
        expect(page.locator("article h1")).to_have_text(re.compile(r"Errors"))
        row = page.locator("tr", has_text="https://sessiongen.dev/problems/provider-overloaded")
        expect(row).to_contain_text("ProviderOverloaded")
        expect(row.locator("td").nth(1)).to_have_text("503")
        page.screenshot(path=browser.shots / "errors.png", full_page=True)
        page.wait_for_load_state("networkidle")
    finally:
        page.close()

    external = browser.external_requests()
    assert not external, f"pages asked for non-loopback hosts: {external}"
    assert any(u.endswith("search_index.json") for u in browser.requests), browser.requests
    assert not browser.errors, f"browser errors: {browser.errors}"
    assert (browser.shots / "contract.png").stat().st_size > 10_000
    print(f"screenshots in {browser.shots} ({time.monotonic() - started:.1f}s in the browser)")


def test_clause_anchor_traceability_and_notebook_in_browser(
    request: pytest.FixtureRequest, base_url: str
) -> None:
    """What a review comment links to: `contract.html#sg-warm-1` lands on that clause; the
    traceability matrix shows a row per clause and its test links open the test's line; a
    notebook page shows its stored figures as images, all with no request off loopback."""
    from playwright.sync_api import expect

    browser: Browser = request.getfixturevalue("browser")
    first_request, first_error = len(browser.requests), len(browser.errors)
    page = _open(browser, base_url + "/contract.html#sg-warm-1")
    try:
        clause = page.locator("#sg-warm-1")
        expect(clause).to_be_visible()
        expect(clause).to_contain_text("SG-WARM-1 · Warming shape.")
        expect(clause).to_be_in_viewport()
        expect(clause.locator("a.headerlink")).to_have_attribute("href", "#sg-warm-1")
        page.screenshot(path=browser.shots / "contract-sg-warm-1.png")

        page.goto(base_url + "/traceability.html", wait_until="load")
        expect(page).to_have_title("Traceability - sessiongen")
        rows = page.locator("article details.sg-trace")
        expect(rows).to_have_count(len(_clauses()))
        row = page.locator("#trace-sg-warm-1")
        expect(row.locator('a[href*=".py.html#L-"]').first).to_be_visible()  # open when wide
        page.screenshot(path=browser.shots / "traceability.png", full_page=True)
        row.locator('a[href*=".py.html#L-"]').first.click()
        expect(page).to_have_url(re.compile(r"/source/tests/.+\.py\.html#L-\d+$"))
        target = page.url.rsplit("#", 1)[1]
        expect(page.locator(f"[id='{target}']")).to_contain_text("def test")
        page.screenshot(path=browser.shots / "test-source.png")

        page.goto(base_url + "/notebooks/03-cache-ttl-warming.html", wait_until="load")
        figure = page.locator("article .jp-RenderedImage img").first
        figure.scroll_into_view_if_needed()
        expect(figure).to_be_visible()
        width = figure.evaluate("img => img.complete ? img.naturalWidth : 0")
        assert width > 100, f"notebook 03's first figure did not render ({width}px wide)"
        page.screenshot(path=browser.shots / "notebook-03.png", full_page=True)
        page.wait_for_load_state("networkidle")
    finally:
        page.close()

    external = [u for u in browser.requests[first_request:] if not _is_local(u)]
    assert not external, f"pages asked for non-loopback hosts: {external}"
    assert not browser.errors[first_error:], f"browser errors: {browser.errors[first_error:]}"
    assert (browser.shots / "notebook-03.png").stat().st_size > 50_000
    print(f"screenshots in {browser.shots}")


WIDE_PAGES = ("contract", "benchmarks", "traces", "traceability", "warming", "risks")


def test_wide_pages_fit_a_1400_px_screen(request: pytest.FixtureRequest, base_url: str) -> None:
    """At 1400 px the content column is wider than Material's default (about 690 px between
    the two sidebars), no page scrolls sideways, every table fits the column whole (the
    contract's 10-column tools-policy matrix included), and a code block wider than the
    column scrolls inside its own box rather than being cut."""
    browser: Browser = request.getfixturevalue("browser")
    page = browser.context.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        for name in WIDE_PAGES:
            page.goto(f"{base_url}/{name}.html", wait_until="load")
            fit = page.evaluate(
                """() => {
                  const article = document.querySelector('article.md-content__inner');
                  const loose = [...article.querySelectorAll('table, pre')].filter(el => {
                    const box = el.closest('.md-typeset__scrollwrap, .highlight') || el.parentElement;
                    const scrolls = getComputedStyle(box).overflowX === 'auto';
                    return el.scrollWidth > box.clientWidth + 1 && !scrolls;
                  });
                  const wide = [...article.querySelectorAll('table')].filter(t => {
                    const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
                    return box.scrollWidth > box.clientWidth + 1;
                  });
                  return {
                    wide: wide.map(t => t.scrollWidth + ' px: ' + t.innerText.slice(0, 60)),
                    column: article.getBoundingClientRect().width,
                    pageScroll: document.documentElement.scrollWidth - window.innerWidth,
                    loose: loose.map(el => el.tagName + ': ' + el.innerText.slice(0, 60)),
                  };
                }"""
            )
            assert fit["column"] >= 850, f"{name}: content column {fit['column']:.0f} px"
            assert fit["pageScroll"] <= 0, f"{name} scrolls sideways by {fit['pageScroll']} px"
            assert not fit["loose"], f"{name}: wider than the column, not scrolling: {fit['loose']}"
            assert not fit["wide"], f"{name}: tables wider than the column: {fit['wide']}"
        page.goto(f"{base_url}/contract.html", wait_until="load")
        page.screenshot(path=browser.shots / "contract-1400.png")
    finally:
        page.close()


def test_notebook_tables_fit_a_1400_px_screen(
    request: pytest.FixtureRequest, base_url: str
) -> None:
    """At 1400 px every table a notebook printed (notebook 06's per-request calibration
    DataFrame the widest) fits its output box whole: nothing is cut or hidden behind a
    scroll."""
    browser: Browser = request.getfixturevalue("browser")
    page = browser.context.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
            page.goto(f"{base_url}/notebooks/{notebook.stem}.html", wait_until="load")
            wide = page.evaluate(
                """() => [...document.querySelectorAll('article .jp-OutputArea-output table')]
                  .map(t => [t.scrollWidth, t.closest('.jp-OutputArea-output').clientWidth,
                             t.innerText.slice(0, 60)])
                  .filter(([table, box]) => table > box + 1)"""
            )
            assert not wide, f"{notebook.name}: tables wider than their output box: {wide}"
        page.goto(f"{base_url}/notebooks/06-replay-fidelity.html", wait_until="load")
        page.screenshot(path=browser.shots / "notebook-06-1400.png", full_page=True)
    finally:
        page.close()


PHONE = {"width": 390, "height": 844}
PHONE_PAGE_HEIGHT = 6_000
"""How tall the traceability page may be on a phone (it was 47,000 px as a table)."""


def test_traceability_on_a_phone_is_a_list_of_clauses(
    request: pytest.FixtureRequest, base_url: str
) -> None:
    """On a phone the traceability page is one collapsed line or two per clause, no taller
    than PHONE_PAGE_HEIGHT, and does not scroll sideways; a link to one clause's section
    opens that section, with its tests."""
    from playwright.sync_api import expect

    browser: Browser = request.getfixturevalue("browser")
    page = browser.context.new_page()
    page.set_viewport_size(PHONE)
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(f"{base_url}/traceability.html", wait_until="load")
        height = page.evaluate("document.documentElement.scrollHeight")
        sideways = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert height <= PHONE_PAGE_HEIGHT, f"traceability is {height} px tall on a phone"
        assert sideways <= 0, f"traceability scrolls sideways by {sideways} px on a phone"
        page.screenshot(path=browser.shots / "traceability-phone.png", full_page=True)
        page.goto(f"{base_url}/traceability.html#trace-sg-keep-2", wait_until="load")
        section = page.locator("#trace-sg-keep-2")
        expect(section).to_have_attribute("open", "")
        expect(section.locator('a[href*=".py.html#L-"]').first).to_be_visible()
        expect(page.locator("#trace-sg-keep-1 a[href*='.py.html#L-']").first).to_be_hidden()
    finally:
        page.close()


def test_search_works_from_disk(request: pytest.FixtureRequest, site: BuiltSite) -> None:
    """Opened as files (file://), where a browser starts no Web Worker for the page: search
    still finds pages (the index as search/search_index.js, docs/assets/file-worker.js for
    the worker), and no request leaves the machine."""
    from playwright.sync_api import expect

    browser: Browser = request.getfixturevalue("browser")
    first_request, first_error = len(browser.requests), len(browser.errors)
    page = _open(browser, (site.root / "decisions" / "warming.html").as_uri())
    try:
        search = page.locator("input.md-search__input")
        search.click()
        search.press_sequentially("problem")
        result = page.locator(".md-search-result__item").first
        expect(result).to_be_visible()
        result.locator("a").first.click()
        assert page.url.startswith((site.root).as_uri() + "/"), page.url
        page.screenshot(path=browser.shots / "search-from-disk.png")
    finally:
        page.close()
    external = [u for u in browser.requests[first_request:] if not _is_local(u)]
    assert not external, f"pages asked for non-loopback hosts: {external}"
    assert not browser.errors[first_error:], f"browser errors: {browser.errors[first_error:]}"


def test_the_404_page_links_relatively(site: BuiltSite) -> None:
    """Like every other page: opened from disk or served under a path (`/sessiongen/`), a
    root-absolute `/assets/...` would miss the site."""
    text = (site.root / "404.html").read_text()
    absolute = re.findall(r'(?:href|src)="/(?!/)[^"]*"|"(?:base|search)": "/[^"]*"', text)
    assert not absolute, f"404.html links root-absolutely: {absolute[:5]}"
    assert 'href="assets/sessiongen.css"' in text


def test_the_404_page_is_styled_from_disk(request: pytest.FixtureRequest, site: BuiltSite) -> None:
    """Opened as a file, the 404 page loads its stylesheets and links back to the home page."""
    from playwright.sync_api import expect

    browser: Browser = request.getfixturevalue("browser")
    page = _open(browser, (site.root / "404.html").as_uri())
    try:
        header = page.locator("header.md-header")
        expect(header).to_be_visible()
        colour = header.evaluate("el => getComputedStyle(el).backgroundColor")
        assert colour not in ("rgba(0, 0, 0, 0)", "transparent"), "404.html lost its stylesheet"
        home = page.locator("a.md-header__button.md-logo")
        assert home.evaluate("a => a.href") == (site.root / "index.html").as_uri()
    finally:
        page.close()


def test_warming_page_examples_run(tmp_path: Path) -> None:
    """Every Python example on the Warming page runs as written, and the keeper example
    shows what the page says: pings that read, and a next turn that reads the cache."""

    page = (ROOT / "docs" / "warming.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) >= 2
    outputs = []
    for k, code in enumerate(blocks):
        script = tmp_path / f"example_{k}.py"
        script.write_text(code)
        run = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path
        )
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout)
    keeper = outputs[0].splitlines()
    assert keeper[0].startswith("[295.0, 590.0, 885.0, 1180.0]")
    assert int(keeper[1].split()[3]) > 0
    (saved,) = [o for o in outputs if o.startswith("tracking pinged at")]
    assert saved.startswith("tracking pinged at [295.0")  # the loaded fitted policy pings
    assert any("best online: learned" in o for o in outputs)


def test_http_page_plugin_example_runs(tmp_path: Path) -> None:
    """The plugin example on the HTTP page runs as written and prints what the page says."""

    page = (ROOT / "docs" / "http.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", page, re.S)
    script = tmp_path / "plugin_example.py"
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    expected = re.search(r"It prints `(.*?)`", page)
    assert expected is not None and run.stdout.strip() == expected.group(1)
