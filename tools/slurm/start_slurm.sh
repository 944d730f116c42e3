#!/usr/bin/env bash
# start_slurm.sh — a private single-node Slurm (munged + slurmctld + slurmd) on this machine,
# for dask_ps's HPC tests and examples. Root only; no systemd or cgroups needed.
#
#   start_slurm.sh start     install the packages if missing (and allowed), render slurm.conf,
#                            start munged, slurmctld, slurmd, wait until the node is idle
#   start_slurm.sh stop      cancel every job, end what is left of its job steps (this
#                            instance's slurmstepd processes and their descendants), then stop
#                            the three daemons by the PIDs they recorded in DIR; nothing else
#                            (a shell that only sourced DIR/env.sh is never touched)
#   start_slurm.sh status    sinfo, squeue, and the daemons' PIDs
#   start_slurm.sh install   only install Debian's slurmctld slurmd slurm-client munge
#
# Options (flags, or the environment variables named):
#   --dir DIR        DPS_SLURM_DIR     private folder (state, spool, logs, PIDs, munge socket)
#                                      default: a new folder made with mktemp -d (printed)
#   --port PORT      DPS_SLURM_PORT    slurmctld port            (default: a free port)
#   --slurmd-port P  DPS_SLURMD_PORT   slurmd port               (default: a free port)
#   --cpus N         DPS_SLURM_CPUS    CPUs declared for the node (default: nproc)
#   --mem-mb MB      DPS_SLURM_MEM_MB  memory declared (MB)       (default: 80 % of MemTotal)
#   --no-install     DPS_SLURM_NO_INSTALL=1   never run apt-get
#
# After start, "source DIR/env.sh" exports SLURM_CONF (sinfo, sbatch, srun and dask-jobqueue
# read it). Exit status: 0 done, 1 failed, 3 Slurm cannot run on this machine (not root, no
# apt-get, or the installation failed); the last line on stderr gives the reason.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PACKAGES=(slurmctld slurmd slurm-client munge)
CMD=${1:-}
[ $# -gt 0 ] && shift
DIR=${DPS_SLURM_DIR:-}
PORT=${DPS_SLURM_PORT:-}
SLURMD_PORT=${DPS_SLURMD_PORT:-}
CPUS=${DPS_SLURM_CPUS:-}
MEM_MB=${DPS_SLURM_MEM_MB:-}
NO_INSTALL=${DPS_SLURM_NO_INSTALL:-0}

log() { printf '[start_slurm %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
cannot() { log "CANNOT RUN SLURM HERE: $*"; exit 3; }
print_help() { sed -n '2,/^set -e/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; }
usage() { print_help; exit 0; }
misuse() { print_help; log "ERROR: $*"; exit 1; }  # the help, then the reason as the last line

value() {  # value OPTION ARGS...: the option's value, or a usage error when it has none
  [ $# -ge 2 ] && [ -n "$2" ] && [[ "$2" != --* ]] || misuse "option $1 needs a value"
  printf '%s' "$2"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$(value "$@"); shift 2 ;;
    --port) PORT=$(value "$@"); shift 2 ;;
    --slurmd-port) SLURMD_PORT=$(value "$@"); shift 2 ;;
    --cpus) CPUS=$(value "$@"); shift 2 ;;
    --mem-mb) MEM_MB=$(value "$@"); shift 2 ;;
    --no-install) NO_INSTALL=1; shift ;;
    -h|--help) usage ;;
    *) misuse "unknown option $1" ;;
  esac
done

have_slurm() {
  local c
  for c in slurmctld slurmd sbatch squeue scancel sinfo munge unmunge; do
    command -v "$c" >/dev/null 2>&1 || return 1
  done
  [ -x /usr/sbin/munged ] || command -v munged >/dev/null 2>&1
}

