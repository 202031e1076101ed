"""The measured figures and rankings written by hand in the docs, checked against their records.

Each test finds one sentence (or one table) of a page by a pattern, reads the figures or the
order it states, and compares them with the generated record they come from: a table of
`contract/evidence/` (`uv run python -m sessiongen_tooling.evidence`), `benchmarks/bench.json`
(`uv run sessiongen bench`) or a notebook's stored output (`uv run sessiongen workbench`). A
test fails when the record no longer bears the sentence out (fix the sentence, or find out
why the record moved) and when the sentence is reworded past its pattern (check the new
wording against the record, then update the pattern). Fast: files of the repository only,
no site build, no network.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONTRACT = ROOT / "contract" / "session-generate.md"
EVIDENCE = ROOT / "contract" / "evidence"
BENCH = ROOT / "benchmarks" / "bench.json"
NOTEBOOK_03 = ROOT / "notebooks" / "03-cache-ttl-warming.ipynb"

FAR_MORE = 1.25
"""What "costs far more" claims at least: the dearer policy's ratio over the cheaper one's."""
BARELY = 1.05
"""What "barely beats" allows at most: the beaten policy's ratio over the winner's."""

Row = dict[str, str]


def prose(path: Path) -> str:
    """The file's text with each run of whitespace made one space, so a sentence matches
    however its lines are wrapped."""
    return " ".join(path.read_text(encoding="utf-8").split())


def claim(path: Path, pattern: str, text: str | None = None) -> re.Match[str]:
    """The sentence of `path` (or of `text`, read from it) that `pattern` matches."""
    match = re.search(pattern, prose(path) if text is None else text)
    assert match, (
        f"{path.relative_to(ROOT)}: no sentence matches {pattern!r}. If the claim was "
        "reworded, check it against its record and update the pattern here."
    )
    return match


def tables(path: Path) -> list[list[Row]]:
    """The markdown tables of a file, in order, each a list of rows keyed by its header."""
    found: list[list[Row]] = []
    header: list[str] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            found.append([])
        elif not set("".join(cells)) <= set("-: "):
            found[-1].append(dict(zip(header, cells, strict=True)))
    return found


def number(cell: str) -> float:
    """The first number in a cell: `1,696.0 µ$` is 1696.0, `84%` is 84.0."""
    match = re.search(r"\d[\d,]*(?:\.\d+)?", cell)
    assert match, f"no number in {cell!r}"
    return float(match[0].replace(",", ""))


def policy_name(cell: str) -> str:
    """A warming table's policy cell without its markup: `**tracking** (default)` is
    `tracking`."""
    return re.sub(r"\s*\(default\)$", "", cell.replace("*", "").replace("`", "")).strip()


def tools_policies() -> dict[str, Row]:
    """contract/evidence/tools-policy.md by policy letter (`A` for `A \\`definitions\\``)."""
    return {row["policy"].split()[0]: row for row in tables(EVIDENCE / "tools-policy.md")[0]}


def provider_matrix() -> dict[tuple[str, str], Row]:
    """The first table of contract/evidence/tools-policy-providers.md by (provider, letter)."""
    rows = tables(EVIDENCE / "tools-policy-providers.md")[0]
    return {(row["provider"], row["policy"].split()[0]): row for row in rows}


def provider_decisions() -> dict[str, Row]:
    """The second table of contract/evidence/tools-policy-providers.md by provider."""
    return {row["provider"]: row for row in tables(EVIDENCE / "tools-policy-providers.md")[1]}


def warming_ratios(name: str, index: int = 0) -> dict[str, dict[str, float]]:
    """Table `index` of contract/evidence/`name`: each trace column's ratios by row name."""
    rows = tables(EVIDENCE / name)[index]
    first = next(iter(rows[0]))
    traces = [column for column in rows[0] if column not in (first, "online")]
    return {
        trace: {policy_name(row[first]): number(row[trace]) for row in rows} for trace in traces
    }


