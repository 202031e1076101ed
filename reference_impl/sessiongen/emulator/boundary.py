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
    AfterValidator,
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

    def param(self, *, brackets: bool = True) -> str:
        """The field as the other APIs name it, `messages[0].content` (`brackets`) or
        `messages.0.content`, without the union members' tags pydantic puts in `loc`
        (`literal['auto', ...]`, `_ClassName`)."""
        text = ""
        for part in self.loc:
            if isinstance(part, int):
                text += f"[{part}]" if brackets else f".{part}"
            elif not (part.startswith("_") or "[" in part):
                text += f".{part}" if text else part
        return text


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


# --- OpenAI Chat Completions and Responses -------------------------------------------------


class _Part(TypedDict):
    type: str


_Content = Annotated[
    list[_Part] | None,
    BeforeValidator(lambda v: [{"type": "text", "text": v}] if isinstance(v, str) else v),
]


class _JsonSchema(TypedDict, total=False):
    """A function's parameters: the parts of a JSON Schema the token counter reads
    (`tokens._ts_type`), each of the type JSON Schema gives it."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    properties: dict[str, _JsonSchema | bool]
    required: list[str]
    enum: list[Any]
    items: _JsonSchema | bool | list[Any]
    anyOf: list[_JsonSchema | bool]
    oneOf: list[_JsonSchema | bool]


class _Function(TypedDict):
    name: str
    description: NotRequired[str | None]
    parameters: NotRequired[_JsonSchema | None]


class _ChatTool(TypedDict):
    type: NotRequired[str]
    function: _Function


class _CalledFunction(TypedDict):
    name: str
    arguments: str


class _ToolCall(TypedDict):
    id: str
    function: _CalledFunction


class _ChatMessage(TypedDict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: NotRequired[_Content]
    name: NotRequired[str | None]
    tool_calls: NotRequired[list[_ToolCall] | None]
    tool_call_id: NotRequired[str]


class _ChosenFunction(TypedDict):
    name: str


class _ToolChoiceObject(TypedDict):
    type: str
    function: NotRequired[_ChosenFunction]  # Chat
    name: NotRequired[str]  # Responses


class _OpenAICommon(TypedDict):
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    model: str
    tool_choice: NotRequired[Literal["none", "auto", "required"] | _ToolChoiceObject | None]
    parallel_tool_calls: NotRequired[StrictBool | None]
    stream: NotRequired[StrictBool | None]
    prompt_cache_key: NotRequired[str | None]
    prompt_cache_retention: NotRequired[Literal["in_memory", "24h"] | None]


class _StreamOptions(TypedDict):
    include_usage: NotRequired[StrictBool | None]


class ChatBody(_OpenAICommon):
    """A `/v1/chat/completions` body."""

    messages: Annotated[list[_ChatMessage], Field(min_length=1)]
    tools: NotRequired[list[_ChatTool] | None]
    max_tokens: NotRequired[Annotated[StrictInt, Field(ge=1)] | None]
    max_completion_tokens: NotRequired[Annotated[StrictInt, Field(ge=1)] | None]
    response_format: NotRequired[dict[str, Any] | None]
    reasoning_effort: NotRequired[str | None]
    verbosity: NotRequired[str | None]
    stream_options: NotRequired[_StreamOptions | None]


class _InputItem(TypedDict):
    type: NotRequired[str]
    role: NotRequired[Literal["user", "assistant", "system", "developer"]]
    content: NotRequired[_Content]


class _ResponsesTool(TypedDict):
    type: NotRequired[str]
    name: NotRequired[str]
    description: NotRequired[str | None]
    parameters: NotRequired[_JsonSchema | None]


class _TextConfig(TypedDict):
    format: NotRequired[dict[str, Any] | None]
    verbosity: NotRequired[str | None]


class _Reasoning(TypedDict):
    effort: NotRequired[str | None]


class ResponsesBody(_OpenAICommon):
    """A `/v1/responses` body."""

    input: Annotated[
        list[_InputItem],
        BeforeValidator(lambda v: [{"role": "user", "content": v}] if isinstance(v, str) else v),
    ]
    instructions: NotRequired[str | None]
    tools: NotRequired[list[_ResponsesTool] | None]
    max_output_tokens: NotRequired[Annotated[StrictInt, Field(ge=1)] | None]
    text: NotRequired[_TextConfig | None]
    reasoning: NotRequired[_Reasoning | None]


CHAT = TypeAdapter(ChatBody)
RESPONSES = TypeAdapter(ResponsesBody)


# --- Bedrock Converse ----------------------------------------------------------------------


def _aws_enum(*values: str) -> AfterValidator:
    """A string of `values`, refused in AWS's wording ("Member must satisfy enum value set")."""

    def check(value: str) -> str:
        if value not in values:
            raise PydanticCustomError(
                "enum",
                "Member must satisfy enum value set: [{values}]",
                {"values": ", ".join(values)},
            )
        return value

    return AfterValidator(check)


