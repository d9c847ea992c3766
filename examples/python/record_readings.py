#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""record_readings.py: an application that records sensor readings in its own
table and, in the same transaction, an event about each one in the outbox
(through edge_outbox.py and libedge-outbox.so.0). A forwarder
(edge-outbox-forwarder --db the same file) sends the events.

    record_readings.py --db /var/lib/app/app.db --device-id gw-1 --count 100

Each reading row names its event (readings.event_id) and each event's data
names its reading, so an audit can match them one to one: both commit, or
neither. Prints {"recorded": N} when done.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import edge_outbox  # noqa: E402

READINGS_TABLE = """
CREATE TABLE IF NOT EXISTS readings (
  id             INTEGER PRIMARY KEY,
  sensor         TEXT NOT NULL,
  value          REAL NOT NULL,
  recorded_at_ms INTEGER NOT NULL,
  event_id       TEXT NOT NULL UNIQUE
)"""


def record(outbox, device_id, topic_prefix, sensor, value):
    """One reading and its event, in one transaction; returns the event id."""
    now_ms = int(time.time() * 1000)
    with outbox.transaction() as tx:
        event_id = tx.enqueue(
            topic=f"{topic_prefix}/{device_id}/events/reading",
            type="reading.recorded",
            data=json.dumps({"sensor": sensor, "value": value, "recorded_at_ms": now_ms}).encode(),
            content_type="application/json")
        tx.execute("INSERT INTO readings(sensor, value, recorded_at_ms, event_id) VALUES (?, ?, ?, ?)",
                   (sensor, value, now_ms, event_id))
    return event_id


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="the application's SQLite file (created if missing)")
    parser.add_argument("--device-id", default="gw-1")
    parser.add_argument("--topic-prefix", default="devices", help="topics are PREFIX/DEVICE/events/reading")
    parser.add_argument("--count", type=int, default=10, help="readings to record; 0: until killed")
    parser.add_argument("--interval-ms", type=int, default=0, help="pause between readings")
    parser.add_argument("--durability", choices=["full", "normal"], default="full")
    parser.add_argument("--print-ids", action="store_true", help="print each event id once its transaction committed")
    args = parser.parse_args()

    durability = edge_outbox.DURABILITY_FULL if args.durability == "full" else edge_outbox.DURABILITY_NORMAL
    try:
        with edge_outbox.Outbox(args.db, durability=durability) as outbox:
            with outbox.transaction() as tx:
                tx.execute(READINGS_TABLE)
            recorded = 0
            while args.count == 0 or recorded < args.count:
                value = round(20.0 + 5.0 * math.sin(recorded / 10.0), 3)
                event_id = record(outbox, args.device_id, args.topic_prefix, "temperature", value)
                if args.print_ids:
                    print(event_id, flush=True)
                recorded += 1
                if args.interval_ms:
                    time.sleep(args.interval_ms / 1000.0)
    except edge_outbox.OutboxError as e:
        print(f"record_readings.py: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"recorded": recorded}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
