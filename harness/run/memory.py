"""Reading a cell's per-step memory timeline: does memory grow in steps with sequence length?

Users report it as a staircase: each new, longer batch makes the CUDA caching allocator reserve
more, and reserved memory never comes back down, so a run that fit at step 10 dies at step 900.
On CUDA the metric is reserved memory after each step; on CPU it is peak RSS so far (the CPU
allocator hands large blocks back, so only the peak keeps the trace).

The rule (`STAIRCASE_RULE`): the metric rises (by more than 1 MiB and 0.5 %) at 3 or more steps,
at least 3 in 4 of those rises come at a step whose sequence length is the longest seen so far,
and the metric ends at least 5 % above where it started.
"""

from __future__ import annotations

MIN_RISE_BYTES = 2**20
MIN_RISE_FRACTION = 0.005
MIN_RISES = 3
MIN_WITH_LENGTH = 0.75
MIN_GROWTH = 0.05
STAIRCASE_RULE = (
    f"rises > {MIN_RISE_BYTES // 2**20} MiB and > {MIN_RISE_FRACTION:.1%} at >= {MIN_RISES} steps, "
    f">= {MIN_WITH_LENGTH:.0%} of them at a new longest sequence, total growth >= {MIN_GROWTH:.0%}"
)


def staircase(timeline: list[dict]) -> dict | None:
    if not timeline:
        return None
    metric = "cuda_reserved_bytes" if "cuda_reserved_bytes" in timeline[0] else "peak_rss_bytes"
    points = [p for p in timeline if isinstance(p.get(metric), (int, float))]
    if len(points) < 2:
        return None
    rises = []
    longest = points[0].get("seq_len", 0)
    for prev, cur in zip(points, points[1:]):
        delta = cur[metric] - prev[metric]
        new_longest = cur.get("seq_len", 0) > longest
        longest = max(longest, cur.get("seq_len", 0))
        if delta > max(MIN_RISE_BYTES, MIN_RISE_FRACTION * prev[metric]):
            rises.append(
                {"step": cur["step"], "seq_len": cur.get("seq_len"), "delta_bytes": delta, "new_longest": new_longest}
            )
    first, last = points[0][metric], points[-1][metric]
    with_length = sum(r["new_longest"] for r in rises)
    flag = (
        len(rises) >= MIN_RISES and with_length >= MIN_WITH_LENGTH * len(rises) and last - first >= MIN_GROWTH * first
    )
    return {"metric": metric, "flag": flag, "rises": rises, "growth_bytes": last - first, "rule": STAIRCASE_RULE}
