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
# failure's. SIGTERM and SIGUSR1 are passed on to every rank (the trainer
# then checkpoints and exits 75; see docs/TRAINING.md); Ctrl-C stops them.
set -uo pipefail
NPROC=1 NNODES=1 NODE_RANK=0 ADDR="" PORT=""
while [ $# -gt 0 ]; do
  case $1 in
    --nproc) NPROC=$2; shift 2;;
    --nnodes) NNODES=$2; shift 2;;
    --node-rank) NODE_RANK=$2; shift 2;;
    --master-addr) ADDR=$2; shift 2;;
    --port) PORT=$2; shift 2;;
    --) shift; break;;
    *) echo "launch.sh: unknown option $1" >&2; exit 2;;
  esac
done
[ $# -gt 0 ] || { echo "usage: launch.sh --nproc N [--port P] -- CMD ARGS..." >&2; exit 2; }
for v in "$NPROC" "$NNODES" "$NODE_RANK"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "launch.sh: '$v' is not a number" >&2; exit 2; }
done
[ "$NODE_RANK" -lt "$NNODES" ] || { echo "launch.sh: --node-rank $NODE_RANK must be < --nnodes $NNODES" >&2; exit 2; }
if [ -z "$ADDR" ]; then
  [ "$NNODES" -eq 1 ] || { echo "launch.sh: --nnodes $NNODES needs --master-addr (node 0's address)" >&2; exit 2; }
  ADDR=127.0.0.1
fi
if [ -z "$PORT" ] && [ "$NNODES" -gt 1 ]; then
  PORT=29500  # every node must agree on it
elif [ -z "$PORT" ]; then  # a free port, chosen by the kernel
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
WORLD=$((NPROC * NNODES))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
forward() { for p in "${pids[@]}"; do kill -s "$1" "$p" 2>/dev/null; done; }
trap 'cleanup; exit 130' INT
trap 'forward TERM' TERM
trap 'forward USR1' USR1
for ((i = 0; i < NPROC; i++)); do
  rank=$((NODE_RANK * NPROC + i))
  if [ "$rank" -eq 0 ]; then
    MASTER_ADDR=$ADDR MASTER_PORT=$PORT RANK=$rank WORLD_SIZE=$WORLD LOCAL_RANK=$i LOCAL_WORLD_SIZE=$NPROC "$@" &
  else  # $! is the rank itself (signals reach it), its output goes through sed
    MASTER_ADDR=$ADDR MASTER_PORT=$PORT RANK=$rank WORLD_SIZE=$WORLD LOCAL_RANK=$i LOCAL_WORLD_SIZE=$NPROC "$@" \
      > >(sed -u "s/^/[rank $rank] /" >&2) 2>&1 &
  fi
  pids+=($!)
done
rc=0
while [ ${#pids[@]} -gt 0 ]; do
  done_pid=""
  wait -n -p done_pid "${pids[@]}"; r=$?
  [ -n "${done_pid:-}" ] || continue  # a trapped signal interrupted the wait
  pids=($(for p in "${pids[@]}"; do [ "$p" != "$done_pid" ] && echo "$p"; done))
  if [ $r -ne 0 ] && [ $rc -eq 0 ]; then rc=$r; cleanup; fi
done
wait  # the output filters
exit $rc
