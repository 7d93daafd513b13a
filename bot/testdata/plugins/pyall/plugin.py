"""A test plugin (Python SDK) that enriches, transforms, gates and observes."""
# The test copies plugins/sdk/python/hookroom_plugin.py next to this file.
from hookroom_plugin import hook, run


@hook("message:enrich", priority=10)
async def enrich(ctx):
    ctx.add_metadata("py_item", "from python", cache_policy="stable")


@hook("message:before_response", priority=10)
async def transform(ctx):
    ctx.draft.text = ctx.draft.text + " [py]"


@hook("tool:before_call", priority=10)
async def gate(ctx):
    if ctx.tool_name == "room_info":
        ctx.decline("python says no")


@hook("message:after_response")
async def observe(ctx):
    with open(ctx.state_root / "seen.txt", "a", encoding="utf-8") as f:
        f.write(ctx.result["text"] + "\n")


if __name__ == "__main__":
    run(name="pyall", version="1.0.0")
