"""MkDocs hook (mkdocs.yml `hooks:`) for the sessiongen site: clause anchors and their tests,
the generated traceability and open-risks pages, the notebooks and the test sources the
traceability page links to, search from disk.

- Every clause heading of the rendered contract (`**SG-WARM-1 · Warming shape.**`) becomes an
  element with `id="sg-warm-1"` and a permalink, so a review comment can link to
  `contract.html#sg-warm-1`; every other plain-text mention of a clause id, on any page,
  links there. Under each clause, a collapsed list of the tests marked with it (each linked
  to its line) and its traceability section. The contract's text is not edited: this works
  on the rendered HTML.
- `risks.md` (Open risks) is generated at build time from the contract's "Not decided here",
  what notebooks say their evidence does not show and every `UNCONFIRMED` marker of the docs
  and the code (`sessiongen_tooling.risks`); the committed docs/risks.md only says so.
- `traceability.md` is generated at build time from the contract, the
  `@pytest.mark.clause` markers and the notebooks, by `sessiongen_tooling.traceability` (the module
  `tests/test_contract_trace.py` uses), so the page and the trace test cannot disagree.
- The notebooks in `notebooks/` join the site as pages (mkdocs-jupyter renders them with
  their stored outputs), and each test file a marker is in joins it as a static,
  highlighted source page with one anchor per line (`#L-42`), so the links work offline.
- The Notebooks section of the nav is made from `notebooks/*.ipynb` (after the page
  `notebooks.md`), so a notebook cannot be missing from it or listed out of order.
- Every figure stored in a notebook is also a file of the site,
  `figures/<notebook stem>-<n>.png` (n counts the notebook's PNG outputs from 1), so a
  decision record can show the figure its decision rests on, next to a link to the
  notebook section that computes it.
- A notebook's markdown links to the docs as `../docs/page.md#anchor` and to another
  notebook as `02-prep-parity.ipynb` (right in JupyterLab and on GitHub); on the rendered
  notebook page they point at `../page.html` and `02-prep-parity.html`.
- The contract's links to notebooks and docs pages (`../notebooks/…`, `../docs/…`, relative
  to `contract/`) point at their pages.
- After the build, `search/search_index.js` (the index as a script), which is what Material
  searches on a page opened from disk (docs/assets/file-worker.js stands in for the worker).
- MathJax and mermaid script tags that nbconvert's template adds (loaded from a CDN) are
  removed from notebook pages: the notebooks use neither, and the site loads nothing remote.
"""

from __future__ import annotations

import base64
import html
import json
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from sessiongen_tooling import risks, site_search, traceability

ROOT = Path(__file__).resolve().parent.parent
TRACEABILITY = "traceability.md"
RISKS = "risks.md"
CONTRACT_PAGE = "contract.md"
SOURCE_DIR = "source"  # test sources, as static pages, under site/source/tests/...
NOTEBOOKS_DIR = "notebooks"
NOTEBOOKS_PAGE = "notebooks.md"
FIGURES_DIR = "figures"
_DOCS_LINK = re.compile(r'href="\.\./docs/([\w/.-]+)\.md(#[^"]*)?"')
_NOTEBOOK_LINK = re.compile(r'href="([\w.-]+)\.ipynb(#[^"]*)?"')  # notebook to notebook

_CLAUSE_HEADING = re.compile(r"<p><strong>((SG-[A-Z]+-\d+)\b[^<]*)</strong>")
_TAG = re.compile(r"(<!--.*?-->|<[^>]*>)", re.S)
_TAG_NAME = re.compile(r"<\s*(/?)\s*([a-zA-Z][a-zA-Z0-9]*)")
# Text inside these is never turned into a clause link: code, existing links, headings.
_NO_LINK = frozenset({"a", "code", "pre", "script", "style", "textarea", "title"}) | {
    f"h{n}" for n in range(1, 7)
}
# What nbconvert's template adds to each notebook page; both would load from a CDN.
_NB_REMOTE_BLOCKS = (
    re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S),
    re.compile(r"<script type=\"module\">(?:(?!</script>).)*?mermaid.*?</script>", re.S),
    re.compile(r"<script[^>]*src=\"https?://[^\"]*mermaid[^\"]*\"[^>]*>\s*</script>", re.S),
)

