"""hookroom process-plugin SDK for Python (standard library only, Python 3.11+).

A plugin is a Python program that hookroom starts and talks to over its stdin
and stdout (JSON-RPC 2.0, one JSON object per line; docs/plugin-protocol.md).
With this module a plugin is a few decorated functions::

    from hookroom_plugin import hook, tool, run

    @hook("message:enrich", priority=20)
    async def enrich_with_location(ctx):
        ctx.add_metadata("location", "User is at home", cache_policy="stable")

    @hook("tool:before_call", failure_policy="closed")
    async def guard(ctx):
        if ctx.tool_name == "read_file" and "secret" in str(ctx.arguments.get("path", "")):
            ctx.decline("Sensitive files must stay unread.")
        elif ctx.tool_name.startswith("delete_"):
            ctx.require_approval("Deleting cannot be undone.")  # a person decides

    @hook("tool:approval_requested")
    async def auto_approve(ctx):
        if ctx.tool_name == "read_file":
            ctx.approve("reads are fine")  # or ctx.deny(reason); neither: ask a person

    @hook("plugin:before_install", failure_policy="closed")
    async def install_policy(ctx):
        if ctx.source_type == "git" and not ctx.source.startswith("https://git.example.org/"):
            ctx.decline("plugins come from git.example.org only")

    @hook("model:request")
    async def redact(ctx):
        ctx.replace_text(os.environ["DB_PASSWORD"], "[secret]")  # in every message sent
        ctx.remove_tool("shell")                                  # or ctx.refuse(reason)

    @hook("tool:result")
    async def mask(ctx):
        ctx.content = re.sub(r"AKIA[0-9A-Z]{16}", "AKIA****", ctx.content)

    @hook("memory:extracted")
    async def keep_no_secrets(ctx):
        ctx.memories = [m for m in ctx.memories if "password" not in m["text"]]  # or ctx.veto(reason)

    @hook("system:enrich")
    async def team_rules(ctx):
        team = ctx.envelope.team  # None unless a team answers
        if team and not team.member_name:
            ctx.add_instruction("team", "Ask only " + ", ".join(ctx.target_member_names))

    @hook("subagent:ended")
    async def meter_members(ctx):
        ctx.logger.info("sub-agent", agent=ctx.agent_id, parent=ctx.parent_agent, reason=ctx.reason,
                        outcome=ctx.outcome, tokens=ctx.usage.total_tokens, seconds=ctx.duration_ns / 1e9)

    @tool("add", "Adds two numbers", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
    async def add(call):
        return str(call.arguments["a"] + call.arguments["b"])

    if __name__ == "__main__":
        run()

Hooks run concurrently on one asyncio event loop. ``async def`` hooks are
cancelled when the host gives up on them (their deadline passed); a plain
``def`` runs on the loop itself, so keep it short. Anything printed to
stdout goes to stderr (hookroom's log): the protocol owns the real stdout.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import inspect
import json
import os
import pathlib
import re
import sys
import traceback
from typing import Any, Awaitable, Callable, Iterable

__all__ = [
    "API_VERSION",
    "Attachment",
    "EnrichmentItem",
    "HostError",
    "NoService",
    "NotFound",
    "Plugin",
    "RecursionLimit",
    "TooLarge",
    "hook",
    "run",
    "tool",
]

API_VERSION = 1

# JSON-RPC and protocol error codes (docs/plugin-protocol.md).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
HOOK_FAILED = -32000
UNKNOWN_INVOCATION = -32001
NO_SERVICE = -32002
NOT_FOUND = -32003
UNKNOWN_HOOK = -32004
RECURSION_LIMIT = -32005
HOOK_PANICKED = -32006
DEADLINE = -32007
TOO_LARGE = -32008
API_VERSION_MISMATCH = -32010

MAX_LINE_BYTES = 16 << 20

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)

_EVENT_RE = re.compile(r"^[a-z0-9_.-]+(:[a-z0-9_.-]+)+$")


class HostError(Exception):
    """A host method failed; ``code`` is the protocol's error code."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class NotFound(HostError):
    """The room state event does not exist."""


class NoService(HostError):
    """The host has no such service (no Matrix connection, or a tool without an emitter)."""


class RecursionLimit(HostError):
    """The causal chain of hook emissions is too deep."""


class TooLarge(HostError):
    """The attachment is larger than hookroom lets hooks fetch (attachments.max_size)."""


_ERRORS_BY_CODE = {NOT_FOUND: NotFound, NO_SERVICE: NoService, RECURSION_LIMIT: RecursionLimit, TOO_LARGE: TooLarge}


def _host_error(err: dict) -> HostError:
    code = int(err.get("code", INTERNAL_ERROR))
    return _ERRORS_BY_CODE.get(code, HostError)(code, str(err.get("message", "")))


