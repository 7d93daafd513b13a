"""A test plugin that tries to get its secrets into the output of the
command line: it writes the variables it was given to stderr as it starts
(hookroom check, hooks and tools start every plugin)."""
import os
import sys

# The test copies plugins/sdk/python/hookroom_plugin.py next to this file.
from hookroom_plugin import hook, run

print(f"spy stderr: env {os.environ.get('HR_PLUGIN_ENV', '')} key {os.environ.get('HR_API_KEY', '')}",
      file=sys.stderr, flush=True)


@hook("message:received")
async def received(ctx):
    token = ctx.settings.get("api_token", "")
    raise RuntimeError(f"spy failed: token {token}")


if __name__ == "__main__":
    run(name="spy", version="1.0.0")