_clauses: dict[str, traceability.Clause] = {}
_marked: dict[str, list[traceability.MarkedTest]] = {}


# --- config --------------------------------------------------------------------------------


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The Notebooks nav section lists `notebooks.md`, then every notebook in file order."""
    pages = [NOTEBOOKS_PAGE] + [
        f"{NOTEBOOKS_DIR}/{p.name}" for p in sorted((ROOT / NOTEBOOKS_DIR).glob("*.ipynb"))
    ]
    for entry in config.nav or []:
        if isinstance(entry, dict) and "Notebooks" in entry:
            entry["Notebooks"] = pages
    return config


# --- files ---------------------------------------------------------------------------------


@event_priority(100)  # before mkdocs-jupyter's on_files, so it wraps the notebooks
def on_files(files: Files, config: MkDocsConfig) -> Files:
    _clauses.clear()
    _clauses.update((c.id, c) for c in traceability.contract_clauses(ROOT))
    tests = traceability.marked_tests(ROOT)
    _marked.clear()
    _marked.update(tests)
    for notebook in sorted((ROOT / NOTEBOOKS_DIR).glob("*.ipynb")):
        files.append(
            File(
                f"{NOTEBOOKS_DIR}/{notebook.name}",
                str(ROOT),
                config.site_dir,
                config.use_directory_urls,
            )
        )
        for name, png in _figures(notebook):
            files.append(File.generated(config, f"{FIGURES_DIR}/{name}", content=png))
    for path in sorted({t.path for ts in tests.values() for t in ts}):
        files.append(
            File.generated(config, f"{SOURCE_DIR}/{path}.html", content=_source_page(path))
        )
    files.append(File.generated(config, TRACEABILITY, content=_traceability(tests)))
    return files


def _figures(notebook: Path) -> list[tuple[str, bytes]]:
    """The notebook's stored PNG figures, in order, as `<stem>-<n>.png`."""
    cells: list[dict[str, Any]] = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    pngs = [
        output["data"]["image/png"]
        for cell in cells
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    return [
        (f"{notebook.stem}-{n}.png", base64.b64decode("".join(png)))
        for n, png in enumerate(pngs, start=1)
    ]


def _source_page(path: str) -> str:
    """One test file as a standalone highlighted page, each line a `#L-N` target."""
    formatter = HtmlFormatter(linenos="inline", linespans="L", cssclass="source")
    code = highlight((ROOT / path).read_text(encoding="utf-8"), PythonLexer(), formatter)
    css = formatter.get_style_defs(".source")
    back = posixpath.relpath("traceability.html", posixpath.dirname(f"{SOURCE_DIR}/{path}"))
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(path)} - sessiongen</title>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<style>{css}\nbody{{font-family:system-ui,sans-serif;margin:1rem 2rem}}"
        ".source pre{font-size:13px;line-height:1.45}"
        "span[id]{scroll-margin-top:8em}span[id]:target{background:#fff3a8}</style>"
        f'</head><body><p><a href="{back}">Traceability</a></p>'
        f"<h1><code>{html.escape(path)}</code></h1>{code}</body></html>\n"
    )


