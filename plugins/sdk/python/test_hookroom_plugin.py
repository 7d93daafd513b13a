"""Unit tests for hookroom_plugin: a fake host drives a Plugin over real pipes.

Run: python3 -m unittest discover -s plugins/sdk/python -v
(plugins/sdk/python/python_test.go runs them in `go test`).
"""

import asyncio
import base64
import json
import os
import pathlib
import tempfile
import time
import unittest

import hookroom_plugin as hp


class FakeHost:
    """The host end of the protocol: sends requests, answers the plugin's host.* calls."""

    def __init__(self, plugin: hp.Plugin):
        self.plugin = plugin
        self.next_id = 1000
        self.responses: dict = {}
        self.waiters: dict = {}
        self.logs: list = []
        self.requests: list = []
        self.state: dict = {}
        self.sent: list = []
        self.emitted: list = []
        self.attachments: dict = {}  # id -> (kind, name, mimetype, data)

    async def start(self):
        loop = asyncio.get_running_loop()
        self.to_plugin_r, self.to_plugin_w = os.pipe()
        self.from_plugin_r, self.from_plugin_w = os.pipe()
        self.serve_task = asyncio.ensure_future(self.plugin.serve(self.to_plugin_r, self.from_plugin_w))
        self.reader = asyncio.StreamReader(limit=1 << 24)
        self.transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self.reader), os.fdopen(self.from_plugin_r, "rb", buffering=0)
        )
        self.read_task = asyncio.ensure_future(self._read())

    async def stop(self):
        os.close(self.to_plugin_w)
        try:
            await asyncio.wait_for(self.serve_task, 2)
        finally:
            self.read_task.cancel()
            self.transport.close()
            os.close(self.to_plugin_r)
            os.close(self.from_plugin_w)

    def write(self, obj_or_bytes):
        data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode() + b"\n"
        os.write(self.to_plugin_w, data)

    async def _read(self):
        while True:
            line = await self.reader.readuntil(b"\n")
            msg = json.loads(line)
            if "method" in msg:
                await self._serve(msg)
            else:
                fut = self.waiters.pop(msg["id"], None)
                if fut is not None:
                    fut.set_result(msg)

    async def _serve(self, msg):
        m, p = msg["method"], msg.get("params") or {}
        self.requests.append(msg)
        if m == "host.log":
            self.logs.append(p)
            return
        result, error = {}, None
        if m == "host.send_message":
            self.sent.append(p)
            result = {"event_id": f"$sent{len(self.sent)}"}
        elif m == "host.room_state.put":
            self.state[(p["room_id"], p["event_type"], p["state_key"])] = p["content"]
            result = {"event_id": "$state"}
        elif m == "host.room_state.get":
            if "state_key" in p:
                key = (p["room_id"], p["event_type"], p["state_key"])
                if key in self.state:
                    result = {"content": self.state[key]}
                else:
                    error = {"code": hp.NOT_FOUND, "message": "not found"}
            else:
                result = {"events": {k[2]: v for k, v in self.state.items() if k[:2] == (p["room_id"], p["event_type"])}}
        elif m == "host.emit":
            self.emitted.append(p)
        elif m == "host.state_dir":
            result = {"path": self.plugin.state_dir}
        elif m == "host.attachment.get":
            att = self.attachments.get(p["attachment_id"])
            if att is None:
                error = {"code": hp.NOT_FOUND, "message": "not an attachment of this message"}
            elif att == "too large":
                error = {"code": hp.TOO_LARGE, "message": "larger than 20 MiB"}
            else:
                kind, name, mimetype, data = att
                off = p.get("offset", 0)
                chunk = data[off : off + min(p.get("length") or 5, 5)]  # small chunks: the SDK must loop
                result = {
                    "attachment_id": p["attachment_id"],
                    "kind": kind,
                    "name": name,
                    "mimetype": mimetype,
                    "size": len(data),
                    "offset": off,
                    "data": base64.b64encode(chunk).decode(),
                    "eof": off + len(chunk) == len(data),
                }
        if "id" in msg:
            reply = {"jsonrpc": "2.0", "id": msg["id"]}
            reply["error" if error else "result"] = error or result
            self.write(reply)

    async def call(self, method, params=None, timeout=5):
        self.next_id += 1
        rid = self.next_id
        fut = asyncio.get_running_loop().create_future()
        self.waiters[rid] = fut
        self.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return await asyncio.wait_for(fut, timeout)

    async def initialize(self, settings=None, state_dir=""):
        return await self.call(
            "initialize", {"api_version": 1, "plugin": "py-test", "settings": settings or {}, "state_dir": state_dir}
        )

    async def invoke(self, hook, event, context, deadline_ms=1000, rid=None):
        return await self.call(
            "hook.invoke", {"invocation": 7, "hook": hook, "event": event, "context": context, "deadline_ms": deadline_ms}
        )


