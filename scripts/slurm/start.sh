#!/usr/bin/env bash
# Start a throwaway single-node Slurm cluster (munged + slurmctld + slurmd)
# whose config, state, logs, pid files and munge socket all live in STATE_DIR.
# Nothing under /etc is written: every Slurm tool honours $SLURM_CONF, and the
# munge socket path reaches the daemons and clients through AuthInfo.
#
# Usage: eval "$(scripts/slurm/start.sh STATE_DIR)"   # prints export lines
# Stop with scripts/slurm/stop.sh STATE_DIR. Needs root (apt, daemons as root).
# Env: SLURM_TEST_PORT (default 6817; slurmd uses +1), SLURM_TEST_GPUS (>=1, default 2).
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
mkdir -p "$1"
S=$(cd "$1" && pwd)        # absolute: slurm.conf paths must not be relative
CONF=$S/etc/slurm.conf
NODE=$(hostname -s)
PORT=${SLURM_TEST_PORT:-6817}
GPUS=${SLURM_TEST_GPUS:-2}

exports() { echo "export SLURM_CONF=$CONF"; }
# Pid in file $1 is running (zombies count as dead: PID 1 may reap late).
alive() { [[ -s $1 ]] && [[ $(cut -d' ' -f3 "/proc/$(cat "$1")/stat" 2>/dev/null) == [^Z]* ]]; }
die() {
  echo "slurm/start.sh: $*" >&2
  for f in "$S"/log/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}

# Already up for this STATE_DIR: only hand the environment back.
if alive "$S/run/slurmctld.pid" && alive "$S/run/slurmd.pid" &&
   SLURM_CONF=$CONF sinfo -h >/dev/null 2>&1; then
  exports; exit 0
fi

# Install once; apt output goes to a log so stdout stays eval-able.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
   ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  pkgs=(slurmctld slurmd slurm-client munge)
  # Retry after apt-get update: a fresh container may have no package lists.
  { apt-get install -y -q --no-install-recommends "${pkgs[@]}" ||
    { apt-get update -q && apt-get install -y -q --no-install-recommends "${pkgs[@]}"; }
  } >"$S/apt.log" 2>&1 || { tail -n 20 "$S/apt.log" >&2; die "package install failed"; }
fi

# Another cluster on our ports would answer our sinfo and fake success.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if ! alive "$S/run/slurmctld.pid" && ! alive "$S/run/slurmd.pid"; then
  for p in "$PORT" "$((PORT + 1))"; do
    in_use "$p" && die "port $p already in use; set SLURM_TEST_PORT to a free port"
  done
fi

mkdir -p "$S"/{etc,state,spool,log,run,munge,dev}
chmod 700 "$S/munge"         # munged refuses group/other-writable dirs

# Private munge instance: own key and socket, so we never depend on (or
# disturb) a system munged. The key only has to match between our daemons.
if [[ ! -s $S/munge/munge.key ]]; then
  if [[ -r /etc/munge/munge.key ]]; then cp /etc/munge/munge.key "$S/munge/munge.key"
  else dd if=/dev/urandom of="$S/munge/munge.key" bs=1024 count=1 status=none; fi
  chmod 600 "$S/munge/munge.key"
fi
SOCK=$S/munge/munge.socket
if ! alive "$S/munge/munged.pid"; then
  munged --socket="$SOCK" --key-file="$S/munge/munge.key" --pid-file="$S/munge/munged.pid" \
    --log-file="$S/log/munged.log" --seed-file="$S/munge/munged.seed" --force \
    || die "munged failed to start"
fi

CPUS=$(nproc)
cat >"$CONF" <<EOF
ClusterName=repro-test
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
# Our own munge socket; used by daemons and by sbatch/squeue alike.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
# No cgroups/systemd in containers: plain /proc process tracking, no binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
# cons_tres is what makes --gres=gpu:N a schedulable per-job resource.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
# Quick scheduling for tests; bring the node back even after a crash.
SchedulerParameters=sched_interval=2
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
# Fake GPUs. Slurm 22.05 drops file-less gpu gres ("Removing file-less GPU"),
# and File= must be a char device, so point nvidiaN symlinks at /dev/null.
# Side effect: tasks get CUDA_VISIBLE_DEVICES=<index>, like on a real node.
for ((i = 0; i < GPUS; i++)); do ln -sfn /dev/null "$S/dev/nvidia$i"; done
cat >"$S/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=$S/dev/nvidia[0-$((GPUS - 1))]
EOF
# Jobs use no cgroups (linuxproc + task/none), but slurmd 22.05 still loads a
# cgroup plugin at startup and reads this; autodetect works in containers.
echo "CgroupPlugin=autodetect" >"$S/etc/cgroup.conf"

export SLURM_CONF=$CONF
# -c: forget stale jobs from a previous run in the same STATE_DIR.
alive "$S/run/slurmctld.pid" || slurmctld -c || die "slurmctld failed to start"
alive "$S/run/slurmd.pid" || slurmd || die "slurmd failed to start"

for i in $(seq 60); do
  # A daemon that died (e.g. port taken) must fail fast, and must not let
  # sinfo report some other cluster listening on the same port as ours.
  if ((i > 3)); then
    for d in slurmctld slurmd; do alive "$S/run/$d.pid" || die "$d exited"; done
  fi
  state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)
  [[ $state == idle ]] && alive "$S/run/slurmctld.pid" && alive "$S/run/slurmd.pid" &&
    { exports; exit 0; }
  sleep 1
done
die "node $NODE not idle after 60s (sinfo state: '${state:-none}')"
