#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Python binding (examples/python/edge_outbox.py) refuses what the C API
cannot carry as given and a Transaction used after its with block, with
OutboxError "invalid_argument" and without a crash; a Python thread that
ends inside a transaction leaves the write lock free. Run by ctest with
EDGE_OUTBOX_LIBRARY (the built libedge-outbox.so.0) and PYTHONPATH
(examples/python) set."""
import ctypes
import os
import subprocess
import sys
import tempfile
import threading
import unittest

import edge_outbox

TOPIC = "devices/gw-1/events/reading"
TYPE = "reading.recorded"
refusals = 0  # counted for the summary line


class BindingTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "app.db")
        self.outbox = edge_outbox.Outbox(self.path, busy_timeout_ms=2000)

    def tearDown(self):
        self.outbox.close()
        self.dir.cleanup()

    def assertRefused(self, call, text):
        global refusals
        with self.assertRaises(edge_outbox.OutboxError) as caught:
            call()
        self.assertEqual(caught.exception.name, "invalid_argument")
        self.assertIn(text, str(caught.exception))
        refusals += 1

    def pending(self):
        return self.outbox.stats()["pending"]

    def test_transaction_after_its_block_is_refused(self):
        with self.outbox.transaction() as tx:
            tx.execute("CREATE TABLE readings(value REAL)")
            tx.enqueue(TOPIC, TYPE, b"{}")
        self.assertRefused(lambda: tx.enqueue(TOPIC, TYPE, b"{}"), "has ended")
        self.assertRefused(lambda: tx.execute("INSERT INTO readings VALUES (1)"), "has ended")
        self.assertRefused(tx.last_insert_rowid, "has ended")
        with self.assertRaises(RuntimeError):
            with self.outbox.transaction() as rolled_back:
                rolled_back.enqueue(TOPIC, TYPE, b"{}")
                raise RuntimeError("the application's failure")
        self.assertRefused(lambda: rolled_back.enqueue(TOPIC, TYPE, b"{}"), "has ended")
        self.assertEqual(self.pending(), 1)
        self.assertEqual(self.outbox.enqueue(TOPIC, TYPE, b"{}") != "", True)  # the handle still works

    def test_nul_inside_a_string_is_refused(self):
        for field, call in [
            ("topic", lambda: self.outbox.enqueue(TOPIC + "\0/hidden", TYPE, b"{}")),
            ("type", lambda: self.outbox.enqueue(TOPIC, b"reading\0.recorded", b"{}")),
            ("id", lambda: self.outbox.enqueue(TOPIC, TYPE, b"{}", id="reading-1\0-2")),
            ("content_type", lambda: self.outbox.enqueue(TOPIC, TYPE, b"{}", content_type="text/plain\0x")),
            ("dropped_event_topic", lambda: edge_outbox.Outbox(self.path, dropped_event_topic="a\0b")),
            ("path", lambda: edge_outbox.Outbox(self.path + "\0.other")),
        ]:
            with self.subTest(field=field):
                self.assertRefused(call, f"{field} contains a NUL")
        with self.outbox.transaction() as tx:
            self.assertRefused(lambda: tx.execute("SELECT 1;\0 DROP TABLE outbox"), "sql contains a NUL")
            self.assertRefused(lambda: tx.enqueue(TOPIC, TYPE, id="x\0"), "id contains a NUL")
        self.assertEqual(self.pending(), 0)
        # A NUL inside the data is data, sent as it is.
        self.outbox.enqueue(TOPIC, TYPE, b"\0\1\0")
        self.assertEqual(self.pending(), 1)

    def test_data_that_is_not_bytes_or_str_is_refused(self):
        for data in [5, 2.5, [1, 2], {"value": 1}, object()]:
            with self.subTest(data=type(data).__name__):
                self.assertRefused(lambda: self.outbox.enqueue(TOPIC, TYPE, data),
                                   f"data must be bytes or str, not {type(data).__name__}")
        self.assertEqual(self.pending(), 0)
        for data in [b"{}", bytearray(b"{}"), memoryview(b"{}"), "{}", None]:
            self.outbox.enqueue(TOPIC, TYPE, data)
        self.assertEqual(self.pending(), 5)

    def test_numbers_out_of_the_c_range_are_refused(self):
        for ttl_ms in [2**64, 2**63, -1, -2**63]:
            with self.subTest(ttl_ms=ttl_ms):
                self.assertRefused(lambda: self.outbox.enqueue(TOPIC, TYPE, b"{}", ttl_ms=ttl_ms),
                                   f"ttl_ms {ttl_ms} is out of range")
        self.assertRefused(lambda: self.outbox.enqueue(TOPIC, TYPE, b"{}", ttl_ms=1.5), "ttl_ms must be an int")
        self.assertRefused(lambda: self.outbox.enqueue(TOPIC, TYPE, b"{}", ttl_ms=True), "ttl_ms must be an int")
        self.assertRefused(lambda: self.outbox.enqueue(TOPIC, TYPE, b"{}", priority=2**32 + 1),
                           "priority 4294967297 is out of range")
        self.assertRefused(lambda: edge_outbox.Outbox(self.path, busy_timeout_ms=2**32), "busy_timeout_ms")
        self.assertRefused(lambda: edge_outbox.Outbox(self.path, max_pending_events=-1), "max_pending_events")
        self.assertRefused(lambda: edge_outbox.Outbox(self.path, max_database_bytes=2**64), "max_database_bytes")
        with self.outbox.transaction() as tx:
            tx.execute("CREATE TABLE numbers(n INTEGER)")
            self.assertRefused(lambda: tx.execute("INSERT INTO numbers VALUES (?)", (2**63,)), "parameter 1")
            self.assertRefused(lambda: tx.execute("INSERT INTO numbers VALUES (?)", ([1],)), "parameter 1")
            tx.execute("INSERT INTO numbers VALUES (?)", (2**63 - 1,))
        self.assertEqual(self.pending(), 0)
        self.outbox.enqueue(TOPIC, TYPE, b"{}", ttl_ms=60000)
        self.assertEqual(self.pending(), 1)

    def test_a_transaction_used_from_another_thread_is_refused(self):
        outcome = []

        def use(tx):
            for call in (lambda: tx.enqueue(TOPIC, TYPE, b"{}"), lambda: tx.execute("SELECT 1")):
                try:
                    call()
                    outcome.append("accepted")
                except edge_outbox.OutboxError as e:
                    outcome.append(e.name)

        with self.outbox.transaction() as tx:
            thread = threading.Thread(target=use, args=(tx,))
            thread.start()
            thread.join()
        self.assertEqual(outcome, ["invalid_argument", "invalid_argument"])

    def test_a_thread_that_ends_inside_a_transaction_leaves_the_lock_free(self):
        lib = edge_outbox._lib
        began = []

        def begin_and_end_the_thread():
            # Through the C API directly: the thread ends with the transaction open.
            txn = ctypes.c_void_p()
            began.append(lib.edge_outbox_begin(self.outbox._handle, ctypes.byref(txn)))
            event, _buffer = edge_outbox._event(TOPIC, TYPE, b"{}", None, edge_outbox.PRIORITY_NORMAL, 0, None)
            began.append(lib.edge_outbox_txn_enqueue(txn, ctypes.byref(event), None, 0))

        thread = threading.Thread(target=begin_and_end_the_thread)
        thread.start()
        thread.join()
        self.assertEqual(began, [0, 0])
        # Another process (busy after 2 s if the lock were held), another
        # handle and this thread write; the ended thread's event is not there.
        other = subprocess.run(
            [sys.executable, "-c",
             "import sys, edge_outbox\n"
             "with edge_outbox.Outbox(sys.argv[1], busy_timeout_ms=2000) as o:\n"
             "    o.enqueue('devices/gw-1/events/reading', 'reading.recorded', b'{}')\n",
             self.path], capture_output=True, text=True, timeout=60)
        self.assertEqual(other.returncode, 0, other.stderr)
        with edge_outbox.Outbox(self.path, busy_timeout_ms=2000) as second:
            second.enqueue(TOPIC, TYPE, b"{}")
        self.outbox.enqueue(TOPIC, TYPE, b"{}")
        self.assertEqual(self.pending(), 3)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    print(f"test_python_binding: {refusals} refusals, each invalid_argument; "
          f"{len(result.failures) + len(result.errors)} failed")
    sys.exit(0 if result.wasSuccessful() else 1)
