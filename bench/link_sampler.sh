#!/bin/bash
# The shaped client link's bytes over time, while bench/fidelity.py replays a trace:
# waits for the run's network namespace, then writes "unix-time bytes-sent" of the HTB
# root class (1:1, the client link) about every 0.1 s until the namespace is gone.
# usage: bench/link_sampler.sh OUT & bench/fidelity.py ...   (as root, one run at a time)
set -eu
out=$1
until ns=$(ip netns list | grep -o 'dflfid[0-9]*' | head -1) && [ -n "$ns" ]; do sleep 0.2; done
sleep 1  # The shaping is set up after the namespace.
dev=$(ip netns exec "$ns" tc qdisc show | awk '/htb/ {print $5; exit}')
echo "# namespace $ns device $dev" > "$out"
while ip netns list | grep -q "$ns"; do
  bytes=$(ip netns exec "$ns" tc -s class show dev "$dev" classid 1:1 2>/dev/null |
          awk '/Sent/ {print $2; exit}') || true
  [ -n "$bytes" ] && echo "$(date +%s.%N) $bytes" >> "$out"
  sleep 0.1
done
