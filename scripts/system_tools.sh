#!/usr/bin/env bash
# The system tools the test matrix needs beyond Python (scripts/test.sh runs this first, with its own
# arguments): without them their tests would skip, and a newcomer would run fewer tests than CI.
#
#   ip (iproute2), unshare (util-linux), nft (nftables): the ray env's cluster test, which makes network
#   namespaces with firewalls (plugins/ray/tests/test_netns_cluster.py)
#
# As root with apt-get, missing ones are installed; otherwise one line names them and how to install them,
# and the exit code is 2. Only bash builtins besides apt-get: the test of this script controls PATH.
set -euo pipefail

declare -A package=([ip]=iproute2 [unshare]=util-linux [nft]=nftables)

# `-e core,ppo` (tox's env selection, as test.sh passes it on) without the ray env needs none of them
selected=
while (( $# )); do
  case $1 in
    -e|--env) selected+=,${2:-}; shift ;;
    -e*) selected+=,${1#-e} ;;
    --env=*) selected+=,${1#--env=} ;;
  esac
  shift
done
if [[ -n $selected && $selected, != *,ray,* && $selected, != *,ALL,* ]]; then exit 0; fi

missing() {
  local tool
  for tool in ip unshare nft; do
    command -v "$tool" >/dev/null || echo -n "$tool "
  done
}

absent=$(missing)
[[ -z $absent ]] && exit 0
packages=$(for tool in $absent; do echo -n "${package[$tool]} "; done)
if (( EUID == 0 )) && command -v apt-get >/dev/null; then
  echo "system_tools.sh: installing ${packages% } for the ray env's network-namespace tests"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${packages% } >/dev/null
  absent=$(missing)
  [[ -z $absent ]] && exit 0
fi
echo "system_tools.sh: the ray env's network-namespace tests need ${absent% } (packages: ${packages% }); install" \
  "them first (as root: apt-get install ${packages% }), or select other envs (scripts/test.sh -e core,ppo,...)" >&2
exit 2
