# free-port.sh — free_port, sourced (not run) by dendrite.sh and postgres.sh, which start servers
# on a port of their own:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"
#   port="$(free_port)"
#
# free_port prints a TCP port on 127.0.0.1 that nothing listens on: one the kernel hands out
# (python3), else a random high port without a listener. It fails (status 1, a message naming the
# sourcing script) when it finds none; under set -e the assignment above then ends the script.
# The port is free when printed, not reserved: a caller retries with another when binding fails.

free_port() {
  local py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1; then
      "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' && return
    fi
  done
  # No Python: pick random high ports until one has no listener.
  local p i
  for i in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  printf '%s: failed to find a free port\n' "${0##*/}" >&2
  return 1
}
