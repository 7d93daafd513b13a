#!/usr/bin/env bash
# demo.sh — run hookroom end to end on this machine, from nothing:
#   1. builds and starts a local Dendrite homeserver on 127.0.0.1 (scripts/dendrite.sh),
#   2. creates a person's account and prints its login,
#   3. writes a demo config.yaml when there is none (the offline `echo` model, unless an
#      OpenAI-compatible endpoint or an Anthropic key is given through the environment); an existing one,
#      with the operator's edits, is kept,
#   4. builds and runs hookroom, which creates its router and agent accounts and the lobby room
#      and invites the person, and says "hookroom is ready" once every account caught up.
# Then log in with any Matrix client (Element, nheko, gomuks, …) at the printed URL.
# hookroom reloads config.yaml when it is saved; `rm DIR/config.yaml` brings the default back.
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
#   ANTHROPIC_API_KEY       use Anthropic's Messages API instead (when no OpenAI setting is given),
#   HOOKROOM_ANTHROPIC_MODEL  with HOOKROOM_ANTHROPIC_MODEL (default claude-sonnet-4-5).
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

if [[ -t 2 && -z "${NO_COLOR:-}" ]]; then
  say() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }
else
  say() { printf 'demo: %s\n' "$*" >&2; }
fi

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
  # hookroom's own exit status does not matter here (and must not trip set -e in this trap:
  # a hookroom stopped before it handles SIGTERM exits with 143).
  if [[ -n "${HOOKROOM_PID:-}" ]] && kill "$HOOKROOM_PID" 2>/dev/null; then
    wait "$HOOKROOM_PID" 2>/dev/null || true
  fi
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

CONFIG="$DEMO/config.yaml"
if [[ -s "$CONFIG" ]]; then
  MODEL_NOTE="as set in config.yaml"
  CONFIG_NOTE="kept as you left it (rm it for the default)"
else
  if [[ -n "${OPENAI_API_KEY:-}" || -n "${HOOKROOM_OPENAI_BASE_URL:-}" ]]; then
    MODEL_NOTE="an OpenAI-compatible model at ${HOOKROOM_OPENAI_BASE_URL:-https://api.openai.com/v1}"
    MODELS=$(cat <<'YAML'
models:
  default:
    provider: openai
    base_url: ${HOOKROOM_OPENAI_BASE_URL:-https://api.openai.com/v1}
    api_key: ${OPENAI_API_KEY:-}
    model: ${HOOKROOM_OPENAI_MODEL:-gpt-4o-mini}
YAML
)
  elif [[ -n "${ANTHROPIC_API_KEY:-}" ]]; then
    MODEL_NOTE="Anthropic's ${HOOKROOM_ANTHROPIC_MODEL:-claude-sonnet-4-5}"
    MODELS=$(cat <<'YAML'
models:
  default:
    provider: anthropic
    api_key: ${ANTHROPIC_API_KEY:-}
    model: ${HOOKROOM_ANTHROPIC_MODEL:-claude-sonnet-4-5}
YAML
)
  else
    MODEL_NOTE="the offline echo model (set OPENAI_API_KEY, HOOKROOM_OPENAI_BASE_URL or ANTHROPIC_API_KEY for a real one)"
    MODELS=$(cat <<'YAML'
models:
  default:
    provider: echo
YAML
)
  fi
  # Written once: later runs keep the operator's edits. The homeserver URL and the
  # registration secret come from the environment demo.sh sets (see the banner).
  cat > "$CONFIG.tmp" <<YAML
# Written by scripts/demo.sh, which keeps your edits: delete this file to get the default
# back. hookroom reloads it when you save it. See config.example.yaml for every key.
data_dir: ./data
log:
  level: info
  format: console
matrix:
  homeserver: \${HOOKROOM_DEMO_HOMESERVER}
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
  mv "$CONFIG.tmp" "$CONFIG"
  CONFIG_NOTE="written now; your edits are kept across restarts"
fi

# The commands that read the demo config outside `run`. The registration secret stays in
# the homeserver's env file: the command reads it from there, it is never printed.
CHECK_ENV=". '$HS/env' && export HOOKROOM_DEMO_SHARED_SECRET=\"\$SECRET\" HOOKROOM_DEMO_HOMESERVER=\"\$URL\""
login_details() {
  cat <<EOF2
  │ homeserver   $URL   (server name: $SERVER_NAME)
  │ your login   $PERSON_ID   password: $(cat "$DEMO/person.password")
EOF2
}

cat >&2 <<EOF2

  ┌─ hookroom demo ───────────────────────────────────────────────────────────
$(login_details)
  │ model        $MODEL_NOTE
  │ config       $CONFIG
  │              $CONFIG_NOTE
  │
  │ Log in with any Matrix client using the homeserver URL above, accept the
  │ invite to "hookroom lobby" (#lobby:$SERVER_NAME) and write: @assistant hello
  │ Wait for "hookroom is ready" below first.
  │
  │ Check the config or list its hooks from another shell:
  │   $CHECK_ENV
  │   '$DEMO/hookroom' check --config '$CONFIG'
  │   '$DEMO/hookroom' hooks --config '$CONFIG'
  │
  │ Ctrl-C stops hookroom and the homeserver; rm -rf $DEMO starts over.
  └───────────────────────────────────────────────────────────────────────────

EOF2

# watch_log copies hookroom's log from stdin to stdout and says when hookroom is ready:
# after "hookroom is running", once each of its accounts has caught up with the homeserver
# (messages sent from then on are answered). It outlives Ctrl-C to read hookroom's last lines.
watch_log() {
  trap '' INT TERM
  local line accounts=-1 caught=0 said=0
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if [[ $accounts -lt 0 && $line == *"hookroom is running"* && $line =~ accounts[\":=]+([0-9]+) ]]; then
      accounts=${BASH_REMATCH[1]}
    fi
    [[ $line == *"account caught up"* ]] && caught=$((caught + 1))
    if [[ $said == 0 && $accounts -ge 0 && $caught -ge $accounts ]]; then
      said=1
      cat <<EOF2

  ┌─ demo: hookroom is ready ─────────────────────────────────────────────────
$(login_details)
  │ Accept the invite to #lobby:$SERVER_NAME and write: @assistant hello
  └───────────────────────────────────────────────────────────────────────────

EOF2
    fi
  done
}

export HOOKROOM_DEMO_SHARED_SECRET="$SECRET" HOOKROOM_DEMO_HOMESERVER="$URL"
if [[ $SMOKE == 1 ]]; then
  LOG="$DEMO/hookroom.log"
  "$DEMO/hookroom" run --config "$CONFIG" > >(watch_log > "$LOG") 2>&1 &
  HOOKROOM_PID=$!
  for _ in $(seq 1 600); do
    if grep -q "demo: hookroom is ready" "$LOG"; then
      say "smoke test: hookroom is ready"; exit 0
    fi
    kill -0 "$HOOKROOM_PID" 2>/dev/null || { cat "$LOG" >&2; say "smoke test: hookroom exited"; exit 1; }
    sleep 0.1
  done
  cat "$LOG" >&2; say "smoke test: hookroom was not ready within 60s"; exit 1
fi
"$DEMO/hookroom" run --config "$CONFIG" > >(watch_log >&2) 2>&1 &
HOOKROOM_PID=$!
wait "$HOOKROOM_PID"