install() {
  have_slurm && return 0
  [ "$NO_INSTALL" = 1 ] && cannot "Slurm/munge are not installed and installing is off (--no-install)"
  [ "$(id -u)" = 0 ] || cannot "Slurm/munge are not installed and installing them needs root"
  command -v apt-get >/dev/null 2>&1 || cannot "Slurm/munge are not installed and there is no apt-get"
  log "installing ${PACKAGES[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  local out
  if ! out=$(apt-get update -q 2>&1 && apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" 2>&1); then
    printf '%s\n' "$out" | tail -5 >&2
    cannot "apt-get install ${PACKAGES[*]} failed"
  fi
  have_slurm || cannot "apt-get installed ${PACKAGES[*]} but their commands are not on PATH"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

sl() { SLURM_CONF=$DIR/slurm.conf "$@"; }  # a Slurm command for this instance

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

render_conf() {
  mkdir -p "$DIR"/{state,spool,log}
  sed -e "s#@DIR@#$DIR#g" -e "s#@CPUS@#$CPUS#g" -e "s#@MEM_MB@#$MEM_MB#g" \
      -e "s#@CTLD_PORT@#$PORT#g" -e "s#@SLURMD_PORT@#$SLURMD_PORT#g" \
      "$HERE/slurm.conf.in" > "$DIR/slurm.conf"
  printf 'export SLURM_CONF=%s\n' "$DIR/slurm.conf" > "$DIR/env.sh"
}

start_munge() {
  # a munged of our own (own key, socket and PID file under $DIR/munge): nothing is shared with
  # the machine's munge or with another instance. munged runs as user munge; it wants the
  # socket's folder open to all and the key's folder private.
  local m=$DIR/munge
  id munge >/dev/null 2>&1 || die "no user 'munge' (the munge package creates it)"
  mkdir -p "$m/private"
  chmod 0755 "$DIR" "$m"
  [ -s "$m/private/munge.key" ] || dd if=/dev/urandom of="$m/private/munge.key" bs=1 count=1024 status=none
  chown munge:munge "$m" "$m/private" "$m/private/munge.key"
  chmod 0700 "$m/private"; chmod 0400 "$m/private/munge.key"
  runuser -u munge -- "$(command -v munged || echo /usr/sbin/munged)" --socket="$m/munge.socket" \
    --key-file="$m/private/munge.key" --seed-file="$m/private/munged.seed" \
    --log-file="$m/munged.log" --pid-file="$m/munged.pid" \
    || { tail -3 "$m/munged.log" >&2 || true; die "munged did not start"; }
  for _ in $(seq 50); do
    munge -n -S "$m/munge.socket" 2>/dev/null | unmunge -S "$m/munge.socket" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "munged does not answer on $m/munge.socket (see $m/munged.log)"
}

start() {
  local t0; t0=$(date +%s.%N)
  [ "$(id -u)" = 0 ] || cannot "the Slurm daemons run as root here, and this is uid $(id -u)"
  install
  if [ -z "$DIR" ]; then DIR=$(mktemp -d "${TMPDIR:-/tmp}/dask-ps-slurm.XXXXXX"); fi
  mkdir -p "$DIR"; DIR=$(cd "$DIR" && pwd)
  alive "$DIR/slurmctld.pid" && die "a Slurm already runs from $DIR (slurmctld $(cat "$DIR/slurmctld.pid")); stop it first"
  PORT=${PORT:-$(free_port)}
  SLURMD_PORT=${SLURMD_PORT:-$(free_port)}
  [ "$PORT" != "$SLURMD_PORT" ] || SLURMD_PORT=$(free_port)
  CPUS=${CPUS:-$(nproc)}
  MEM_MB=${MEM_MB:-$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)}
  render_conf
  start_munge
  # -c: a clean start, nothing remembered from an earlier run of this folder
  # (the daemons carry SLURM_CONF, so do their slurmstepd processes: stop finds those left)
  sl slurmctld -c -f "$DIR/slurm.conf" || die "slurmctld did not start (see $DIR/log/slurmctld.log)"
  sl slurmd -f "$DIR/slurm.conf" -N localhost || die "slurmd did not start (see $DIR/log/slurmd.log)"
  local state=""
  for _ in $(seq 150); do
    state=$(sl sinfo -h -n localhost -o %t 2>/dev/null || true)
    case "$state" in
      idle*) break ;;
      down*|drain*) sl scontrol update nodename=localhost state=resume 2>/dev/null || true ;;
    esac
    sleep 0.2
  done
  if [[ "$state" != idle* ]]; then
    tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
    die "the node is not idle after 30 s (state '$state')"
  fi
  log "Slurm up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s from $DIR (CPUs=$CPUS RealMemory=${MEM_MB}MB, ports $PORT/$SLURMD_PORT; slurmctld $(cat "$DIR/slurmctld.pid"), slurmd $(cat "$DIR/slurmd.pid"), munged $(cat "$DIR/munge/munged.pid"))"
  echo "$DIR"
}