def _one_member(value: Any) -> Any:
    """A union structure of the Smithy model (a content block, a cache point, a tool): exactly
    one member set, as the API requires."""
    if isinstance(value, dict) and len(value) != 1:
        raise PydanticCustomError("union", "exactly one member of the union must be set")
    return value


def _union(cls: Any) -> Any:
    return Annotated[cls, BeforeValidator(_one_member)]


class _CachePoint(TypedDict):
    type: Annotated[str, _aws_enum("default")]
    ttl: NotRequired[Annotated[str, _aws_enum("5m", "1h")]]


class _Bytes(TypedDict):
    bytes: str


class _Image(TypedDict):
    format: Annotated[str, _aws_enum("png", "jpeg", "gif", "webp")]
    source: _Bytes


class _DocumentText(TypedDict):
    text: str


class _CitationsContent(TypedDict):
    """An answer's text with its citations (AWS `CitationsContentBlock`), sent back in a
    later request's history (recorded: langchain-ai/langchain-aws citation cassettes)."""

    content: list[_DocumentText]
    citations: NotRequired[list[Any]]


class _DocumentSource(TypedDict, total=False):
    """A document's source (AWS `DocumentSource`): one of its bytes, its plain text, or its
    text as content blocks (recorded: langchain-ai/langchain-aws citation cassettes)."""

    bytes: str
    text: str
    content: list[_DocumentText]


class _Document(TypedDict):
    format: str
    name: NotRequired[str]
    source: _union(_DocumentSource)  # type: ignore[valid-type]
    context: NotRequired[str]
    citations: NotRequired[dict[str, Any]]


