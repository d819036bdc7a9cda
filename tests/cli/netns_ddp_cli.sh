#!/usr/bin/env bash
# Two nodes on one machine: two network namespaces joined by a veth pair,
# 10.77.0.1/24 and 10.77.0.2/24, with no route out of them. One rank in
# each, started by scripts/launch.sh --nnodes 2 --node-rank R --master-addr
# 10.77.0.1, meet over Gloo on the veth and train; the final weights equal
# one node's with the same world size (launch.sh --nproc 2), and the
# gradients crossed the veth. Then the namespaces are two Slurm nodes
# (scripts/slurm_cluster.sh: a slurmd in each, slurmctld in the first):
# a preparation array spreads over both and verifies, and
# `sbatch -N 2 -n 2 scripts/slurm_train.sh` (one rank per node, the
# address derived by the trainer) gives the same final weights. The
# cluster is stopped and the namespaces removed at the end, also on
# failure.
# Usage: netns_ddp_cli.sh BINDIR DATADIR SCRIPTSDIR. Exit 77: skipped (named reason).
BIN=$(cd "$1" && pwd)
SCRIPTS=$(cd "$3" && pwd)
ROOT=$(cd "$SCRIPTS/.." && pwd)
TRAIN=$(cd "$BIN/.." && pwd)/trainer/train
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_data.sh"
NS_A=imagepack-$$-a
NS_B=imagepack-$$-b
pids=()
CLUSTER=""
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  [ -n "$CLUSTER" ] && "$SCRIPTS/slurm_cluster.sh" stop "$CLUSTER" >/dev/null 2>&1 && rm -rf "$CLUSTER"
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: network namespaces need root"
  exit 77
fi
if ! ip netns add "$NS_A" 2>"$WORK/netns.err"; then
  echo "SKIP: cannot make a network namespace here: $(cat "$WORK/netns.err")"
  exit 77
fi
T0=$SECONDS
ip netns add "$NS_B"
ip link add veth0 netns "$NS_A" type veth peer name veth0 netns "$NS_B"
ip -n "$NS_A" addr add 10.77.0.1/24 dev veth0
ip -n "$NS_B" addr add 10.77.0.2/24 dev veth0
for ns in "$NS_A" "$NS_B"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set veth0 up
done

# Each namespace reaches the other and nothing else.
for ns in "$NS_A" "$NS_B"; do
  run route$ns ip -n "$ns" -4 route show
  expect_true "[ \"\$(cat '$WORK/route$ns.out')\" = '10.77.0.0/24 dev veth0 proto kernel scope link src $(ip -n "$ns" -4 -o addr show veth0 | awk '{print $4}' | cut -d/ -f1) ' ]" \
    "$ns: routes other than the veth's subnet: $(cat "$WORK/route$ns.out")"
done
run out ip netns exec "$NS_B" "$PY" -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.connect(('192.0.2.1', 9)); print('routed')
except OSError as e:
    print('unreachable', e.errno)"
expect_in out.out "unreachable 101"

tiny_classes "$WORK/tiny" "$BIN"
DB=$WORK/tiny/tiny.lmdb
rm -rf "$WORK/tiny/val.lmdb" && cp -a "$DB" "$WORK/tiny/val.lmdb"  # the trainers refuse --val inside --data
TR=(--data "$DB" --val "$WORK/tiny/val.lmdb" --arch small_cnn --size 8 --lr 0.05 --seed 3 --threads 1 --loader-threads 1
    --batch-size 8 --epochs 2 --print-freq 1000)
run one timeout 120 "$SCRIPTS/launch.sh" --nproc 2 -- "$TRAIN" "${TR[@]}" --output "$WORK/one"
expect_rc 0 "one node, 2 ranks" one
want=$(sed -n 's/^final weights digest \([0-9a-f]*\)$/\1/p' "$WORK/one.out")