def online_policies(name: str) -> set[str]:
    return {
        policy_name(row["policy"]) for row in tables(EVIDENCE / name)[0] if row["online"] == "yes"
    }


def read_share(row: Row) -> str:
    """How much of the prefix the turn wrote a generate read: `every`, `part` or `none`."""
    written, read = number(row["prefix written by the turn"]), number(row["read by generate"])
    return "every" if read == written else "none" if read == 0 else "part"


def bench_figure(name: str) -> float:
    record: dict[str, Any] = json.loads(BENCH.read_text(encoding="utf-8"))
    values = [float(f["value"]) for f in record["figures"] if f["name"] == name]
    assert len(values) == 1, f"{BENCH.relative_to(ROOT)} has {len(values)} figures named {name!r}"
    return values[0]


def notebook_cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells


def stored_output(path: Path, marker: str) -> str:
    """The stored text output of the one code cell of a notebook whose output contains
    `marker`."""
    texts = [
        "".join(output.get("text", ""))
        for cell in notebook_cells(path)
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
    ]
    found = [text for text in texts if marker in text]
    assert len(found) == 1, f"{path.relative_to(ROOT)}: {len(found)} outputs contain {marker!r}"
    return found[0]


def markdown(path: Path) -> str:
    """A notebook's markdown cells, whitespace collapsed as `prose` does."""
    cells = notebook_cells(path)
    return " ".join(
        " ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown"
    )


def test_parity_violations_per_tools_policy() -> None:
    """docs/decisions/tools-policy.md: "the parity diff of each policy's request against the
    Step's finds 0 violations for A and D, 1 for C (tool choice) and 2 for B", against the
    `parity violations` column of contract/evidence/tools-policy.md."""
    found = claim(
        DOCS / "decisions" / "tools-policy.md",
        r"finds (\d+) violations for A and D, (\d+) for C \(tool choice\) and (\d+) for B",
    )
    stated = {"A": int(found[1]), "D": int(found[1]), "C": int(found[2]), "B": int(found[3])}
    measured = {p: int(number(r["parity violations"])) for p, r in tools_policies().items()}
    assert measured == stated


def test_what_a_generate_reads_after_a_turn_on_anthropic() -> None:
    """docs/decisions/tools-policy.md: "on Anthropic, A and D read every prefix token the turn
    wrote, C part of them, B none", and the contract under SG-TOOLS-2: "B invalidates
    everything ... C keeps tools and system but loses the whole history", "A is the only
    policy that keeps the full Anthropic prefix cached ... D keeps it too", against the
    `prefix written by the turn` and `read by generate` columns of
    contract/evidence/tools-policy.md."""
    found = claim(
        DOCS / "decisions" / "tools-policy.md",
        r"A and D read (\w+) prefix token the turn wrote, C (\w+) of them, B (\w+)\.",
    )
    shares = {p: read_share(r) for p, r in tools_policies().items()}
    assert shares == {"A": found[1], "D": found[1], "C": found[2], "B": found[3]}
    claim(
        CONTRACT,
        r"B invalidates everything \(tools are first in the prefix\)\. C keeps tools and system "
        r"but loses the whole history",
    )
    claim(
        CONTRACT,
        r'The hypothesis "A is the only policy that keeps the full Anthropic prefix cached" is '
        r"confirmed for request shapes; D keeps it too",
    )
    assert shares == {"A": "every", "D": "every", "C": "part", "B": "none"}


