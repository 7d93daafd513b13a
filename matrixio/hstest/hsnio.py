"""hsnio: small helpers for scripts run by hstest.RunNio with Debian's python3-matrix-nio.

    import asyncio, sys, hsnio

    async def main(url, user_id, password, room_id):
        client = await hsnio.login(url, user_id, password)
        try:
            ...
        finally:
            await client.close()

    asyncio.run(main(*sys.argv[1:]))

Clients have end-to-end encryption off and keep no files.
"""
import sys
import time

from nio import AsyncClient, AsyncClientConfig, LoginResponse, SyncResponse


def new_client(url, user_id, device_id="", access_token=""):
    """A client for url; logged in already when access_token (and device_id) are given."""
    config = AsyncClientConfig(encryption_enabled=False, store_sync_tokens=False)
    client = AsyncClient(url, user_id, device_id=device_id, config=config)
    if access_token:
        client.restore_login(user_id, device_id, access_token)
    return client


async def login(url, user_id, password, device_name="hsnio"):
    """Log in with a password (a new device); raises RuntimeError when it fails."""
    client = new_client(url, user_id)
    resp = await client.login(password, device_name=device_name)
    if not isinstance(resp, LoginResponse):
        await client.close()
        raise RuntimeError(f"login as {user_id} failed: {resp}")
    return client


async def sync_until(client, pred, timeout=10.0):
    """Long-poll /sync until pred(room_id, event) is true for a joined room's timeline event.

    Returns that event, or None after timeout seconds. Invites are in client.invited_rooms.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        resp = await client.sync(timeout=min(5000, left_ms), since=client.next_batch)
        if not isinstance(resp, SyncResponse):
            raise RuntimeError(f"sync failed: {resp}")
        for room_id, room in resp.rooms.join.items():
            for ev in room.timeline.events:
                if pred(room_id, ev):
                    return ev
    return None


def fail(message):
    """Print message to stderr and exit 1: RunNio fails the test with it."""
    print(message, file=sys.stderr)
    sys.exit(1)
