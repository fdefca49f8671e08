#!/usr/bin/env bash
# supervise.sh OWNER_PID LOGFILE -- COMMAND [ARGS...]
# Runs COMMAND and ends it (TERM, then KILL) as soon as OWNER_PID is gone, so that no test-bed
# process survives a test runner that was killed, even with SIGKILL. TERM/INT on this script
# end COMMAND the same way.
owner=$1; log=$2; shift 3
"$@" >>"$log" 2>&1 &
child=$!
stop() {
  kill -TERM "$child" 2>/dev/null
  for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$child" 2>/dev/null || exit 0; sleep 0.2; done
  kill -KILL "$child" 2>/dev/null
  exit 0
}
trap stop TERM INT
while kill -0 "$owner" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.5 & wait $!; done
kill -0 "$child" 2>/dev/null && stop
wait "$child"
