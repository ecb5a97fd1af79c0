#!/usr/bin/python3
"""Draws bench_sched's passes: each pass's time in the order they ran, the
full passes and the passes after one job ends side by side, each against
its target, as an SVG with nothing but the standard library.
Usage: draw.py TIMES_FILE RESULT_JSON OUT_SVG"""
import json
import sys

TARGETS = {"full": 100.0, "incremental": 5.0}
TITLES = {"full": "full pass (100,000 waiting)", "incremental": "pass after one job ends"}


def panel(x0, name, times, w=420, h=260):
    top, left, bottom = 40, 50, 40
    ymax = max(max(times), TARGETS[name]) * 1.15
    sx = (w - left - 10) / max(1, len(times) - 1)

    def y(v):
        return top + (h - top - bottom) * (1 - v / ymax)

    out = [f'<g transform="translate({x0},0)">',
           f'<text x="{left}" y="20" font-size="13">{TITLES[name]}: ms per pass</text>']
    for k in range(6):
        v = ymax * k / 5
        out.append(f'<line x1="{left}" x2="{w - 10}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="10" '
                   f'text-anchor="end">{v:.1f}</text>')
    t = TARGETS[name]
    out.append(f'<line x1="{left}" x2="{w - 10}" y1="{y(t):.1f}" y2="{y(t):.1f}" '
               'stroke="#c00" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{w - 12}" y="{y(t) - 4:.1f}" font-size="10" fill="#c00" '
               f'text-anchor="end">target {t:g} ms</text>')
    pts = " ".join(f"{left + i * sx:.1f},{y(v):.1f}" for i, v in enumerate(times))
    out.append(f'<polyline points="{pts}" fill="none" stroke="#1f5fa8" stroke-width="1.5"/>')
    for i, v in enumerate(times):
        out.append(f'<circle cx="{left + i * sx:.1f}" cy="{y(v):.1f}" r="1.8" fill="#1f5fa8"/>')
    out.append(f'<text x="{(left + w) / 2:.0f}" y="{h - 10}" font-size="11" '
               f'text-anchor="middle">pass ({len(times)}, in the order they ran)</text>')
    out.append("</g>")
    return out


def main():
    times = {"full": [], "incremental": []}
    with open(sys.argv[1]) as f:
        for line in f:
            kind, ms = line.split()
            times[kind].append(float(ms))
    with open(sys.argv[2]) as f:
        res = json.load(f)
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="860" height="300" '
           'font-family="sans-serif">',
           '<rect width="100%" height="100%" fill="white"/>']
    svg += panel(0, "full", times["full"])
    svg += panel(430, "incremental", times["incremental"])
    svg.append(f'<text x="10" y="292" font-size="11">{res["nodes"]} nodes, {res["gpus"]} GPUs, '
               f'{res["running_jobs"]} running; full p50 {res["full_pass_p50_ms"]} ms, '
               f'p99 {res["full_pass_p99_ms"]}; after one job ends p50 '
               f'{res["incremental_pass_p50_ms"]} ms, p99 {res["incremental_pass_p99_ms"]}; '
               f'peak {res["peak_rss_mib"]} MiB</text>')
    svg.append("</svg>")
    with open(sys.argv[3], "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
