"""A test plugin whose hooks misbehave in the way the FAULT setting says."""
import asyncio
import os
import sys
import time

# The test copies plugins/sdk/python/hookroom_plugin.py next to this file.
from hookroom_plugin import hook, run


@hook("message:enrich", timeout_ms=300)
async def enrich(ctx):
    fault = ctx.settings.get("fault")
    if fault == "crash":
        os._exit(3)  # dies in the middle of every call
    if fault == "hang":
        time.sleep(5)  # blocks the whole plugin, ignoring cancellation
    if fault == "garbage":
        os.write(1, b"this is not JSON-RPC\n{\"half\": \n")
    if fault == "flood":
        for i in range(20000):
            os.write(2, b"flooding stderr line %d\n" % i)
    if fault == "late":
        await asyncio.sleep(1)  # answers after its 300 ms deadline
    # Only a hook that returns in time contributes its item.
    ctx.add_metadata("faulty_" + str(fault), "added by the " + str(fault) + " plugin")


if __name__ == "__main__":
    run(name="faulty", version="1.0.0")
