"""A site opened from disk searches `search/search_index.js`: after a whole build (the docs
hook) and after the workbench's partial build merges the index, the script holds exactly the
JSON index, so search from disk never sees fewer pages than search over HTTP."""

from __future__ import annotations

import json
from pathlib import Path

from sessiongen_tooling.site_search import write_search_script
from sessiongen_tooling.workbench import _merge_search_index


def _script_index(index: Path) -> object:
    text = index.with_suffix(".js").read_text(encoding="utf-8")
    assert text.startswith("var __index = ")
    return json.loads(text.removeprefix("var __index = "))


def test_the_script_is_the_json_index(tmp_path: Path) -> None:
    index = tmp_path / "search_index.json"
    index.write_text(json.dumps({"docs": [{"location": "a.html", "text": "x"}]}))
    write_search_script(index)
    assert _script_index(index) == json.loads(index.read_text())
    write_search_script(tmp_path / "missing.json")  # no index, no script
    assert not (tmp_path / "missing.js").exists()


def test_a_partial_build_keeps_every_page_in_the_script(tmp_path: Path) -> None:
    index = tmp_path / "search_index.json"
    before = {"config": {}, "docs": [{"location": "a.html"}, {"location": "b.html#x"}]}
    index.write_text(json.dumps({"config": {}, "docs": [{"location": "b.html"}]}))
    _merge_search_index(index, before)
    merged = json.loads(index.read_text())
    assert {d["location"] for d in merged["docs"]} == {"a.html", "b.html"}
    assert _script_index(index) == merged