def _test_items(tests: list[traceability.MarkedTest], base: str = "") -> str:
    """The tests marked with a clause, as list items linking each to its line."""
    return "".join(
        f'<li><a href="{base}{SOURCE_DIR}/{t.path}.html#L-{t.line}"><code>{t.path}:{t.line}</code>'
        f"</a> <code>{html.escape(t.name)}</code></li>"
        for t in tests
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _traceability(tests: dict[str, list[traceability.MarkedTest]]) -> str:
    """One collapsed section per clause (so the page is a list of clauses on a phone; a wide
    screen opens them all, and a link to `#trace-sg-…` opens its own)."""
    mentions = traceability.notebook_mentions(ROOT)
    sections = []
    for clause in _clauses.values():
        found = tests.get(clause.id, [])
        notebooks = mentions.get(clause.id, [])
        title = html.escape(clause.title or "(purpose)")
        notebook_links = ", ".join(
            f'<a href="{NOTEBOOKS_DIR}/{Path(name).stem}.html"><code>{name}</code></a>'
            for name in notebooks
        )
        sections.append(
            f'<details class="sg-trace" id="trace-{clause.anchor}">'
            f'<summary><a href="contract.html#{clause.anchor}">{clause.id}</a> {title} '
            f'<span class="sg-trace-counts">{_plural(len(found), "test")}'
            f"{', ' + _plural(len(notebooks), 'notebook') if notebooks else ''}</span></summary>"
            f"<ul>{_test_items(found) or '<li><strong>no marked test</strong></li>'}</ul>"
            + (f"<p>Notebooks: {notebook_links}</p>" if notebooks else "")
            + "</details>"
        )
    total = sum(len(ts) for cid, ts in tests.items() if cid in _clauses)
    return "\n".join(
        [
            "---",
            "hide: [toc]",  # the list needs the width; the page has no sections
            "---",
            "",
            "# Traceability",
            "",
            "Generated when the site is built, from `contract/session-generate.md`, the",
            '`@pytest.mark.clause("SG-…")` markers in `tests/` and the notebooks, by the same',
            "code as `tests/test_contract_trace.py` (which fails when a clause has no marked",
            "test). A test counts only by its marker; a notebook is listed when a cell mentions",
            "the clause id. Each test links to its line in a copy of the source shipped with",
            "the site. Each clause is an anchor (`traceability.html#trace-sg-tools-1`); on a",
            "narrow screen the clauses are collapsed: open one to see its tests.",
            "",
            f"{len(_clauses)} clauses, {total} marked tests.",
            "",
            '<div class="sg-trace-list" markdown="0">',
            *sections,
            "</div>",
            _OPEN_DETAILS,
            "",
        ]
    )


_OPEN_DETAILS = """<script>
/* Wide screens show every clause open; a link to one clause opens it wherever it lands. */
(() => {
  const open = () => {
    const wide = window.matchMedia("(min-width: 60em)").matches;
    if (wide) document.querySelectorAll("details.sg-trace").forEach(d => { d.open = true; });
    const target = location.hash && document.getElementById(location.hash.slice(1));
    if (target && target.tagName === "DETAILS") target.open = true;
  };
  open();
  window.addEventListener("hashchange", open);
})();
</script>"""


def _inline(text: str) -> str:
    """A quoted sentence as safe inline HTML: escaped, its `code` spans kept, its Markdown
    links reduced to their text (a quote cut mid-markup must not open a tag)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    parts = html.escape(text).split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: no code spans
        return "`".join(parts)
    return "".join(f"<code>{p}</code>" if k % 2 else p for k, p in enumerate(parts))


def _risks() -> str:
    """The Open risks page: the contract's undecided items, what the notebooks say their
    evidence does not show, and every UNCONFIRMED marker of the docs and the code, read from
    the repository at build time (`sessiongen_tooling.risks`)."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    docs = risks.docs_markers(ROOT, pages)
    code = risks.code_markers(ROOT)
    shown = risks.not_shown(ROOT)
    undecided = [
        item.replace(f"](../{NOTEBOOKS_DIR}/", f"]({NOTEBOOKS_DIR}/").replace("](../docs/", "](")
        for item in risks.undecided(ROOT)
    ]
    lines = [
        "# Open risks",
        "",
        "Everything this work leaves open, on one page, generated when the site is built so it",
        f"cannot go stale: what the [contract](contract.md#{risks.undecided_anchor(ROOT)})",
        "does not decide,",
        "what a notebook says its evidence does not show, and each behaviour the emulator",
        "models without a source to confirm it (marked `" + risks.MARKER + "` where it is",
        "written, in the docs and in the code). `tests/docs/test_site.py` counts the markers",
        "itself and fails when this page misses one.",
        "",
        "## Not decided by the contract",
        "",
        *(f"- {item}" for item in undecided),
        "",
        "## What the evidence does not show",
        "",
    ]
    for entry in shown:
        lines += [
            f"From [{entry.notebook}, {entry.section}]({NOTEBOOKS_DIR}/{entry.notebook}#"
            f"{entry.anchor}), as its last run printed it:",
            "",
            *(f"- {_inline(item)}" for item in entry.items),
            "",
        ]
    total = sum(m.count for m in docs)
    lines += [
        f"## Unconfirmed in the docs ({total})",
        "",
        "Each quoted where it is written, linked to its section.",
        "",
    ]
    for page in pages:
        on_page = [m for m in docs if m.path == page.relative_to(ROOT).as_posix()]
        if not on_page:
            continue
        url = page.relative_to(ROOT / "docs").as_posix()
        lines += [f"### {url} ({sum(m.count for m in on_page)})", ""]
        lines += [
            f'- [{html.escape(m.section or url)}]({url}#{m.anchor}): <span class="sg-risk">'
            f"{_inline(m.text)}</span>"
            for m in on_page
        ]
        lines.append("")
    lines += [
        f"## Unconfirmed in the code ({sum(m.count for m in code)})",
        "",
        "In the package's modules and catalog data (`reference_impl/`), by file and line.",
        "",
        '<details class="sg-risks-code"><summary>Show them</summary>',
        "<ul>",
        *(
            f'<li><code>{m.path}:{m.line}</code>: <span class="sg-risk">{_inline(m.text)}</span></li>'
            for m in code
        ),
        "</ul>",
        "</details>",
        "",
    ]
    return "\n".join(lines)


# --- pages ---------------------------------------------------------------------------------


_SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$', re.M)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """The contract links a notebook as `../notebooks/NN-name.ipynb`, relative to `contract/`
    (right on GitHub and in an editor). `docs/contract.md` includes it whole, so the include
    is done here, with those links made relative to `docs/` (the snippets extension still
    includes the evidence tables the contract itself includes)."""
    if page.file.src_uri == RISKS:  # docs/risks.md says where the page comes from
        return _risks()
    if page.file.src_uri != CONTRACT_PAGE:
        return markdown

    def include(match: re.Match[str]) -> str:
        text = (ROOT / match.group(1)).read_text(encoding="utf-8")
        return text.replace(f"](../{NOTEBOOKS_DIR}/", f"]({NOTEBOOKS_DIR}/").replace(
            "](../docs/", "]("
        )

    return _SNIPPET.sub(include, markdown)


def on_page_content(html_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri.endswith(".ipynb"):
        for block in _NB_REMOTE_BLOCKS:
            html_text = block.sub("", html_text)
        html_text = _NOTEBOOK_LINK.sub(
            lambda m: f'href="{m.group(1)}.html{m.group(2) or ""}"', html_text
        )
        html_text = _DOCS_LINK.sub(
            lambda m: f'href="../{m.group(1)}.html{m.group(2) or ""}"', html_text
        )
    if page.file.src_uri == CONTRACT_PAGE:
        html_text = _CLAUSE_HEADING.sub(_clause_heading, html_text)
        html_text = _CLAUSE_PARAGRAPH.sub(_with_tests, html_text)
        if page.present_anchor_ids is not None:  # so links to #sg-… validate like any anchor
            page.present_anchor_ids |= {c.anchor for c in _clauses.values()}
        contract_url = ""
    else:
        contract_url = posixpath.relpath("contract.html", posixpath.dirname(page.file.url) or ".")
    return _link_mentions(html_text, contract_url)


_CLAUSE_PARAGRAPH = re.compile(r'<p id="(sg-[a-z]+-\d+)" class="sg-clause">.*?</p>', re.S)


def _with_tests(match: re.Match[str]) -> str:
    """A clause's first paragraph, then the tests marked with it, collapsed, each linked to
    its line, and its row of the traceability page."""
    clause = next(c for c in _clauses.values() if c.anchor == match.group(1))
    tests = _marked.get(clause.id, [])
    return (
        f'{match.group(0)}<details class="sg-clause-tests"><summary>Tested by '
        f"{_plural(len(tests), 'test')}</summary><ul>{_test_items(tests)}</ul>"
        f'<p><a href="{TRACEABILITY.replace(".md", ".html")}#trace-{clause.anchor}">'
        f"{clause.id} on the traceability page</a></p></details>"
    )


def _clause_heading(match: re.Match[str]) -> str:
    text, clause_id = match.group(1), match.group(2)
    if clause_id not in _clauses:
        return match.group(0)
    anchor = _clauses[clause_id].anchor
    return (
        f'<p id="{anchor}" class="sg-clause"><strong class="sg-clause-id">{text}</strong>'
        f'<a class="headerlink" href="#{anchor}" title="Link to {clause_id}">¶</a>'
    )


def _link_mentions(html_text: str, contract_url: str) -> str:
    """Each clause id in running text becomes a link to its anchor on the contract page;
    code, links, headings and the clause headings themselves are left alone."""
    out: list[str] = []
    skipping: list[str] = []
    for part in _TAG.split(html_text):
        if part.startswith("<"):
            tag = _TAG_NAME.match(part)
            if tag:
                closing, name = tag.group(1) == "/", tag.group(2).lower()
                if closing and skipping and skipping[-1] == name:
                    skipping.pop()
                elif (
                    not closing
                    and not part.endswith("/>")
                    and (name in _NO_LINK or (name == "strong" and "sg-clause-id" in part))
                ):
                    skipping.append(name)
            out.append(part)
        elif skipping or "SG-" not in part:
            out.append(part)
        else:
            out.append(traceability.CLAUSE_ID.sub(lambda m: _mention(m, contract_url), part))
    return "".join(out)


def _mention(match: re.Match[str], contract_url: str) -> str:
    clause = _clauses.get(match.group(0))
    if clause is None:
        return match.group(0)
    title = html.escape(clause.title or clause.id, quote=True)
    return f'<a class="sg-clause-ref" href="{contract_url}#{clause.anchor}" title="{title}">{match.group(0)}</a>'


# --- search from disk ------------------------------------------------------------------------


def on_post_build(config: MkDocsConfig) -> None:
    """Opened from disk, Material reads the search index from `search/search_index.js` (a
    script can load over file://, a fetch cannot); written here from the JSON index, as
    Material's `offline` plugin would, without the CDN shim that plugin adds (the stand-in
    for the worker is docs/assets/file-worker.js)."""
    site_search.write_search_script(Path(config.site_dir) / "search" / "search_index.json")


# --- the 404 page ----------------------------------------------------------------------------

_ROOT_ABSOLUTE = re.compile(r'((?:href|src)=|"search": )"/(?!/)')


def on_post_template(output: str, template_name: str, config: MkDocsConfig) -> str:
    """Without a `site_url`, MkDocs writes the 404 page with root-absolute links (`/api.html`),
    which break when the site is opened from disk or served under a path (`/sessiongen/`).
    Relative links, like every other page's, work in both; with a `site_url` MkDocs knows the
    site's path and its links are left alone."""
    if template_name != "404.html" or config.site_url:
        return output
    output = output.replace('"base": "/"', '"base": "."')  # Material's base for its scripts
    return _ROOT_ABSOLUTE.sub(r'\1"', output)
