#!/bin/sh
# Test-side (kernel tests, harness/kill-agent.ts): put on the killable agent's PATH under the name of
# a command the agent runs (mount), it runs the real command ($PAUSE_REAL), except for the one
# command line $PAUSE_COMMAND_LINE: there it writes $PAUSE_MARKER (JSON: its pid, and the agent's,
# its parent) and waits for good, so that the agent can be SIGKILLed exactly at that step.
# Nothing of it is in the agent or its image.
if [ "$*" = "$PAUSE_COMMAND_LINE" ]; then
  printf '{"pid":%s,"agent":%s}\n' "$$" "$PPID" > "$PAUSE_MARKER.tmp" && mv "$PAUSE_MARKER.tmp" "$PAUSE_MARKER"
  exec sleep 3600
fi
exec "$PAUSE_REAL" "$@"