stop_pid() {  # stop_pid PIDFILE NAME: SIGTERM, wait up to 5 s, then SIGKILL
  # only the process the daemon NAME recorded in PIDFILE, and only while it is still NAME
  # (a stale file's PID may belong to another process by now)
  local f=$1 name=$2 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  if [[ "$p" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$name" ]; then
    kill "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then log "$name ($p) still alive after 5 s: SIGKILL"; kill -9 "$p" 2>/dev/null || true; fi
    log "stopped $name ($p)"
  fi
  rm -f "$f"
}

steps() {  # PIDs of this instance's job steps: its slurmstepd processes (they carry the
  # SLURM_CONF slurmd was started with) and all their descendants (the jobs' processes).
  # Nothing else: a process that merely has SLURM_CONF (a shell that sourced env.sh, sbatch,
  # a driver outside the allocation) is not a job step's.
  local f p stepds
  stepds=$(for f in $(grep -lzxF "SLURM_CONF=$DIR/slurm.conf" /proc/[0-9]*/environ 2>/dev/null); do
             p=${f#/proc/}; p=${p%/environ}
             [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] && echo "$p"
           done)
  [ -n "$stepds" ] || return 0
  ps -e -o pid= -o ppid= | awk -v roots="$stepds" -v me="$$" '
    BEGIN { n = split(roots, r); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END {
      for (p in parent) {
        for (q = p; q != "" && q > 1; q = parent[q]) if (q in keep) { if (p != me) print p; break }
      }
    }'
}

stop() {
  [ -n "$DIR" ] || die "stop needs --dir DIR (or DPS_SLURM_DIR)"
  [ -d "$DIR" ] || { log "no folder $DIR: nothing to stop"; return 0; }
  DIR=$(cd "$DIR" && pwd)
  if alive "$DIR/slurmctld.pid"; then
    local jobs
    jobs=$(sl squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      log "cancelling jobs $(echo $jobs)"
      sl scancel --full $jobs 2>/dev/null || true
      for _ in $(seq 75); do [ -z "$(sl squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
    fi
  fi
  local left
  left=$(steps)
  if [ -n "$left" ]; then  # jobs slurmd did not end (or slurmctld was gone and could not cancel)
    log "ending what is left of this Slurm's job steps: $(echo $left)"
    kill $left 2>/dev/null || true
    for _ in $(seq 50); do left=$(steps); [ -z "$left" ] && break; sleep 0.1; done
    [ -z "$left" ] || { kill -9 $left 2>/dev/null || true; sleep 0.2; }
  fi
  stop_pid "$DIR/slurmd.pid" slurmd
  stop_pid "$DIR/slurmctld.pid" slurmctld
  stop_pid "$DIR/munge/munged.pid" munged
  left=$(steps)
  [ -z "$left" ] || die "job step processes of this Slurm still running: $(echo $left)"
  return 0
}

status() {
  [ -n "$DIR" ] || die "status needs --dir DIR (or DPS_SLURM_DIR)"
  local f
  for f in slurmctld.pid slurmd.pid munge/munged.pid; do
    if alive "$DIR/$f"; then echo "${f%.pid} $(cat "$DIR/$f") running"; else echo "${f%.pid} not running"; fi
  done
  if alive "$DIR/slurmctld.pid"; then sl sinfo; sl squeue; fi
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  install) install ;;
  -h|--help|help) usage ;;
  '') misuse "no command (start, stop, status or install)" ;;
  *) misuse "unknown command $CMD" ;;
esac
