"""`sessiongen emulator probe` against a hostile `--base-url` (issue 28): a raw HTTP server on
127.0.0.1 that redirects to another origin, never answers, drips its answer a byte a second,
or answers garbage; the real command runs against it in child processes, all four providers'
SDKs at once. Each case ends the probe with one line on stderr, never a traceback; a
redirect is never followed, so the other origin receives nothing, no key and no prompt.

Each passing test records its figures for the reliability page (`hostile`)."""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from sessiongen._choices import PROVIDERS, Provider

from .reliability._figures import record

SECRET = "sk-hostile-test-key-0123456789"
TIMEOUT = 2
"""The probes' `--timeout` here, in seconds."""
ANSWERED_WITHIN = 20
"""The probes' `--timeout` where every server answers at once (malformed, not slow)."""
BOUND = 30.0
"""However loaded the machine, a probe against a silent or dripping endpoint ends by then."""
ADMIN = "/_emulator"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    at: float  # time.monotonic() when it was read


@dataclass(frozen=True)
class Reply:
    """Raw bytes to send (then close); `drip`: one byte a second; `hang`: send nothing."""

    data: bytes = b""
    drip: bool = False
    hang: bool = False


def _http(status: int, body: bytes, *, extra: str = "", length: int | None = None) -> Reply:
    head = (
        f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body) if length is None else length}\r\n"
        f"connection: close\r\n{extra}\r\n"
    )
    return Reply(head.encode() + body)


def _json(status: int, payload: object) -> Reply:
    return _http(status, json.dumps(payload).encode())


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        try:
            line = self.rfile.readline(65536).decode("latin-1").split()
            headers: dict[str, str] = {}
            while (header := self.rfile.readline(65536).decode("latin-1").strip()) != "":
                name, _, value = header.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.rfile.read(int(headers.get("content-length") or 0))
            if len(line) < 2:
                return
            request = Request(line[0], line[1], headers, time.monotonic())
            hostile = self.server.hostile
            with hostile.lock:
                hostile.requests.append(request)
            self._reply(hostile.respond(request), hostile.stopping)
        except OSError:
            pass  # the probe went away: what a hostile server wants anyway

    def _reply(self, reply: Reply, stopping: threading.Event) -> None:
        if reply.hang:
            stopping.wait(BOUND * 2)
        elif reply.drip:
            for byte in reply.data:
                if stopping.wait(1.0):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
        else:
            self.wfile.write(reply.data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    hostile: Hostile


class Hostile:
    """An HTTP/1.1 server on 127.0.0.1 (a free port) answering each request with
    `respond(request)`, one request per connection, recording every request it read."""

    def __init__(self, respond: Callable[[Request], Reply]) -> None:
        self.respond = respond
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.hostile = self
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def api_requests(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if not r.path.startswith(ADMIN)]

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[Request], Reply]], Hostile]]:
    started: list[Hostile] = []

    def start(respond: Callable[[Request], Reply]) -> Hostile:
        started.append(Hostile(respond))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def _is_count(path: str) -> bool:
    """The providers' free token-count endpoints (sent before the first probe request)."""
    return path.endswith(("/count_tokens", "/input_tokens", ":countTokens", "/count-tokens"))


def _api(respond: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    """`respond` for the provider API; the probe's emulator check is a plain 404 (so the
    probe goes on to the SDK's requests)."""

    def answer(request: Request) -> Reply:
        if request.path.startswith(ADMIN):
            return _json(404, {"error": "not found"})
        return respond(request)

    return answer


@dataclass(frozen=True)
class Ended:
    provider: Provider
    server: Hostile
    result: subprocess.CompletedProcess[str]
    at: float  # time.monotonic() when the process had ended


def _probe_all(runs: list[tuple[Hostile, Provider]], timeout: float = TIMEOUT) -> list[Ended]:
    """`sessiongen emulator probe --provider P --base-url URL --timeout T` for each (server,
    provider) in `runs`, in child processes at the same time (with a key for each SDK)."""
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "AKIDHOSTILETEST",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
    }
    env.pop("AWS_BEARER_TOKEN_BEDROCK", None)

    def one(run: tuple[Hostile, Provider]) -> Ended:
        server, provider = run
        key = [] if provider == "bedrock" else ["--api-key", SECRET]
        result = subprocess.run(
            [*(sys.executable, "-m", "sessiongen.cli", "emulator", "probe")]
            + ["--provider", provider, "--base-url", server.url, "--timeout", str(timeout)]
            + key,
            capture_output=True,
            text=True,
            timeout=BOUND + 60,
            env=env,
        )
        return Ended(provider, server, result, time.monotonic())

    with ThreadPoolExecutor(max_workers=len(runs)) as pool:
        return list(pool.map(one, runs))


def _one_line_error(ended: Ended) -> str:
    result = ended.result
    where = f"{ended.provider}: {result.stderr!r}"
    assert "Traceback" not in result.stderr, where
    assert result.returncode == 1, where
    assert result.stderr.endswith("\n") and result.stderr.count("\n") == 1, where
    assert SECRET not in result.stderr + result.stdout, where
    line = result.stderr.rstrip("\n")
    assert line.startswith("sessiongen: error: "), where
    return line