def test_the_tools_policies_on_each_provider_in_the_decision_record() -> None:
    """docs/decisions/tools-policy.md: "A reads the whole prefix on every provider; C loses
    the messages level on Anthropic, reads all of it on OpenAI and Gemini, and cannot be
    spelled on Bedrock Converse; B reads nothing anywhere, and Bedrock rejects it once the
    session has used a tool", against the decision table of
    contract/evidence/tools-policy-providers.md."""
    found = claim(
        DOCS / "decisions" / "tools-policy.md",
        r"A reads the whole prefix on every provider; C loses the messages level on (\w+), reads "
        r"all of it on (\w+) and (\w+), and cannot be spelled on (\w+) Converse; B reads nothing "
        r"anywhere, and (\w+) rejects it once the session has used a tool",
    )
    loses, full, full_too, unspellable, rejects = (name.lower() for name in found.groups())
    rows = provider_decisions()
    assert {row["read of the Step's prefix"] for row in rows.values()} == {"100%"}
    assert number(rows[loses]["`choice_none` there"]) < 100
    assert (
        number(rows[full]["`choice_none` there"])
        == number(rows[full_too]["`choice_none` there"])
        == 100
    )
    assert "cannot be spelled" in rows[unspellable]["`choice_none` there"]
    assert {p: r["`no_tools` there"].startswith("rejected") for p, r in rows.items()} == {
        p: p == rejects for p in rows
    }
    assert all(r["`no_tools` there"] == "reads 0%" for p, r in rows.items() if p != rejects)


def test_the_tools_policies_on_each_provider_in_the_contract() -> None:
    """The contract under SG-TOOLS-3: "on each, A sends the Step's request but for the prompt
    and reads the Step's whole cached prefix", "B is rejected by Bedrock once the history
    holds a tool call" and "C where the wire has `none` (Anthropic at the cost of the messages
    level, OpenAI and Gemini at no cache cost)", against
    contract/evidence/tools-policy-providers.md."""
    claim(
        CONTRACT,
        r"on each, A sends the Step's request but for the prompt and reads the Step's whole cached prefix",
    )
    matrix = provider_matrix()
    providers = {provider for provider, _ in matrix}
    for provider in providers:
        default = matrix[provider, "A"]
        assert (default["parity violations"], default["read of the Step's prefix"]) == ("0", "100%")
    rejects = claim(CONTRACT, r"B is rejected by (\w+) once the history holds a tool call")[
        1
    ].lower()
    assert {p for p in providers if matrix[p, "B"]["accepted"].startswith("no")} == {rejects}
    found = claim(
        CONTRACT,
        r"C where the wire has `none` \((\w+) at the cost of the messages level, (\w+) and (\w+) "
        r"at no cache cost\)",
    )
    costly, free, free_too = (name.lower() for name in found.groups())
    assert number(matrix[costly, "C"]["read of the Step's prefix"]) < 100
    assert (
        matrix[free, "C"]["read of the Step's prefix"]
        == matrix[free_too, "C"]["read of the Step's prefix"]
        == "100%"
    )


def test_the_warming_shape_is_the_cheapest_ping() -> None:
    """docs/decisions/warming.md: "The warming shape (no output, breakpoint on the last shared
    block) costs least, then the breakpoint on the prompt, then no ping", against the `total
    cost` column of contract/evidence/warming-placement.md."""
    found = claim(
        DOCS / "decisions" / "warming.md",
        r"The warming shape \(no output, breakpoint on the last shared block\) costs least, then "
        r"(.+?), then (.+?) \(\[02",
    )
    rows = {
        "the warming shape": "ping: warming shape",
        "the breakpoint on the prompt": "ping: breakpoint on prompt",
        "no ping": "no ping",
    }
    stated = ["ping: warming shape", rows[found[1]], rows[found[2]]]
    costs = {
        row["placement"]: number(row["total cost"])
        for row in tables(EVIDENCE / "warming-placement.md")[0]
    }
    assert sorted(costs, key=costs.__getitem__) == stated


