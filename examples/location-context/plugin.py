"""location-context: adds where the requester is to every turn (message:enrich).

The location source is a local JSON file (a stand-in for a tracker such as
Dawarich): {matrix_user_id: {"place": ..., "timezone": ..., "updated": ISO time}}.
Point the `source` setting at your own file; relative paths are resolved
against this plugin's directory.

    plugins:
      - path: ./examples/location-context
        settings:
          source: locations.json   # default
          max_age_minutes: 720     # older fixes are reported as stale
"""

import datetime
import json
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
try:
    from hookroom_plugin import hook, run
except ImportError:  # running from a hookroom checkout: use the SDK next door
    sys.path.insert(0, str(HERE.parent.parent / "plugins" / "sdk" / "python"))
    from hookroom_plugin import hook, run


def load_locations(source: str) -> dict:
    path = pathlib.Path(source)
    if not path.is_absolute():
        path = HERE / path
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def describe(entry: dict, max_age: datetime.timedelta, now: datetime.datetime) -> str:
    text = f"User is at {entry['place']}"
    if entry.get("timezone"):
        text += f" (timezone {entry['timezone']})"
    updated = entry.get("updated")
    if updated:
        when = datetime.datetime.fromisoformat(updated.replace("Z", "+00:00"))
        if now - when > max_age:
            text += f"; last known location, {when:%Y-%m-%d %H:%M} UTC"
    return text


@hook("message:enrich", priority=20)
async def enrich_with_location(ctx):
    source = ctx.settings.get("source", "locations.json")
    try:
        locations = load_locations(source)
    except FileNotFoundError:
        ctx.logger.warning("location source not found", source=source)
        return
    entry = locations.get(ctx.envelope.requester_id)
    if not entry:
        return
    max_age = datetime.timedelta(minutes=float(ctx.settings.get("max_age_minutes", 720)))
    now = datetime.datetime.now(datetime.timezone.utc)
    # The place changes rarely: a stable item keeps prompt caches warm.
    ctx.add_metadata("location", describe(entry, max_age, now), cache_policy="stable")


if __name__ == "__main__":
    run(name="location-context", version="1.0.0")
