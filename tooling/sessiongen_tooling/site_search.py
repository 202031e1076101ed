"""The docs site's search index as a script, for a site opened from disk (file://): there
Material reads `search/search_index.js` (`var __index = ...`), because a page may load a
script from disk but not fetch a file. Written after every build from the JSON index, by the
docs hook (a whole build) and by the workbench (after it merges a partial build's index), so
both always agree. Internal: not part of the public surface.
"""

from __future__ import annotations

from pathlib import Path


def write_search_script(index: Path) -> None:
    """`search_index.js` beside the JSON `index`, holding the same index; nothing when the
    build wrote no index."""
    if index.is_file():
        index.with_suffix(".js").write_text(
            "var __index = " + index.read_text(encoding="utf-8"), encoding="utf-8"
        )