@dataclasses.dataclass
class Attachment:
    """A file of the message a hook handles, as ``ctx.attachment(id)`` returns it."""

    id: str  # the mxc:// URI, as in ctx.envelope.attachment_ids
    kind: str  # "image", "file", "audio" or "video"
    name: str
    mimetype: str  # as the sender declared it ("" when none)
    size: int
    data: bytes = dataclasses.field(repr=False)  # decrypted; never log it


@dataclasses.dataclass
class EnrichmentItem:
    """An item for the message context (message:enrich) or the system context (system:enrich).

    Hooks add items with ``ctx.add_metadata`` / ``ctx.add_instruction``, or return
    an item (or a list of items).
    """

    key: str
    text: str
    cache_policy: str = "volatile"  # or "stable"
    transient: bool = False  # message:enrich only: never stored in history

    def to_json(self) -> dict:
        if self.cache_policy not in ("volatile", "stable"):
            raise ValueError(f"cache_policy must be 'volatile' or 'stable', not {self.cache_policy!r}")
        if not self.key:
            raise ValueError("an enrichment item needs a key")
        d = {"key": self.key, "text": self.text, "cache_policy": self.cache_policy}
        if self.transient:
            d["transient"] = True
        return d


class Namespace:
    """Read access to a JSON object by attribute (``ns.room_id``) or item (``ns["room_id"]``).

    Missing attributes read as None, so optional fields need no guards.
    """

    __slots__ = ("_data",)

    def __init__(self, data: dict):
        self._data = data

    def __getattr__(self, name: str) -> Any:
        return _wrap(self._data.get(name))

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        return _wrap(self._data.get(key, default))

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def to_dict(self) -> dict:
        return self._data

    def __repr__(self) -> str:
        return f"Namespace({self._data!r})"


def _wrap(v: Any) -> Any:
    if isinstance(v, dict):
        return Namespace(v)
    if isinstance(v, list) and v and isinstance(v[0], dict):
        return [_wrap(x) for x in v]
    return v


class Logger:
    """Structured logging into hookroom's log: ``ctx.logger.info("msg", key=value)``."""

    def __init__(self, plugin: "Plugin", invocation: int = 0, **bound: Any):
        self._plugin = plugin
        self._invocation = invocation
        self._bound = bound

    def bind(self, **fields: Any) -> "Logger":
        return Logger(self._plugin, self._invocation, **{**self._bound, **fields})

    def _log(self, level: str, message: str, fields: dict) -> None:
        params: dict[str, Any] = {"level": level, "message": str(message)}
        if self._invocation:
            params["invocation"] = self._invocation
        merged = {**self._bound, **fields}
        if merged:
            params["fields"] = {k: _jsonable(v) for k, v in merged.items()}
        self._plugin._notify("host.log", params)

    def debug(self, message: str, **fields: Any) -> None:
        self._log("debug", message, fields)

    def info(self, message: str, **fields: Any) -> None:
        self._log("info", message, fields)

    def warning(self, message: str, **fields: Any) -> None:
        self._log("warn", message, fields)

    warn = warning

    def error(self, message: str, **fields: Any) -> None:
        self._log("error", message, fields)

    def exception(self, message: str, **fields: Any) -> None:
        fields.setdefault("traceback", traceback.format_exc())
        self._log("error", message, fields)


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool, list, dict)):
        return v
    return str(v)


class _Base:
    """What hook contexts and tool calls share."""

    def __init__(self, plugin: "Plugin", invocation: int):
        self._plugin = plugin
        self._invocation = invocation
        self._logger: Logger | None = None

    @property
    def plugin_name(self) -> str:
        return self._plugin.name

    @property
    def settings(self) -> dict:
        """The plugin's settings from config.yaml."""
        return self._plugin.settings

    @property
    def state_root(self) -> pathlib.Path:
        """The plugin's own state directory (created on first access); also the working directory."""
        p = pathlib.Path(self._plugin.state_dir or ".")
        p.mkdir(parents=True, exist_ok=True)
        return p

    @property
    def logger(self) -> Logger:
        if self._logger is None:
            self._logger = Logger(self._plugin, self._invocation)
        return self._logger

    async def emit(self, event: str, payload: Any = None) -> None:
        """Emit a custom event ("todo:item_completed") to every plugin's hooks."""
        await self._plugin._call(
            "host.emit", {"invocation": self._invocation, "event": event, "payload": {} if payload is None else payload}
        )


