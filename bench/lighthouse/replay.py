#!/usr/bin/env python3
"""Holds redline's port of Lighthouse's render-blocking graph to Lighthouse
itself (bench/lighthouse.sh with LH_SAVE=1): for each Lighthouse JSON given,
runs `lighthouse_replay` (crates/web/examples) on the trace and DevTools log
Lighthouse saved beside it and compares the lists and times.

Arguments: REPLAY_BINARY [--mobile] LH_JSON... Prints one Markdown line: page
loads, those with the same list, listings missing and extra, the largest
time difference (ms); then each load that differs."""
import json
import subprocess
import sys


def main(args):
    binary, rest = args[0], args[1:]
    mobile = ["--mobile"] if "--mobile" in rest else []
    files = [a for a in rest if a != "--mobile"]
    loads = same = missing = extra = 0
    worst = 0.0
    notes = []
    for f in files:
        base = f[: -len(".json")]
        lh = json.load(open(f))
        a = (lh["audits"].get("render-blocking-resources") or {}).get("details") or {}
        want = {i["url"]: i["wastedMs"] for i in a.get("items") or []}
        out = subprocess.run(
            [binary, base + "-0.trace.json", base + "-0.devtoolslog.json"] + mobile,
            capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            notes.append(f"- {f}: {out.stderr.strip()}")
            continue
        got = {u: ms for u, ms in json.loads(out.stdout)}
        loads += 1
        same += set(want) == set(got)
        missing += len(set(want) - set(got))
        extra += len(set(got) - set(want))
        for u in set(want) & set(got):
            worst = max(worst, abs(want[u] - got[u]))
        if set(want) != set(got):
            notes.append(f"- {f}: Lighthouse {sorted(want)}, replay {sorted(got)}")
    print(f"Replay of Lighthouse's own traces: {loads} page loads, {same} with Lighthouse's list, "
          f"{missing} listings missing, {extra} extra, times within {worst:.1f} ms")
    for n in notes:
        print(n)


if __name__ == "__main__":
    main(sys.argv[1:])
