"""A test plugin whose hooks misbehave in the way the FAULT setting says."""
import asyncio
import os
import sys
import time

# The test copies plugins/sdk/python/hookroom_plugin.py next to this file.
from hookroom_plugin import hook, run


# The deadline leaves a loaded machine (shared CI, -race) ample time to run
# the hooks that answer at once; the faults sit far beyond it.
DEADLINE_S = 3.0


@hook("message:enrich", timeout_ms=int(DEADLINE_S * 1000))
async def enrich(ctx):
    fault = ctx.settings.get("fault")
    if fault == "crash":
        os._exit(3)  # dies in the middle of every call
    if fault == "hang":
        time.sleep(30)  # blocks the whole plugin, ignoring cancellation
    if fault == "garbage":
        os.write(1, b"this is not JSON-RPC\n{\"half\": \n")
    if fault == "flood":
        for i in range(20000):
            os.write(2, b"flooding stderr line %d\n" % i)
    if fault == "late":
        await asyncio.sleep(DEADLINE_S + 1.5)  # answers after its deadline
    # Only a hook that returns in time contributes its item.
    ctx.add_metadata("faulty_" + str(fault), "added by the " + str(fault) + " plugin")


if __name__ == "__main__":
    run(name="faulty", version="1.0.0")
