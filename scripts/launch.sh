#!/usr/bin/env bash
# Starts N local ranks of a command with exactly torchrun's variables
# (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE),
# because Debian's torchrun (python3-torch 1.13) crashes under Python 3.11
# before starting anything. Elsewhere the same program runs under
#   torchrun --nproc_per_node=N --no_python ./train ...
#
#   scripts/launch.sh --nproc N [--nnodes M --node-rank R --master-addr A] [--port P] -- CMD ARGS...
#
# One node: the port is a free one the kernel picks. Several nodes: run it
# on each with its --node-rank and the same --master-addr (node 0's
# address, reachable from the others) and --port (default 29500, as
# torchrun's).
# Rank 0's output passes through; other ranks' is prefixed "[rank K]".
# If one rank fails, the others are stopped; the exit code is the first
# failure's (2 for a usage error of launch.sh itself). SIGTERM and SIGUSR1
# are passed on to every rank (the trainers then checkpoint and exit 75; see
# docs/TRAINING.md). Ctrl-C reaches every rank as it would a lone process
# (the trainers checkpoint at the next step and exit 130; a second Ctrl-C
# stops them at once): in a terminal the ranks get it from the terminal
# itself, and a SIGINT sent to launch.sh alone (kill -INT, no terminal) is
# passed on. launch.sh waits for the ranks and exits with their code; a
# third Ctrl-C kills them.
# Each rank also gets IMAGEPACK_LAUNCH_CMD: launch.sh's own words as run, up
# to and with "--", shell-quoted ("scripts/launch.sh --nproc 2 --"), which
# the trainers put before the command they print to continue an
# interrupted run, so that it resumes on as many processes.
set -uo pipefail
USAGE="usage: launch.sh --nproc N [--nnodes M --node-rank R --master-addr A] [--port P] -- CMD ARGS..."
usage_error() { echo "launch.sh: $1" >&2; echo "$USAGE" >&2; exit 2; }
NPROC=1 NNODES=1 NODE_RANK=0 ADDR="" PORT=""
words=("$0")  # this command line up to "--", for IMAGEPACK_LAUNCH_CMD
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help)
      sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
      exit 0;;
    --nproc|--nnodes|--node-rank|--master-addr|--port)
      [ $# -ge 2 ] || usage_error "$1 needs a value"
      case $1 in
        --nproc) NPROC=$2;; --nnodes) NNODES=$2;; --node-rank) NODE_RANK=$2;;
        --master-addr) ADDR=$2;; --port) PORT=$2;;
      esac
      words+=("$1" "$2")
      shift 2;;
    --) shift; break;;
    -*) usage_error "unknown option $1";;
    *) usage_error "put -- before the command, e.g. launch.sh --nproc $NPROC -- $*";;
  esac
done
[ $# -gt 0 ] || usage_error "no command after --"
for opt in "--nproc $NPROC" "--nnodes $NNODES" "--node-rank $NODE_RANK"; do
  [[ ${opt#* } =~ ^[0-9]+$ ]] || usage_error "${opt% *} '${opt#* }' is not a number"
done
# The command is found before any rank starts (each would fail alike).
command -v -- "$1" >/dev/null 2>&1 || usage_error "$1: no such command (not a file, nor on PATH)"
[ "$NPROC" -ge 1 ] || usage_error "--nproc must be at least 1"
[ "$NODE_RANK" -lt "$NNODES" ] || usage_error "--node-rank $NODE_RANK must be < --nnodes $NNODES"
[ -z "$PORT" ] || [[ $PORT =~ ^[0-9]+$ ]] || usage_error "--port '$PORT' is not a number"
if [ -z "$ADDR" ]; then
  [ "$NNODES" -eq 1 ] || usage_error "--nnodes $NNODES needs --master-addr (node 0's address)"
  ADDR=127.0.0.1
fi
if [ -z "$PORT" ] && [ "$NNODES" -gt 1 ]; then
  PORT=29500  # every node must agree on it
elif [ -z "$PORT" ]; then  # a free port, chosen by the kernel
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
WORLD=$((NPROC * NNODES))
printf -v LAUNCH_CMD '%q ' "${words[@]}"
LAUNCH_CMD+="--"
pids=()
interrupts=0
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
forward() { for p in "${pids[@]}"; do kill -s "$1" "$p" 2>/dev/null; done; }
# Whether this script's process group is its terminal's foreground one: a
# Ctrl-C there went to every rank already (they are in the same group).
in_foreground() {
  local stat fields
  stat=$(cat /proc/$$/stat 2>/dev/null) || return 1
  read -r -a fields <<< "${stat##*) }"  # state ppid pgrp session tty_nr tpgid ...
  [ "${fields[5]}" -gt 0 ] && [ "${fields[5]}" = "${fields[2]}" ]
}
on_interrupt() {
  interrupts=$((interrupts + 1))
  if [ $interrupts -ge 3 ]; then
    forward KILL
  elif ! in_foreground; then
    forward INT
  fi
}
trap on_interrupt INT
trap 'forward TERM' TERM
trap 'forward USR1' USR1
for ((i = 0; i < NPROC; i++)); do
  rank=$((NODE_RANK * NPROC + i))
  # "trap - INT": the rank takes Ctrl-C as a lone process would (a
  # background command of a script otherwise starts with SIGINT ignored).
  if [ "$rank" -eq 0 ]; then
    (trap - INT; MASTER_ADDR=$ADDR MASTER_PORT=$PORT RANK=$rank WORLD_SIZE=$WORLD LOCAL_RANK=$i \
      LOCAL_WORLD_SIZE=$NPROC IMAGEPACK_LAUNCH_CMD=$LAUNCH_CMD exec "$@") &
  else  # $! is the rank itself (signals reach it), its output goes through sed
    (trap - INT; MASTER_ADDR=$ADDR MASTER_PORT=$PORT RANK=$rank WORLD_SIZE=$WORLD LOCAL_RANK=$i \
      LOCAL_WORLD_SIZE=$NPROC IMAGEPACK_LAUNCH_CMD=$LAUNCH_CMD exec "$@") > >(sed -u "s/^/[rank $rank] /" >&2) 2>&1 &
  fi
  pids+=($!)
done
rc=0
while [ ${#pids[@]} -gt 0 ]; do
  done_pid=""
  wait -n -p done_pid "${pids[@]}"; r=$?
  [ -n "${done_pid:-}" ] || continue  # a trapped signal interrupted the wait
  pids=($(for p in "${pids[@]}"; do [ "$p" != "$done_pid" ] && echo "$p"; done))
  if [ $r -ne 0 ] && [ $rc -eq 0 ]; then
    rc=$r
    # A rank that stopped on request (75: checkpointed; 130: Ctrl-C) does so
    # together with the others: they are left to finish.
    [ $r -eq 75 ] || [ $r -eq 130 ] || cleanup
  fi
done
wait  # the output filters
exit $rc