def envelope(body="hello"):
    return {
        "source_event_id": "$e",
        "room_id": "!room:localhost",
        "requester_id": "@alice:localhost",
        "sender_id": "@alice:localhost",
        "body": body,
        "agent_name": "assistant",
        "source_kind": "message",
    }


def make_plugin() -> hp.Plugin:
    p = hp.Plugin(version="9.9.9")

    @p.hook("message:received")
    async def suppress_spam(ctx):
        ctx.suppress = "spam" in ctx.envelope.body

    @p.hook("message:enrich", priority=20, timeout_ms=500, agents=["assistant"], rooms=["!room:localhost"])
    async def enrich(ctx):
        ctx.add_metadata("location", f"User is at {ctx.settings.get('home', '?')}", cache_policy="stable")

    @p.hook("message:enrich", name="returns_items")
    async def returns(ctx):
        return [hp.EnrichmentItem("time", "noon"), hp.EnrichmentItem("tz", "UTC", cache_policy="stable", transient=True)]

    @p.hook("system:enrich")
    async def tags(ctx):
        ctx.add_instruction("tags", "a, b")

    @p.hook("message:before_response")
    async def footer(ctx):
        ctx.draft.response_text += "\n-- footer"
        if "hide" in ctx.draft.text:
            ctx.draft.suppress = True

    @p.hook("message:final_response_transform")
    async def shout(ctx):
        ctx.draft.text = ctx.draft.text.upper()

    @p.hook("tool:before_call", failure_policy="closed")
    async def guard(ctx):
        if ctx.tool_name == "read_file" and "secret" in str(ctx.arguments.get("path", "")):
            ctx.decline("Sensitive files must stay unread.")
        if ctx.tool_name == "delete_file":
            ctx.require_approval("Deleting needs a person's yes.")

    @p.hook("tool:approval_requested")
    async def auto_approve(ctx):
        if ctx.tool_name == "read_file":
            ctx.approve("reading is fine")
        elif ctx.tool_name == "format_disk":
            ctx.deny("never")

    @p.hook("message:claim")
    def ping(ctx):  # a plain function works too
        if ctx.envelope.body == "ping":
            ctx.claim("pong")

    @p.hook("schedule:fired")
    async def sched(ctx):
        ctx.message_text = "rewritten: " + ctx.message_text

    @p.hook("message:after_response")
    async def callbacks(ctx):
        room = ctx.result.envelope.room_id
        ev = await ctx.send_message(room, "reply was " + ctx.result.text, thread_id="$t")
        await ctx.put_room_state(room, "org.example.n", "", {"n": 1})
        one = await ctx.query_room_state(room, "org.example.n", "")
        every = await ctx.query_room_state(room, "org.example.n")
        missing = await ctx.query_room_state(room, "org.example.none", "")
        await ctx.emit("test:done", {"ev": ev})
        ctx.logger.info("callbacks done", one=one, every=every, missing=missing, state=str(ctx.state_root))

    @p.hook("test:slow")
    async def slow(ctx):
        await asyncio.sleep(ctx.payload.get("sleep", 0.2) if isinstance(ctx.payload, dict) else 0.2)
        ctx.logger.info("slept")

    @p.hook("test:raises")
    async def raises(ctx):
        raise KeyError("dawarich_url")

    @p.hook("test:attrs")
    async def attrs(ctx):
        ctx.logger.info(
            "attrs",
            event=ctx.event_name,
            hook=ctx.hook_name,
            plugin=ctx.plugin_name,
            correlation=ctx.correlation_id,
            room=ctx.room_id,
            missing=ctx.no_such_field,
            nested=ctx.payload["deep"]["x"],
            # message:after_response's token usage reads as attributes too.
            tokens=ctx.result.usage.total_tokens if ctx.result is not None else None,
        )

    @p.hook("message:enrich", name="read_attachments")
    async def read_attachments(ctx):
        for att_id in ctx.envelope.attachment_ids or []:
            try:
                a = await ctx.attachment(att_id)
                ctx.add_metadata(att_id, f"{a.kind} {a.name} {a.mimetype} {a.size} {a.data!r}")
            except hp.HostError as e:
                ctx.add_metadata(att_id, f"{type(e).__name__} {e.code}")

    @p.hook("plugin:before_install", failure_policy="closed")
    async def install_policy(ctx):
        if ctx.source_type == "git" and not ctx.source.startswith("https://git.example.org/"):
            ctx.decline(f"{ctx.name} {ctx.version}: plugins come from git.example.org only")

    @p.hook("model:resolve")
    async def route(ctx):
        if not ctx.requested and "hard" in ctx.text:
            ctx.model = "smart"

    @p.hook("model:request")
    async def redact(ctx):
        ctx.replace_text("hunter2", "[secret]")
        ctx.remove_tool("shell")
        if ctx.round > 3:
            ctx.refuse(f"too many rounds for {ctx.model}")

    @p.hook("tool:result")
    async def mask(ctx):
        ctx.content = ctx.content.replace("AKIA1234", "AKIA****")

    @p.hook("memory:extracted")
    async def memories(ctx):
        ctx.memories = [m for m in ctx.memories if "password" not in m["text"]]
        for m in ctx.memories:
            m["text"] = m["text"].replace("Alice", "A.")
            if "veto" in m["text"]:
                ctx.veto("asked to")

    @p.hook("model:response")
    async def meter(ctx):
        ctx.logger.info("metered", round=ctx.round, tokens=ctx.usage.total_tokens, latency_ms=ctx.latency_ns / 1e6, tools=[c.name for c in ctx.tool_calls or []])

    @p.hook("usage:budget_reached")
    async def budget_alert(ctx):
        ctx.logger.info("budget", scope=ctx.scope, subject=ctx.subject, share=ctx.threshold, day=ctx.day)

    @p.hook("system:enrich")
    async def team_rules(ctx):
        team = ctx.envelope.team
        if team is None:
            return
        if team.member_name:
            ctx.add_instruction("team", f"You answer as {team.member_name}, a member of {team.team_name}")
        else:
            ctx.add_instruction("team", f"You lead {team.team_name} ({team.team_mode}) asking {', '.join(ctx.target_member_names)}")

    @p.hook("message:before_response")
    async def team_sign(ctx):
        team = ctx.draft.envelope.team
        if ctx.draft.kind == "team" and team:
            ctx.draft.text += f"\n-- {team.team_name}: {', '.join(team.target_member_names)}"

    @p.hook("subagent:spawned")
    async def subagent_start(ctx):
        ctx.logger.info("spawned", agent=ctx.agent_id, parent=ctx.parent_agent, team=ctx.team, reason=ctx.reason, depth=ctx.spawn_depth, task=ctx.task)

    @p.hook("subagent:ended")
    async def subagent_end(ctx):
        ctx.logger.info("ended", run=ctx.run_id, outcome=ctx.outcome, error=ctx.error, tokens=ctx.usage.total_tokens, seconds=ctx.duration_ns / 1e9)

    @p.tool("add", "adds", {"type": "object"})
    async def add(call):
        return call.arguments["a"] + call.arguments["b"]

    @p.tool()
    async def announce(call):
        """Emits test:done."""
        await call.emit("test:done", {"from": "tool"})
        return "announced"

    @p.tool("fails")
    def fails(call):
        raise RuntimeError("tool broke")

    return p


class PluginTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.plugin = make_plugin()
        self.host = FakeHost(self.plugin)
        await self.host.start()
        res = await self.host.initialize({"home": "Berlin"}, self.tmp.name)
        self.decl = res["result"]

    async def asyncTearDown(self):
        await self.host.stop()
        self.tmp.cleanup()

    async def result(self, hook, event, context, **kw):
        res = await self.host.invoke(hook, event, context, **kw)
        self.assertIn("result", res, res)
        return res["result"]["context"]

    async def test_declaration(self):
        d = self.decl
        self.assertEqual(d["api_version"], 1)
        self.assertEqual(d["name"], "py-test")
        self.assertEqual(d["version"], "9.9.9")
        names = [h["name"] for h in d["hooks"]]
        self.assertEqual(names[:4], ["suppress_spam", "enrich", "returns_items", "tags"])
        enrich = d["hooks"][1]
        self.assertEqual(
            enrich,
            {
                "event": "message:enrich",
                "name": "enrich",
                "priority": 20,
                "timeout_ms": 500,
                "agents": ["assistant"],
                "rooms": ["!room:localhost"],
            },
        )
        self.assertEqual(d["hooks"][6]["failure_policy"], "closed")
        tools = {t["name"]: t for t in d["tools"]}
        self.assertEqual(tools["add"]["parameters"], {"type": "object"})
        self.assertEqual(tools["announce"]["description"], "Emits test:done.")

    async def test_every_mode(self):
        cases = [
            ("suppress_spam", "message:received", {"envelope": envelope("cheap spam")}, {"suppress": True}),
            ("suppress_spam", "message:received", {"envelope": envelope("hi")}, {"suppress": False}),
            (
                "enrich",
                "message:enrich",
                {"envelope": envelope(), "target_agent": "assistant"},
                {"items": [{"key": "location", "text": "User is at Berlin", "cache_policy": "stable"}]},
            ),
            (
                "returns_items",
                "message:enrich",
                {"envelope": envelope()},
                {
                    "items": [
                        {"key": "time", "text": "noon", "cache_policy": "volatile"},
                        {"key": "tz", "text": "UTC", "cache_policy": "stable", "transient": True},
                    ]
                },
            ),
            ("tags", "system:enrich", {"envelope": envelope()}, {"items": [{"key": "tags", "text": "a, b", "cache_policy": "volatile"}]}),
            (
                "footer",
                "message:before_response",
                {"draft": {"text": "Hello", "kind": "ai", "extra": {"k": 1}, "envelope": envelope()}},
                {"draft": {"text": "Hello\n-- footer", "extra": {"k": 1}, "tool_trace": None, "suppress": False}},
            ),
            (
                "footer",
                "message:before_response",
                {"draft": {"text": "hide me", "kind": "ai", "envelope": envelope()}},
                {"draft": {"text": "hide me\n-- footer", "extra": None, "tool_trace": None, "suppress": True}},
            ),
            ("shout", "message:final_response_transform", {"draft": {"text": "done"}}, {"draft": {"text": "DONE"}}),
            (
                "guard",
                "tool:before_call",
                {"tool": "read_file", "arguments": {"path": "/secret"}, "declined": False},
                {"declined": True, "decline_reason": "Sensitive files must stay unread.", "approval_required": False, "approval_reason": ""},
            ),
            (
                "guard",
                "tool:before_call",
                {"tool": "read_file", "arguments": {"path": "/ok"}},
                {"declined": False, "decline_reason": "", "approval_required": False, "approval_reason": ""},
            ),
            (
                "guard",
                "tool:before_call",
                {"tool": "delete_file", "arguments": {"path": "/ok"}},
                {"declined": False, "decline_reason": "", "approval_required": True, "approval_reason": "Deleting needs a person's yes."},
            ),
            (
                "auto_approve",
                "tool:approval_requested",
                {"tool": "read_file", "arguments": {}, "approval_id": "a1"},
                {"decision": "approve", "decision_reason": "reading is fine"},
            ),
            (
                "auto_approve",
                "tool:approval_requested",
                {"tool": "format_disk", "arguments": {}, "approval_id": "a2"},
                {"decision": "deny", "decision_reason": "never"},
            ),
            ("auto_approve", "tool:approval_requested", {"tool": "ls", "arguments": {}}, {"decision": "", "decision_reason": ""}),
            (
                "install_policy",
                "plugin:before_install",
                {"name": "geo", "version": "1.2.0", "source": "https://evil.example/geo.git", "source_type": "git", "declined": False},
                {"declined": True, "decline_reason": "geo 1.2.0: plugins come from git.example.org only"},
            ),
            (
                "install_policy",
                "plugin:before_install",
                {"name": "geo", "version": "1.2.0", "source": "/srv/geo", "source_type": "dir", "declined": False},
                {"declined": False, "decline_reason": ""},
            ),
            (
                "route",
                "model:resolve",
                {"text": "a hard one", "configured": "default", "source": "config", "models": ["default", "smart"], "model": "default"},
                {"model": "smart"},
            ),
            (
                "route",
                "model:resolve",
                {"text": "a hard one", "configured": "default", "requested": "default", "source": "thread", "models": ["default", "smart"], "model": "default"},
                {"model": "default"},
            ),
            (
                "redact",
                "model:request",
                {
                    "round": 1,
                    "model": "default",
                    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "pw hunter2, hunter2"}],
                    "tools": [{"name": "shell"}, {"name": "clock", "parameters": {"type": "object"}}],
                    "refused": False,
                },
                {
                    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "pw [secret], [secret]"}],
                    "tools": [{"name": "clock", "parameters": {"type": "object"}}],
                    "refused": False,
                    "refuse_reason": "",
                },
            ),
            (
                "redact",
                "model:request",
                {"round": 4, "model": "default", "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "shell"}], "refused": False},
                {"messages": [{"role": "user", "content": "hi"}], "tools": None, "refused": True, "refuse_reason": "too many rounds for default"},
            ),
            ("mask", "tool:result", {"tool": "env", "arguments": {}, "call_id": "c1", "blocked": False, "content": "key=AKIA1234"}, {"content": "key=AKIA****"}),
            (
                "memories",
                "memory:extracted",
                {
                    "agent": "assistant",
                    "memories": [
                        {"text": "Alice has a cat.", "scope": "person", "person": "@alice:x", "agent": "assistant", "room": "!r:x"},
                        {"text": "Alice's password is hunter2.", "scope": "person", "person": "@alice:x", "agent": "assistant", "room": "!r:x"},
                    ],
                    "vetoed": False,
                },
                {
                    "memories": [{"text": "A. has a cat.", "scope": "person", "person": "@alice:x", "agent": "assistant", "room": "!r:x"}],
                    "vetoed": False,
                    "veto_reason": "",
                },
            ),
            (
                "memories",
                "memory:extracted",
                {"agent": "assistant", "memories": [{"text": "veto this", "scope": "person", "agent": "assistant"}], "vetoed": False},
                {"memories": [{"text": "veto this", "scope": "person", "agent": "assistant"}], "vetoed": True, "veto_reason": "asked to"},
            ),
            ("ping", "message:claim", {"envelope": envelope("ping")}, {"claimed": {"text": "pong"}}),
            ("ping", "message:claim", {"envelope": envelope("other")}, {}),
            (
                "sched",
                "schedule:fired",
                {"task_id": "t", "message_text": "standup", "suppress": False},
                {"message_text": "rewritten: standup", "suppress": False},
            ),
        ]
        for hook, event, context, want in cases:
            with self.subTest(hook=hook, context=context):
                self.assertEqual(await self.result(hook, event, context), want)

    async def test_model_observers(self):
        resp = {
            "agent": "assistant",
            "round": 2,
            "model": "default",
            "text": "",
            "tool_calls": [{"id": "c1", "name": "clock", "arguments": "{}"}],
            "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15, "model_calls": 1},
            "latency_ns": 250000000,
        }
        self.assertEqual(await self.result("meter", "model:response", resp), {})
        budget = {"agent": "assistant", "scope": "person", "subject": "@alice:localhost", "limit": 1000, "used": 812, "threshold": 0.8, "day": "2026-01-02"}
        self.assertEqual(await self.result("budget_alert", "usage:budget_reached", budget), {})
        logs = {l["message"]: l["fields"] for l in self.host.logs}
        self.assertEqual(logs["metered"], {"round": 2, "tokens": 15, "latency_ms": 250.0, "tools": ["clock"]})
        self.assertEqual(logs["budget"], {"scope": "person", "subject": "@alice:localhost", "share": 0.8, "day": "2026-01-02"})

    async def test_team(self):
        team = {
            "team_name": "research",
            "team_mode": "coordinate",
            "team_leader": "alice",
            "member_names": ["alice", "bob", "carol"],
            "target_member_names": ["alice", "carol"],
        }
        env = {**envelope(), "agent_name": "research", "team": team}
        lead = {"envelope": env, "target_agent": "research", "target_member_names": ["alice", "carol"]}
        want = {"items": [{"key": "team", "text": "You lead research (coordinate) asking alice, carol", "cache_policy": "volatile"}]}
        self.assertEqual(await self.result("team_rules", "system:enrich", lead), want)
        member = {"envelope": {**env, "team": {**team, "member_name": "carol"}}, "target_agent": "carol"}
        want = {"items": [{"key": "team", "text": "You answer as carol, a member of research", "cache_policy": "volatile"}]}
        self.assertEqual(await self.result("team_rules", "system:enrich", member), want)
        self.assertEqual(await self.result("team_rules", "system:enrich", {"envelope": envelope(), "target_agent": "assistant"}), {})

        draft = {"draft": {"text": "Both agree.", "kind": "team", "envelope": env}}
        want = {"draft": {"text": "Both agree.\n-- research: alice, carol", "extra": None, "tool_trace": None, "suppress": False}}
        self.assertEqual(await self.result("team_sign", "message:before_response", draft), want)
        draft = {"draft": {"text": "Hi.", "kind": "ai", "envelope": envelope()}}
        self.assertEqual((await self.result("team_sign", "message:before_response", draft))["draft"]["text"], "Hi.")

        run = {
            "agent": "research",
            "room_id": "!room:localhost",
            "run_id": "$e/research/alice/answer",
            "agent_id": "alice",
            "parent_agent": "research",
            "team": "research",
            "reason": "team_member",
            "task": "find the sources",
            "spawn_depth": 1,
            "started_at": "2026-01-02T10:00:00Z",
            "usage": {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "total_tokens": 0, "model_calls": 0},
        }
        self.assertEqual(await self.result("subagent_start", "subagent:spawned", run), {})
        ended = {**run, "outcome": "timeout", "error": "context deadline exceeded", "ended_at": "2026-01-02T10:00:01.5Z", "duration_ns": 1500000000}
        self.assertEqual(await self.result("subagent_end", "subagent:ended", ended), {})
        logs = {l["message"]: l["fields"] for l in self.host.logs}
        self.assertEqual(logs["spawned"], {"agent": "alice", "parent": "research", "team": "research", "reason": "team_member", "depth": 1, "task": "find the sources"})
        self.assertEqual(logs["ended"], {"run": "$e/research/alice/answer", "outcome": "timeout", "error": "context deadline exceeded", "tokens": 0, "seconds": 1.5})

    async def test_host_calls(self):
        ctx = {"result": {"text": "42", "envelope": envelope()}}
        self.assertEqual(await self.result("callbacks", "message:after_response", ctx), {})
        self.assertEqual(self.host.sent, [{"invocation": 7, "room_id": "!room:localhost", "text": "reply was 42", "thread_id": "$t"}])
        self.assertEqual(self.host.emitted, [{"invocation": 7, "event": "test:done", "payload": {"ev": "$sent1"}}])
        log = [l for l in self.host.logs if l["message"] == "callbacks done"][0]
        self.assertEqual(log["invocation"], 7)
        self.assertEqual(log["level"], "info")
        self.assertEqual(log["fields"]["one"], {"n": 1})
        self.assertEqual(log["fields"]["every"], {"": {"n": 1}})
        self.assertIsNone(log["fields"]["missing"])
        self.assertEqual(log["fields"]["state"], self.tmp.name)

    async def test_attachments(self):
        self.host.attachments = {
            "mxc://localhost/a": ("file", "a.txt", "text/plain", "hello, chunked ✓".encode()),
            "mxc://localhost/big": "too large",
        }
        env = envelope()
        env["attachment_ids"] = ["mxc://localhost/a", "mxc://localhost/gone", "mxc://localhost/big"]
        got = await self.result("read_attachments", "message:enrich", {"envelope": env})
        self.assertEqual(
            [(i["key"], i["text"]) for i in got["items"]],
            [
                ("mxc://localhost/a", "file a.txt text/plain 18 " + repr("hello, chunked ✓".encode())),
                ("mxc://localhost/gone", f"NotFound {hp.NOT_FOUND}"),
                ("mxc://localhost/big", f"TooLarge {hp.TOO_LARGE}"),
            ],
        )
        gets = [r["params"] for r in self.host.requests if r["method"] == "host.attachment.get"]
        self.assertEqual([g["offset"] for g in gets if g["attachment_id"] == "mxc://localhost/a"], [0, 5, 10, 15])
        self.assertTrue(all(g["invocation"] == 7 for g in gets))

    async def test_attributes(self):
        usage = {"model": "m", "input_tokens": 120, "output_tokens": 8, "cached_tokens": 100, "total_tokens": 128, "model_calls": 1}
        ctx = {"correlation_id": "c1", "room_id": "!r", "payload": {"deep": {"x": 3}}, "result": {"usage": usage}}
        await self.result("attrs", "test:attrs", ctx)
        log = [l for l in self.host.logs if l["message"] == "attrs"][0]["fields"]
        self.assertEqual(
            log,
            {"event": "test:attrs", "hook": "attrs", "plugin": "py-test", "correlation": "c1", "room": "!r", "missing": None, "nested": 3, "tokens": 128},
        )

    async def test_hooks_run_concurrently(self):
        start = time.monotonic()
        results = await asyncio.gather(*(self.host.invoke("slow", "test:slow", {"payload": {"sleep": 0.3}}) for _ in range(5)))
        elapsed = time.monotonic() - start
        self.assertTrue(all("result" in r for r in results), results)
        self.assertLess(elapsed, 1.0, "five 0.3 s hooks did not overlap")

    async def test_cancel(self):
        self.host.next_id += 1
        rid = self.host.next_id
        fut = asyncio.get_running_loop().create_future()
        self.host.waiters[rid] = fut
        self.host.write(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "hook.invoke",
                "params": {"invocation": 1, "hook": "slow", "event": "test:slow", "context": {"payload": {"sleep": 30}}, "deadline_ms": 60000},
            }
        )
        await asyncio.sleep(0.05)
        start = time.monotonic()
        self.host.write({"jsonrpc": "2.0", "method": "$/cancel", "params": {"id": rid}})
        res = await asyncio.wait_for(fut, 2)
        self.assertEqual(res["error"]["code"], hp.REQUEST_CANCELLED)
        self.assertLess(time.monotonic() - start, 0.5)
        self.assertFalse([l for l in self.host.logs if l["message"] == "slept"])

    async def test_local_deadline(self):
        start = time.monotonic()
        res = await self.host.invoke("slow", "test:slow", {"payload": {"sleep": 30}}, deadline_ms=50)
        self.assertEqual(res["error"]["code"], hp.DEADLINE)
        self.assertLess(time.monotonic() - start, 0.5)

    async def test_hook_exception(self):
        res = await self.host.invoke("raises", "test:raises", {})
        self.assertEqual(res["error"], {"code": hp.HOOK_FAILED, "message": "KeyError: 'dawarich_url'"})
        log = [l for l in self.host.logs if l["level"] == "error"][0]
        self.assertEqual(log["message"], "hook raises failed")
        self.assertIn("Traceback", log["fields"]["traceback"])

    async def test_protocol_errors(self):
        res = await self.host.invoke("nope", "test:x", {})
        self.assertEqual(res["error"]["code"], hp.UNKNOWN_HOOK)
        res = await self.host.call("no.such.method")
        self.assertEqual(res["error"]["code"], hp.METHOD_NOT_FOUND)
        res = await self.host.call("initialize", {"api_version": 2})
        self.assertEqual(res["error"]["code"], hp.API_VERSION_MISMATCH)
        res = await self.host.invoke("suppress_spam", "message:received", "not an object")
        self.assertEqual(res["error"]["code"], hp.INVALID_PARAMS)

    async def test_garbage_is_skipped(self):
        self.host.write(b"this is not json\n")
        self.host.write(b"[1, 2]\n")
        self.host.write(b'{"jsonrpc": "1.0", "method": "$/ping", "id": 1}\n')
        self.host.write(b"\n")
        res = await self.host.call("$/ping")
        self.assertEqual(res["result"], {})

    async def test_tools(self):
        res = await self.host.call("tool.call", {"invocation": 3, "tool": "add", "arguments": {"a": 2, "b": 40}, "deadline_ms": 1000})
        self.assertEqual(res["result"], {"content": "42"})
        res = await self.host.call("tool.call", {"invocation": 4, "tool": "announce", "arguments": {}})
        self.assertEqual(res["result"], {"content": "announced"})
        self.assertEqual(self.host.emitted[-1], {"invocation": 4, "event": "test:done", "payload": {"from": "tool"}})
        res = await self.host.call("tool.call", {"invocation": 5, "tool": "fails", "arguments": {}})
        self.assertEqual(res["error"], {"code": hp.HOOK_FAILED, "message": "RuntimeError: tool broke"})
        res = await self.host.call("tool.call", {"invocation": 6, "tool": "nope"})
        self.assertEqual(res["error"]["code"], hp.UNKNOWN_HOOK)

    async def test_shutdown_ends_serve(self):
        res = await self.host.call("shutdown")
        self.assertEqual(res["result"], {})
        await asyncio.wait_for(asyncio.shield(self.host.serve_task), 2)


class DeclarationTest(unittest.TestCase):
    def test_invalid_declarations(self):
        p = hp.Plugin()
        for kwargs in ({"event": "nocolon"}, {"event": "Message:Received"}, {"event": "a:b", "failure_policy": "maybe"}, {"event": "a:b", "timeout_ms": 0}):
            with self.subTest(kwargs=kwargs), self.assertRaises(ValueError):
                p.hook(**kwargs)

        @p.hook("a:b")
        async def h(ctx):
            pass

        with self.assertRaises(ValueError):
            p.hook("a:c", name="h")(lambda ctx: None)

    def test_enrichment_item_validation(self):
        with self.assertRaises(ValueError):
            hp.EnrichmentItem("k", "t", cache_policy="forever").to_json()
        with self.assertRaises(ValueError):
            hp.EnrichmentItem("", "t").to_json()

    def test_namespace(self):
        ns = hp.Namespace({"a": {"b": [{"c": 1}]}, "n": None})
        self.assertEqual(ns.a.b[0].c, 1)
        self.assertIsNone(ns.missing)
        self.assertEqual(ns["a"]["b"][0]["c"], 1)
        self.assertIn("a", ns)


if __name__ == "__main__":
    unittest.main()
