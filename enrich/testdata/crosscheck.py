#!/usr/bin/env python3
"""Independent check of the enrich golden files.

Renders every case of cases.json from the written rules, using Python's own
html.escape(quote=True), str.rstrip() and stable sorted(), and compares the
result byte for byte with <name>.golden. It guards the claim that the Go
renderer escapes, trims and orders exactly like the Python code the format
comes from. Run from anywhere:

    python3 enrich/testdata/crosscheck.py

Exit status 0 when every case matches.
"""

import html
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
RESERVED = {"matrix_message_target"}


def esc(s):
    return html.escape(s, quote=True)


def item(it):
    policy = it.get("cache_policy") or "volatile"
    return '<item key="%s" cache_policy="%s">\n%s\n</item>' % (
        esc(it["key"]),
        esc(policy),
        esc(it["text"]),
    )


def block(tag, items):
    if not items:
        return ""
    return "<%s>\n%s\n</%s>" % (tag, "\n".join(item(i) for i in items), tag)


def message(items):
    return block("hookroom_message_context", items)


def system(items):
    stable = sorted((i for i in items if i.get("cache_policy") == "stable"), key=lambda i: i["key"])
    rest = sorted((i for i in items if i.get("cache_policy") != "stable"), key=lambda i: i["key"])
    return block("hookroom_system_context", stable + rest)


def transient(parts):
    body = "\n\n".join(p for p in parts if p)
    if not body:
        return ""
    return "<hookroom_transient_context>\n%s\n</hookroom_transient_context>" % body


def kept(items):
    return [i for i in items if i["key"] and i["key"] not in RESERVED]


def build(case):
    msg = kept(case.get("items") or [])
    persisted = [i for i in msg if not i.get("transient")]
    volatile_turn = [i for i in msg if i.get("transient")]
    prompt = case["user"]
    if persisted:
        prompt = prompt.rstrip() + "\n\n" + message(persisted)
    trans = transient([message(volatile_turn)] + (case.get("parts") or []))
    sys_block = system(kept(case.get("system") or []))
    return "-- prompt --\n%s\n-- transient --\n%s\n-- system --\n%s\n" % (prompt, trans, sys_block)


def render(case):
    kind = case["kind"]
    items = case.get("items") or []
    if kind == "message":
        return message(items)
    if kind == "system":
        return system(items)
    if kind == "transient":
        return transient([message(items)] + (case.get("parts") or []))
    if kind == "build":
        return build(case)
    raise ValueError("unknown kind %r" % kind)


def main():
    cases = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
    failed = 0
    for case in cases:
        want = (HERE / (case["name"] + ".golden")).read_bytes()
        got = render(case).encode("utf-8")
        if got != want:
            failed += 1
            print("MISMATCH %s\n  python: %r\n  golden: %r" % (case["name"], got, want))
    print("%d cases, %d mismatches" % (len(cases), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
