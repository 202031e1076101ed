"""The real agent clients `sessiongen agents` drives, one class each: where the npm package
puts its program, how to run it offline against an emulator in a throwaway HOME, how to run a
turn and continue a session, and how a scenario's tool intents become this client's own tool
calls (the scripted model calls the client's real tools, which the client really runs).

Each client was explored against the emulator before it was written down here; the facts
(environment variables, config keys, tool names) are the ones those runs showed, cited per
client. A client's settings turn off its telemetry, update checks and error reports, so the
only connection it makes is to the emulator."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import httpx
from pydantic import BaseModel, ConfigDict

from .._choices import AgentClientName
from ..emulator import ScriptedResponse, ScriptedToolCall
from .process import Workspace, run_process, started
from .wire import WireCall

AGENTS_DIR_ENV = "SESSIONGEN_AGENTS_DIR"
"""Where `sessiongen agents install` puts the clients (one npm prefix per client)."""

ClientName = AgentClientName
CallKind = Literal["turn", "title", "summary", "compaction", "subagent", "side call"]
Continuation = Literal["new", "resume", "fork"]


def agents_dir() -> Path:
    """`$SESSIONGEN_AGENTS_DIR`, else `~/.cache/sessiongen/agents`."""
    configured = os.environ.get(AGENTS_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "sessiongen" / "agents"


class Intent(BaseModel):
    """One tool call of a scenario, in words every client can act on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: Literal["list", "read", "edit", "shell", "subagent"]
    path: str = "."
    """Relative to the project."""
    old: str = ""
    new: str = ""
    command: str = ""
    prompt: str = ""
    """A subagent's task."""
    reply: str = "Done."
    """What the subagent answers (its one scripted reply)."""
    fork: bool = False
    """The subagent inherits the conversation (Claude Code's `fork`, Codex's
    `fork_turns="all"`) instead of starting fresh."""


class UnsupportedIntent(ValueError):
    """A scenario asks a client for something it has no tool for."""


class ClientNotInstalled(Exception):
    """The client's program is not where `sessiongen agents install` puts it."""

    def __init__(self, client: AgentClient, root: Path) -> None:
        self.client = client
        super().__init__(
            f"{client.name} {client.version} is not installed under {root}: "
            f"run `sessiongen agents install --client {client.name}` "
            f"(npm install --prefix {root / client.name} {client.spec})"
        )


