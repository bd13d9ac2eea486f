"""Reads a trace of benches/trace_probe.py: the GPU's busy time and idle gaps over the
traced steps, and, per gap, what each host thread was inside (the innermost Python frame
or op covering the whole gap), summed by name; and the CUDA runtime calls that took
longest (a blocking call shows there).

    python benches/trace_gaps.py trace-torch.json trace-every.json
"""
import collections
import json
import sys

GAP_US = 5.0


def load(path: str) -> list:
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def union(intervals: list) -> list:
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def report(path: str, top: int = 12) -> str:
    events = load(path)
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in events
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    busy = union(gpu)
    span = busy[-1][1] - busy[0][0]
    gaps = [(a[1], b[0]) for a, b in zip(busy, busy[1:]) if b[0] - a[1] > GAP_US]
    host = [e for e in events if e.get("cat") in ("python_function", "cpu_op", "cuda_runtime",
                                                  "cuda_driver", "user_annotation")]
    by_thread = collections.defaultdict(list)
    for e in host:
        by_thread[e["tid"]].append(e)
    inside = collections.Counter()
    for start, end in gaps:
        for tid, evs in by_thread.items():
            covering = [e for e in evs if e["ts"] <= start and e["ts"] + e["dur"] >= end]
            if covering:
                innermost = min(covering, key=lambda e: e["dur"])
                inside[f"[{tid}] {innermost['name'][:90]}"] += end - start
    runtime = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            r = runtime[e["name"]]
            r[0] += 1
            r[1] += e["dur"]
            r[2] = max(r[2], e["dur"])
    lines = [f"== {path}: GPU span {span / 1e3:.3f} ms, busy {sum(b - a for a, b in busy) / 1e3:.3f} ms, "
             f"{len(gaps)} gaps over {GAP_US:.0f} us totalling {sum(b - a for a, b in gaps) / 1e3:.3f} ms",
             "  during the gaps, each host thread was inside (us):"]
    lines += [f"    {us:9.1f}  {name}" for name, us in inside.most_common(top)]
    lines.append("  CUDA runtime calls: count, total us, longest us")
    lines += [f"    {n:5d} {total:9.1f} {longest:8.1f}  {name}"
              for name, (n, total, longest) in sorted(runtime.items(), key=lambda kv: -kv[1][1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(report(p))
