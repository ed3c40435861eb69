#!/usr/bin/env bash
# Kills every process of node NODE (everything in its cgroup), as a power loss would.
#   kill.sh NODE
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_load
[ $# -eq 1 ] || cluster_die "usage: kill.sh NODE"
cluster_kill_node "$1"
