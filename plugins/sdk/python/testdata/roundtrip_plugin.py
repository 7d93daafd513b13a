"""The Python twin of the Go SDK's test plugin, for plugins/sdk/python/python_test.go.

HOOKROOM_PY_MODE picks a misbehaviour for fault tests: ok (default), crash,
block, import_error.
"""

import asyncio
import os
import time

MODE = os.environ.get("HOOKROOM_PY_MODE", "ok")
if MODE == "import_error":
    import hookroom_no_such_module  # noqa: F401

from hookroom_plugin import EnrichmentItem, hook, run, tool


@hook("message:received")
async def suppress_spam(ctx):
    print("stray output from plugin code:", ctx.envelope.body)
    ctx.suppress = "spam" in ctx.envelope.body


@hook("message:enrich", priority=20)
async def location(ctx):
    ctx.add_metadata("location", f"User is at {ctx.settings['home']}", cache_policy="stable")


@hook("system:enrich")
async def tags(ctx):
    return EnrichmentItem("agent", f"You are {ctx.target_agent}")


@hook("message:before_response")
async def footer(ctx):
    if MODE == "crash":
        print("about to crash", flush=True)
        os._exit(3)
    if MODE == "block":
        time.sleep(30)  # blocks the event loop: no pings answered either
    ctx.draft.text += ctx.settings["footer"]


@hook("message:final_response_transform")
async def shout(ctx):
    ctx.draft.text = ctx.draft.text.upper()


@hook("tool:before_call", failure_policy="closed", timeout_ms=150)
async def guard(ctx):
    if not isinstance(ctx.data.get("arguments"), dict):
        raise ValueError("arguments must be an object")
    if "secret" in str(ctx.arguments.get("path", "")):
        ctx.decline("secrets stay unread")


@hook("message:claim")
def ping(ctx):
    if ctx.envelope.body == "ping":
        ctx.claim("pong")


@hook("schedule:fired", rooms=["!room:localhost"])
async def sched(ctx):
    ctx.message_text = "rewritten: " + ctx.message_text


@hook("message:after_response", agents=["assistant"])
async def callbacks(ctx):
    room = ctx.result.envelope.room_id
    await ctx.send_message(room, "reply was: " + ctx.result.text, thread_id=ctx.result.envelope.resolved_thread_id)
    await ctx.put_room_state(room, "org.example.count", "", {"n": 1})
    one = await ctx.query_room_state(room, "org.example.count", "")
    every = await ctx.query_room_state(room, "org.example.count")
    missing = await ctx.query_room_state(room, "org.example.missing", "")
    await ctx.emit("sdktest:emitted", {"from": "hook"})
    report = f"state={one} all={len(every)} missing={missing} plugin={ctx.plugin_name} hook={ctx.hook_name} event={ctx.event_name}"
    (ctx.state_root / "callbacks.txt").write_text(report)
    ctx.logger.info("callbacks done", report=report)


@hook("model:resolve")
async def route(ctx):
    if not ctx.requested and "hard" in ctx.text:
        ctx.model = "gpt-9" if "unknown" in ctx.text else "smart"


@hook("model:request")
async def redact(ctx):
    ctx.replace_text("hunter2", "[secret]")
    ctx.remove_tool("shell")
    if ctx.round > 3:
        ctx.refuse(f"too many rounds for {ctx.model}")


@hook("tool:result")
async def mask(ctx):
    ctx.content = ctx.content.replace("AKIA1234", "AKIA****")


@hook("memory:extracted")
async def memories(ctx):
    ctx.memories = [m for m in ctx.memories if "password" not in m["text"]]
    for m in ctx.memories:
        m["text"] = m["text"].replace("Alice", "A.")
        if "veto" in m["text"]:
            ctx.veto("asked to")


@hook("system:enrich")
async def team_rules(ctx):
    team = ctx.envelope.team
    if team is None:
        return
    if team.member_name:
        ctx.add_instruction("team", f"You answer as {team.member_name}, a member of {team.team_name}")
    else:
        ctx.add_instruction("team", f"You lead {team.team_name} ({team.team_mode}) asking {', '.join(ctx.target_member_names)}")


@hook("message:final_response_transform")
async def team_sign(ctx):
    team = ctx.draft.envelope.team
    if ctx.draft.kind == "team" and team:
        ctx.draft.text += f"\n-- {team.team_name}: {', '.join(team.target_member_names)}"


@hook("subagent:spawned")
async def subagent_start(ctx):
    ctx.logger.info(f"sub-agent {ctx.agent_id} of {ctx.parent_agent} spawned ({ctx.reason}, depth {ctx.spawn_depth}): {ctx.task}")


@hook("subagent:ended")
async def subagent_end(ctx):
    seconds = ctx.duration_ns / 1e9
    ctx.logger.info(f"sub-agent {ctx.agent_id} ended {ctx.outcome} after {seconds:g}s: {ctx.usage.total_tokens} tokens, run {ctx.run_id}")


@hook("sdktest:emitted")
async def emitted(ctx):
    await ctx.send_message("!room:localhost", "emitted from " + ctx.payload["from"])


@hook("message:cancelled")
async def fails(ctx):
    raise RuntimeError("calendar API is down")


@hook("room:member_joined", timeout_ms=100)
async def slow(ctx):
    await asyncio.sleep(10)


@tool("add", "adds two numbers", {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}})
async def add(call):
    return str(call.arguments["a"] + call.arguments["b"])


@tool("whoami", "answers with who called it, where, in which turn")
async def whoami(call):
    return " ".join([call.agent, call.room_id, call.thread_id, call.requester_id, call.session_id, call.correlation_id])


@tool("announce", "emits sdktest:emitted")
async def announce(call):
    await call.emit("sdktest:emitted", {"from": "tool"})
    return "announced"


if __name__ == "__main__":
    run(name="py-test", version="1.2.3")
