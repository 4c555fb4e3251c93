#!/usr/bin/env bash
# Stop the Slurm test cluster that scripts/slurm/start.sh started in STATE_DIR.
# Only processes named by STATE_DIR's pid files are signalled, so other
# clusters (or a system munged/slurm) on the machine are left alone.
set -euo pipefail

[[ $# -eq 1 ]] || { echo "usage: $0 STATE_DIR" >&2; exit 2; }
S=$(cd "$1" && pwd)
export SLURM_CONF=$S/etc/slurm.conf

# Cancel leftover jobs first: slurmstepd survives slurmd, and its job
# processes would otherwise outlive the cluster.
if [[ -f $SLURM_CONF ]] && jobs=$(timeout 10 squeue -h -o %A 2>/dev/null) && [[ -n $jobs ]]; then
  # shellcheck disable=SC2086  # one argument per job id
  timeout 10 scancel $jobs 2>/dev/null || true
  for _ in $(seq 10); do [[ -z $(timeout 5 squeue -h 2>/dev/null) ]] && break; sleep 1; done
fi

# Running = exists and not a zombie (PID 1 in containers may reap late).
running() { [[ $(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) == [^Z]* ]]; }
rc=0
# slurmd before slurmctld, munged last: daemons still need auth while exiting.
for pidfile in "$S/run/slurmd.pid" "$S/run/slurmctld.pid" "$S/munge/munged.pid"; do
  [[ -s $pidfile ]] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || { rm -f "$pidfile"; continue; }   # already gone
  for _ in $(seq 50); do running "$pid" || break; sleep 0.2; done
  if running "$pid"; then
    echo "slurm/stop.sh: $pidfile ($pid) ignored SIGTERM for 10s; sending SIGKILL" >&2
    kill -9 "$pid" 2>/dev/null || true
    sleep 0.5
    running "$pid" && { echo "slurm/stop.sh: $pid still alive" >&2; rc=1; }
  fi
  rm -f "$pidfile"
done
exit "$rc"
