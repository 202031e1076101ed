"""`sessiongen emulator probe`: against a `sessiongen emulator` in another process every probe
agrees for all four providers (with --with-ttl the waits move that emulator's clock, they do
not sleep); an emulator whose cache behaves differently disagrees; errors are one line.

`UPDATE_PROBE_DOCS=1 uv run pytest tests/test_probe.py -k docs` rewrites the example in
docs/probe.md from a fresh run."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sessiongen._choices import PROVIDERS, Provider
from sessiongen._probe import (
    Counts,
    Lifetime,
    available_lifetime,
    cheapest_model,
    counts_agree,
    plan,
    probes,
)
from sessiongen.cache import get_model
from sessiongen.emulator import free_port

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "probe.md"
DOCS_PORT = 8765
START = "<!-- probe-example:start -->"
END = "<!-- probe-example:end -->"


class Emulator:
    """`sessiongen emulator` in a child process on a free loopback port."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sessiongen.cli", "emulator", "--port", str(self.port)],
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            time.sleep(0.05)
        else:
            self.stop()
            raise AssertionError(f"the emulator never listened on {self.url}")
        token = (env or {}).get("SESSIONGEN_EMULATOR_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.admin = httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def now(self) -> float:
        now: float = self.admin.get("/_emulator/clock").json()["now"]
        return now

    def requests(self) -> list[dict[str, Any]]:
        logged: list[dict[str, Any]] = self.admin.get("/_emulator/requests").json()["requests"]
        return logged

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def shared() -> Iterator[Emulator]:
    emulator = Emulator()
    try:
        yield emulator
    finally:
        emulator.admin.close()
        emulator.stop()


@pytest.fixture
def target(shared: Emulator) -> Emulator:
    """The module's emulator, reset: clock 0, empty cache and log, default settings."""
    shared.admin.post("/_emulator/reset").raise_for_status()
    return shared


def _probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a child process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "sessiongen.cli", "emulator", "probe", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
    )


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.rstrip("\n")


def _report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _probe_named(report: dict[str, Any], name: str) -> dict[str, Any]:
    probe: dict[str, Any] = next(p for p in report["probes"] if p["name"] == name)
    return probe


# --- agreement ---------------------------------------------------------------------------