class AgentClient(ABC):
    """One agent client, run as a subprocess per turn."""

    name: ClientName
    package: str
    version: str
    provider: str
    """The emulator API it talks to."""
    turn_tool: str
    """A tool every agent-loop request of this client offers and its side calls do not: how
    a scripted step finds the loop's request (`ScriptMatch`)."""
    spawn_tool: str
    """The tool that starts a subagent."""
    subagent_header: str | None = None
    """A header the client's subagents' requests carry and the loop's do not: how the two
    are told apart (`ScriptMatch.headers`), whatever order they arrive in."""
    parent_only_tool: str | None = None
    """Where there is no such header: a tool the loop's requests offer and a subagent's do
    not (neither: the script serves the subagent's requests in order)."""
    relative_binary: str

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}"

    def prefix(self, root: Path) -> Path:
        return root / self.name

    def binary(self, root: Path) -> Path | None:
        """The installed program, or None."""
        matches = sorted(self.prefix(root).glob(self.relative_binary))
        return matches[0] if matches and os.access(matches[0], os.X_OK) else None

    def require(self, root: Path) -> Path:
        found = self.binary(root)
        if found is None:
            raise ClientNotInstalled(self, root)
        return found

    def install_command(self, root: Path) -> list[str]:
        prefix = str(self.prefix(root))
        return [
            "npm",
            "install",
            "--prefix",
            prefix,
            "--save-exact",
            "--no-audit",
            "--no-fund",
            self.spec,
        ]

    @abstractmethod
    def prepare(self, home: Path, project: Path, base_url: str) -> dict[str, str]:
        """Write the client's settings into `home` and return its environment (no variable
        of the caller's is inherited but PATH, so no real key can leak to it)."""

    can_fork_session = False
    """Whether a turn can continue in a fork of the session (`Continuation` "fork")."""

    @abstractmethod
    def turn(
        self, binary: Path, prompt: str, *, model: str | None, session: Continuation
    ) -> list[str]:
        """The command line of one non-interactive turn: in a new session, resuming the
        session the previous turn left (its history reloaded from disk), or in a fork of it
        (a new session with that history copied)."""

    @abstractmethod
    def call(self, intent: Intent, project: Path, model: str | None) -> ScriptedToolCall:
        """`intent` as this client's tool call."""

    compact_prompt: str | None = None
    """The prompt that runs the client's compaction on the session (None: its
    non-interactive mode has none)."""

    @property
    def can_compact(self) -> bool:
        return self.compact_prompt is not None

    def compact(self, work: Workspace, log: Path, model: str | None) -> int | None:
        """Run the client's compaction on the session as one turn; its exit status (None:
        killed at `timeout`)."""
        if self.compact_prompt is None:
            raise UnsupportedIntent(f"{self.name} has no compaction command")
        argv = self.turn(work.binary, self.compact_prompt, model=model, session="resume")
        return run_process(argv, work, log)

    def loop_tool(self, model: str | None) -> str:
        return self.turn_tool

    def _parent(self, tools: list[str]) -> bool:
        return self.parent_only_tool is None or self.parent_only_tool in tools

    def check(self, intent: Intent) -> None:
        """Raise UnsupportedIntent where this client has no tool for `intent`."""
        if intent.tool == "subagent" and intent.fork:
            raise UnsupportedIntent(f"{self.name} has no subagent that inherits the conversation")

    def subagent_reply(self, intent: Intent) -> ScriptedResponse:
        """How the subagent `intent` starts ends its work: by answering `intent.reply`."""
        return ScriptedResponse(text=intent.reply)

    def after_spawn(self, intent: Intent) -> list[ScriptedToolCall]:
        """The loop's next calls after starting the subagent (none: the spawn tool returns
        the subagent's answer)."""
        return []

    def remember(self, stdout: str, stderr: str) -> None:
        """Keep what the next turn needs to continue the session (nothing, by default: the
        client finds its newest session itself)."""
        return None

    def classify(self, call: WireCall, main: bool) -> CallKind:
        """The kind of a request, from its system prompt, its last user text, its tools, its
        headers and whether its model is the session's main model."""
        system, last_user = call.texts()
        tools = call.tool_names()
        text = f"{system}\n{last_user}".lower()
        if any(cue in last_user.lower() for cue in _COMPACTION_CUES):
            return "compaction"
        if self.subagent_header is not None and self.subagent_header in call.headers:
            return "subagent"
        if self.turn_tool in tools:
            return "turn" if main and self._parent(tools) else "subagent"
        if "title" in text:
            return "title"
        if "summar" in text:
            return "summary"
        return "side call"


_COMPACTION_CUES = (
    "summary of the conversation",
    "summarize the conversation",
    "<summary>",
    "context checkpoint compaction",
)
"""Words of a compaction request's last user text (Claude Code's asks for "an <analysis>
block followed by a <summary> block"; Codex's begins "You are performing a CONTEXT
CHECKPOINT COMPACTION")."""


def _base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "TMPDIR": str(home / "tmp"),
        "NO_COLOR": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "DO_NOT_TRACK": "1",
        "LANG": "C.UTF-8",
    }


