"""One side of tests/interop.rs: pottery's Redlock (Python) contending for one resource with
quorumlock on the same local masters. Prints a JSON line per hold, times on CLOCK_MONOTONIC
(nanoseconds), as the Rust side reads the same clock. Every loop is bounded: `rounds`
acquisitions, each waiting at most `wait` seconds.

Usage: pottery_contender.py PORTS NAME ROUNDS HOLD_MS PAUSE_MS TTL_S WAIT_S
"""

import json
import sys
import time

from pottery import Redlock
from redis import Redis


def main() -> None:
    ports, name, rounds, hold_ms, pause_ms, ttl_s, wait_s = sys.argv[1:8]
    masters = {
        Redis(host="127.0.0.1", port=int(port), socket_timeout=1.0)
        for port in ports.split(",")
    }
    lock = Redlock(
        key=name,
        masters=masters,
        auto_release_time=float(ttl_s),
        context_manager_timeout=float(wait_s),
    )
    print(json.dumps({"ready": time.monotonic_ns()}), flush=True)
    for _ in range(int(rounds)):
        started = time.monotonic_ns()
        if not lock.acquire(blocking=True, timeout=float(wait_s)):
            print(json.dumps({"timed_out": started}), flush=True)
            continue
        acquired = time.monotonic_ns()
        token = lock._uuid  # pottery's token: a uuid4 string, the key's value on each node
        # Checked on the nodes while held: this token stands on a majority.
        holding = sum(1 for master in masters if master.get(lock.key) == token.encode())
        time.sleep(float(hold_ms) / 1000)
        released = time.monotonic_ns()
        lock.release()
        print(
            json.dumps(
                {
                    "token": token,
                    "started": started,
                    "acquired": acquired,
                    "released": released,
                    "holding": holding,
                    "ttl_ms": int(float(ttl_s) * 1000),
                }
            ),
            flush=True,
        )
        time.sleep(float(pause_ms) / 1000)


if __name__ == "__main__":
    main()
