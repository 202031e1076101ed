"""The request bodies of every emulated API, as pydantic models checked at the boundary,
before anything else reads them: Anthropic Messages (and count_tokens), OpenAI Chat
Completions and Responses, Bedrock Converse / ConverseStream, Gemini generateContent /
streamGenerateContent and cachedContents. A model describes the shape (types, required
fields, enums, bounds); the rules between fields (a tool_use's result, a model's limits, the
cache rules) stay with each API's translation. `first_error` gives the first violation,
which each API renders in its own error shape.

Models validate only: the translation reads the JSON body as received, so every field a
model does not name passes through (extra fields are allowed, as the APIs' own schemas
allow them or as the emulator does not model them). Anthropic's API is itself pydantic: its
messages are pydantic's (`loc` joined by '.', then `msg`), which `loc_path` and `msg` give.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple, NotRequired, get_args

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from ..cache.prefix import is_server_tool_result


class Violation(NamedTuple):
    """One pydantic error: where (`loc`), what (`kind`, pydantic's error type) and its text."""

    loc: tuple[int | str, ...]
    kind: str
    msg: str

    def loc_path(self) -> str:
        """`messages.0.content`: pydantic's location joined by '.'."""
        return ".".join(str(part) for part in self.loc)

    def pydantic_text(self) -> str:
        """`<loc>: <msg>`, as a pydantic API words it (the message alone at the root)."""
        return f"{self.loc_path()}: {self.msg}" if self.loc else self.msg


def first_error(
    adapter: TypeAdapter[Any], body: Any, *, skip: str | None = None
) -> Violation | None:
    """The first violation of `body` against `adapter` (None: valid); `skip` drops the
    violations under that top-level field."""
    try:
        adapter.validate_python(body)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            loc = tuple(error["loc"])
            if skip is None or not loc or loc[0] != skip:
                return Violation(loc, error["type"], error["msg"])
    return None


def _str_as_text_blocks(value: Any) -> Any:
    """A string content (`"hi"`) as the one text block it stands for."""
    return [{"type": "text", "text": value}] if isinstance(value, str) else value


# --- Anthropic Messages ----------------------------------------------------------------------

# The content block types of the Messages API (the `ContentBlockParam` union), in the sorted
# order the API lists them in its answer to an unknown one: "Input tag '<type>' found using
# 'type' does not match any of the expected tags: 'bash_code_execution_tool_result', ..."
# (wording and first tag as quoted in public reports; the rest of the list UNCONFIRMED). Split
# around "text", the one whose fields are checked, so the union lists them in that order.
_BeforeText = Literal[
    "bash_code_execution_tool_result",
    "code_execution_tool_result",
    "container_upload",
    "document",
    "image",
    "redacted_thinking",
    "search_result",
    "server_tool_use",
]
_AfterText = Literal[
    "text_editor_code_execution_tool_result",
    "thinking",
    "tool_result",
    "tool_search_tool_result",
    "tool_use",
    "web_fetch_tool_result",
    "web_search_tool_result",
]
BLOCK_TYPES: tuple[str, ...] = (*get_args(_BeforeText), "text", *get_args(_AfterText))
# Beta block types, accepted without their beta header (not modelled), and not listed.
BETA_BLOCK_TYPES = frozenset(
    {
        "advisor_tool_result",
        "compaction",
        "fallback",
        "mcp_tool_listing",
        "mcp_tool_result",
        "mcp_tool_use",
        "tool_addition",
        "tool_removal",
    }
)
MIN_THINKING_BUDGET = 1024


class _ListedBlock(TypedDict):
    type: _BeforeText


class _TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class _LaterBlock(TypedDict):
    type: _AfterText


def _unlisted_block(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A beta block or any server tool's `*_tool_result` (as the cache model accepts them)
    passes; every other block is the listed union's to judge."""
    kind = value.get("type") if isinstance(value, dict) else None
    if isinstance(kind, str) and (kind in BETA_BLOCK_TYPES or is_server_tool_result(kind)):
        return value
    return handler(value)


_Block = Annotated[
    _ListedBlock | _TextBlock | _LaterBlock,
    Field(discriminator="type"),
    WrapValidator(_unlisted_block),
]
_Blocks = Annotated[list[_Block], BeforeValidator(_str_as_text_blocks)]


def _role(value: Any) -> Any:
    # "system" only on some models (`validation.check_system_messages` answers the others
    # as for any unknown role, which is why it is not in the message).
    if value not in ("user", "assistant", "system"):
        raise PydanticCustomError("literal_error", "Input should be 'user' or 'assistant'")
    return value


class _Message(TypedDict):
    role: Annotated[Any, PlainValidator(_role)]
    content: _Blocks


class _SystemBlock(TypedDict):
    type: Literal["text"]
    text: str


class _CustomTool(TypedDict):
    name: str
    input_schema: dict[str, Any]


class _ServerTool(TypedDict):
    name: str


def _tool_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else None
    return "custom" if kind in (None, "custom") else "server"


_Tool = Annotated[
    Annotated[_CustomTool, Tag("custom")] | Annotated[_ServerTool, Tag("server")],
    Discriminator(_tool_kind),
]


class _ToolChoiceAuto(TypedDict):
    type: Literal["auto"]


class _ToolChoiceAny(TypedDict):
    type: Literal["any"]


class _ToolChoiceTool(TypedDict):
    type: Literal["tool"]
    name: str


class _ToolChoiceNone(TypedDict):
    type: Literal["none"]


class _ThinkingEnabled(TypedDict):
    type: Literal["enabled"]
    budget_tokens: Annotated[StrictInt, Field(ge=MIN_THINKING_BUDGET)]


class _ThinkingDisabled(TypedDict):
    type: Literal["disabled"]


class _ThinkingAdaptive(TypedDict):
    type: Literal["adaptive"]


class MessagesBody(TypedDict):
    """A `/v1/messages` body (count_tokens: the same without `max_tokens`)."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    model: str
    max_tokens: Annotated[StrictInt, Field(ge=0)]
    messages: list[_Message]
    stream: NotRequired[StrictBool]
    system: NotRequired[Annotated[list[_SystemBlock], BeforeValidator(_str_as_text_blocks)] | None]
    tools: NotRequired[list[_Tool] | None]
    tool_choice: NotRequired[
        Annotated[
            _ToolChoiceAuto | _ToolChoiceAny | _ToolChoiceTool | _ToolChoiceNone,
            Field(discriminator="type"),
        ]
        | None
    ]
    thinking: NotRequired[
        Annotated[
            _ThinkingEnabled | _ThinkingDisabled | _ThinkingAdaptive,
            Field(discriminator="type"),
        ]
        | None
    ]


MESSAGES = TypeAdapter(MessagesBody)
