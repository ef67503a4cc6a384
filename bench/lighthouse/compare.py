#!/usr/bin/env python3
"""Compares Lighthouse's and redline's findings (bench/lighthouse.sh).

Arguments: pairs of files, LH_JSON RL_JSON ... (Lighthouse's --output json,
redline's `audit -o json`). Prints a Markdown table per audit: resources
Lighthouse flags, redline flags, in both, the share of each tool's that the
other flags too, and redline's figure over
Lighthouse's for the resources in both (bytes; for render-blocking the
milliseconds on Lighthouse's simulated 40 ms / 10 Mbit/s link: redline's
`link_ms`, its own Lantern-model estimate, over Lighthouse's `wastedMs`)."""
import json
import sys
from urllib.parse import urldefrag

# Lighthouse audit id -> (redline check id, which finding figure).
PAIRS = [
    ("uses-text-compression", "compression", "bytes"),
    ("uses-long-cache-ttl", "cache-static", "bytes"),
    ("uses-responsive-images", "images-scaled", "bytes"),
    ("modern-image-formats", "images-format", "bytes"),
    ("render-blocking-resources", "render-blocking", "ms"),
    ("unminified-css", "minify", "bytes"),
    ("unminified-javascript", "minify", "bytes"),
    ("offscreen-images", "offscreen-images", "bytes"),
]


def norm(u):
    return urldefrag(u)[0]


def lh_items(lh, audit):
    a = lh["audits"].get(audit) or {}
    items = (a.get("details") or {}).get("items") or []
    out = {}
    for it in items:
        u = it.get("url")
        if not isinstance(u, str) or not u.startswith("http"):
            continue
        out[norm(u)] = it.get("wastedBytes") if "wastedBytes" in it else it.get("wastedMs")
    return out


def rl_items(rl, check, kind_filter):
    out = {}
    for c in rl["checks"]:
        if c["id"] != check:
            continue
        for f in c.get("findings", []) + c.get("third_party", []):
            u = f.get("url")
            if not u:
                continue
            if kind_filter and not kind_filter(u):
                continue
            if f.get("severity") == "ok":
                continue
            if f.get("link_ms") is not None:
                out[norm(u)] = f["link_ms"]
            elif f.get("saving_bytes") is not None:
                out[norm(u)] = f["saving_bytes"]
            else:
                out[norm(u)] = f.get("saving_ms")
    return out


def main(args):
    if len(args) % 2:
        sys.exit("usage: compare.py LH_JSON RL_JSON [...]")
    rows = {}
    detail = []
    for i in range(0, len(args), 2):
        lh = json.load(open(args[i]))
        rl = json.load(open(args[i + 1]))
        page = lh.get("finalDisplayedUrl") or lh.get("requestedUrl")
        for audit, check, unit in PAIRS:
            flt = None
            if audit == "unminified-css":
                flt = lambda u: u.split("?")[0].endswith(".css")
            elif audit == "unminified-javascript":
                flt = lambda u: u.split("?")[0].endswith(".js")
            a = lh_items(lh, audit)
            b = rl_items(rl, check, flt)
            r = rows.setdefault(audit, {"check": check, "lh": 0, "rl": 0, "both": 0, "ratios": [], "unit": unit})
            r["lh"] += len(a)
            r["rl"] += len(b)
            for u in sorted(set(a) | set(b)):
                if u in a and u in b:
                    r["both"] += 1
                    if a[u]:
                        r["ratios"].append((b[u] or 0) / a[u])
                detail.append((page, audit, u, a.get(u), b.get(u)))
    print("| Lighthouse audit | redline check | Lighthouse flags | redline flags | in both | of LH's / of redline's | redline/LH bytes (ms for render-blocking), in both |")
    print("|---|---|---:|---:|---:|---|---|")
    for audit, _, _ in PAIRS:
        r = rows.get(audit)
        if not r:
            continue
        if r["ratios"]:
            ratio = f"{min(r['ratios']):.2f}-{max(r['ratios']):.2f}"
        else:
            ratio = "-"
        pct = lambda n: f"{100 * r['both'] / n:.0f} %" if n else "-"
        print(f"| {audit} | {r['check']} | {r['lh']} | {r['rl']} | {r['both']} | {pct(r['lh'])} / {pct(r['rl'])} | {ratio} |")
    print()
    print("| page | audit | resource | Lighthouse | redline |")
    print("|---|---|---|---:|---:|")
    for page, audit, u, a, b in detail:
        short = u.split("/", 3)[-1]
        print(f"| {page.rsplit('/', 1)[-1]} | {audit} | {short} | {'-' if a is None else round(a)} | {'-' if b is None else round(b)} |")


if __name__ == "__main__":
    main(sys.argv[1:])