class ClaudeCode(AgentClient):
    """`@anthropic-ai/claude-code`: a native program; `-p` runs one turn, `--resume ID`
    continues a session from its transcript on disk. `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`
    is its one switch for telemetry, updates and the feature-flag fetch (read in its code;
    strace showed one connection, to the base URL)."""

    name: ClientName = "claude-code"
    package = "@anthropic-ai/claude-code"
    version = "2.1.328"
    provider = "anthropic"
    turn_tool = "Read"
    spawn_tool = "Agent"
    subagent_header = "x-claude-code-agent-id"
    compact_prompt = "/compact"
    relative_binary = "node_modules/@anthropic-ai/claude-code/bin/claude.exe"

    def __init__(self) -> None:
        self.session: str | None = None

    def prepare(self, home: Path, project: Path, base_url: str) -> dict[str, str]:
        (home / ".claude").mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        key = "sk-ant-emulator-key-not-a-secret"
        settings = {
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": self.version,
            "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
            "projects": {
                str(project): {
                    "hasTrustDialogAccepted": True,
                    "hasCompletedProjectOnboarding": True,
                }
            },
        }
        (home / ".claude.json").write_text(json.dumps(settings), encoding="utf-8")
        return {
            **_base_env(home),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_UPDATES": "1",
        }

    can_fork_session = True

    def turn(
        self, binary: Path, prompt: str, *, model: str | None, session: Continuation
    ) -> list[str]:
        argv = [str(binary), "-p", prompt, "--output-format", "json"]
        argv += ["--allowedTools", "Bash,Read,Edit,Write,Glob,Grep,Agent"]
        if model:
            argv += ["--model", model]
        if session != "new" and self.session:
            argv += ["--resume", self.session]
            if session == "fork":
                argv.append("--fork-session")
        return argv

    def remember(self, stdout: str, stderr: str) -> None:
        """The session id the turn printed (`--output-format json`)."""
        try:
            self.session = str(json.loads(stdout)["session_id"])
        except (ValueError, KeyError, TypeError):
            pass

    def check(self, intent: Intent) -> None:
        return None

    def call(self, intent: Intent, project: Path, model: str | None) -> ScriptedToolCall:
        path = str(project / intent.path)
        if intent.tool == "subagent":
            # In the foreground: `-p` would end the turn before a background agent reports.
            kind = "fork" if intent.fork else "general-purpose"
            return ScriptedToolCall(
                name="Agent",
                input={
                    "description": "Delegated task",
                    "prompt": intent.prompt,
                    "subagent_type": kind,
                    "run_in_background": False,
                },
            )
        if intent.tool == "read":
            return ScriptedToolCall(name="Read", input={"file_path": path})
        if intent.tool == "edit":
            return ScriptedToolCall(
                name="Edit",
                input={"file_path": path, "old_string": intent.old, "new_string": intent.new},
            )
        command = intent.command if intent.tool == "shell" else f"ls -R {shlex.quote(path)}"
        return ScriptedToolCall(name="Bash", input={"command": command, "description": "Run it"})


