#!/usr/bin/env bash
# demo.sh — run hookroom end to end on this machine, from nothing:
#   1. builds and starts a local Dendrite homeserver on 127.0.0.1 (scripts/dendrite.sh),
#   2. creates a person's account and prints its login,
#   3. writes a demo config.yaml (the offline `echo` model, unless an OpenAI-compatible
#      endpoint is configured through the environment),
#   4. builds and runs hookroom, which creates its router and agent accounts and the lobby room
#      and invites the person.
# Then log in with any Matrix client (Element, nheko, gomuks, …) at the printed URL.
#
#   ./scripts/demo.sh            run until Ctrl-C (the homeserver is stopped too)
#   ./scripts/demo.sh --smoke    start everything, check that hookroom comes up, stop (used by the tests)
#
# Environment:
#   HOOKROOM_DEMO_DIR       where the demo keeps its state (default ./.demo); delete it to start over
#   HOOKROOM_DEMO_PORT      homeserver port (default 8008)
#   OPENAI_API_KEY          use a real model: with HOOKROOM_OPENAI_BASE_URL (default
#   HOOKROOM_OPENAI_BASE_URL  https://api.openai.com/v1) and HOOKROOM_OPENAI_MODEL (default
#   HOOKROOM_OPENAI_MODEL     gpt-4o-mini). Any OpenAI-compatible server works (Ollama, vLLM, …);
#                           setting HOOKROOM_OPENAI_BASE_URL alone is enough for local servers.
set -euo pipefail
umask 077
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

SMOKE=0
[[ "${1:-}" == "--smoke" ]] && SMOKE=1
DEMO="${HOOKROOM_DEMO_DIR:-$ROOT/.demo}"
PORT="${HOOKROOM_DEMO_PORT:-8008}"
HS="$DEMO/homeserver"
mkdir -p "$DEMO"
DEMO="$(cd "$DEMO" && pwd)"
HS="$DEMO/homeserver"

say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }

say "building hookroom"
go build -tags goolm -o "$DEMO/hookroom" ./cmd/hookroom

if "$ROOT/scripts/dendrite.sh" env "$HS" >/dev/null 2>&1; then
  say "the demo homeserver is already running"
else
  say "starting the homeserver (the first run builds Dendrite: a few minutes)"
  "$ROOT/scripts/dendrite.sh" start "$HS" "$PORT" >/dev/null
fi
# shellcheck disable=SC1091
. "$HS/env"   # URL, SECRET, SERVER_NAME, PID
HS_PID="$PID"
stop_all() {
  [[ -n "${HOOKROOM_PID:-}" ]] && kill "$HOOKROOM_PID" 2>/dev/null && wait "$HOOKROOM_PID" 2>/dev/null
  "$ROOT/scripts/dendrite.sh" stop "$HS" >/dev/null 2>&1 || true
}
trap stop_all EXIT

PERSON=demo
if [[ ! -s "$DEMO/person.password" ]]; then
  head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$DEMO/person.password"
  "$("$ROOT/scripts/dendrite.sh" bin)/create-account" --config "$HS/dendrite.yaml" -url "$URL" \
    -username "$PERSON" -passwordstdin < "$DEMO/person.password" >/dev/null 2>&1 \
    || { rm -f "$DEMO/person.password"; say "failed to create the demo account"; exit 1; }
fi
PERSON_ID="@$PERSON:$SERVER_NAME"

if [[ -n "${OPENAI_API_KEY:-}" || -n "${HOOKROOM_OPENAI_BASE_URL:-}" ]]; then
  MODEL_NOTE="an OpenAI-compatible model at ${HOOKROOM_OPENAI_BASE_URL:-https://api.openai.com/v1}"
  MODELS=$(cat <<YAML
models:
  default:
    provider: openai
    base_url: \${HOOKROOM_OPENAI_BASE_URL:-https://api.openai.com/v1}
    api_key: \${OPENAI_API_KEY:-}
    model: \${HOOKROOM_OPENAI_MODEL:-gpt-4o-mini}
YAML
)
else
  MODEL_NOTE="the offline echo model (set OPENAI_API_KEY or HOOKROOM_OPENAI_BASE_URL for a real one)"
  MODELS=$(cat <<'YAML'
models:
  default:
    provider: echo
YAML
)
fi

cat > "$DEMO/config.yaml" <<YAML
# Written by scripts/demo.sh; see config.example.yaml for every key.
data_dir: ./data
log:
  level: info
  format: console
matrix:
  homeserver: $URL
  server_name: $SERVER_NAME
  registration:
    shared_secret: \${HOOKROOM_DEMO_SHARED_SECRET}
$MODELS
rooms:
  lobby:
    alias: lobby
    name: hookroom lobby
    topic: Talk to the agents here. Mention one (@assistant) or just ask.
    invite: ["$PERSON_ID"]
agents:
  assistant:
    display_name: Assistant
    role: A friendly general helper.
    rooms: [lobby]
authorization:
  global_users: ["$PERSON_ID"]
YAML

cat >&2 <<EOF2

  ┌─ hookroom demo ───────────────────────────────────────────────────────────
  │ homeserver   $URL   (server name: $SERVER_NAME)
  │ your login   $PERSON_ID   password: $(cat "$DEMO/person.password")
  │ model        $MODEL_NOTE
  │ config       $DEMO/config.yaml
  │
  │ Log in with any Matrix client using the homeserver URL above, accept the
  │ invite to "hookroom lobby" (#lobby:$SERVER_NAME) and write: @assistant hello
  │ Ctrl-C stops hookroom and the homeserver; rm -rf $DEMO starts over.
  └───────────────────────────────────────────────────────────────────────────

EOF2

export HOOKROOM_DEMO_SHARED_SECRET="$SECRET"
if [[ $SMOKE == 1 ]]; then
  LOG="$DEMO/hookroom.log"
  "$DEMO/hookroom" run --config "$DEMO/config.yaml" > "$LOG" 2>&1 &
  HOOKROOM_PID=$!
  for _ in $(seq 1 600); do
    if grep -q "hookroom is running" "$LOG"; then
      say "smoke test: hookroom is running"; exit 0
    fi
    kill -0 "$HOOKROOM_PID" 2>/dev/null || { cat "$LOG" >&2; say "smoke test: hookroom exited"; exit 1; }
    sleep 0.1
  done
  cat "$LOG" >&2; say "smoke test: hookroom did not come up within 60s"; exit 1
fi
"$DEMO/hookroom" run --config "$DEMO/config.yaml" &
HOOKROOM_PID=$!
wait "$HOOKROOM_PID"