def test_the_ttl_the_keeper_assumes_and_who_beats_it() -> None:
    """The contract under SG-KEEP-2: "writing every prompt at 1h costs far more than 5m on the
    Mooncake traces (the `1h` and `5m` rows), and where long breaks make 1h pay (the generated
    coding sessions), choosing the TTL per request (`learned`, `selective_1h`) beats both",
    against the policy tables of contract/evidence/warming-policies-*.md. "Far more" is at
    least `FAR_MORE` times."""
    found = claim(
        CONTRACT,
        r"writing every prompt at 1h costs far more than 5m on the Mooncake traces \(the `1h` and "
        r"`5m` rows\), and where long breaks make 1h pay \(the generated coding sessions\), "
        r"choosing the TTL per request \(`(\w+)`, `(\w+)`\) beats both",
    )
    for ratios in warming_ratios("warming-policies-mooncake.md").values():
        assert ratios["1h"] >= FAR_MORE * ratios["5m"]
    for ratios in warming_ratios("warming-policies-generated.md").values():
        assert ratios["1h"] < ratios["5m"]
        assert all(ratios[chooser] < ratios["1h"] for chooser in found.groups())


SWEEP_CLAIMS = {
    "contract": (
        CONTRACT,
        r"Blind pings at a shorter interval buy nothing the later ping does not and cost a read "
        r"each \(the second table: 5m pings for (\d+) minutes cost more the more often they go, "
        r"and more than no pings at all\)",
    ),
    "decision": (
        DOCS / "decisions" / "warming.md",
        r"blind 5m pings cost more the more often they go",
    ),
    "traces": (
        DOCS / "traces.md",
        r"every blind ping interval of the second table costs more than no pings, the more so the "
        r"more often the pings go",
    ),
}


@pytest.mark.parametrize("page", SWEEP_CLAIMS)
def test_blind_pings_cost_more_the_more_often_they_go(page: str) -> None:
    """Blind 5m pings cost more the more often they go, and more than no pings: the contract
    under SG-KEEP-3 (for every trace, its "30 minutes" the sweep's horizon), the warming
    decision record and the Traces page (the Mooncake traces), against the ping-interval
    tables of contract/evidence/warming-policies-*.md."""
    path, pattern = SWEEP_CLAIMS[page]
    found = claim(path, pattern)
    names = ["warming-policies-mooncake.md"]
    if page != "traces":
        names.append("warming-policies-generated.md")
    for name in names:
        header = next(iter(tables(EVIDENCE / name)[1][0]))
        if found.groups():
            assert re.fullmatch(rf"5m pings for {found[1]} min, every", header), header
        for ratios in warming_ratios(name, index=1).values():
            alone = ratios.pop("no pings (5m)")
            by_interval = sorted(ratios.items(), key=lambda item: number(item[0]))
            costs = [cost for _, cost in by_interval]
            assert costs == sorted(costs, reverse=True) and len(set(costs)) == len(costs)
            assert min(costs) > alone


def test_learned_comes_closest_to_the_optimum() -> None:
    """docs/decisions/warming.md: "always-1h costs far more than plain 5m on the Mooncake
    traces, ... and `learned`, which learns the workload's gaps, comes closest to the optimum
    of the online policies on every trace", against the policy tables of
    contract/evidence/warming-policies-*.md (a tie counts as closest)."""
    found = claim(
        DOCS / "decisions" / "warming.md",
        r"always-1h costs far more than plain 5m on the Mooncake traces, blind 5m pings cost more "
        r"the more often they go, and `(\w+)`, which learns the workload's gaps, comes closest to "
        r"the optimum of the online policies on every trace",
    )
    for ratios in warming_ratios("warming-policies-mooncake.md").values():
        assert ratios["1h"] >= FAR_MORE * ratios["5m"]
    for name in ("warming-policies-mooncake.md", "warming-policies-generated.md"):
        online = online_policies(name)
        for ratios in warming_ratios(name).values():
            assert ratios[found[1]] == min(ratios[p] for p in online)


