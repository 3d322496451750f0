#!/usr/bin/env python3
"""Replays `redis-cli monitor` logs of the five nodes of one `quorumlock bench --only contended`
run, for the 4 processes x 2 waiting rows with hold 0 ms, and says where its hand-offs go:
which attempts lost and to whom, and how long from a release starting to the next holder.

Each node's key is replayed from the commands alone (SET NX sets it when absent; a release's
compare-and-delete clears it when the token matches), so no client needs instrumenting. Every
attempt of `acquire_within` has a token of its own; a process is told by its connection's port
on the first node. Usage: contended-monitor.py mon-PORT1.txt ... mon-PORT5.txt
"""

import collections
import re
import statistics
import sys

LINE = re.compile(r'^(\d+\.\d+) \[0 ([^\]]+)\] "(\w+)" (.*)$')
KEY = re.compile(r'contended:4x2:0:waiting:\d+$')
QUORUM = 3


def events_by_key(files):
    """(time, node, kind, token, client) per key, in time order; kind SET, REL or RELW."""
    events = collections.defaultdict(list)
    for node, name in enumerate(files):
        for line in open(name, errors="replace"):
            match = LINE.match(line)
            if not match or match.group(2) == "lua":
                continue
            ts, client, cmd, rest = match.groups()
            args = re.findall(r'"((?:[^"\\]|\\.)*)"', rest)
            if cmd == "SET" and KEY.search(args[0]):
                events[args[0]].append((float(ts), node, "SET", args[1], client))
            elif cmd == "EVAL" and "DEL" in args[0] and len(args) >= 4 and KEY.search(args[2]):
                kind = "RELW" if "PUBLISH" in args[0] else "REL"
                events[args[2]].append((float(ts), node, kind, args[3], client))
            elif cmd == "PTTL" and KEY.search(args[0]):
                events[args[0]].append((float(ts), node, "PTTL", None, client))
    for evs in events.values():
        evs.sort()
    return events


def main(files):
    tally = collections.Counter()
    timeline = collections.defaultdict(list)
    for evs in events_by_key(files).values():
        holder = {}
        won = collections.defaultdict(list)
        lost_to = collections.defaultdict(list)
        released = collections.defaultdict(list)
        first, process = {}, {}
        for ts, node, kind, token, client in evs:
            if kind == "PTTL":
                tally["PTTL"] += 1
            elif kind == "SET":
                first.setdefault(token, ts)
                if node == 0:
                    process[token] = client
                if holder.get(node) is None:
                    holder[node] = token
                    won[token].append(ts)
                else:
                    lost_to[token].append((holder[node], ts))
            elif holder.get(node) == token:
                holder[node] = None
                if kind == "RELW":
                    released[token].append(ts)
        granted = sorted((first[t], t) for t in first if len(won[t]) >= QUORUM)
        grants = [t for _, t in granted]
        tally["grants"] += len(grants)
        # A held lock: from its quorum-th grant to its release starting.
        held = [(sorted(won[t])[QUORUM - 1], min(released[t], default=float("inf")), t)
                for t in grants]
        for token in first:
            if len(won[token]) >= QUORUM:
                continue
            tally["lost attempts"] += 1
            old = sum(1 for h, at in lost_to[token] if released[h] and released[h][0] <= at)
            if len(won[token]) + old >= QUORUM:
                tally["lost: would have won had the release it raced reached every node"] += 1
            during = [t for since, until, t in held if since <= first[token] < until]
            if during and process.get(during[0]) == process.get(token):
                tally["lost: started while its own process held the lock"] += 1
            elif during:
                tally["lost: started while another process held the lock, before its release"] += 1
            else:
                tally["lost: started after a release began"] += 1
        lost = [(first[t], process.get(t)) for t in first if len(won[t]) < QUORUM]
        for prev, nxt in zip(grants, grants[1:]):
            if len(released[prev]) < QUORUM or None in (process.get(prev), process.get(nxt)):
                continue
            start = released[prev][0]
            if any(p == process[nxt] and start <= s < first[nxt] for s, p in lost):
                tally["hand-offs whose next holder lost an attempt after the release began"] += 1
            tally["hand-offs"] += 1
            if process[prev] == process[nxt]:
                kind = "next holder in the releasing process"
            elif any(p == process[nxt] and start - 0.0015 <= s < start for s, p in lost):
                kind = "next holder in another process, busy with a lost attempt"
            else:
                kind = "next holder in another process, idle"
            timeline[kind].append((
                (sorted(released[prev])[QUORUM - 1] - start) * 1e6,
                (first[nxt] - start) * 1e6,
                (sorted(won[nxt])[QUORUM - 1] - start) * 1e6,
            ))
    for name, count in sorted(tally.items()):
        print(f"{name}: {count}")
    print(f"lost attempts per grant: {tally['lost attempts'] / max(tally['grants'], 1):.2f}")
    print("hand-offs, p50 µs after the release starts (nodes' clock): release on the 3rd node, "
          "next holder's first SET, its SET on its 3rd node")
    for kind, rows in sorted(timeline.items()):
        p50 = [statistics.median(row[i] for row in rows) for i in range(3)]
        print(f"  {kind}: {len(rows)}: {p50[0]:.0f}, {p50[1]:.0f}, {p50[2]:.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