class Codex(AgentClient):
    """`@openai/codex`: a native program in the platform package; `codex exec` runs one turn,
    `codex exec resume --last` continues the newest session of the directory. A custom
    provider entry points it at the emulator's Responses API. Its newest models work in code
    mode: the only tool is `exec` (JavaScript that calls `tools.exec_command`), sent in an
    `additional_tools` input item; older ones call `exec_command` directly."""

    name: ClientName = "codex"
    package = "@openai/codex"
    version = "0.169.0"
    provider = "openai"
    turn_tool = "exec_command"
    spawn_tool = "spawn_agent"
    subagent_header = "x-openai-subagent"
    """`collab_spawn` on a spawned agent's requests, fresh or forked (0.169.0)."""
    relative_binary = "node_modules/@openai/codex-linux-*/vendor/*/bin/codex"

    def prepare(self, home: Path, project: Path, base_url: str) -> dict[str, str]:
        home.mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        config = f"""\
model_provider = "emulator"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.emulator]
name = "sessiongen emulator"
base_url = "{base_url}/v1"
env_key = "EMULATOR_API_KEY"
wire_api = "responses"

[features]
plugins = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
"""
        (home / "config.toml").write_text(config, encoding="utf-8")
        return {
            **_base_env(home),
            "CODEX_HOME": str(home),
            "EMULATOR_API_KEY": "emulator-key-not-a-secret",
            "RUST_LOG": "warn",
        }

    can_fork_session = True

    def __init__(self) -> None:
        self.session: str | None = None

    def turn(
        self, binary: Path, prompt: str, *, model: str | None, session: Continuation
    ) -> list[str]:
        argv = [str(binary), "exec"]
        if session == "resume":
            argv += ["resume", "--last"]
        elif session == "fork":
            argv += ["fork"]
        argv += ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if model:
            argv += ["--model", model]
        if session == "fork" and self.session:
            argv.append(self.session)
        return [*argv, prompt]

    def remember(self, stdout: str, stderr: str) -> None:
        """The session id its banner printed (`session id: ...`, on stderr)."""
        found = re.search(r"^session id: (\S+)$", stderr, re.MULTILINE)
        if found:
            self.session = found.group(1)

    @staticmethod
    def code_mode(model: str | None) -> bool:
        """Codex's bundled catalog puts its newest models (gpt-6.x, gpt-5.6) in code mode."""
        return model is None or model.startswith(("gpt-6", "gpt-5.6"))

    def loop_tool(self, model: str | None) -> str:
        return "exec" if self.code_mode(model) else "exec_command"

    def check(self, intent: Intent) -> None:
        return None

    compact_prompt = "/compact"

    def compact(self, work: Workspace, log: Path, model: str | None) -> int | None:
        """`codex exec` sends `/compact` to the model as text; its compaction runs when the
        session is past `model_auto_compact_token_limit`, so this turn sets that limit to
        one token (`-c`, for this turn only)."""
        argv = self.turn(work.binary, self.compact_prompt, model=model, session="resume")
        argv[2:2] = ["-c", "model_auto_compact_token_limit=1"]
        return run_process(argv, work, log)

    def after_spawn(self, intent: Intent) -> list[ScriptedToolCall]:
        """`spawn_agent` returns at once; the parent waits for the child's mailbox."""
        return [ScriptedToolCall(name="wait_agent", input={"timeout_ms": 120000})]

    def call(self, intent: Intent, project: Path, model: str | None) -> ScriptedToolCall:
        if intent.tool == "subagent":
            # A tool of the `collaboration` namespace, called directly in code mode too.
            spawn = {
                "task_name": "delegated_task",
                "message": intent.prompt,
                "fork_turns": "all" if intent.fork else "none",
            }
            return ScriptedToolCall(name="spawn_agent", input=spawn)
        path = shlex.quote(intent.path)
        if intent.tool == "read":
            command = f"cat {path}"
        elif intent.tool == "list":
            command = f"ls -R {path}"
        elif intent.tool == "edit":
            lines = [f"-{line}" for line in intent.old.splitlines()]
            lines += [f"+{line}" for line in intent.new.splitlines()]
            patch = "\n".join(
                ["*** Begin Patch", f"*** Update File: {intent.path}", "@@", *lines]
                + ["*** End Patch"]
            )
            command = f"apply_patch <<'EOF'\n{patch}\nEOF"
        else:
            command = intent.command
        if self.code_mode(model):
            code = (
                f"text(JSON.stringify(await tools.exec_command({{cmd: {json.dumps(command)}}})));"
            )
            return ScriptedToolCall(name="exec", input=code)
        return ScriptedToolCall(name="exec_command", input={"cmd": command})

    def classify(self, call: WireCall, main: bool) -> CallKind:
        """Its compaction appends "You are performing a CONTEXT CHECKPOINT COMPACTION" to the
        session's own request, tools and all."""
        tools = call.tool_names()
        if "context checkpoint compaction" in call.texts()[1].lower():
            return "compaction"
        if self.subagent_header in call.headers:
            return "subagent"
        if "exec" in tools or "exec_command" in tools:
            return "turn" if main else "subagent"
        system, last_user = call.texts()
        if not tools and "summar" in f"{system}\n{last_user}".lower():
            return "compaction"
        return super().classify(call, main)