def test_writing_the_cache_barely_beats_not_caching_on_mooncake() -> None:
    """docs/traces.md: "on the whole traces writing the cache barely beats not caching (the
    `5m` and `no_cache` rows of the first table)", against
    contract/evidence/warming-policies-mooncake.md: `5m` cheaper than `no_cache`, by less
    than `BARELY`."""
    found = claim(
        DOCS / "traces.md",
        r"on the whole traces writing the cache (\w+) beats not caching \(the `5m` and `no_cache` "
        r"rows of the first table\)",
    )
    assert found[1] == "barely"
    for ratios in warming_ratios("warming-policies-mooncake.md").values():
        assert ratios["5m"] < ratios["no_cache"] < BARELY * ratios["5m"]


def test_the_mooncake_traces_as_notebook_03_loads_them() -> None:
    """docs/traces.md: the table of requests and inferred sessions per Mooncake file, and
    "Most inferred sessions have a single request in these 30 minutes (5,719 requests, 4,007
    sessions)", against the traces table notebook 03 stored in its section 2 (most: the
    sessions with one request, at least sessions - (requests - sessions), are over half)."""
    printed = stored_output(NOTEBOOK_03, "median reuse gap")
    loaded: dict[str, tuple[int, int, float]] = {}
    for line in printed.splitlines():
        row = re.fullmatch(r"\s*(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+[\d.]+\s*", line)
        if row:
            loaded[row[1]] = (int(row[2]), int(row[3]), float(row[4]))
    table = next(t for t in tables(DOCS / "traces.md") if "Sessions inferred" in t[0])
    stated = {
        row["File"].strip("`").removesuffix(".jsonl"): (
            int(number(row["Requests"])),
            int(number(row["Sessions inferred"])),
        )
        for row in table
    }
    assert stated == {name: loaded[name][:2] for name in stated}
    found = claim(
        DOCS / "traces.md",
        r"Most inferred sessions have a single request in these (\d+) minutes \(([\d,]+) requests, "
        r"([\d,]+) sessions\)",
    )
    requests, sessions, minutes = loaded["conversation_trace_first_half"]
    assert (int(number(found[2])), int(number(found[3]))) == (requests, sessions)
    assert int(found[1]) == round(minutes)
    assert sessions - (requests - sessions) > sessions / 2


def test_the_token_accuracy_requests() -> None:
    """docs/emulator.md: "N of them replayed, from P projects", against the `recorded requests
    replayed` figure of benchmarks/bench.json and the repositories the recordings cite."""
    found = claim(DOCS / "emulator.md", r"([\d,]+) of them replayed, from (\d+) projects")
    assert int(found[1].replace(",", "")) == bench_figure("recorded requests replayed")
    files = [ROOT / "benchmarks" / "data" / "token_recordings.jsonl"]
    files += sorted((ROOT / "benchmarks" / "data" / "recordings").glob("*.jsonl"))
    repos = {
        json.loads(line)["source"]["repo"]
        for path in files
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    assert int(found[2]) == len(repos)


def test_notebook_03_says_which_policy_a_longer_lifetime_helps_most() -> None:
    """notebooks/03-cache-ttl-warming.ipynb, section 7: "A longer lifetime helps most the
    policy that pays for expiries: plain 5m, ... gains more than `learned`", against the line
    of the same section's stored output that says how much the longest linger lowers each
    policy's ratio."""
    found = claim(
        NOTEBOOK_03,
        r"A longer lifetime helps most the policy that pays for expiries: plain (\w+), whose late "
        r"reuses become reads, gains more than `(\w+)`",
        text=markdown(NOTEBOOK_03),
    )
    printed = stored_output(NOTEBOOK_03, "linger lowers the ratios by")
    gains = {
        policy: float(gain)
        for gain, policy in re.findall(
            r"(-?\d+\.\d+) \((\w+)\)", printed.split("lowers the ratios by")[1]
        )
    }
    assert max(gains, key=gains.__getitem__) == found[1]
    assert gains[found[1]] > gains[found[2]]
