"""A realistic sample agent and workspace, shared by the demo, the lab, notebooks and tests.

The system prompt is long enough (about 1,300 tokens with the tool definitions) to pass the
1,024-token minimum cacheable length of claude-sonnet-4-6, so cache effects are visible.
"""

from __future__ import annotations

from pathlib import Path

from ..model import Agent, ModelRef

SYSTEM_PROMPT = (Path(__file__).parent / "system_prompt.md").read_text(encoding="utf-8")

SAMPLE_AGENT = Agent(
    name="forge",
    model=ModelRef(id="claude-sonnet-4-6"),
    system=SYSTEM_PROMPT,
    tools=("read_file", "list_files", "grep"),
    steps=6,
    max_output_tokens=512,
)

SAMPLE_WORKSPACE = {
    "AGENTS.md": "Run `pytest` before you report. Keep functions under 20 lines.\n",
    "src/app.py": (
        "def add(a, b):\n    return a + b\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n"
    ),
    "src/util.py": "TODO = 'remove me'\n",
    "tests/test_app.py": "from src.app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