class GeminiCli(AgentClient):
    """`@google/gemini-cli`: a Node program; `-p` runs one turn (`--yolo` approves its tools),
    `--resume latest` continues the newest session of the project. `GOOGLE_GEMINI_BASE_URL`
    points it at the emulator (plain http only on loopback); telemetry, usage statistics and
    auto-update are settings."""

    name: ClientName = "gemini-cli"
    package = "@google/gemini-cli"
    version = "0.61.0"
    provider = "gemini"
    turn_tool = "read_file"
    spawn_tool = "invoke_agent"
    parent_only_tool = "invoke_agent"
    compact_prompt = "/compress"
    """Seen in 0.61.0: `-p /compress` makes the two state-snapshot requests of its
    compression and then sends `/compress` to the model as a prompt as well."""

    def subagent_reply(self, intent: Intent) -> ScriptedResponse:
        """A Gemini CLI subagent finishes only through `complete_task` (a text answer gets
        a "you have one final chance" nudge and a second request)."""
        return ScriptedResponse(
            tool_calls=[
                ScriptedToolCall(name="complete_task", input={"result": {"response": intent.reply}})
            ]
        )

    relative_binary = "node_modules/.bin/gemini"

    def prepare(self, home: Path, project: Path, base_url: str) -> dict[str, str]:
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        settings = {
            "security": {
                "auth": {"selectedType": "gemini-api-key"},
                "folderTrust": {"enabled": False},
            },
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False, "logPrompts": False},
            "general": {
                "enableAutoUpdate": False,
                "enableAutoUpdateNotification": False,
                "checkpointing": {"enabled": False},
            },
            "ide": {"enabled": False},
            "ui": {"hideBanner": True, "hideTips": True},
        }
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        return {
            **_base_env(home),
            "GEMINI_CLI_HOME": str(home),
            "GEMINI_API_KEY": "emulator-key-not-a-secret",
            "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            "GEMINI_TELEMETRY_ENABLED": "false",
            "NO_BROWSER": "true",
        }

    def turn(
        self, binary: Path, prompt: str, *, model: str | None, session: Continuation
    ) -> list[str]:
        argv = [str(binary), "--yolo"]
        if model:
            argv += ["--model", model]
        if session == "resume":
            argv += ["--resume", "latest"]
        return [*argv, "-p", prompt]

    def call(self, intent: Intent, project: Path, model: str | None) -> ScriptedToolCall:
        path = str(project / intent.path)
        if intent.tool == "subagent":
            return ScriptedToolCall(
                name="invoke_agent", input={"agent_name": "generalist", "prompt": intent.prompt}
            )
        if intent.tool == "read":
            return ScriptedToolCall(name="read_file", input={"file_path": path})
        if intent.tool == "edit":
            return ScriptedToolCall(
                name="replace",
                input={
                    "file_path": path,
                    "instruction": "Apply the change.",
                    "old_string": intent.old,
                    "new_string": intent.new,
                },
            )
        if intent.tool == "list":
            return ScriptedToolCall(name="glob", input={"pattern": "**/*"})
        return ScriptedToolCall(
            name="run_shell_command", input={"command": intent.command, "description": "Run it"}
        )

    def classify(self, call: WireCall, main: bool) -> CallKind:
        system = call.texts()[0]
        if not call.tool_names() and "route" in system.lower():
            return "side call"
        if "<state_snapshot>" in system:
            return "compaction"
        return super().classify(call, main)


