#!/usr/bin/env bash
# Takes node NODE's link down (or up again) at the bridge, as a pulled cable or a dead switch
# port would: its processes live on, but nothing reaches or leaves the node.
#   link.sh NODE down|up
set -euo pipefail
. "$(dirname "$0")/lib.sh"
cluster_load
[ $# -eq 2 ] && { [ "$2" = down ] || [ "$2" = up ]; } || cluster_die "usage: link.sh NODE down|up"
ip -n "$(cluster_bridge_ns)" link set "n${1#node}" "$2"