class Draft:
    """The reply draft of message:before_response and message:final_response_transform."""

    __slots__ = ("_d",)

    def __init__(self, d: dict):
        self._d = d

    @property
    def text(self) -> str:
        return self._d.get("text", "")

    @text.setter
    def text(self, v: str) -> None:
        self._d["text"] = str(v)

    # MindRoom's name for the same field.
    response_text = text

    @property
    def suppress(self) -> bool:
        return bool(self._d.get("suppress", False))

    @suppress.setter
    def suppress(self, v: bool) -> None:
        self._d["suppress"] = bool(v)

    @property
    def extra(self) -> dict | None:
        return self._d.get("extra")

    @extra.setter
    def extra(self, v: dict | None) -> None:
        self._d["extra"] = v

    @property
    def tool_trace(self) -> list:
        return self._d.setdefault("tool_trace", None) or []

    @tool_trace.setter
    def tool_trace(self, v: list | None) -> None:
        self._d["tool_trace"] = v

    @property
    def kind(self) -> str:
        return self._d.get("kind", "")

    @property
    def envelope(self) -> Namespace:
        return Namespace(self._d.get("envelope") or {})


class HookContext(_Base):
    """The context a hook gets: the event's fields as attributes, helpers, and setters for
    the event's designated mutable fields (only those reach hookroom).

    Attributes from the event's JSON read as attributes: ``ctx.envelope.body``,
    ``ctx.room_id``, ``ctx.payload``... (nested objects as Namespace).
    """

    def __init__(self, plugin: "Plugin", invocation: int, event: str, hook_name: str, data: dict):
        super().__init__(plugin, invocation)
        self._event = event
        self._hook_name = hook_name
        self._data = data
        self._items: list[dict] = []
        self._draft: Draft | None = None

    # -- identity ---------------------------------------------------------
    @property
    def event_name(self) -> str:
        return self._event

    @property
    def hook_name(self) -> str:
        return self._hook_name

    @property
    def correlation_id(self) -> str:
        return self._data.get("correlation_id", "")

    @property
    def data(self) -> dict:
        """The context as hookroom sent it (a dict)."""
        return self._data

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not attributes of the class.
        data = self.__dict__.get("_data")
        if data is None or name.startswith("_"):
            raise AttributeError(name)
        return _wrap(data.get(name))

    # -- designated mutable fields -----------------------------------------
    @property
    def suppress(self) -> bool:
        """message:received, schedule:fired: drop the message."""
        return bool(self._data.get("suppress", False))

    @suppress.setter
    def suppress(self, v: bool) -> None:
        self._data["suppress"] = bool(v)

    @property
    def message_text(self) -> str:
        """schedule:fired: the text the schedule posts."""
        return self._data.get("message_text", "")

    @message_text.setter
    def message_text(self, v: str) -> None:
        self._data["message_text"] = str(v)

    @property
    def draft(self) -> Draft:
        """message:before_response, message:final_response_transform: the reply draft."""
        if self._draft is None:
            self._draft = Draft(self._data.setdefault("draft", {}))
        return self._draft

    def add_metadata(self, key: str, text: str, cache_policy: str = "volatile", transient: bool = False) -> None:
        """message:enrich: add an item to the message context of the user turn."""
        self._items.append(EnrichmentItem(key, text, cache_policy, transient).to_json())

    def add_instruction(self, key: str, text: str, cache_policy: str = "volatile") -> None:
        """system:enrich: add an item to the system context."""
        self._items.append(EnrichmentItem(key, text, cache_policy).to_json())

    @property
    def items(self) -> list[dict]:
        return self._items

    def decline(self, reason: str) -> None:
        """tool:before_call: refuse the tool call with a reason the model sees.
        plugin:before_install: refuse the install with a reason the operator sees."""
        self._data["declined"] = True
        self._data["decline_reason"] = str(reason)

    def require_approval(self, reason: str) -> None:
        """tool:before_call: make the call wait for a person's approval (a later decline still wins)."""
        if not self._data.get("approval_required") or not self._data.get("approval_reason"):
            self._data["approval_reason"] = str(reason)
        self._data["approval_required"] = True

    @property
    def approval_required(self) -> bool:
        return bool(self._data.get("approval_required", False))

    def approve(self, reason: str = "") -> None:
        """tool:approval_requested: let the call run without asking a person."""
        self._data["decision"] = "approve"
        self._data["decision_reason"] = str(reason)

    def deny(self, reason: str) -> None:
        """tool:approval_requested: refuse the call without asking a person; the model sees reason."""
        self._data["decision"] = "deny"
        self._data["decision_reason"] = str(reason)

    @property
    def decision(self) -> str:
        """tool:approval_requested: "approve", "deny" or "" (ask a person)."""
        return self._data.get("decision", "") or ""

    @property
    def declined(self) -> bool:
        return bool(self._data.get("declined", False))

    @property
    def decline_reason(self) -> str:
        return self._data.get("decline_reason", "")

    def claim(self, text: str, extra: dict | None = None) -> None:
        """message:claim: answer the message instead of the model ("" claims it silently)."""
        c: dict[str, Any] = {"text": str(text)}
        if extra:
            c["extra"] = extra
        self._data["claimed"] = c

    @property
    def claimed(self) -> dict | None:
        return self._data.get("claimed")

    @property
    def model(self) -> str:
        """model:resolve: the model the turn will use; set it to one of ``ctx.models``.
        model:request, model:response: the model's name in config.yaml (read only)."""
        return self._data.get("model", "")

    @model.setter
    def model(self, v: str) -> None:
        self._data["model"] = str(v)

    @property
    def messages(self) -> list[dict]:
        """model:request: the messages sent to the model, as dicts (``role``, ``content``,
        ``name``, ``tool_calls``, ``tool_call_id``); change, add or remove them in place."""
        return self._data.setdefault("messages", [])

    @messages.setter
    def messages(self, v: list[dict]) -> None:
        self._data["messages"] = list(v)

    @property
    def tools(self) -> list[dict]:
        """model:request: the tools offered (``name``, ``description``, ``parameters``)."""
        t = self._data.get("tools")
        if t is None:
            t = self._data["tools"] = []
        return t

    @tools.setter
    def tools(self, v: list[dict]) -> None:
        self._data["tools"] = list(v)

    def replace_text(self, old: str, new: str) -> int:
        """model:request: replace old with new in the content of every message (a redaction);
        returns how many it replaced."""
        if not old:
            return 0
        n = 0
        for m in self.messages:
            c = m.get("content") or ""
            k = c.count(old)
            if k:
                n += k
                m["content"] = c.replace(old, new)
        return n

    def remove_tool(self, name: str) -> bool:
        """model:request: stop offering the tool called name for this call."""
        before = len(self.tools)
        self.tools[:] = [t for t in self.tools if t.get("name") != name]
        return len(self.tools) < before

    def refuse(self, reason: str) -> None:
        """model:request: do not call the model; the turn ends and the person sees reason."""
        self._data["refused"] = True
        self._data["refuse_reason"] = str(reason)

    @property
    def refused(self) -> bool:
        return bool(self._data.get("refused", False))

    @property
    def content(self) -> str:
        """tool:result: the text of the tool message the model and the history get."""
        return self._data.get("content", "")

    @content.setter
    def content(self, v: str) -> None:
        self._data["content"] = str(v)

    @property
    def memories(self) -> list[dict]:
        """memory:extracted: the facts the memory plugin would store, as dicts (``text``,
        ``scope``, ``person``, ``agent``, ``room``); drop entries or edit their ``text`` in
        place, or assign a new list. What is left is stored."""
        return self._data.setdefault("memories", [])

    @memories.setter
    def memories(self, v: list[dict]) -> None:
        self._data["memories"] = list(v)

    def veto(self, reason: str) -> None:
        """memory:extracted: store none of the memories (the chain stops); reason is logged."""
        self._data["vetoed"] = True
        self._data["veto_reason"] = str(reason)

    @property
    def vetoed(self) -> bool:
        return bool(self._data.get("vetoed", False))

    # -- conveniences -------------------------------------------------------
    @property
    def target_member_names(self) -> list[str]:
        """message:enrich, system:enrich: the team members a team's turn asks (``[]`` for a
        single agent's turn); the team itself is ``ctx.envelope.team``."""
        return list(self._data.get("target_member_names") or [])

    @property
    def tool_name(self) -> str:
        """tool:before_call, tool:after_call, tool:approval_*, tool:result: the tool's name."""
        return self._data.get("tool", "")

    @property
    def arguments(self) -> dict:
        """tool:before_call, tool:after_call: the tool call's arguments (a dict)."""
        a = self._data.get("arguments")
        return a if isinstance(a, dict) else {}

    @property
    def payload(self) -> Any:
        """Custom events: the payload the emitter passed."""
        return self._data.get("payload")

    # -- host services ----------------------------------------------------
    async def send_message(
        self,
        room_id: str,
        text: str,
        *,
        thread_id: str | None = None,
        extra_content: dict | None = None,
        trigger_dispatch: bool = False,
    ) -> str | None:
        """Send a Markdown message; returns its event id, or None when no sender is available."""
        params: dict[str, Any] = {"invocation": self._invocation, "room_id": room_id, "text": text}
        if thread_id:
            params["thread_id"] = thread_id
        if extra_content:
            params["extra"] = extra_content
        if trigger_dispatch:
            params["trigger_dispatch"] = True
        try:
            res = await self._plugin._call("host.send_message", params)
        except NoService:
            return None
        return res.get("event_id")

    async def query_room_state(self, room_id: str, event_type: str, state_key: str | None = None) -> dict | None:
        """One state event's content (with state_key), or {state_key: content} of every event of
        the type (without); None when it does not exist or no Matrix connection is available."""
        params: dict[str, Any] = {"invocation": self._invocation, "room_id": room_id, "event_type": event_type}
        if state_key is not None:
            params["state_key"] = state_key
        try:
            res = await self._plugin._call("host.room_state.get", params)
        except (NotFound, NoService):
            return None
        return res.get("content") if state_key is not None else res.get("events", {})

    async def put_room_state(self, room_id: str, event_type: str, state_key: str, content: dict) -> bool:
        """Write one state event; False when no Matrix connection is available."""
        try:
            await self._plugin._call(
                "host.room_state.put",
                {
                    "invocation": self._invocation,
                    "room_id": room_id,
                    "event_type": event_type,
                    "state_key": state_key,
                    "content": content,
                },
            )
        except NoService:
            return False
        return True

    async def attachment(self, attachment_id: str) -> Attachment:
        """Read a file of the message this hook handles, by one of ``ctx.envelope.attachment_ids``
        (its mxc:// URI), with its content (read in chunks). Raises NotFound for an id that is not
        an attachment of the message (and in hooks of events without an envelope), TooLarge for a
        file over hookroom's limit, NoService without a Matrix connection."""
        chunks: list[bytes] = []
        offset = 0
        while True:
            res = await self._plugin._call(
                "host.attachment.get",
                {"invocation": self._invocation, "attachment_id": attachment_id, "offset": offset},
            )
            data = base64.b64decode(res.get("data") or "")
            if int(res.get("offset", 0)) != offset or (not data and not res.get("eof")):
                raise HostError(INTERNAL_ERROR, f"host.attachment.get answered offset {res.get('offset')} for {offset}")
            chunks.append(data)
            offset += len(data)
            if res.get("eof"):
                return Attachment(
                    id=str(res.get("attachment_id", attachment_id)),
                    kind=str(res.get("kind", "")),
                    name=str(res.get("name", "")),
                    mimetype=str(res.get("mimetype", "")),
                    size=offset,
                    data=b"".join(chunks),
                )

    # -- result -------------------------------------------------------------
    def _result(self) -> dict:
        """The designated mutable fields of the event (docs/plugin-protocol.md)."""
        d, ev = self._data, self._event
        if ev == "message:received":
            return {"suppress": bool(d.get("suppress", False))}
        if ev == "schedule:fired":
            return {"message_text": d.get("message_text", ""), "suppress": bool(d.get("suppress", False))}
        if ev in ("message:enrich", "system:enrich"):
            return {"items": self._items} if self._items else {}
        if ev == "message:before_response":
            dr = d.get("draft") or {}
            return {
                "draft": {
                    "text": dr.get("text", ""),
                    "extra": dr.get("extra"),
                    "tool_trace": dr.get("tool_trace"),
                    "suppress": bool(dr.get("suppress", False)),
                }
            }
        if ev == "message:final_response_transform":
            return {"draft": {"text": (d.get("draft") or {}).get("text", "")}}
        if ev == "tool:before_call":
            return {
                "declined": bool(d.get("declined", False)),
                "decline_reason": d.get("decline_reason", ""),
                "approval_required": bool(d.get("approval_required", False)),
                "approval_reason": d.get("approval_reason", ""),
            }
        if ev == "tool:approval_requested":
            return {"decision": d.get("decision", "") or "", "decision_reason": d.get("decision_reason", "")}
        if ev == "plugin:before_install":
            return {"declined": bool(d.get("declined", False)), "decline_reason": d.get("decline_reason", "")}
        if ev == "message:claim":
            return {"claimed": d["claimed"]} if d.get("claimed") is not None else {}
        if ev == "model:resolve":
            return {"model": d.get("model", "")}
        if ev == "model:request":
            res: dict[str, Any] = {
                "tools": d.get("tools") or None,
                "refused": bool(d.get("refused", False)),
                "refuse_reason": d.get("refuse_reason", ""),
            }
            if "messages" in d:
                res["messages"] = d["messages"]
            return res
        if ev == "tool:result":
            return {"content": d.get("content", "")}
        if ev == "memory:extracted":
            res = {"vetoed": bool(d.get("vetoed", False)), "veto_reason": d.get("veto_reason", "")}
            if "memories" in d:
                res["memories"] = d["memories"] or []
            return res
        return {}


