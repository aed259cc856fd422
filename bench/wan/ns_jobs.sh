# Sourced by the bench scripts that start jobs of ranks in the region namespaces
# (algo_sweep.sh, ps_hosts.sh, diloco_wan.sh): the clean-up trap, which kills what is left of a job and
# removes the namespaces, and waiting for a job. Set `here` to this folder first; a job
# puts its processes in PIDS.
PIDS=()

ns_cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  "$here/netns.sh" down >/dev/null 2>&1 || true
  exit "$rc"
}

ns_trap() {
  trap ns_cleanup EXIT
  trap 'exit 130' INT TERM
}

# Waits for every process of the job; fails with the last non-zero status.
ns_wait_job() {
  local p rc=0
  for p in "${PIDS[@]}"; do wait "$p" || rc=$?; done
  PIDS=()
  return "$rc"
}