# --- redirects ---------------------------------------------------------------------------


def test_a_redirect_to_another_origin_is_refused_and_nothing_reaches_it(
    serve: Callable[[Callable[[Request], Reply]], Hostile],
) -> None:
    """Every API request is answered 307 to the same path on another origin (another port of
    127.0.0.1): every SDK refuses it, and the other origin receives no request at all, so no
    key and no prompt. The emulator check (the probe's own client) refuses it too."""
    other = serve(lambda request: _json(200, {}))

    def to_other(request: Request) -> Reply:
        return _http(307, b"", extra=f"location: {other.url}{request.path}\r\n")

    runs = [(serve(_api(to_other)), provider) for provider in PROVIDERS]
    ended = _probe_all([*runs, (serve(to_other), "bedrock")])
    assert [(r.method, r.path) for r in other.requests] == []  # no key, no prompt
    refused = f"redirected (HTTP 307) to {other.url}, another origin than"
    for probe in ended[:-1]:
        line = _one_line_error(probe)
        assert line.startswith("sessiongen: error: shared-prefix A (its token count): "), line
        assert refused in line and line.endswith("refused, not followed"), line
    line = _one_line_error(ended[-1])
    assert line.startswith(f"sessiongen: error: the emulator check (GET {ADMIN}/clock): ")
    assert refused in line, line
    # The base URL did get the (one) request each SDK sent: it is the endpoint.
    assert [len(server.api_requests()) for server, _ in runs] == [1] * len(PROVIDERS)
    record(
        "hostile",
        {
            "probe-redirect": {
                "SDKs redirected (307 to another origin)": len(PROVIDERS),
                "redirects refused": len(ended),
                "requests reaching the other host": len(other.requests),
            }
        },
    )


# --- timeouts ----------------------------------------------------------------------------


def _silent(request: Request) -> Reply:
    return Reply(hang=True)


def _dripping(request: Request) -> Reply:
    body = b'{"usage": {"input_tokens": 1200, "output_tokens": 1}}' * 4
    return Reply(_http(200, body).data, drip=True)


@pytest.mark.parametrize(
    ("case", "respond"),
    [("probe-no-answer", _silent), ("probe-drip", _dripping)],
    ids=["never-answers", "drips-a-byte-a-second"],
)
def test_an_endpoint_that_never_answers_or_drips_ends_at_the_timeout(
    case: str,
    respond: Callable[[Request], Reply],
    serve: Callable[[Callable[[Request], Reply]], Hostile],
) -> None:
    """A server that reads the request and then sends nothing, or sends its answer one byte
    a second (no socket read ever waits long, so only a total deadline ends it): each probe
    ends with one timeout line about `--timeout` seconds after its first API request. The
    emulator check, the first request of all, is bound by the same deadline."""
    runs = [(serve(_api(respond)), provider) for provider in PROVIDERS]
    ended = _probe_all([*runs, (serve(respond), "bedrock")])
    expected = f"no complete answer within {TIMEOUT} s (--timeout)"
    seconds = []
    for probe in ended:
        line = _one_line_error(probe)
        assert line.endswith(expected), line
        waited_on = [r for r in probe.server.requests if r.path.startswith(ADMIN)]
        waited_on = waited_on if probe is ended[-1] else probe.server.api_requests()
        assert len(waited_on) == 1, waited_on
        seconds.append(probe.at - waited_on[0].at)
    for probe in ended[:-1]:
        assert "shared-prefix A (its token count): " in probe.result.stderr
    assert f"the emulator check (GET {ADMIN}/clock): " in ended[-1].result.stderr
    # from the request the probe waited on to the end of its process (exit included)
    assert max(seconds) < BOUND, seconds
    assert min(seconds) >= TIMEOUT * 0.9, seconds
    record(
        "hostile",
        {
            case: {
                "probes (4 SDKs and the emulator check)": len(ended),
                f"seconds until the probe ended, --timeout {TIMEOUT} (longest)": round(
                    max(seconds), 1
                ),
            }
        },
    )


# --- malformed answers -------------------------------------------------------------------

VALID: dict[Provider, dict[str, Any]] = {
    "anthropic": {
        "id": "msg_hostile",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1200, "output_tokens": 1},
    },
    "openai": {
        "id": "chatcmpl-hostile",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-5-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 1, "total_tokens": 1201},
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {
            "promptTokenCount": 1200,
            "candidatesTokenCount": 1,
            "totalTokenCount": 1201,
        },
    },
    "bedrock": {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1200, "outputTokens": 1, "totalTokens": 1201},
        "metrics": {"latencyMs": 1},
    },
}
"""A well-formed answer of each API (no cache read or write): the probe takes it."""
COUNT: dict[Provider, str] = {
    "anthropic": "input_tokens",
    "openai": "input_tokens",
    "gemini": "totalTokens",
    "bedrock": "inputTokens",
}
"""The field of each API's token-count answer."""