@pytest.mark.clause("SG-REPLAY-3")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_probe_agrees_with_an_emulator_and_the_waits_move_its_clock(
    provider: str, target: Emulator, tmp_path: Path
) -> None:
    out = tmp_path / "probe.json"
    started = time.monotonic()
    result = _probe(
        "--provider", provider, "--base-url", target.url, "--with-ttl", "--json", str(out)
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("4 of 4 probes agree with the emulator's prediction")
    report = _report(out)
    assert (report["agree"], report["total"], report["emulator"]) == (4, 4, True)
    names = [p["name"] for p in report["probes"]]
    assert names == ["shared-prefix", "warm-ping", "ttl-boundary", "retention"]
    for probe in report["probes"]:
        assert probe["agree"], probe
        for request in probe["requests"]:
            assert request["real"] == request["predicted"], request  # the same emulator rules
    # The waits were clock moves on the target (600 s: the retention read), not sleeps.
    assert target.now() == 600.0
    assert elapsed < 285, f"took {elapsed:.0f} s: the probe slept instead of moving the clock"
    # Every probe request reached the target through the provider's own API.
    providers = {r["provider"] for r in target.requests()}
    assert providers == {provider}


def test_without_with_ttl_only_the_instant_probes_run_and_the_clock_stays(
    target: Emulator,
) -> None:
    result = _probe("--provider", "anthropic", "--base-url", target.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ttl-boundary" not in result.stdout and "retention" not in result.stdout
    assert result.stdout.rstrip().endswith("2 of 2 probes agree with the emulator's prediction")
    assert target.now() == 0.0


def test_the_cheap_probes_read_what_the_rules_say(target: Emulator, tmp_path: Path) -> None:
    """What the two instant probes measure on Anthropic: B reads A's system prefix; the ping
    reads turn 1 and writes the history; turn 2 reads what the ping wrote."""
    out = tmp_path / "probe.json"
    result = _probe("--provider", "anthropic", "--base-url", target.url, "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = _report(out)
    a, b = _probe_named(report, "shared-prefix")["requests"]
    minimum = get_model(cheapest_model("anthropic")).min_cacheable_tokens
    assert a["real"]["cache_read"] == 0 and a["real"]["cache_write"] > minimum
    assert minimum < b["real"]["cache_read"] < a["real"]["cache_write"]
    turn1, ping, turn2 = _probe_named(report, "warm-ping")["requests"]
    written = turn1["real"]["cache_write"]
    assert ping["real"]["cache_read"] == written and ping["real"]["cache_write"] > 0
    assert turn2["real"]["cache_read"] == written + ping["real"]["cache_write"]
    # The ping asked for no output, as session.generate(warming=True) does.
    bodies = [r["body"] for r in target.requests() if r["path"] == "/v1/messages"]
    assert [body["max_tokens"] for body in bodies] == [1, 1, 1, 0, 1]


# --- disagreement ------------------------------------------------------------------------


@pytest.mark.clause("SG-REPLAY-3")
def test_a_cache_that_outlives_its_ttl_disagrees_on_the_ttl_boundary(
    target: Emulator, tmp_path: Path
) -> None:
    """An emulator whose entries linger 2 minutes past the TTL reads at 315 s: the prediction
    (a default emulator) does not, so that probe, and only it, disagrees (exit 3)."""
    target.admin.post("/_emulator/config", json={"linger": 120}).raise_for_status()
    out = tmp_path / "probe.json"
    result = _probe(
        "--provider", "anthropic", "--base-url", target.url, "--with-ttl", "--json", str(out)
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith(
        "3 of 4 probes agree with the emulator's prediction (1 disagree)"
    )
    report = _report(out)
    assert [p["name"] for p in report["probes"] if not p["agree"]] == ["ttl-boundary"]
    over = _probe_named(report, "ttl-boundary")["requests"][3]
    assert over["agree"] is False
    minimum = get_model(cheapest_model("anthropic")).min_cacheable_tokens
    assert over["real"]["cache_read"] > minimum and over["predicted"]["cache_read"] == 0


def test_a_cache_that_is_not_ready_at_once_disagrees_on_the_instant_probes(
    target: Emulator,
) -> None:
    """An emulator whose writes become readable only 5 s after the request (time to first
    token) never serves B, the ping or turn 2, since its clock does not move between them."""
    target.admin.post("/_emulator/config", json={"ttft": 5}).raise_for_status()
    result = _probe("--provider", "bedrock", "--base-url", target.url)
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith(
        "0 of 2 probes agree with the emulator's prediction (2 disagree)"
    )
    assert result.stdout.count(" NO") == 3  # B, the ping and turn 2; A and turn 1 agree


class _NoCacheHandler(BaseHTTPRequestHandler):
    """An Anthropic-shaped endpoint that is no sessiongen emulator: every message is billed
    as plain input, nothing is ever cached; everything else is 404."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path != "/v1/messages":
            return self._send(404, {"type": "error", "error": {"type": "not_found_error"}})
        usage = {"input_tokens": 1200, "output_tokens": 1, "cache_read_input_tokens": 0}
        usage["cache_creation_input_tokens"] = 0
        self._send(
            200,
            {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": usage,
            },
        )

    def do_GET(self) -> None:
        self._send(404, {"type": "error", "error": {"type": "not_found_error"}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_endpoint_that_never_caches_disagrees_and_is_not_taken_for_an_emulator(
    tmp_path: Path,
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoCacheHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    out = tmp_path / "probe.json"
    try:
        result = _probe(
            "--provider", "anthropic", "--base-url", url, "--api-key", "k", "--json", str(out)
        )
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 3, result.stdout + result.stderr
    assert "(waits are real sleeps)" in result.stdout and "no count endpoint" in result.stdout
    assert result.stdout.rstrip().endswith(
        "0 of 2 probes agree with the emulator's prediction (2 disagree)"
    )
    report = _report(out)
    assert report["emulator"] is False
    verdicts = [r["agree"] for p in report["probes"] for r in p["requests"]]
    assert verdicts == [False, False, False, False, False]  # every write or read is missing


def test_a_request_the_endpoint_fails_disagrees_and_the_rest_still_run(
    target: Emulator, tmp_path: Path
) -> None:
    """The target answers the first request (shared-prefix A) 529: that request shows the
    error, its probe disagrees, and every other request is still sent and compared. B then
    reads nothing (A wrote nothing to read), where the prediction's B reads A's prefix."""
    fault = {"status": 529, "count": 1, "message": "Overloaded"}
    target.admin.post("/_emulator/faults", json=fault).raise_for_status()
    out = tmp_path / "probe.json"
    result = _probe("--provider", "openai", "--base-url", target.url, "--json", str(out))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "shared-prefix A: the endpoint answered HTTP 529: Overloaded" in result.stdout
    assert result.stdout.rstrip().endswith(
        "1 of 2 probes agree with the emulator's prediction (1 disagree)"
    )
    a, b = _probe_named(_report(out), "shared-prefix")["requests"]
    error = "the endpoint answered HTTP 529: Overloaded"
    assert (a["real"], a["agree"], a["error"]) == (None, False, error)
    assert b["agree"] is False and b["real"]["cache_read"] == 0 < b["predicted"]["cache_read"]
    assert len([r for r in target.requests() if r["path"] == "/v1/chat/completions"]) == 5


# --- cost --------------------------------------------------------------------------------


def test_the_cost_cap_refuses_before_any_request_is_billed(target: Emulator) -> None:
    result = _probe(
        "--provider", "anthropic", "--base-url", target.url, "--with-ttl", "--max-cost", "0.001"
    )
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line.startswith("sessiongen: error: the probes could cost up to $")
    assert "above --max-cost $0.00" in line
    assert "estimated worst-case cost: $" in result.stdout
    # Only the free token count reached the endpoint; no message was created.
    assert {r["path"] for r in target.requests()} <= {"/v1/messages/count_tokens"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_default_model_is_catalogued_priced_and_fits_the_default_cap(
    provider: Provider,
) -> None:
    from sessiongen._probe import DEFAULT_MAX_COST, predict, worst_case_cost
    from sessiongen.cache import get_model, price

    model = cheapest_model(provider)
    assert get_model(model).provider == provider and price(model).input > 0
    the_plan = plan(model, "00000000", with_ttl=True)
    predicted = predict(provider, the_plan)
    assert worst_case_cost(the_plan, predicted) <= DEFAULT_MAX_COST
    minimum = get_model(model).min_cacheable_tokens
    first = Counts.of(predicted[the_plan.order[0]])
    assert minimum < first.total < minimum * 1.3  # just over the minimum


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--json", "/no/such/dir/probe.json"), "--json"),
        (("--max-cost", "-1"), "--max-cost"),
        (("--tolerance", "2"), "--tolerance"),
        (("--provider", "mistral"), "--provider"),
    ],
)
def test_bad_options_are_usage_errors_before_any_work(args: tuple[str, ...], option: str) -> None:
    result = _probe("--provider", "openai", *args)
    line = _one_line_error(result)
    assert result.returncode == 2 and result.stdout == ""
    assert line.startswith(f"sessiongen: error: argument {option}:")


def test_the_serving_options_are_refused_with_probe() -> None:
    result = subprocess.run(
        [*(sys.executable, "-m", "sessiongen.cli"), "emulator", "--port", "9000", "probe"]
        + ["--provider", "openai"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = _one_line_error(result)
    assert result.returncode == 2
    assert line.startswith("sessiongen: error: argument --port: serves an emulator")


@pytest.mark.parametrize("url", ["ftp://example.com", "example.com", "http://", "http://h:99999"])
def test_a_bad_url_is_a_usage_error(url: str) -> None:
    result = _probe("--provider", "openai", "--base-url", url)
    line = _one_line_error(result)
    assert result.returncode == 2 and result.stdout == ""
    assert line.startswith("sessiongen: error: argument --base-url:")


def test_a_refused_connection_is_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = _probe("--provider", "anthropic", "--base-url", url)
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line == f"sessiongen: error: cannot connect to {url}: connection refused"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_refused_credentials_are_one_line(provider: str, target: Emulator) -> None:
    """The target answers every API request 401, in the provider's own error shape."""
    fault = {"status": 401, "count": 50}
    target.admin.post("/_emulator/faults", json=fault).raise_for_status()
    result = _probe("--provider", provider, "--base-url", target.url)
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line.startswith("sessiongen: error: the endpoint refused the credentials (HTTP 401)")


@pytest.mark.parametrize(("provider", "module"), [("openai", "openai"), ("gemini", "google.genai")])
def test_a_missing_sdk_names_the_extra(
    provider: str, module: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessiongen.cli import main

    monkeypatch.setitem(sys.modules, module, None)  # `import` now raises ImportError
    code = main(["emulator", "probe", "--provider", provider, "--base-url", "http://127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith(f"sessiongen: error: the {provider} probe needs the {module} SDK")
    assert "pip install 'sessiongen[providers]'" in err


def test_a_missing_boto3_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['boto3'] = None; from sessiongen.cli import main; "
        "raise SystemExit(main(['emulator', 'probe', '--provider', 'bedrock']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    line = _one_line_error(result)
    assert result.returncode == 1
    assert "boto3 SDK" in line and "pip install 'sessiongen[providers]'" in line


def test_no_key_for_a_real_endpoint_is_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "sessiongen.cli", "emulator", "probe", "--provider", "openai"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line == "sessiongen: error: no API key for openai: set OPENAI_API_KEY, or pass --api-key"


def test_an_unknown_model_is_one_line() -> None:
    result = _probe("--provider", "gemini", "--model", "gpt-4.1", "--base-url", "http://x")
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line.startswith("sessiongen: error: unknown model 'gpt-4.1' for gemini (catalogued:")


def test_a_retired_model_is_one_line() -> None:
    result = _probe("--provider", "anthropic", "--model", "claude-opus-4-1")
    line = _one_line_error(result)
    assert result.returncode == 1
    assert line == "sessiongen: error: model 'claude-opus-4-1' was retired on 2026-08-05"


def test_an_emulator_with_a_token_needs_it_and_works_with_it() -> None:
    guarded = Emulator(env={"SESSIONGEN_EMULATOR_TOKEN": "s3cret"})
    try:
        without = {k: v for k, v in os.environ.items() if k != "SESSIONGEN_EMULATOR_TOKEN"}
        result = subprocess.run(
            [
                *(sys.executable, "-m", "sessiongen.cli", "emulator", "probe"),
                *("--provider", "openai", "--base-url", guarded.url),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=without,
        )
        line = _one_line_error(result)
        assert result.returncode == 1 and "--emulator-token" in line
        result = _probe(
            "--provider", "openai", "--base-url", guarded.url, "--emulator-token", "s3cret"
        )
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        guarded.admin.close()
        guarded.stop()


# --- the pieces --------------------------------------------------------------------------


def test_agreement_compares_shares_of_the_input() -> None:
    predicted = Counts(input=10, cache_read=1000, cache_write=0)
    assert counts_agree(Counts(12, 1100, 0), predicted, 0.1)  # another tokenizer, same rule
    assert not counts_agree(Counts(1010, 0, 0), predicted, 0.1)  # a miss
    assert not counts_agree(Counts(10, 1000, 5), predicted, 0.1)  # a write where none was
    assert not counts_agree(Counts(500, 510, 0), predicted, 0.1)  # half the prefix


def test_a_real_endpoint_is_waited_for_from_the_first_request_on() -> None:
    """Against anything but an emulator the waits are sleeps until each request's time on
    the timeline, counted from the first request, so the requests' latency does not add up."""
    from sessiongen._probe import WallPacer

    now = [100.0]
    slept: list[float] = []
    said: list[str] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    clock = WallPacer(said.append, sleep=sleep, monotonic=lambda: now[0])
    the_plan = plan("gpt-5-mini", "00000000", with_ttl=True)
    for p, s in the_plan.order:
        clock.until(the_plan.probes[p].steps[s].at)
        now[0] += 2.0  # each request takes 2 s
    assert slept == [285 - 16, 315 - 287, 600 - 317]
    assert said[0] == "waiting 269 s (until 285 s into the run)"


def test_the_probes_are_on_one_timeline_and_their_prefixes_are_their_own() -> None:
    assert [p.name for p in probes(with_ttl=False)] == ["shared-prefix", "warm-ping"]
    the_plan = plan("claude-sonnet-5", "abcd1234", with_ttl=True)
    times = [the_plan.probes[p].steps[s].at for p, s in the_plan.order]
    assert times == sorted(times) and times[-1] == 600
    starts = {prompt.system[:60] for prompt in the_plan.prompts.values()}
    assert len(starts) == 5  # one prefix per probe, two for the TTL boundary
    assert all("abcd1234" in start for start in starts)


# --- the docs page -----------------------------------------------------------------------


def test_the_docs_cost_table_is_what_the_probe_estimates() -> None:
    from sessiongen._probe import predict, worst_case_cost

    rows = re.findall(r"^\| (\w+) \| `([^`]+)` \| \$([\d.]+) \| \$([\d.]+) \|$", _page(), re.M)
    assert [r[0] for r in rows] == list(PROVIDERS)
    for provider, model, quick, slow in rows:
        assert cheapest_model(provider) == model
        for with_ttl, shown in ((False, quick), (True, slow)):
            the_plan = plan(model, "00000000", with_ttl=with_ttl)
            estimate = worst_case_cost(the_plan, predict(provider, the_plan))
            assert f"{estimate:.4f}" == shown, (provider, with_ttl)


def _page() -> str:
    return DOCS.read_text(encoding="utf-8")


def test_the_docs_example_is_a_fresh_run(target: Emulator) -> None:
    """docs/probe.md shows the output of the command it shows, run against a fresh emulator
    (its port written as 8765). UPDATE_PROBE_DOCS=1 rewrites it."""
    command = "sessiongen emulator probe --provider anthropic --base-url {url} --with-ttl"
    args = command.format(url=target.url).split()[3:]
    result = _probe(*args)
    assert result.returncode == 0, result.stderr
    output = result.stdout.replace(target.url, f"http://127.0.0.1:{DOCS_PORT}").rstrip()
    shown = command.format(url=f"http://127.0.0.1:{DOCS_PORT}")
    block = f"{START}\n```console\n$ {shown}\n{output}\n```\n{END}"
    page = DOCS.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    assert pattern.search(page), f"{DOCS} has no {START} ... {END} block"
    if os.environ.get("UPDATE_PROBE_DOCS"):
        DOCS.write_text(pattern.sub(lambda _: block, page), encoding="utf-8")
        page = DOCS.read_text(encoding="utf-8")
    assert block in page, (
        "docs/probe.md's example is not what the command prints now; "
        "regenerate it: UPDATE_PROBE_DOCS=1 uv run pytest tests/test_probe.py -k docs"
    )


@pytest.mark.parametrize(
    ("model", "lifetime", "expected"),
    [
        ("anthropic.claude-opus-4-7", "long", "default"),  # Bedrock: no 1h on this model
        ("anthropic.claude-opus-4-7", "short", "short"),
        ("anthropic.claude-opus-4-5-20251101-v1:0", "long", "long"),
        ("gpt-4o", "long", "default"),  # OpenAI: no extended (24h) retention
        ("gpt-4o", "short", "short"),
        ("gpt-5", "long", "long"),
        ("gpt-5.6-sol", "long", "default"),  # GPT-5.6+: one lifetime, "30m"
    ],
)
def test_available_lifetime_replaces_only_a_long_lifetime_the_model_lacks(
    model: str, lifetime: Lifetime, expected: Lifetime
) -> None:
    """Only `long` falls back (to the model's default) where the model has no long lifetime;
    `short` and `default` are asked for as given on every model."""
    assert available_lifetime(model, lifetime) == expected
