"""The `sessiongen` command: `demo` runs the main job, `serve` serves sessions over HTTP,
`emulator` serves the emulator (`emulator probe` checks its cache rules against an endpoint),
`experiment warming` replays warming policies over a trace and writes tables and plots,
`bench` runs the benchmarks and writes bench.json, `workbench` runs every notebook,
regenerates the contract's evidence and builds the docs site."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn, cast

from ._bind import EMULATOR_TOKEN_ENV, UnusableToken, check_token
from ._bind import SERVER_TOKEN_ENV as TOKEN_ENV
from ._choices import PROVIDERS as DEMO_PROVIDERS
from ._choices import SERVE_PROVIDERS as PROVIDERS
from ._choices import TRACE_FORMATS as FORMATS
from .errors import SessiongenError

if TYPE_CHECKING:
    from .cache import TTL
    from .lab import Provider as LabProvider
    from .server.serving import Provider
    from .warming.study.experiment import ExperimentResult, Sweep
    from .warming.study.report import PolicyTable
    from .warming.traces import Trace

PORTS = range(1, 65536)
MAX_SESSIONS = 100_000


USAGE_ERROR = 2
"""The exit status when the command line is wrong: an unknown option, a bad value, options
that do not go together, a public bind without a token. Nothing was done."""
RUNTIME_ERROR = 1
"""The exit status when the command could not do its job: a file it cannot read or parse, a
port in use, a store it cannot open, a provider fault, an optional extra not installed."""
ERROR_PREFIX = "sessiongen: error: "
"""How every error line on stderr begins, whatever the command and the exit status (a usage
error ends by naming the command's --help). Ctrl-C is `sessiongen: interrupted`, exit 130."""


class _UsageError(Exception):
    """A command-line mistake found by a parser (`_Parser.error`), reported by `main`."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit 2, by `main`), so they read as errors, not as
    help."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message, self.prog)


def _tooling(module: str) -> ModuleType | None:
    """A module of the repository's tooling (`sessiongen_tooling`, behind `bench` and
    `workbench`), or None where it is not installed: it is a workspace package of a checkout,
    not part of the sessiongen wheel."""
    try:
        return importlib.import_module(f"sessiongen_tooling.{module}")
    except ModuleNotFoundError as error:
        if error.name in ("sessiongen_tooling", f"sessiongen_tooling.{module}"):
            return None
        raise


def port(text: str) -> int:
    """An argparse type: a TCP port a server can listen on."""
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number not in PORTS:
        raise argparse.ArgumentTypeError(
            f"must be a port from {PORTS.start} to {PORTS.stop - 1}, got {text!r}"
        )
    return number


def bound(text: str) -> int | None:
    """An argparse type: a count or size the emulator keeps at most; 0 means no bound."""
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number, 0 for no limit, got {text!r}")
    return number or None


def session_count(text: str) -> int:
    """An argparse type: how many sessions `--generate` draws, 1 to MAX_SESSIONS."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_SESSIONS:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of sessions from 1 to {MAX_SESSIONS:,}, got {text!r}"
        )
    return number