class ToolCall(_Base):
    """One call of a plugin tool: arguments and who called it."""

    def __init__(self, plugin: "Plugin", params: dict):
        super().__init__(plugin, int(params.get("invocation", 0)))
        self.tool: str = params.get("tool", "")
        args = params.get("arguments")
        self.arguments: dict = args if isinstance(args, dict) else {}
        self.agent: str = params.get("agent", "")
        self.room_id: str = params.get("room_id", "")
        self.thread_id: str = params.get("thread_id", "")
        self.requester_id: str = params.get("requester_id", "")
        self.session_id: str = params.get("session_id", "")
        #: The turn's correlation id, the one its hook runs carry (for logs).
        self.correlation_id: str = params.get("correlation_id", "")


@dataclasses.dataclass
class _HookSpec:
    fn: Callable[..., Any]
    event: str
    name: str
    priority: int
    timeout_ms: int | None
    agents: list[str] | None
    rooms: list[str] | None
    failure_policy: str | None

    def declaration(self) -> dict:
        d: dict[str, Any] = {"event": self.event, "name": self.name, "priority": self.priority}
        if self.timeout_ms:
            d["timeout_ms"] = self.timeout_ms
        if self.agents:
            d["agents"] = self.agents
        if self.rooms:
            d["rooms"] = self.rooms
        if self.failure_policy:
            d["failure_policy"] = self.failure_policy
        return d