def _cut_off(payload: object) -> Reply:
    """`payload`'s JSON announced whole (content-length) and half sent, then the close."""
    body = json.dumps(payload).encode()
    return _http(200, body[: len(body) // 2], length=len(body))


def _always(reply: Reply) -> Callable[[Request], Reply]:
    return lambda request: reply


def _counts_absent(reply: Reply) -> Callable[[Request], Reply]:
    """`reply` to every request but the token count, which is a 404 (taken as no count)."""
    return lambda request: _json(404, {}) if _is_count(request.path) else reply


NOT_JSON = _http(200, b"<html><body>502 Bad Gateway</body></html>")
"""Not JSON, though its content-type says so."""
_BOTOCORE_EMPTY = "no inputTokens"
"""What botocore makes of a body that is not JSON (or cut off): an empty answer."""
BAD_COUNTS: list[tuple[Provider, str, Reply, str]] = [
    *(
        (p, "not JSON", NOT_JSON, _BOTOCORE_EMPTY if p == "bedrock" else "not JSON")
        for p in PROVIDERS
    ),
    *(
        (
            p,
            "cut off",
            _cut_off({COUNT[p]: 1200}),
            _BOTOCORE_EMPTY if p == "bedrock" else "broke off",
        )
        for p in PROVIDERS
    ),
    ("anthropic", "a string", _json(200, {"input_tokens": "many"}), "input_tokens is 'many'"),
    ("openai", "a JSON list", _http(200, b"[1, 2, 3]"), "the answer is a list"),
    ("openai", "negative", _json(200, {"input_tokens": -5}), "input_tokens is -5, not a token"),
    ("gemini", "a string", _json(200, {"totalTokens": "many"}), "total_tokens: Input should"),
    ("bedrock", "a JSON list", _http(200, b"[1, 2, 3]"), "the SDK failed on it"),
    ("bedrock", "3 tokens", _json(200, {"inputTokens": 3}), "not a plausible count"),
]
"""Malformed answers to the token count, the first request each SDK sends, and what the
error line says about each."""


def _usage(provider: Provider, field: str, value: object) -> Reply:
    """The valid answer with its usage's `field` replaced by `value` (None: no usage)."""
    body = json.loads(json.dumps(VALID[provider]))
    usage = "usageMetadata" if provider == "gemini" else "usage"
    if value is None:
        del body[usage]
    else:
        body[usage][field] = value
    return _json(200, body)


BAD_ANSWERS: list[tuple[Provider, str, Reply, str]] = [
    (
        "anthropic",
        "input_tokens a string",
        _usage("anthropic", "input_tokens", "many"),
        "usage.input_tokens is 'many', not a token count",
    ),
    ("openai", "no usage", _usage("openai", "", None), "no usage"),
    (
        "gemini",
        "promptTokenCount a string",
        _usage("gemini", "promptTokenCount", "many"),
        "usage_metadata.promptTokenCount: Input should be a valid integer",
    ),
    (
        "bedrock",
        "inputTokens negative",
        _usage("bedrock", "inputTokens", -5),
        "usage.inputTokens is -5, not a token count",
    ),
]
"""Malformed answers to the first probe request (its token count a 404): each SDK parses
differently (a raw JSON error, a pydantic validation error, botocore's parser crashing on a
list), and the usage is checked after it."""


def test_malformed_answers_are_one_line_and_never_a_traceback(
    serve: Callable[[Callable[[Request], Reply]], Hostile],
) -> None:
    """Garbage, cut-off and wrongly typed answers, to the token count and to the first probe
    request (shared-prefix A, its token count a 404): each is one line naming the request
    and what was wrong, exit 1. Each is the provider's valid answer (`VALID`, which the
    probe takes) with one thing broken, and the line names that thing. A count far below
    any real tokenizer's is refused too (the prompts would grow by that ratio, to millions
    of tokens)."""
    runs = [(serve(_api(_always(reply))), p) for p, _, reply, _ in BAD_COUNTS]
    runs += [(serve(_api(_counts_absent(reply))), p) for p, _, reply, _ in BAD_ANSWERS]
    # Each answer comes at once: the timeout only has to outlast a loaded machine running
    # all these probes together (2 s did not, twice, under the full suite).
    ended = _probe_all(runs, timeout=ANSWERED_WITHIN)
    lines = [_one_line_error(probe) for probe in ended]
    counted = "sessiongen: error: shared-prefix A (its token count): malformed answer: "
    answered = "sessiongen: error: shared-prefix A: malformed answer: "
    expected = [counted] * len(BAD_COUNTS) + [answered] * len(BAD_ANSWERS)
    cases = BAD_COUNTS + BAD_ANSWERS
    for line, start, (provider, kind, _, shown) in zip(lines, expected, cases, strict=True):
        # what was wrong, from the field the probe reads: so it was not anything else
        assert line.startswith(start) and shown in line, (provider, kind, line)
    record(
        "hostile",
        {
            "probe-malformed": {
                "malformed answers tried (4 SDKs)": len(ended),
                "one-line errors": len(lines),
                "tracebacks": sum("Traceback" in e.result.stderr for e in ended),
            }
        },
    )