class _ToolResultContent(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    text: str
    json: Any
    image: _Image
    document: _Document


class _ToolUse(TypedDict):
    toolUseId: str
    name: str
    input: NotRequired[Any]


class _ToolResult(TypedDict):
    toolUseId: str
    content: NotRequired[list[_union(_ToolResultContent)]]  # type: ignore[valid-type]
    status: NotRequired[Annotated[str, _aws_enum("success", "error")]]


class _ReasoningText(TypedDict):
    text: str
    signature: NotRequired[str]


class _ReasoningContent(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    reasoningText: _ReasoningText
    redactedContent: str


class _ContentBlock(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    text: str
    image: _Image
    document: _Document
    toolUse: _ToolUse
    toolResult: _ToolResult
    reasoningContent: _ReasoningContent
    cachePoint: _CachePoint
    citationsContent: _CitationsContent


class _ConverseMessage(TypedDict):
    role: Annotated[str, _aws_enum("user", "assistant")]
    content: list[_union(_ContentBlock)]  # type: ignore[valid-type]


class _SystemContent(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    text: str
    cachePoint: _CachePoint


class _InferenceConfig(TypedDict, total=False):
    maxTokens: Annotated[StrictInt, Field(ge=1)]
    stopSequences: list[str]
    temperature: float
    topP: float


class _InputSchema(TypedDict):
    json: dict[str, Any]


class _ToolSpec(TypedDict):
    name: Annotated[str, Field(min_length=1)]
    description: NotRequired[str]
    inputSchema: _InputSchema


class _ConverseTool(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    toolSpec: _ToolSpec
    cachePoint: _CachePoint


class _SpecificTool(TypedDict):
    name: str


class _ConverseToolChoice(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    auto: dict[str, Any]
    any: dict[str, Any]
    tool: _SpecificTool


class _ToolConfig(TypedDict):
    tools: Annotated[list[_union(_ConverseTool)], Field(min_length=1)]  # type: ignore[valid-type]
    toolChoice: NotRequired[_union(_ConverseToolChoice) | None]  # type: ignore[valid-type]


class ConverseBody(TypedDict, total=False):
    """A Converse / ConverseStream body (the model is in the path)."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    messages: list[_ConverseMessage]
    system: list[_union(_SystemContent)]  # type: ignore[valid-type]
    inferenceConfig: _InferenceConfig
    toolConfig: _ToolConfig | None
    additionalModelRequestFields: dict[str, Any]


CONVERSE = TypeAdapter(ConverseBody)


# --- Gemini generateContent and cachedContents ---------------------------------------------

GEMINI_DATA_FIELDS = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
)


def _one_data_field(value: Any) -> Any:
    """A part carries one data field; a part of a model turn that carries only its thought
    signature (`{"thought": true, "thoughtSignature": ...}` or the signature alone) has none,
    and the API bills it (recorded: crmne/ruby_llm and google/adk-go cassettes, 200s)."""
    if isinstance(value, dict):
        found = [f for f in GEMINI_DATA_FIELDS if f in value]
        signed_only = not found and "thoughtSignature" in value
        if len(found) != 1 and not signed_only:
            raise PydanticCustomError(
                "data", "a part must have exactly one data field, found {found}", {"found": found}
            )
    return value


def _upper(value: Any) -> Any:
    """Enum names in any case (recorded: `"mode": "none"` served, crmne/ruby_llm)."""
    return value.upper() if isinstance(value, str) else value


class _FunctionCall(TypedDict):
    name: str
    args: NotRequired[dict[str, Any] | None]
    id: NotRequired[str | None]


class _FunctionResponse(TypedDict):
    name: str
    response: NotRequired[dict[str, Any] | None]
    id: NotRequired[str | None]


class _Blob(TypedDict):
    mimeType: str
    data: str


class _FileData(TypedDict):
    mimeType: NotRequired[str]
    fileUri: str


class _GeminiPart(TypedDict, total=False):
    text: str
    inlineData: _Blob
    fileData: _FileData
    functionCall: _FunctionCall
    functionResponse: _FunctionResponse
    executableCode: dict[str, Any]
    codeExecutionResult: dict[str, Any]
    thought: StrictBool
    thoughtSignature: str


_GeminiParts = list[Annotated[_GeminiPart, BeforeValidator(_one_data_field)]]


class _GeminiContent(TypedDict):
    # "function": the role of function responses in the v1beta API's first spelling, still
    # served (recorded: crmne/ruby_llm, 200s billed).
    role: NotRequired[Literal["user", "model", "function"]]
    parts: Annotated[_GeminiParts, Field(min_length=1)]


class _SystemInstruction(TypedDict):
    role: NotRequired[str | None]
    parts: _GeminiParts


class _Declaration(TypedDict):
    name: str
    description: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any] | None]
    parametersJsonSchema: NotRequired[Any]


class _GeminiTool(TypedDict, total=False):
    functionDeclarations: list[_Declaration] | None


class _CallingConfig(TypedDict, total=False):
    mode: Annotated[
        Literal["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"], BeforeValidator(_upper)
    ]
    allowedFunctionNames: list[str] | None


class _GeminiToolConfig(TypedDict, total=False):
    functionCallingConfig: _CallingConfig | None


class _GenerationConfig(TypedDict, total=False):
    maxOutputTokens: Annotated[StrictInt, Field(ge=1)]
    stopSequences: list[str] | None


class _GeminiRequest(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    systemInstruction: _SystemInstruction | None
    tools: list[_GeminiTool] | None
    toolConfig: _GeminiToolConfig | None


class GenerateBody(_GeminiRequest, total=False):
    """A generateContent / streamGenerateContent body (camelCase; the model is in the
    path). `contents` may be empty only with a `cachedContent` (checked by the endpoint)."""

    contents: list[_GeminiContent]
    generationConfig: _GenerationConfig | None
    cachedContent: str


class CachedContentBody(_GeminiRequest, total=False):
    """A `cachedContents` create body (update: its `ttl` or `expireTime` only)."""

    model: str
    contents: list[_GeminiContent] | None
    ttl: str
    expireTime: str
    displayName: str | None


GENERATE = TypeAdapter(GenerateBody)
CACHED_CONTENT = TypeAdapter(CachedContentBody)
