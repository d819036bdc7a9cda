# Helpers for the command-line tests: real processes, checked on exit code,
# stdout and stderr. Source this file; every check failure counts, and
# `finish` prints "N passed, N failed" and exits non-zero if any failed.
set -u
PASS=0
FAIL=0
WORK=$(mktemp -d /tmp/imagepack-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
PY=/usr/bin/python3

ok() { PASS=$((PASS + 1)); }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*" >&2; }

# run NAME CMD...: runs CMD, keeps $WORK/NAME.out, .err and the exit code in RC.
run() {
  local name=$1; shift
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  RC=$?
}
expect_rc() { [ "$RC" -eq "$1" ] && ok || bad "$2: exit code $RC, expected $1 ($(head -c 400 "$WORK/$3.err"))"; }
expect_in() { grep -qF -- "$2" "$WORK/$1" && ok || bad "$1 does not contain '$2': $(head -c 600 "$WORK/$1")"; }
expect_not_in() { grep -qF -- "$2" "$WORK/$1" && bad "$1 contains '$2'" || ok; }
expect_true() { if eval "$1"; then ok; else bad "$2"; fi; }

# The name a temporary of PATH would have if process PID of this user, host
# and boot had made it (files.h, "Temporaries"): ".NAME.ipk-tmp.UID.HOST.BOOT.PID".
temp_name() {
  local boot ns
  boot=$(tr -d - </proc/sys/kernel/random/boot_id | cut -c1-8)
  ns=$(stat -L -c %i /proc/self/ns/pid)
  [ "$ns" = 4026531836 ] || boot="${boot}n$(printf %x "$ns")"
  echo "$(dirname "$1")/.$(basename "$1").ipk-tmp.$(id -u).$(hostname | tr . _).$boot.$2"
}

finish() {
  echo "$PASS passed, $FAIL failed"
  [ "$FAIL" -eq 0 ]
}
