#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The benchmark figures: their targets, bench/results/*.json and docs/performance.md.

bench/run.sh calls it after a run; each command may also be run by hand
(from anywhere: paths are taken from the repository's root).

  figures.py collect FIGURES_TXT MODE [OUT_JSON]
      FIGURES_TXT holds the benchmarks' "key value" lines. Prints the table
      of figures and targets and writes OUT_JSON (one number per key;
      relative paths from the repository's root), by default
      bench/results/latest.json. MODE is "full" or "--quick". run.sh gives
      a quick run bench/results/quick.json, and $EDGE_OUTBOX_BENCH_OUT when
      set.
  figures.py record-run MODE STARTED LOAD_AT_START [BUILD_DIR]
      Writes bench/results/latest-run.json: the kind of run, when, and on
      what machine (for the page below). run.sh calls it after a full run
      only.
  figures.py docs
      Writes docs/performance.md from bench/performance.md.in (the
      hand-written text; its line {{figures}} becomes the generated section)
      and bench/results/latest.json (+ latest-run.json when present).
"""
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LATEST = os.path.join(ROOT, "bench", "results", "latest.json")
LATEST_RUN = os.path.join(ROOT, "bench", "results", "latest-run.json")
TEMPLATE = os.path.join(ROOT, "bench", "performance.md.in")
PAGE = os.path.join(ROOT, "docs", "performance.md")

# key: (target text, test): the targets the figures are held to. A test takes
# the value and all the figures of the run (for targets relative to another
# key of the same run).
TARGETS = {
    "atomic_write_ratio": (">= 0.85", lambda v, f: v >= 0.85),
    "group_commit_ratio": (">= 0.85", lambda v, f: v >= 0.85),
    "forward_vs_paho_ratio": (">= 0.8", lambda v, f: v >= 0.8),
    "forward_vs_naive_ratio": (">= 3.5", lambda v, f: v >= 3.5),
    "forward_vs_naive_ratio_normal": (">= 1.2", lambda v, f: v >= 1.2),
    "durable_before_send_cost": ("<= 0.1", lambda v, f: v <= 0.1),
    "drain_vs_paho_buffer_ratio": (">= 4", lambda v, f: v >= 4),
    "rss_backlog_delta_mib": ("<= 2", lambda v, f: v <= 2),
    "restart_first_publish_ms_1m": ("<= 100", lambda v, f: v <= 100),
    "restart_unconfirmed_first_publish_ms_1m": ("<= 100", lambda v, f: v <= 100),
    "reconnect_first_publish_ms_1m": ("<= 100", lambda v, f: v <= 100),
    "live_p99_ms_during_drain": ("<= 50", lambda v, f: v <= 50),
    "drain_live_first_vs_fifo_ratio": (">= 0.9", lambda v, f: v >= 0.9),
    "live_p99_ms_during_drain_thin_link": ("<= the link's round trip + 50 (`thin_link_rtt_ms` + 50)",
                                           lambda v, f: v <= f.get("thin_link_rtt_ms", 50) + 50),
    "enqueue_growth_ratio": (">= 0.9", lambda v, f: v >= 0.9),
    "forward_growth_ratio": (">= 0.9", lambda v, f: v >= 0.9),
    "latency_p99_ms": ("<= 10", lambda v, f: v <= 10),
    "bytes_written_per_event_group": ("<= 640", lambda v, f: v <= 640),
    "bytes_written_per_event_txn": ("<= 8192", lambda v, f: v <= 8192),
    "ingest_vs_forward_ratio": (">= 1.0", lambda v, f: v >= 1.0),
    "batch_vs_single_ratio": (">= 4", lambda v, f: v >= 4),
    "batch_vs_raw_paho_ratio": (">= 3", lambda v, f: v >= 3),
    "ingest_vs_forward_batch_ratio": (">= 1.5", lambda v, f: v >= 1.5),
    "ingest_vs_paho_subscriber_ratio": (">= 0.8", lambda v, f: v >= 0.8),
    "ingest_vs_store_limit_ratio": (">= 0.4", lambda v, f: v >= 0.4),
    "ingest_vs_store_limit_ratio_pg": (">= 0.7", lambda v, f: v >= 0.7),
    "wire_bytes_per_event_zstd": ("<= 60", lambda v, f: v <= 60),
    "device_cpu_us_per_event_batch": ("<= 1/4 of `device_cpu_us_per_event_single`",
                                      lambda v, f: "device_cpu_us_per_event_single" in f
                                      and v <= f["device_cpu_us_per_event_single"] / 4),
    "latency_p99_ms_batch": ("<= linger + 10 (`latency_linger_ms` + 10)",
                             lambda v, f: v <= f.get("latency_linger_ms", 20) + 10),
}

# Single events beside batches of 100: (what, single key, batched key, zstd
# key); docs/performance.md shows them side by side.
SIDE_BY_SIDE = [
    ("forwarder drain, events/s (FULL)", "forward_events_per_s", "forward_batch_events_per_s",
     "forward_batch_zstd_events_per_s"),
    ("forwarder CPU per event, us", "device_cpu_us_per_event_single", "device_cpu_us_per_event_batch",
     "device_cpu_us_per_event_zstd"),
    ("bytes on the wire per event (MQTT 5)", "wire_bytes_per_event_single", "wire_bytes_per_event_batch",
     "wire_bytes_per_event_zstd"),
    ("bytes on the wire per event (MQTT 3.1.1)", "wire_bytes_per_event_single_3_1_1", None,
     "wire_bytes_per_event_zstd_3_1_1"),
    ("ingest store rate, events/s (SQLite FULL)", "ingest_events_per_s", "ingest_events_per_s_batch", None),
    ("ingest / forwarder in the same run", "ingest_vs_forward_ratio", "ingest_vs_forward_batch_ratio", None),
    ("ingest / forwarder, messages marked server confirmation", "ingest_vs_forward_ratio_marked",
     "ingest_vs_forward_batch_ratio", None),
    ("ingest / raw Paho subscriber (marked)", "ingest_vs_paho_subscriber_ratio", None, None),
    ("ingest / the store's own inserts (SQLite FULL)", None, "ingest_vs_store_limit_ratio", None),
    ("ingest / the store's own inserts (PostgreSQL)", None, "ingest_vs_store_limit_ratio_pg", None),
    ("receiver's decoding per event, us", "wire_decode_us_per_event_structured", "wire_decode_us_per_event_batch",
     None),
    ("latency p99, ms (100 events/s, enqueue to stored)", "latency_p99_ms", "latency_p99_ms_batch", None),
]


def show(v):
    return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"


def table_lines(figures):
    """The markdown table: the targets first, then every other key by name."""
    lines = ["| key | value | target | met? |", "|---|---|---|---|"]
    for key in list(TARGETS) + sorted(k for k in figures if k not in TARGETS):
        if key not in figures:
            if key in TARGETS:
                lines.append(f"| `{key}` | not measured | {TARGETS[key][0]} | - |")
            continue
        v = figures[key]
        if key in TARGETS:
            text, ok = TARGETS[key]
            lines.append(f"| `{key}` | {show(v)} | {text} | {'yes' if ok(v, figures) else '**no**'} |")
        else:
            lines.append(f"| `{key}` | {show(v)} | report | |")
    return lines


def collect(figures_txt, mode, out_json=LATEST):
    figures = {}
    with open(figures_txt) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                try:
                    figures[parts[0]] = float(parts[1])
                except ValueError:
                    pass
    # bench_forward calls the forwarder / raw Paho ratio forward_ratio.
    if "forward_ratio" in figures:
        figures.setdefault("forward_vs_paho_ratio", figures["forward_ratio"])

    print(f"\nedge-outbox benchmarks ({mode} run; {platform.machine()}, "
          f"{len(os.sched_getaffinity(0))} CPUs)\n")
    print("\n".join(table_lines(figures)))
    print("\n" + "\n".join(side_by_side_lines(figures)))

    out_json = os.path.join(ROOT, out_json)
    os.makedirs(os.path.dirname(out_json), exist_ok=True)
    with open(out_json, "w") as out:
        json.dump(figures, out, indent=2, sort_keys=True)
        out.write("\n")
    print(f"\nwrote {os.path.relpath(out_json, ROOT) if out_json.startswith(ROOT + os.sep) else out_json}")


def first_line(command):
    """The first output line of a command, or None when it cannot run."""
    if not shutil.which(command[0]):
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else None


def package_version(name):
    line = first_line(["dpkg-query", "-W", "-f", "${Version}\\n", name])
    return line if line and not line.startswith("dpkg-query") else None


def machine_description(build_dir):
    parts = []
    cpus = os.cpu_count()
    model = None
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    parts.append(f"{cpus} CPUs" + (f" ({model})" if model else "") + f", {platform.machine()}")
    try:
        with open("/proc/meminfo") as f:
            kib = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
        parts.append(f"{kib / 1024 / 1024:.0f} GiB")
    except (OSError, AttributeError):
        pass
    parts.append(f"Linux {platform.release()}")
    try:
        with open("/etc/os-release") as f:
            os_name = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', f.read(), re.M).group(1)
        parts.append(os_name)
    except (OSError, AttributeError):
        pass
    compiler = None
    if build_dir:
        try:
            with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
                m = re.search(r"^CMAKE_CXX_COMPILER:\w+=(.+)$", f.read(), re.M)
            if m:
                compiler = first_line([m.group(1).strip(), "--version"])
        except OSError:
            pass
    if compiler:
        parts.append(compiler)
    versions = []
    for label, package in (("SQLite", "libsqlite3-dev"), ("Paho C", "libpaho-mqtt-dev"),
                           ("Paho C++", "libpaho-mqttpp-dev"), ("mosquitto", "mosquitto")):
        v = package_version(package)
        if v:
            versions.append(f"{label} {v}")
    if versions:
        parts.append(", ".join(versions))
    return "; ".join(parts)


def record_run(mode, started, load_at_start, build_dir=None):
    try:
        with open("/proc/loadavg") as f:
            load_at_end = f.read().split()[0]
    except OSError:
        load_at_end = "?"
    run = {
        "mode": "quick" if mode == "--quick" else mode,
        "started": started,
        "finished": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine_description(build_dir),
        "load_average": f"{load_at_start} at the start, {load_at_end} at the end (1-minute)",
    }
    with open(LATEST_RUN, "w") as out:
        json.dump(run, out, indent=2, sort_keys=True)
        out.write("\n")
    print("wrote bench/results/latest-run.json")


def figures_section():
    with open(LATEST) as f:
        figures = json.load(f)
    run = None
    if os.path.exists(LATEST_RUN):
        with open(LATEST_RUN) as f:
            run = json.load(f)
    met = sum(1 for k, (_, ok) in TARGETS.items() if k in figures and ok(figures[k], figures))
    measured = sum(1 for k in TARGETS if k in figures)
    lines = [
        "## Figures of the latest full run",
        "",
        "<!-- This section is generated by bench/run.sh (bench/figures.py docs) from",
        "     bench/results/latest.json: do not edit it by hand. -->",
        "",
        "*Generated by a full `bench/run.sh` (not `--quick`) from `bench/results/latest.json`;",
        "rerun it (or `bench/figures.py docs` for the figures already there) instead of editing.*",
        "",
    ]
    if run:
        when = run.get("started", "?")
        if run.get("finished"):
            when += f" to {run['finished']}"
        lines.append(f"- **Run**: {run.get('mode', '?')} (`bench/run.sh"
                     f"{' --quick' if run.get('mode') == 'quick' else ''}`), {when}")
        if run.get("machine"):
            lines.append(f"- **Machine**: {run['machine']}")
        if run.get("load_average"):
            lines.append(f"- **Load average**: {run['load_average']}")
        if run.get("note"):
            lines.append(f"- **Note**: {run['note']}")
        if run.get("mode") == "quick":
            lines.append("- A quick run: smaller workloads (named in the `*_rows` / `*_events` / `*_messages` keys);"
                         " its figures are a smoke test, not comparable with a full run's.")
    lines.append(f"- **Targets met**: {met} of {len(TARGETS)}"
                 + (f" ({len(TARGETS) - measured} not measured)" if measured < len(TARGETS) else ""))
    lines.append("")
    lines.extend(table_lines(figures))
    lines.extend(["", "### Single events and batches of 100 side by side", "",
                  "From the same run (the keys in the table above); `-`: not measured.", ""])
    lines.extend(side_by_side_lines(figures))
    return "\n".join(lines)


def side_by_side_lines(figures):
    """The SIDE_BY_SIDE table: one event per message, batches, batches with zstd."""
    def cell(key):
        if key is None:
            return ""
        return f"{show(figures[key])} (`{key}`)" if key in figures else "-"
    lines = ["| | one event per message | batches of 100 | batches of 100, zstd |", "|---|---|---|---|"]
    for what, single, batch, zstd in SIDE_BY_SIDE:
        lines.append(f"| {what} | {cell(single)} | {cell(batch)} | {cell(zstd)} |")
    return lines


def docs():
    with open(TEMPLATE) as f:
        template = f.read()
    if "{{figures}}" not in template:
        sys.exit(f"{TEMPLATE}: no {{{{figures}}}} line")
    page = ("<!-- Generated by bench/run.sh (bench/figures.py docs) from bench/performance.md.in and\n"
            "     bench/results/latest.json: edit those, not this file. -->\n"
            + template.replace("{{figures}}", figures_section()))
    with open(PAGE, "w") as out:
        out.write(page)
    print("wrote docs/performance.md")


def main(argv):
    if len(argv) in (4, 5) and argv[1] == "collect":
        collect(*argv[2:])
    elif len(argv) in (5, 6) and argv[1] == "record-run":
        record_run(*argv[2:])
    elif len(argv) == 2 and argv[1] == "docs":
        docs()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