class Opencode(AgentClient):
    """`opencode-ai`: `opencode run` runs one turn on a private server of its own and
    `--session ID` continues a session from its database; `provider.anthropic.options.baseURL`
    in the project's `opencode.json` points it at the emulator. Its title call goes to the
    small model (`claude-haiku-4-5`) with a prompt of its own, sharing nothing with the
    session's cache."""

    name: ClientName = "opencode"
    package = "opencode-ai"
    version = "1.18.33"
    provider = "anthropic"
    turn_tool = "read"
    spawn_tool = "task"
    subagent_header = "x-parent-session-id"
    relative_binary = "node_modules/.bin/opencode"

    def __init__(self) -> None:
        self.session: str | None = None

    def prepare(self, home: Path, project: Path, base_url: str) -> dict[str, str]:
        home.mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                "anthropic": {
                    "options": {
                        "baseURL": f"{base_url}/v1",
                        "apiKey": "sk-ant-emulator-not-a-secret",
                    }
                }
            },
            "autoupdate": False,
            "share": "disabled",
        }
        (project / "opencode.json").write_text(json.dumps(config), encoding="utf-8")
        return {
            **_base_env(home),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        }

    can_fork_session = True

    def turn(
        self, binary: Path, prompt: str, *, model: str | None, session: Continuation
    ) -> list[str]:
        argv = [str(binary), "run", "--format", "json"]
        if model:
            argv += ["--model", model if "/" in model else f"anthropic/{model}"]
        if session != "new" and self.session:
            argv += ["--session", self.session]
            if session == "fork":
                argv.append("--fork")
        return [*argv, prompt]

    can_compact = True
    default_model = "claude-sonnet-4-6"

    def compact(self, work: Workspace, log: Path, model: str | None) -> int | None:
        """`opencode run` has no compaction; the TUI's `/compact` is the server's
        `POST /session/{id}/summarize` (its SDK: `providerID`, `modelID`). So this starts
        `opencode serve` on a loopback port of its own (a fresh process: the history is
        reloaded from its database), asks it to summarise the session, and stops it."""
        if self.session is None:
            return 1
        provider, _, name = (model or self.default_model).rpartition("/")
        port = _free_port()
        argv = [str(work.binary), "serve", "--port", str(port), "--hostname", "127.0.0.1"]
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + work.timeout
        with started(argv, work, log) as server, httpx.Client(trust_env=False) as http:
            try:
                while True:
                    if server.poll() is not None or time.monotonic() > deadline:
                        return server.returncode
                    try:
                        if http.get(f"{base}/session", timeout=2).status_code == 200:
                            break
                    except httpx.TransportError:
                        time.sleep(0.2)
                reply = http.post(
                    f"{base}/session/{self.session}/summarize",
                    json={"providerID": provider or "anthropic", "modelID": name},
                    timeout=max(1.0, deadline - time.monotonic()),
                )
            except httpx.TimeoutException:
                return None
            return 0 if reply.status_code == 200 else 1

    def classify(self, call: WireCall, main: bool) -> CallKind:
        """Its summary re-sends the conversation as text in one new prompt, without tools."""
        if not call.tool_names() and "<conversation>" in call.texts()[1]:
            return "compaction"
        return super().classify(call, main)

    def remember(self, stdout: str, stderr: str) -> None:
        """The session id on the turn's JSON events."""
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("sessionID"):
                self.session = str(event["sessionID"])
                return

    def call(self, intent: Intent, project: Path, model: str | None) -> ScriptedToolCall:
        path = str(project / intent.path)
        if intent.tool == "subagent":
            return ScriptedToolCall(
                name="task",
                input={
                    "description": "Delegated task",
                    "prompt": intent.prompt,
                    "subagent_type": "general",
                },
            )
        if intent.tool == "read":
            return ScriptedToolCall(name="read", input={"filePath": path})
        if intent.tool == "edit":
            return ScriptedToolCall(
                name="edit",
                input={"filePath": path, "oldString": intent.old, "newString": intent.new},
            )
        if intent.tool == "list":
            return ScriptedToolCall(name="glob", input={"pattern": "**/*", "path": path})
        return ScriptedToolCall(
            name="bash", input={"command": intent.command, "description": "Run it"}
        )


CLIENTS: Mapping[ClientName, type[AgentClient]] = {
    "opencode": Opencode,
    "claude-code": ClaudeCode,
    "codex": Codex,
    "gemini-cli": GeminiCli,
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def npm_available() -> bool:
    return shutil.which("npm") is not None
