"""tool-guard: declines tool calls that match deny rules (tool:before_call).

    plugins:
      - path: ./examples/tool-guard
        settings:
          deny:
            - tool: read_file          # exact tool name, or "*" for any tool
              argument: path           # the argument to look at
              pattern: "secret|\\.env$" # a Python regular expression
              reason: Secrets stay unread.
        hooks:
          guard:
            failure_policy: closed     # the default here: no guard, no call

Every decline is logged and emitted as the custom event tool-guard:declined,
which other plugins can observe (an audit log, a notifier).
"""

import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
try:
    from hookroom_plugin import hook, run
except ImportError:  # running from a hookroom checkout: use the SDK next door
    sys.path.insert(0, str(HERE.parent.parent / "plugins" / "sdk" / "python"))
    from hookroom_plugin import hook, run

_compiled: dict[str, re.Pattern] = {}


def matches(rule: dict, tool: str, arguments: dict) -> bool:
    if rule.get("tool", "*") not in ("*", tool):
        return False
    pattern = rule.get("pattern")
    if not pattern:
        return True
    rx = _compiled.get(pattern)
    if rx is None:
        rx = _compiled[pattern] = re.compile(pattern)
    argument = rule.get("argument")
    value = arguments.get(argument, "") if argument else " ".join(str(v) for v in arguments.values())
    return rx.search(str(value)) is not None


@hook("tool:before_call", priority=10, failure_policy="closed")
async def guard(ctx):
    for rule in ctx.settings.get("deny", []):
        if matches(rule, ctx.tool_name, ctx.arguments):
            reason = rule.get("reason") or f"{ctx.tool_name} is not allowed here."
            ctx.decline(reason)
            ctx.logger.info("declined a tool call", tool=ctx.tool_name, agent=ctx.agent, reason=reason)
            await ctx.emit(
                "tool-guard:declined",
                {"tool": ctx.tool_name, "agent": ctx.agent, "room_id": ctx.room_id, "reason": reason},
            )
            return


if __name__ == "__main__":
    run(name="tool-guard", version="1.0.0")
