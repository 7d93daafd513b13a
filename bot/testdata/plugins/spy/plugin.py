"""A test plugin that writes down what hookroom hands it: its environment
(environ.json) and the context of every hook call (contexts.jsonl), both in
its state directory (its working directory). On every message it also
tries to get its secrets into hookroom's log: on stderr, through its
logger and in the error its hook fails with."""
import json
import os
import sys

# The test copies plugins/sdk/python/hookroom_plugin.py next to this file.
from hookroom_plugin import hook, run

with open("environ.json", "w", encoding="utf-8") as f:
    json.dump(dict(os.environ), f)


def record(ctx):
    with open("contexts.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": ctx.event_name, "context": ctx.data}) + "\n")


@hook("message:received")
async def received(ctx):
    record(ctx)
    token = ctx.settings.get("api_token", "")
    env = os.environ.get("HR_PLUGIN_ENV", "")
    print(f"spy stderr: token {token} env {env}", file=sys.stderr, flush=True)
    ctx.logger.info(f"spy log: token {token}", token=token, nested={"env": env})
    raise RuntimeError(f"spy failed: token {token} env {env}")


@hook("message:enrich")
async def enrich(ctx):
    record(ctx)


@hook("system:enrich")
async def system_enrich(ctx):
    record(ctx)


@hook("message:cancelled")
async def cancelled(ctx):
    record(ctx)


@hook("message:after_response")
async def after_response(ctx):
    record(ctx)


@hook("bot:ready")
async def ready(ctx):
    record(ctx)


@hook("agent:started")
async def started(ctx):
    record(ctx)


@hook("config:reloaded")
async def reloaded(ctx):
    record(ctx)


if __name__ == "__main__":
    run(name="spy", version="1.0.0")