tx_bytes() { ip -n "$1" -s -j link show veth0 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["bytes"])'; }
tx_a0=$(tx_bytes "$NS_A")
tx_b0=$(tx_bytes "$NS_B")
for r in 0 1; do
  ns=$NS_A
  [ $r -eq 1 ] && ns=$NS_B
  ip netns exec "$ns" timeout 120 "$SCRIPTS/launch.sh" --nnodes 2 --node-rank $r --master-addr 10.77.0.1 --nproc 1 \
    -- "$TRAIN" "${TR[@]}" --output "$WORK/two" >"$WORK/node$r.out" 2>"$WORK/node$r.err" &
  pids+=($!)
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
pids=()
expect_true "[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]" "two nodes: exit codes $rc0 and $rc1 ($(tail -n 3 "$WORK/node0.err" "$WORK/node1.err"))"
expect_in node0.out "2 process(es) [gloo, torchrun]"
got=$(sed -n 's/^final weights digest \([0-9a-f]*\)$/\1/p' "$WORK/node0.out")
expect_true "[ ${#want} -eq 16 ] && [ '$got' = '$want' ]" "final weights: two namespaces $got, one node $want"
# Each step all-reduces every gradient: at 2 ranks, each sends about the
# model's size per step. At least half of it must have crossed the veth
# (2 epochs of 32 steps).
params=$(sed -n 's/^=> small_cnn (\([0-9]*\) parameters).*/\1/p' "$WORK/node0.out")
tx_a=$(($(tx_bytes "$NS_A") - tx_a0))
tx_b=$(($(tx_bytes "$NS_B") - tx_b0))
floor=$((params * 4 * 64 / 2))
expect_true "[ -n '$params' ] && [ $tx_a -ge $floor ] && [ $tx_b -ge $floor ]" \
  "bytes over the veth: $tx_a from node 0, $tx_b from node 1, expected at least $floor each ($params parameters)"
echo "netns_ddp_cli: launch.sh on two nodes, $tx_a + $tx_b bytes over the veth; $((SECONDS - T0)) s"

# --- The two namespaces as a two-node Slurm.
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "netns_ddp_cli: no two-node Slurm part: slurm-wlm or munge not installed (scripts/setup.sh)"
else
  T1=$SECONDS
  CLUSTER=$(mktemp -d /tmp/imagepack-slurm-XXXXXX)
  # The namespaces' own port space: slurmctld's default port is free there.
  run up env IMAGEPACK_SLURM_NODES="n1=10.77.0.1@$NS_A n2=10.77.0.2@$NS_B" "$SCRIPTS/slurm_cluster.sh" start "$CLUSTER"
  expect_rc 0 "a two-node Slurm over the namespaces" up
  export SLURM_CONF=$CLUSTER/slurm.conf
  in_a() { ip netns exec "$NS_A" "$@"; }
  run sinfo in_a sinfo -h -N -o '%N %T'
  expect_in sinfo.out "n1 idle"
  expect_in sinfo.out "n2 idle"
  cd "$ROOT" || exit 1
  IMAGEPACK_BUILD_DIR=$(cd "$BIN/.." && pwd)
  export IMAGEPACK_BUILD_DIR
  tiny_imagenet "$WORK/imagenet"
  P=$(in_a sbatch --parsable --array=0-1 -o "$WORK/p-%A_%a.out" scripts/slurm_prepare.sbatch "$WORK/imagenet" "$WORK/o" --max-size 32)
  J=$(in_a sbatch --parsable -N 2 -n 2 -o "$WORK/slurm.out" scripts/slurm_train.sh "${TR[@]}" --output "$WORK/slurm")
  end=$((SECONDS + 150))
  while [ $SECONDS -lt $end ] && [ -n "$(in_a squeue -h -j "$P,$J" -o %i)" ]; do sleep 0.3; done
  expect_true "[ -z \"\$(in_a squeue -h -j $P,$J -o %i)\" ]" "the Slurm jobs ended within 150 s"
  # One array task on each node (each asks for a whole node).
  nodes=$(in_a scontrol -o show job "$P" | grep -o ' NodeList=[a-z0-9]*' | sort | tr -d ' ' | tr '\n' ' ')
  expect_true "[ '$nodes' = 'NodeList=n1 NodeList=n2 ' ]" "array tasks ran on: $nodes"
  run pv "$BIN/verify_db" "$WORK/o/train-0-of-2.lmdb" "$WORK/o/train-1-of-2.lmdb" --against "$WORK/imagenet/train" -q
  expect_rc 0 "the two nodes' shards together are the source" pv
  expect_in slurm.out "2 task(s) on n[1-2]"
  expect_in slurm.out "2 process(es) [gloo, slurm]"
  got=$(sed -n 's/^final weights digest \([0-9a-f]*\)$/\1/p' "$WORK/slurm.out")
  expect_true "[ '$got' = '$want' ]" "final weights: two Slurm nodes $got, one node $want"
  run down "$SCRIPTS/slurm_cluster.sh" stop "$CLUSTER"
  expect_rc 0 "the two-node Slurm stops" down
  rm -rf "$CLUSTER"
  CLUSTER=""
  echo "netns_ddp_cli: two-node Slurm (prepare array, training) in $((SECONDS - T1)) s"
fi

cleanup_check() { ! ip netns list | grep -q -e "$NS_A" -e "$NS_B"; }
ip netns del "$NS_A"
ip netns del "$NS_B"
expect_true cleanup_check "the namespaces are gone"
finish
