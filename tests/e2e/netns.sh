# Separate hosts for the distributed suites: each Baton process in a network namespace of
# its own ("ip netns"), joined to this machine by a veth pair, so coordinator and workers
# talk over real network interfaces, not loopback. The test services listen on this
# machine's loopback; a socat forwarder on the host end of each pair makes a service
# port reachable from that namespace at the host end's address.
#
#   netns_start            true when namespaces can be made here (root, ip, socat;
#                          BATON_TEST_NO_NETNS=1 says no)
#   netns_host NAME        creates NAME's namespace; sets host_ip[NAME] (this machine's
#                          end) and addr_of[NAME] (the namespace's address)
#   netns_forward NAME URL_OR_DSN...   forwards the 127.0.0.1 ports named in them
#   netns_rewrite NAME TEXT            TEXT with 127.0.0.1 replaced by host_ip[NAME]
#   netns_run NAME CMD...  runs CMD in NAME's namespace (the same PID: ip execs it)
#   netns_cleanup          removes namespaces and forwarders (also on exit)
# Without namespaces the same calls run processes on loopback: addr_of is 127.0.0.1.

declare -A host_ip addr_of netns_name
netns_ok=false
netns_forwarders=()
netns_index=0
netns_base=$(( ($$ % 200) + 20 ))

netns_start() {
  if [[ -z ${BATON_TEST_NO_NETNS:-} && $(id -u) == 0 ]] && command -v ip >/dev/null && command -v socat >/dev/null &&
    ip netns add "baton-probe-$$" 2>/dev/null; then
    ip netns del "baton-probe-$$"
    netns_ok=true
  fi
  $netns_ok
}

netns_host() {
  local name=$1
  if ! $netns_ok; then
    host_ip[$name]=127.0.0.1
    addr_of[$name]=127.0.0.1
    return 0
  fi
  local ns="baton-$$-$name" k hostend nsend
  k=$((netns_base + netns_index))
  netns_index=$((netns_index + 1))
  hostend="bt${k}h$$"
  nsend="bt${k}n$$"
  hostend=${hostend:0:15}
  nsend=${nsend:0:15}
  ip netns add "$ns" &&
    ip link add "$hostend" type veth peer name "$nsend" &&
    ip link set "$nsend" netns "$ns" &&
    ip addr add "10.213.$k.1/24" dev "$hostend" &&
    ip link set "$hostend" up &&
    ip netns exec "$ns" ip addr add "10.213.$k.2/24" dev "$nsend" &&
    ip netns exec "$ns" ip link set "$nsend" up &&
    ip netns exec "$ns" ip link set lo up || return 1
  netns_name[$name]=$ns
  host_ip[$name]=10.213.$k.1
  addr_of[$name]=10.213.$k.2
}

netns_forward() {
  local name=$1 text port
  shift
  $netns_ok || return 0
  for text in "$@"; do
    for port in $(grep -oE '127\.0\.0\.1(:| port=)[0-9]+' <<<"$text" | grep -oE '[0-9]+$'); do
      socat "TCP-LISTEN:$port,bind=${host_ip[$name]},fork,reuseaddr" "TCP:127.0.0.1:$port" &
      netns_forwarders+=($!)
    done
  done
  sleep 0.2  # let the listeners bind
}

netns_rewrite() { echo "${2//127.0.0.1/${host_ip[$1]}}"; }

netns_run() {
  local name=$1
  shift
  if $netns_ok; then
    exec ip netns exec "${netns_name[$name]}" "$@"
  else
    exec "$@"
  fi
}

netns_cleanup() {
  local pid name
  for pid in "${netns_forwarders[@]}"; do kill "$pid" 2>/dev/null; done
  for name in "${!netns_name[@]}"; do ip netns del "${netns_name[$name]}" 2>/dev/null; done
  netns_forwarders=()
  netns_name=()
}