@dataclasses.dataclass
class _ToolSpec:
    fn: Callable[..., Any]
    name: str
    description: str
    parameters: dict | None


class Plugin:
    """A set of hooks and tools served over the protocol. The module-level ``hook``, ``tool``
    and ``run`` use a default instance; create your own to keep several apart (tests)."""

    def __init__(self, name: str | None = None, version: str = "0.0.0"):
        self.name = name or ""
        self.version = version
        self.settings: dict = {}
        self.state_dir: str = ""
        self._hooks: dict[str, _HookSpec] = {}
        self._tools: dict[str, _ToolSpec] = {}
        self._pending: dict[int, asyncio.Future] = {}
        self._tasks: dict[Any, asyncio.Task] = {}
        self._next_id = 0
        self._out_fd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.logger = Logger(self)

    # -- declaration ---------------------------------------------------------
    def hook(
        self,
        event: str,
        *,
        name: str | None = None,
        priority: int = 100,
        timeout_ms: int | None = None,
        agents: Iterable[str] | None = None,
        rooms: Iterable[str] | None = None,
        failure_policy: str | None = None,
    ) -> Callable:
        """Declare a hook for ``event`` (decorator). ``name`` defaults to the function's name."""
        if not isinstance(event, str) or not _EVENT_RE.match(event):
            raise ValueError(f"invalid event name {event!r}")
        if failure_policy not in (None, "open", "closed"):
            raise ValueError(f"failure_policy must be 'open' or 'closed', not {failure_policy!r}")
        if timeout_ms is not None and timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be positive, not {timeout_ms!r}")

        def decorate(fn: Callable) -> Callable:
            hook_name = name or fn.__name__
            if hook_name in self._hooks:
                raise ValueError(f"duplicate hook name {hook_name!r}")
            self._hooks[hook_name] = _HookSpec(
                fn,
                event,
                hook_name,
                int(priority),
                timeout_ms,
                list(agents) if agents else None,
                list(rooms) if rooms else None,
                failure_policy,
            )
            fn.__hookroom_hook__ = hook_name  # type: ignore[attr-defined]
            return fn

        return decorate

    def tool(self, name: str | None = None, description: str = "", parameters: dict | None = None) -> Callable:
        """Declare a tool (decorator): ``async def fn(call) -> str``. ``parameters`` is the JSON
        Schema of the arguments object."""

        def decorate(fn: Callable) -> Callable:
            tool_name = name or fn.__name__
            if tool_name in self._tools:
                raise ValueError(f"duplicate tool name {tool_name!r}")
            self._tools[tool_name] = _ToolSpec(fn, tool_name, description or (fn.__doc__ or "").strip(), parameters)
            return fn

        return decorate

    def declaration(self) -> dict:
        return {
            "api_version": API_VERSION,
            "name": self.name,
            "version": self.version,
            "hooks": [h.declaration() for h in self._hooks.values()],
            "tools": [
                {"name": t.name, "description": t.description, **({"parameters": t.parameters} if t.parameters else {})}
                for t in self._tools.values()
            ],
        }

    # -- serving ---------------------------------------------------------------
    def run(self) -> None:
        """Serve the protocol on stdin/stdout until hookroom shuts the plugin down."""
        if sys.stdin.isatty():
            print(
                f"{sys.argv[0]} is a hookroom plugin: hookroom runs it and speaks JSON-RPC on its stdin and stdout.",
                file=sys.stderr,
            )
            sys.exit(2)
        # The protocol owns the real stdout; print() and child processes
        # writing to fd 1 end up on stderr (hookroom's log) instead.
        out_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        asyncio.run(self.serve(0, out_fd))

    async def serve(self, in_fd: int, out_fd: int) -> None:
        """Serve the protocol reading ``in_fd`` and writing ``out_fd`` (pipes) until shutdown or EOF."""
        loop = asyncio.get_running_loop()
        if hasattr(asyncio, "eager_task_factory"):
            # Python 3.12+: a hook that finishes without waiting is answered
            # without a round through the event loop.
            loop.set_task_factory(asyncio.eager_task_factory)
        self._loop = loop
        self._out_fd = out_fd
        self._stop = asyncio.Event()
        transport, _ = await loop.connect_read_pipe(
            lambda: _LineProtocol(self), os.fdopen(in_fd, "rb", buffering=0, closefd=False)
        )
        try:
            await self._stop.wait()
        finally:
            for t in list(self._tasks.values()):
                t.cancel()
            for f in self._pending.values():
                if not f.done():
                    f.set_exception(HostError(INTERNAL_ERROR, "connection closed"))
            transport.close()

    def _dispatch(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError as e:
            _stderr(f"hookroom_plugin: skipping a line that is not JSON: {e}")
            return
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            _stderr("hookroom_plugin: skipping a message that is not JSON-RPC 2.0")
            return
        method = msg.get("method")
        if method is None:
            self._deliver(msg)
            return
        rid = msg.get("id")
        params = msg.get("params") or {}
        if method == "$/cancel":
            t = self._tasks.get(params.get("id") if isinstance(params, dict) else None)
            if t is not None:
                t.cancel()
            return
        if method == "$/ping":
            self._reply(rid, {})
            return
        if method == "initialize":
            self._initialize(rid, params)
            return
        if method == "shutdown":
            self._reply(rid, {})
            assert self._loop is not None and self._stop is not None
            self._loop.call_later(0.01, self._stop.set)
            return
        if method == "hook.invoke":
            self._invoke_hook(rid, params)
            return
        if method == "tool.call":
            self._call_tool(rid, params)
            return
        if rid is not None:
            self._error(rid, METHOD_NOT_FOUND, f"method not found: {method}")

    def _initialize(self, rid: Any, params: dict) -> None:
        if params.get("api_version") != API_VERSION:
            self._error(
                rid,
                API_VERSION_MISMATCH,
                f"this plugin speaks api_version {API_VERSION}, the host asked for {params.get('api_version')}",
            )
            return
        self.name = params.get("plugin") or self.name
        settings = params.get("settings")
        self.settings = settings if isinstance(settings, dict) else {}
        self.state_dir = params.get("state_dir") or ""
        self.logger = Logger(self)
        self._reply(rid, self.declaration())

    def _invoke_hook(self, rid: Any, params: dict) -> None:
        spec = self._hooks.get(params.get("hook", ""))
        if spec is None:
            self._error(rid, UNKNOWN_HOOK, f"this plugin has no hook {params.get('hook')!r}")
            return
        data = params.get("context")
        if not isinstance(data, dict):
            self._error(rid, INVALID_PARAMS, "hook.invoke: context must be an object")
            return
        ctx = HookContext(self, int(params.get("invocation", 0)), params.get("event", spec.event), spec.name, data)

        def done(ret: Any) -> None:
            if ret is not None:
                try:
                    _add_returned_items(ctx, ret)
                except (TypeError, ValueError) as e:
                    self._error(rid, HOOK_FAILED, f"hook {spec.name} returned {type(ret).__name__}: {e}")
                    return
            self._reply(rid, {"context": ctx._result()})

        def failed(e: Exception) -> None:
            ctx.logger.error(f"hook {spec.name} failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
            self._error(rid, HOOK_FAILED, f"{type(e).__name__}: {e}")

        self._run(rid, spec.fn, ctx, params.get("deadline_ms") or 0, f"hook {spec.name}", done, failed)

    def _call_tool(self, rid: Any, params: dict) -> None:
        spec = self._tools.get(params.get("tool", ""))
        if spec is None:
            self._error(rid, UNKNOWN_HOOK, f"this plugin has no tool {params.get('tool')!r}")
            return
        call = ToolCall(self, params)

        def done(out: Any) -> None:
            if out is None:
                out = ""
            elif not isinstance(out, str):
                out = json.dumps(out, ensure_ascii=False)
            self._reply(rid, {"content": out})

        def failed(e: Exception) -> None:
            call.logger.error(f"tool {spec.name} failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
            self._error(rid, HOOK_FAILED, f"{type(e).__name__}: {e}")

        self._run(rid, spec.fn, call, params.get("deadline_ms") or 0, f"tool {spec.name}", done, failed)

    def _run(self, rid: Any, fn: Callable, arg: Any, deadline_ms: float, what: str, done: Callable, failed: Callable) -> None:
        """Run a hook or tool function: a plain function at once on the loop, a coroutine
        function in a task of its own, cancelled by $/cancel or when deadline_ms pass."""
        try:
            ret = fn(arg)
        except Exception as e:
            failed(e)
            return
        if not inspect.isawaitable(ret):
            done(ret)
            return
        assert self._loop is not None
        task = self._loop.create_task(self._await(rid, ret, deadline_ms, what, done, failed))
        if not task.done():  # an eager task (Python 3.12+) may have finished already
            self._tasks[rid] = task

    async def _await(self, rid: Any, aw: Awaitable, deadline_ms: float, what: str, done: Callable, failed: Callable) -> None:
        expired = False
        timer = None
        if deadline_ms > 0:
            task = asyncio.current_task()
            assert task is not None and self._loop is not None

            def expire() -> None:
                nonlocal expired
                expired = True
                task.cancel()

            timer = self._loop.call_later(deadline_ms / 1000, expire)
        try:
            ret = await aw
        except asyncio.CancelledError:
            if expired:
                self._error(rid, DEADLINE, f"{what} passed its deadline ({deadline_ms} ms)")
            else:
                self._error(rid, REQUEST_CANCELLED, "cancelled by the host")
            return
        except Exception as e:
            failed(e)
            return
        finally:
            if timer is not None:
                timer.cancel()
            self._tasks.pop(rid, None)
        done(ret)

    # -- wire ------------------------------------------------------------------
    def _write(self, obj: dict) -> None:
        self._write_line(_ENCODER.encode(obj))

    def _write_line(self, line: str) -> None:
        view = memoryview((line + "\n").encode())
        while view:
            n = os.write(self._out_fd, view)
            view = view[n:]

    def _reply(self, rid: Any, result: Any) -> None:
        enc = _ENCODER.encode
        self._write_line('{"jsonrpc":"2.0","id":' + enc(rid) + ',"result":' + enc(result) + "}")

    def _error(self, rid: Any, code: int, message: str) -> None:
        self._write({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})

    def _notify(self, method: str, params: dict) -> None:
        if self._out_fd < 0:
            _stderr(f"{params.get('level', 'info')}: {params.get('message', '')} {params.get('fields', '')}")
            return
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def _call(self, method: str, params: dict) -> dict:
        if self._loop is None:
            raise NoService(NO_SERVICE, f"{method}: not connected to hookroom")
        self._next_id += 1
        rid = self._next_id
        fut = self._loop.create_future()
        self._pending[rid] = fut
        try:
            self._write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return await fut
        except asyncio.CancelledError:
            if not fut.done():
                self._write({"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": rid}})
            raise
        finally:
            self._pending.pop(rid, None)

    def _deliver(self, msg: dict) -> None:
        fut = self._pending.get(msg.get("id"))  # type: ignore[arg-type]
        if fut is None or fut.done():
            return
        if msg.get("error") is not None:
            err = msg["error"]
            fut.set_exception(_host_error(err if isinstance(err, dict) else {"message": str(err)}))
        else:
            fut.set_result(msg.get("result") or {})


class _LineProtocol(asyncio.Protocol):
    """Splits the input into lines and dispatches each as it arrives."""

    def __init__(self, plugin: "Plugin"):
        self._plugin = plugin
        self._buf = bytearray()
        self._skipping = False

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            if self._skipping:
                self._skipping = False
            else:
                self._plugin._dispatch(bytes(buf[start:nl]))
            start = nl + 1
        del buf[:start]
        if len(buf) > MAX_LINE_BYTES:
            _stderr(f"hookroom_plugin: skipping a line longer than {MAX_LINE_BYTES} bytes")
            buf.clear()
            self._skipping = True

    def eof_received(self) -> bool:
        if self._buf.strip() and not self._skipping:
            self._plugin._dispatch(bytes(self._buf))
        self._buf.clear()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._plugin._stop is not None:
            self._plugin._stop.set()


def _add_returned_items(ctx: HookContext, ret: Any) -> None:
    items = ret if isinstance(ret, (list, tuple)) else [ret]
    for it in items:
        if not isinstance(it, EnrichmentItem):
            raise TypeError("hooks return None, an EnrichmentItem or a list of them")
        if ctx.event_name not in ("message:enrich", "system:enrich"):
            raise ValueError(f"{ctx.event_name} hooks cannot return enrichment items")
        ctx._items.append(it.to_json())


def _stderr(msg: str) -> None:
    print(msg, file=sys.__stderr__, flush=True)


_default = Plugin()

#: Declare a hook on the default plugin: ``@hook("message:enrich", priority=20)``.
hook = _default.hook
#: Declare a tool on the default plugin: ``@tool("name", "description", {...schema...})``.
tool = _default.tool


def run(name: str | None = None, version: str | None = None) -> None:
    """Serve the default plugin (every ``@hook`` and ``@tool`` declared so far)."""
    if name:
        _default.name = name
    if version:
        _default.version = version
    _default.run()