def seed(text: str) -> int:
    """An argparse type: the generator's seed, any integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None


def fit_fraction(text: str) -> float:
    """An argparse type: the share of a trace the learning policies fit on, 0 to below 1."""
    try:
        number = float(text)
    except ValueError:
        number = -1.0
    if not 0.0 <= number < 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a number from 0 to below 1, got {text!r}")
    return number


def ttl_seconds(text: str) -> tuple[str | None, float]:
    """An argparse type: `SECONDS` (every swept TTL) or `TTL=SECONDS` (that TTL's sweep only),
    a positive number of seconds."""
    ttl, _, number = text.rpartition("=")
    if ttl not in ("", "5m", "1h"):
        raise argparse.ArgumentTypeError(f"the TTL must be 5m or 1h, got {ttl!r} in {text!r}")
    try:
        seconds = float(number)
    except ValueError:
        seconds = -1.0
    if not 0.0 < seconds < float("inf"):  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be SECONDS or TTL=SECONDS, > 0, got {text!r}")
    return ttl or None, seconds


def usd_per_mtok(text: str) -> float:
    """An argparse type: a price in USD per million tokens, a finite number >= 0."""
    try:
        number = float(text)
    except ValueError:
        number = -1.0
    if not 0.0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a number >= 0 (USD per million tokens), got {text!r}"
        )
    return number


PRICE_OPTIONS = ("input", "cache_write_5m", "cache_write_1h", "cache_read", "output")
"""The `--<kind>-price` options of `experiment warming`, as `cache.pricing.Price` names them."""


def base_url(text: str) -> str:
    """An argparse type: an http(s) URL with a host."""
    # startup: the command line loads only what the command it runs needs
    from ._probe import check_base_url

    try:
        return check_base_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def probe_timeout(text: str) -> float:
    """An argparse type: the probe's `--timeout`, seconds above 0."""
    # startup: the command line loads only what the command it runs needs
    from ._probe import check_timeout

    try:
        return check_timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def model_alias(text: str) -> tuple[str, str]:
    """An argparse type: `NAME=ID`, ID a catalogued model and NAME not one."""
    # startup: the command line loads only what the command it runs needs
    from .cache import UnknownModel, get_model, is_known_model

    name, _, model = text.partition("=")
    if not name or not model:
        raise argparse.ArgumentTypeError(f"must be NAME=ID, got {text!r}")
    if is_known_model(name):
        raise argparse.ArgumentTypeError(f"{name!r} is a catalogued model already")
    try:
        get_model(model)
    except UnknownModel:
        raise argparse.ArgumentTypeError(f"{model!r} is not a catalogued model") from None
    return name, model


def usd(text: str) -> float:
    """An argparse type: a non-negative amount of US dollars."""
    try:
        amount = float(text)
    except ValueError:
        amount = -1.0
    if not amount >= 0 or amount == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a non-negative amount of USD, got {text!r}")
    return amount


def share(text: str) -> float:
    """An argparse type: a fraction from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction from 0 to 1, got {text!r}")
    return value


def new_file(text: str) -> Path:
    """An argparse type: a file to write, in an existing directory (checked before any work)."""
    path = Path(text)
    if path.is_dir() or not path.resolve().parent.is_dir():
        raise argparse.ArgumentTypeError(f"must be a file in an existing directory, got {text!r}")
    return path


def directory(text: str) -> Path:
    """An argparse type: an existing directory."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"must be an existing directory, got {text!r}")
    return path


def _error(message: str) -> int:
    """A one-line runtime error (a bad file, not a bad argument): exit status 1."""
    print(ERROR_PREFIX + message, file=sys.stderr)
    return RUNTIME_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit status. The one place errors become exit statuses
    (USAGE_ERROR, RUNTIME_ERROR) and one line on stderr (ERROR_PREFIX): a usage error exits
    (SystemExit, as argparse does), any other sessiongen error is returned as 1, with its
    message and no traceback."""
    try:
        return _run(argv)
    except _UsageError as error:
        print(f"{ERROR_PREFIX}{error} (see {error.prog} --help)", file=sys.stderr)
        raise SystemExit(USAGE_ERROR) from None
    except SessiongenError as error:
        return _error(str(error))


def _run(argv: Sequence[str] | None) -> int:
    parser = _Parser(prog="sessiongen", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('sessiongen')}")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser(
        "demo", help="three durable turns and a generate on the embedded emulator and SQLite"
    )
    demo.add_argument(
        "--provider",
        choices=DEMO_PROVIDERS,
        default="anthropic",
        help="the API and official SDK the engine talks to the emulator through (default "
        "anthropic; bedrock: boto3 Converse, openai: Chat Completions, gemini: google-genai)",
    )

    server = commands.add_parser(
        "serve",
        help="serve sessions, durable turns and session.generate over HTTP",
        description="Serve the HTTP API (routes in docs/openapi.json) for the sample agent. "
        "Errors are application/problem+json. Stop with Ctrl-C.",
    )
    server.add_argument(
        "--host",
        default="127.0.0.1",
        help="bind address (default 127.0.0.1; a non-loopback address needs a token)",
    )
    server.add_argument("--port", type=port, default=8080, help="1 to 65535 (default 8080)")
    server.add_argument(
        "--db",
        default="sessiongen.db",
        metavar="FILE",
        help="the SQLite store (default: sessiongen.db in the current directory; "
        "':memory:' keeps nothing after exit)",
    )
    server.add_argument(
        "--provider",
        choices=PROVIDERS,
        default="emulator",
        help="emulator (default): the embedded emulator, in-process, on real time; "
        "anthropic: the Anthropic API, configured by ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL",
    )
    server.add_argument(
        "--token",
        help=f"require 'Authorization: Bearer TOKEN' on every route but /api/health "
        f"(default: ${TOKEN_ENV}; prefer it, a command line is visible to other users)",
    )
    server.add_argument(
        "--workspace",
        type=directory,
        metavar="DIR",
        help="the directory new sessions' tools work in (default: none; tool calls then "
        "answer that the session has no workspace)",
    )
    server.add_argument(
        "--warming-policy",
        type=Path,
        metavar="FILE",
        help="the warming keeper's policy, as `experiment warming --save-policy` saved it "
        "(default: tracking, fitted on generated coding-agent turns)",
    )

    emulator = commands.add_parser(
        "emulator",
        help="serve the emulator (Anthropic, OpenAI, Bedrock and Gemini APIs), or probe one",
        description="Serve the provider emulator: the Anthropic, OpenAI, Bedrock and Gemini "
        "APIs on one port, each with its prompt-cache rules, for the official SDKs "
        "(`emulator probe` checks an endpoint against those rules).",
    )
    emulator.add_argument(
        "--host",
        default="127.0.0.1",
        help="bind address (default 127.0.0.1; a non-loopback address needs a token)",
    )
    emulator.add_argument("--port", type=port, default=8765, help="1 to 65535 (default 8765)")
    emulator.add_argument(
        "--token",
        help=f"require 'Authorization: Bearer TOKEN' on the admin API (/_emulator/*); "
        f"the provider routes still accept any SDK key (default: ${EMULATOR_TOKEN_ENV}; prefer it, "
        "a command line is visible to other users)",
    )
    emulator.add_argument(
        "--log-capacity",
        type=bound,
        default=10_000,
        help="requests the log keeps, oldest dropped first and counted (default 10000; "
        "0 keeps every request)",
    )
    emulator.add_argument(
        "--log-bytes",
        type=bound,
        default=256 * 1024 * 1024,
        help="bytes the log's entries may hold, oldest dropped first and counted (default "
        "268435456, 256 MiB; 0 for no byte bound)",
    )
    emulator.add_argument(
        "--alias",
        action="append",
        default=[],
        type=model_alias,
        metavar="NAME=ID",
        help="answer model NAME as the catalogued model ID (its facts, caching and prices); "
        "for a client's model the catalog does not know yet (repeatable)",
    )
    emulator.add_argument(
        "--cache-entries",
        type=bound,
        default=500_000,
        help="prompt-cache entries kept at once, the soonest to expire evicted first "
        "(default 500000, about 230 MiB; 0 for no bound)",
    )
    emulator.add_argument(
        "--max-body-bytes",
        type=bound,
        default=32 * 1024 * 1024,
        help="the largest request body taken; a larger one is answered the provider's 'too "
        "large' error unread (default 33554432, the Messages API's 32 MB; 0 for no limit)",
    )

    emulator_commands = emulator.add_subparsers(
        dest="emulator_command",
        title="subcommand",
        description="none: serve the emulator with the options above",
    )
    probe = emulator_commands.add_parser(
        "probe",
        help="check the emulator's cache rules against an endpoint: the provider's real API "
        "with your key, or an emulator",
        description="Run the cache probes (shared prefix, warm ping; with --with-ttl also the "
        "TTL boundary and retention) through the provider's official SDK against --base-url, "
        "and print each request's usage beside the prediction of an embedded emulator that "
        "runs the same requests on its virtual clock. Against a sessiongen emulator the waits "
        "move its clock; against anything else they are real sleeps. Exit 0 when every probe "
        "agrees, 3 when one disagrees, 1 on an error. See docs/probe.md.",
    )
    probe.add_argument(
        "--provider",
        choices=DEMO_PROVIDERS,
        required=True,
        help="the API and its official SDK (bedrock: boto3 Converse, openai: Chat "
        "Completions, gemini: google-genai)",
    )
    probe.add_argument(
        "--base-url",
        type=base_url,
        metavar="URL",
        help="the endpoint (default: the SDK's own, e.g. https://api.anthropic.com); for "
        "openai a URL without /v1 gets it",
    )
    probe.add_argument(
        "--model",
        help="the model (default: the provider's catalogued model the probes cost least on)",
    )
    probe.add_argument(
        "--api-key",
        help="the provider key (default: the SDK's usual variable, e.g. ANTHROPIC_API_KEY; "
        "for bedrock a Bedrock API key, else boto3's AWS credentials); an emulator gets a "
        "placeholder unless this is given (prefer the variable: a command line is visible "
        "to other users)",
    )
    probe.add_argument(
        "--with-ttl",
        action="store_true",
        help="also the TTL-boundary and retention probes: 10 minutes of real waiting against "
        "a real endpoint (a clock move on an emulator)",
    )
    probe.add_argument(
        "--max-cost",
        type=usd,
        default=0.05,
        metavar="USD",
        help="refuse to send when the estimated worst-case cost is above this (default 0.05)",
    )
    probe.add_argument(
        "--tolerance",
        type=share,
        default=0.10,
        help="how far a read or write may differ as a share of the input (default 0.10)",
    )
    probe.add_argument(
        "--emulator-token",
        help=f"the bearer token of an emulator's admin API (default: ${EMULATOR_TOKEN_ENV})",
    )
    probe.add_argument(
        "--timeout",
        type=probe_timeout,
        default=30.0,
        metavar="SECONDS",
        help="how long each request may take in all, connecting and reading included (default 30)",
    )
    probe.add_argument(
        "--json",
        type=new_file,
        metavar="FILE",
        help="also write the results here (its directory must exist)",
    )

    experiment = commands.add_parser(
        "experiment", help="run an experiment and write its tables and plots"
    )
    experiments = experiment.add_subparsers(dest="experiment", required=True)
    warming = experiments.add_parser(
        "warming",
        help="every warming policy against the offline optimum, on a trace file or generated",
        description="Replay every warming policy over a trace, price each against the offline "
        "optimum, sweep ping intervals, and write policies.csv, intervals.csv and three PNG "
        "plots into --out. Costs are prompt costs in USD (output tokens excluded).",
    )
    source = warming.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", type=Path, metavar="FILE", help="a trace file (or directory)")
    source.add_argument(
        "--generate",
        type=session_count,
        metavar="N",
        help=f"generate N sessions instead (1 to {MAX_SESSIONS:,}; the experiment's time grows "
        "about linearly with N)",
    )
    warming.add_argument("--format", choices=FORMATS, help="the trace's format (with --trace)")
    warming.add_argument("--seed", type=seed, help="the generator's seed (default 0)")
    warming.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="where to write (created)"
    )
    warming.add_argument(
        "--fit-fraction",
        type=fit_fraction,
        default=0.5,
        metavar="F",
        help="fit the learning policies on the sessions that start first, holding this share "
        "of the requests, and price every policy on the rest (0 to below 1; default 0.5; "
        "0: no fitting, the whole trace)",
    )
    warming.add_argument(
        "--save-policy",
        type=Path,
        metavar="FILE",
        help="also write the default policy, fitted on the whole trace, here (JSON; for "
        "`sessiongen serve --warming-policy`)",
    )
    knobs = warming.add_argument_group(
        "model, prices and ping sweeps",
        "Prices are the catalog's unless overridden; each --*-price changes that price of "
        "--model for this run (and so prices every request at --model).",
    )
    knobs.add_argument(
        "--model",
        metavar="NAME",
        help="price every request at this catalog model, whatever model the log names "
        "(default: each request at its own, claude-sonnet-4-6 where it names none)",
    )
    for kind in PRICE_OPTIONS:
        knobs.add_argument(
            f"--{kind.replace('_', '-')}-price",
            dest=f"{kind}_price",
            type=usd_per_mtok,
            metavar="USD",
            help=f"the {kind.replace('_', ' ')} price, USD per million tokens",
        )
    knobs.add_argument(
        "--ttl",
        action="append",
        choices=("5m", "1h"),
        help="sweep ping intervals for this TTL (repeatable; default both 5m and 1h)",
    )
    knobs.add_argument(
        "--ping-interval",
        action="append",
        type=ttl_seconds,
        metavar="[TTL=]SECONDS",
        help="a ping interval to sweep (repeatable; TTL= for one TTL's grid only; default a "
        "grid from a twentieth of the TTL to just past it)",
    )
    knobs.add_argument(
        "--horizon",
        action="append",
        type=ttl_seconds,
        metavar="[TTL=]SECONDS",
        help="how long pings go on after each request (TTL= for one TTL; default 1800 for "
        "5m, 7200 for 1h)",
    )

    bench_tooling = _tooling("bench")
    bench_names = bench_tooling.NAMES if bench_tooling is not None else None
    bench = commands.add_parser(
        "bench",
        help="run the benchmarks, print their figures against their targets, write bench.json",
        description="Run the benchmark scripts of this checkout's benchmarks/ directory (each "
        "a registered entry of sessiongen_tooling.bench), print a table of every figure against its "
        "target, and write the record (figures, machine, commit) as JSON. About 15 minutes on 2 "
        "cores, most of it warming_scale's million requests.",
    )
    bench.add_argument(
        "--quick", action="store_true", help="smaller runs (for tests; figures not comparable)"
    )
    bench.add_argument(
        "--out", type=Path, metavar="FILE", help="the JSON record to write (default bench.json)"
    )
    bench.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=bench_names,
        help="run only this benchmark (repeatable): " + ", ".join(bench_names or ("none here",)),
    )
    bench.add_argument(
        "--docs",
        type=Path,
        metavar="PAGE",
        help="also rewrite the generated section of this docs page (docs/benchmarks.md)",
    )
    bench.add_argument(
        "--from",
        dest="source",
        type=Path,
        metavar="FILE",
        help="with --docs: render this record (benchmarks/bench.json) instead of running",
    )

    # startup: the command line loads only what the command it runs needs
    from .agents.command import add_agents_parser

    agents = add_agents_parser(commands)

    workbench = commands.add_parser(
        "workbench",
        help="run every notebook, regenerate the contract's evidence, build (and serve) the site",
        description="Execute every notebook against the embedded emulator and store the fresh "
        "outputs, regenerate the evidence tables the contract includes, and build the site "
        "(contract, traceability, decision records, plan, notebooks, API reference) into "
        "site/; only what changed since the last run is redone, in parallel. A failure "
        "exits 1 with one line naming the notebook and the cell (counted from 1).",
    )
    workbench.add_argument(
        "notebooks",
        nargs="*",
        type=Path,
        metavar="NOTEBOOK",
        help="run only these notebooks (default: every notebook in notebooks/)",
    )
    workbench.add_argument(
        "--skip-notebooks",
        action="store_true",
        help="only build the site, from the stored notebook outputs and evidence tables "
        "(no notebook executed, no table measured)",
    )
    workbench.add_argument(
        "--skip-evidence", action="store_true", help="do not measure the evidence tables again"
    )
    workbench.add_argument(
        "--check",
        action="store_true",
        help="execute and measure everything, but write neither notebooks nor evidence back",
    )
    workbench.add_argument(
        "--force",
        action="store_true",
        help="redo every notebook, table and the site, even those whose inputs are unchanged",
    )
    workbench.add_argument(
        "--site-dir", type=Path, metavar="DIR", help="where to build the site (default: site/)"
    )
    workbench.add_argument(
        "--serve",
        action="store_true",
        help="then serve the site on 127.0.0.1 and rebuild it when the contract, the plan, "
        "the notebooks or the docs change (Ctrl-C stops)",
    )
    workbench.add_argument(
        "--port", type=port, default=8000, help="the port --serve listens on (default 8000)"
    )

    given = list(sys.argv[1:] if argv is None else argv)
    if given and given[0].startswith("-") and given[0] not in ("-h", "--help", "--version"):
        # argparse would first complain that no command was given, hiding the real mistake.
        parser.error(
            f"unrecognized argument {given[0]!r}; a command comes first: "
            + ", ".join(commands.choices)
        )
    args = parser.parse_args(argv)
    if args.command in ("bench", "workbench") and _tooling(args.command) is None:
        return _error(
            f"sessiongen {args.command} runs on a checkout of the sessiongen repository, where "
            "`uv sync` installs its tooling (the sessiongen_tooling package, not part of the "
            f"sessiongen wheel); in a checkout, run `uv run sessiongen {args.command}`"
        )
    if args.command == "bench":
        _bench = _tooling("bench")
        assert _bench is not None
        if args.source is not None and args.docs is None:
            bench.error("argument --from: only with --docs")
        if args.source is not None and (args.quick or args.only or args.out is not None):
            bench.error("argument --from: renders a record, so not with --quick, --only or --out")
        return int(
            _bench.main(
                quick=args.quick,
                out=args.out if args.out is not None else Path("bench.json"),
                only=args.only,
                docs=args.docs,
                source=args.source,
            )
        )
    if args.command == "workbench":
        workbench_ = _tooling("workbench")
        assert workbench_ is not None

        if args.skip_notebooks and args.notebooks:
            workbench.error("argument --skip-notebooks: not with NOTEBOOK arguments")
        return int(
            workbench_.main(
                notebooks=args.notebooks,
                skip_notebooks=args.skip_notebooks,
                skip_evidence=args.skip_evidence,
                check=args.check,
                site_dir=args.site_dir,
                serve=args.serve,
                port=args.port,
                force=args.force,
            )
        )
    if args.command == "agents":
        # startup: the command line loads only what the command it runs needs
        from .agents.command import run_agents_command

        return run_agents_command(agents, args)
    if args.command == "experiment":
        if args.trace is not None and args.format is None:
            warming.error(f"argument --format: required with --trace ({', '.join(FORMATS)})")
        if args.trace is not None and args.seed is not None:
            warming.error("argument --seed: only with --generate")
        if args.generate is not None and args.format is not None:
            warming.error("argument --format: only with --trace")
        prices = {
            kind: getattr(args, f"{kind}_price")
            for kind in PRICE_OPTIONS
            if getattr(args, f"{kind}_price") is not None
        }
        model = args.model
        if model is not None or prices:
            # startup: the command line loads only what the command it runs needs
            from .catalog import is_known_model, nearest_models
            from .warming.policies.decision import DEFAULT_MODEL

            model = model or DEFAULT_MODEL
            if not is_known_model(model):
                near = ", ".join(nearest_models(model, "anthropic"))
                warming.error(f"argument --model: not a catalog model: {model!r} (nearest: {near})")
        return _warming_experiment(
            args.trace,
            args.format,
            args.generate,
            args.seed,
            args.out,
            args.fit_fraction,
            args.save_policy,
            model=model,
            prices=prices,
            sweeps=_sweeps(warming, args.ttl, args.ping_interval, args.horizon),
        )
    if args.command == "demo":
        # startup: the command line loads only what the command it runs needs
        from ._demo import print_demo

        asyncio.run(print_demo(cast("LabProvider", args.provider)))
        return 0
    if args.command == "serve":
        token = _token(server, args.token, TOKEN_ENV)
        return _serve(
            server,
            args.host,
            args.port,
            args.db,
            args.provider,
            token,
            args.workspace,
            args.warming_policy,
        )
    if args.emulator_command == "probe":
        served = [
            "--" + dest.replace("_", "-")
            for dest in (
                "host",
                "port",
                "token",
                "log_capacity",
                "log_bytes",
                "max_body_bytes",
                "cache_entries",
                "alias",
            )  # fmt: skip
            if getattr(args, dest) != emulator.get_default(dest)
        ]
        if served:
            emulator.error(f"argument {served[0]}: serves an emulator, so not with probe")
        return _probe(args)
    token = _token(emulator, args.token, EMULATOR_TOKEN_ENV)
    return _emulator(
        emulator,
        args.host,
        args.port,
        token,
        args.log_capacity,
        log_bytes=args.log_bytes,
        max_body_bytes=args.max_body_bytes,
        cache_entries=args.cache_entries,
        aliases=args.alias,
    )


def _token(parser: _Parser, given: str | None, env: str) -> str | None:
    """A server's token: `--token`, else the variable `env` (unset or empty: none); an empty
    or placeholder one is a usage error (exit 2) naming where it came from."""
    token: str | None
    if given is not None:
        token, source = given, "argument --token"
    else:
        token, source = os.environ.get(env) or None, f"${env}"
    try:
        check_token(token, source)
    except UnusableToken as exc:
        parser.error(str(exc))
    return token


def _probe(args: argparse.Namespace) -> int:
    """`sessiongen emulator probe`: the probes, the table, exit 0 (all agree) or 3."""
    # startup: the command line loads only what the command it runs needs
    from ._probe import ProbeError, run, write_json

    token = args.emulator_token or os.environ.get(EMULATOR_TOKEN_ENV) or None
    try:
        report = run(
            args.provider,
            base_url=args.base_url,
            model=args.model,
            api_key=args.api_key,
            with_ttl=args.with_ttl,
            max_cost=args.max_cost,
            tolerance=args.tolerance,
            emulator_token=token,
            out=lambda line: print(line, flush=True),
            timeout=args.timeout,
        )
        if args.json is not None:
            write_json(report, args.json)
    except ProbeError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))
    except KeyboardInterrupt:
        print("sessiongen: interrupted", file=sys.stderr)
        return 130
    return 0 if report.agreeing == len(report.probes) else 3


def _emulator(
    parser: _Parser,
    host: str,
    port: int,
    token: str | None,
    capacity: int | None,
    *,
    log_bytes: int | None,
    max_body_bytes: int | None,
    cache_entries: int | None,
    aliases: Sequence[tuple[str, str]] = (),
) -> int:
    """`sessiongen emulator`: an unprotected public bind is refused (exit 2) before anything
    is bound, a host that cannot be bound is exit 1, then serve until interrupted, with each
    alias answered as its model."""
    # startup: the command line loads only what the command it runs needs
    from contextlib import ExitStack

    # startup: the command line loads only what the command it runs needs
    from ._bind import InsecureBind
    from .cache import alias_model
    from .emulator import EmulatorState, serve

    try:
        with ExitStack() as names:
            for alias, model in aliases:
                names.enter_context(alias_model(alias, model))
            state = EmulatorState(
                log_capacity=capacity,
                log_bytes=log_bytes,
                max_body_bytes=max_body_bytes,
                cache_entries=cache_entries,
            )
            serve(host=host, port=port, state=state, token=token)
    except InsecureBind as exc:
        parser.error(str(exc))
    except OSError as exc:  # serve checks the address before it serves, so this is binding
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return _error(f"cannot bind {address}: {exc.strerror or exc}")
    return 0


def _serve(
    parser: _Parser,
    host: str,
    port: int,
    db: str,
    provider: str,
    token: str | None,
    workspace: Path | None,
    warming_policy: Path | None = None,
) -> int:
    """`sessiongen serve`: refuse an unprotected public bind (exit 2) before anything else,
    then serve until interrupted; an unreadable policy file, a port in use or an unopenable
    store is exit 1."""
    # startup: the command line loads only what the command it runs needs
    import sqlite3

    # startup: the command line loads only what the command it runs needs
    from .plugins import PluginLoadError
    from .server.serving import InsecureBind, check_bind, serve
    from .warming.keeper import FromPolicy, KeeperPolicy
    from .warming.policies.saved import PolicyFileError, load_policy

    try:
        check_bind(host, token)
    except InsecureBind as exc:
        parser.error(str(exc))
    policy: KeeperPolicy | None = None
    if warming_policy is not None:
        try:
            policy = FromPolicy(load_policy(warming_policy))
        except PolicyFileError as exc:
            return _error(f"--warming-policy: {exc}")
        except OSError as exc:
            return _error(f"--warming-policy: {exc.filename}: {exc.strerror}")
    try:
        serve(
            host,
            port,
            db,
            cast("Provider", provider),
            token,
            workspace=workspace,
            warming_policy=policy,
        )
    except OSError as exc:  # serve checks the address before it serves, so this is binding
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return _error(f"cannot bind {address}: {exc.strerror or exc}")
    except sqlite3.Error as exc:
        return _error(f"cannot open the store {db}: {exc}")
    except PluginLoadError as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        pass
    return 0


def _load(trace_path: Path | None, format: str, sessions: int | None, seed: int | None) -> Trace:
    """The trace from the file, or generated; load errors propagate to the caller."""
    if trace_path is None:
        # startup: the command line loads only what the command it runs needs
        from .warming.traces.generator import generate_sessions

        return generate_sessions(sessions or 0, seed if seed is not None else 0)
    # startup: the command line loads only what the command it runs needs
    from .warming.traces.formats import TraceFormat, load_trace

    return load_trace(trace_path, cast(TraceFormat, format))  # argparse checked the choice


def _sweeps(
    parser: argparse.ArgumentParser,
    ttls: list[str] | None,
    intervals: list[tuple[str | None, float]] | None,
    horizons: list[tuple[str | None, float]] | None,
) -> tuple[Sweep, ...]:
    """The interval sweeps `--ttl`, `--ping-interval` and `--horizon` ask for."""
    # startup: the command line loads only what the command it runs needs
    from .warming.study.experiment import HORIZONS

    chosen = list(dict.fromkeys(ttls or HORIZONS))
    for option, given in (("--ping-interval", intervals), ("--horizon", horizons)):
        stray = [ttl for ttl, _ in given or () if ttl is not None and ttl not in chosen]
        if stray:
            parser.error(f"argument {option}: {stray[0]}= but --ttl does not sweep {stray[0]}")
    sweeps: list[Sweep] = []
    for ttl in chosen:
        kind = cast("TTL", ttl)  # argparse checked the choice
        mine = [s for t, s in horizons or () if t in (None, kind)]
        grid = tuple(sorted({s for t, s in intervals or () if t in (None, kind)}))
        sweeps.append((kind, mine[-1] if mine else HORIZONS[kind], grid or None))
    return tuple(sweeps)


def _warming_experiment(
    trace_path: Path | None,
    format: str,
    sessions: int | None,
    seed: int | None,
    out: Path,
    fit_fraction: float = 0.5,
    save_policy: Path | None = None,
    *,
    model: str | None = None,
    prices: dict[str, float] | None = None,
    sweeps: Sequence[Sweep] | None = None,
) -> int:
    """`sessiongen experiment warming`: run it under a progress bar on stderr (silent when
    stderr is not a terminal), then print the policy table and the summary on stdout."""
    # startup: the command line loads only what the command it runs needs
    from rich.console import Console

    # startup: the command line loads only what the command it runs needs
    from ._progress import progress_bar
    from .cache.pricing import override_price
    from .warming.study.experiment import SWEEPS, experiment_steps, run_warming_experiment
    from .warming.study.plots import PlotsUnavailable, require_matplotlib
    from .warming.traces.events import ParquetUnavailable
    from .warming.traces.formats import article

    errors = Console(stderr=True)
    where = trace_path if trace_path is not None else "the generated trace"
    sweeps = sweeps or SWEEPS
    try:
        require_matplotlib()  # before loading: a missing extra should not cost a wait
        with progress_bar(errors) as bar, ExitStack() as priced:
            if prices:
                assert model is not None  # main() sets it with any price
                priced.enter_context(override_price(model, **prices))
            total = experiment_steps(model=model, fit_fraction=fit_fraction, sweeps=sweeps)
            task = bar.add_task("loading the trace", total=total)
            started = False

            def step(name: str) -> None:
                nonlocal started
                if started:
                    bar.advance(task)
                started = True
                bar.update(task, description=name)

            trace = _load(trace_path, format, sessions, seed)
            if not trace.requests:
                raise ValueError(f"{where}: the {format} trace has no requests: nothing to compare")
            total = experiment_steps(trace, model, fit_fraction=fit_fraction, sweeps=sweeps)
            bar.update(task, total=total)
            result = run_warming_experiment(
                trace,
                out,
                fit_fraction=fit_fraction,
                save_policy=save_policy,
                progress=step,
                model=model,
                sweeps=sweeps,
            )
            bar.update(task, completed=total)
    except (PlotsUnavailable, ParquetUnavailable) as exc:  # a missing extra, named
        return _error(str(exc))
    except UnicodeDecodeError as exc:
        return _error(
            f"cannot read {where} as {article(format)} {format} trace: not UTF-8 text "
            f"({exc.reason})"
        )
    except ValueError as exc:  # TraceFormatError names file:line; an empty trace says so
        return _error(str(exc))
    except OSError as exc:  # load_trace's own errors have a message, the system's a filename
        return _error(str(exc) if exc.filename is None else f"{exc.filename}: {exc.strerror}")
    except KeyboardInterrupt:
        print("sessiongen: interrupted", file=sys.stderr)
        return 130
    _print_table(result, prices or {})
    return 0


def _print_table(result: ExperimentResult, overridden: Mapping[str, float]) -> None:
    """The policy table, cheapest first, then one summary line and the files written."""
    # startup: the command line loads only what the command it runs needs
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = result.table
    if table.output_unknown:
        output = (
            f"output tokens, excluded, are unknown for {table.output_unknown:,} of "
            f"{table.requests:,} requests (the log's figures are placeholders)"
        )
    else:
        output = f"output tokens, excluded, add {table.output_cost:,.4f} USD under every policy"
    models = table.models()
    if models:
        each = ", ".join(f"{name} {count:,}" for name, count in models)
        prices = f"prompt cost, each request at its own model's prices ({each} requests)"
    else:
        prices = f"prompt cost at {table.model} prices"
    if overridden:  # the command line's --*-price options, named so the table says whose
        changed = ", ".join(f"{kind} {usd:g}" for kind, usd in overridden.items())
        prices += f" (overridden: {changed} USD/MTok)"
    view = Table(
        title=Text(f"Warming policies on {table.trace}"),
        caption=Text(f"{prices}; {output}"),
        title_justify="left",
        caption_justify="left",
    )
    view.add_column("policy", no_wrap=True)
    view.add_column("online")
    view.add_column("cost (USD)", justify="right")
    view.add_column("ratio_to_optimum", justify="right")
    view.add_column("pings", justify="right")
    for row in table.rows:
        view.add_row(
            Text(row.policy),
            "yes" if row.online else "no",
            f"{row.cost:,.4f}",
            f"{row.ratio_to_optimum:.3f}",
            f"{row.pings:,}",
        )
    out = Console(highlight=False, markup=False)
    out.print(view)
    for line in table.yardsticks():
        out.print(line, soft_wrap=True)
    best = table.best_online()
    if table.part == "held_back":
        where = (
            f"held-back part {table.trace}: {table.requests:,} requests, {table.sessions:,} "
            f"sessions (learning policies fitted on the {table.fitted_sessions:,} sessions "
            "before it)"
        )
    else:
        where = f"trace {table.trace}: {table.requests:,} requests, {table.sessions:,} sessions"
    out.print(
        f"best online policy: {best.policy}, ratio {best.ratio_to_optimum:.3f} to the optimum; "
        f"{where}",
        soft_wrap=True,
    )
    default = table.default_row()
    if default is not None:
        out.print(
            f"default policy ({default.policy}): ratio {default.ratio_to_optimum:.3f}, "
            f"{default.cost / best.cost:.3f} of the best online policy's cost",
            soft_wrap=True,
        )
    if table.calibration is not None:
        out.print(table.calibration.line(), soft_wrap=True)
    covered = _as_recorded_coverage(table)
    if covered:
        out.print(covered, soft_wrap=True)
    out.print("wrote: " + ", ".join(str(p) for p in result.paths), soft_wrap=True)


def _as_recorded_coverage(table: PolicyTable) -> str | None:
    """Which sessions the `as_recorded` row covers and their real usage, when that is not
    the whole trace the calibration line covers (the held-back part of a split)."""
    mine = table.as_recorded
    if mine is None or table.part != "held_back":
        return None
    logs = list(dict.fromkeys(row.session.split("/", 1)[0] for row in mine.rows))
    named = ", ".join(logs[:6]) + (f" and {len(logs) - 6:,} more" if len(logs) > 6 else "")
    t = mine.total
    return (
        f"as_recorded row: the held-back part only, {table.sessions:,} sessions of "
        f"{len(logs):,} logs ({named}), {t.requests:,} requests with recorded usage; real "
        f"usage of exactly those: cache reads {t.real_cache_read_tokens:,}, cache writes "
        f"{t.real_cache_write_tokens:,}, prompt cost {t.real_cost:,.4f} USD; predicted / "
        f"real: cache reads {t.read_ratio:.3f}, cache writes {t.write_ratio:.3f}, prompt "
        f"cost {t.cost_ratio:.3f} (--fit-fraction 0 prices the whole trace)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
