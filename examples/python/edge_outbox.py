# SPDX-License-Identifier: Apache-2.0
"""edge_outbox: the outbox from Python, through the C API (libedge-outbox.so.0)
with ctypes. Debian's python3 is enough: no pip, no compiler.

    with edge_outbox.Outbox("/var/lib/app/app.db") as outbox:
        with outbox.transaction() as tx:          # commits, or rolls back on an exception
            tx.execute("INSERT INTO readings(value) VALUES (?)", (21.5,))
            tx.enqueue("devices/gw-1/events/reading", "reading.recorded",
                       b'{"value":21.5}', content_type="application/json")

The application's own SQL runs on the transaction's connection (tx.execute,
through libsqlite3 with ctypes: Python's sqlite3 module cannot use a
connection it did not open), so the rows and the events commit together.

Thread rule: an Outbox may be shared by threads; a transaction belongs to the
thread that began it and ends with its with block. Errors raise OutboxError
(status name and message); what the C API cannot carry as given (a NUL
inside a string, data that is not bytes or str, a number out of its C
type's range) and a Transaction used after its block raise OutboxError
"invalid_argument" before anything reaches the library.
The library is looked for as $EDGE_OUTBOX_LIBRARY, else libedge-outbox.so.0
on the loader's path.
"""
import contextlib
import ctypes
import os

__all__ = ["Outbox", "Transaction", "OutboxError", "version",
           "DURABILITY_FULL", "DURABILITY_NORMAL", "REJECT_NEW", "DROP_OLDEST",
           "PRIORITY_CRITICAL", "PRIORITY_NORMAL", "PRIORITY_LOW"]

DURABILITY_FULL, DURABILITY_NORMAL = 0, 1
REJECT_NEW, DROP_OLDEST = 0, 1
PRIORITY_CRITICAL, PRIORITY_NORMAL, PRIORITY_LOW = 0, 1, 2
_ID_SIZE = 129  # EDGE_OUTBOX_ID_SIZE
_INVALID_ARGUMENT = 1  # EDGE_OUTBOX_INVALID_ARGUMENT
_INT32 = (-2**31, 2**31 - 1)
_INT64 = (-2**63, 2**63 - 1)
_UINT32 = (0, 2**32 - 1)
_UINT64 = (0, 2**64 - 1)


class _Options(ctypes.Structure):
    _fields_ = [("durability", ctypes.c_int),
                ("busy_timeout_ms", ctypes.c_uint32),
                ("max_pending_events", ctypes.c_uint64),
                ("max_database_bytes", ctypes.c_uint64),
                ("file_mode", ctypes.c_uint),
                ("capacity_policy", ctypes.c_int),
                ("dropped_event_topic", ctypes.c_char_p)]


class _Event(ctypes.Structure):
    _fields_ = [("topic", ctypes.c_char_p),
                ("type", ctypes.c_char_p),
                ("data", ctypes.c_void_p),
                ("data_length", ctypes.c_size_t),
                ("content_type", ctypes.c_char_p),
                ("priority", ctypes.c_int),
                ("ttl_ms", ctypes.c_int64),
                ("id", ctypes.c_char_p)]


class _Stats(ctypes.Structure):
    _fields_ = [("pending", ctypes.c_uint64),
                ("unconfirmed", ctypes.c_uint64),
                ("dead", ctypes.c_uint64),
                ("published_total", ctypes.c_uint64),
                ("dropped_total", ctypes.c_uint64),
                ("database_bytes", ctypes.c_uint64),
                ("wal_bytes", ctypes.c_uint64),
                ("oldest_pending_age_ms", ctypes.c_int64)]


def _load():
    lib = ctypes.CDLL(os.environ.get("EDGE_OUTBOX_LIBRARY", "libedge-outbox.so.0"))
    p = ctypes.c_void_p
    status = ctypes.c_int
    sigs = {
        "edge_outbox_version": (ctypes.c_char_p, []),
        "edge_outbox_status_name": (ctypes.c_char_p, [status]),
        "edge_outbox_last_error": (ctypes.c_char_p, []),
        "edge_outbox_options_init": (None, [ctypes.POINTER(_Options)]),
        "edge_outbox_event_init": (None, [ctypes.POINTER(_Event)]),
        "edge_outbox_open": (status, [ctypes.c_char_p, ctypes.POINTER(_Options), ctypes.POINTER(p)]),
        "edge_outbox_close": (status, [p]),
        "edge_outbox_begin": (status, [p, ctypes.POINTER(p)]),
        "edge_outbox_txn_db": (p, [p]),
        "edge_outbox_txn_enqueue": (status, [p, ctypes.POINTER(_Event), ctypes.c_char_p, ctypes.c_size_t]),
        "edge_outbox_commit": (status, [p]),
        "edge_outbox_rollback": (status, [p]),
        "edge_outbox_enqueue": (status, [p, ctypes.POINTER(_Event), ctypes.c_char_p, ctypes.c_size_t]),
        "edge_outbox_get_stats": (status, [p, ctypes.POINTER(_Stats)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _load_sqlite():
    # The libsqlite3 libedge-outbox.so.0 is linked with: the loader gives
    # the same one to both.
    lib = ctypes.CDLL("libsqlite3.so.0")
    p = ctypes.c_void_p
    sigs = {
        "sqlite3_prepare_v2": (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(p), p]),
        "sqlite3_bind_null": (ctypes.c_int, [p, ctypes.c_int]),
        "sqlite3_bind_int64": (ctypes.c_int, [p, ctypes.c_int, ctypes.c_int64]),
        "sqlite3_bind_double": (ctypes.c_int, [p, ctypes.c_int, ctypes.c_double]),
        "sqlite3_bind_text": (ctypes.c_int, [p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, p]),
        "sqlite3_bind_blob": (ctypes.c_int, [p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, p]),
        "sqlite3_bind_parameter_count": (ctypes.c_int, [p]),
        "sqlite3_step": (ctypes.c_int, [p]),
        "sqlite3_finalize": (ctypes.c_int, [p]),
        "sqlite3_column_count": (ctypes.c_int, [p]),
        "sqlite3_column_type": (ctypes.c_int, [p, ctypes.c_int]),
        "sqlite3_column_int64": (ctypes.c_int64, [p, ctypes.c_int]),
        "sqlite3_column_double": (ctypes.c_double, [p, ctypes.c_int]),
        "sqlite3_column_bytes": (ctypes.c_int, [p, ctypes.c_int]),
        "sqlite3_column_blob": (p, [p, ctypes.c_int]),
        "sqlite3_errmsg": (ctypes.c_char_p, [p]),
        "sqlite3_last_insert_rowid": (ctypes.c_int64, [p]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


_lib = _load()
_sqlite = None  # loaded at the first execute
_SQLITE_ROW, _SQLITE_DONE = 100, 101
_SQLITE_TRANSIENT = ctypes.c_void_p(-1)  # SQLite copies the bound value


class OutboxError(Exception):
    """A failed call: status (the edge_outbox_status code), name (e.g.
    "storage_full") and the library's message."""

    def __init__(self, status, message):
        self.status = status
        self.name = _lib.edge_outbox_status_name(status).decode()
        super().__init__(f"{self.name}: {message}")


class SqliteError(Exception):
    """The application's own SQL failed on the transaction's connection."""


def _check(status):
    if status != 0:
        raise OutboxError(status, _lib.edge_outbox_last_error().decode(errors="replace"))


def _refuse(message):
    raise OutboxError(_INVALID_ARGUMENT, message)


def _text(name, value, required=False):
    """value (str or bytes) as the bytes of a C string, None as NULL. A NUL
    inside is refused: the C string would end there."""
    if value is None:
        if required:
            _refuse(f"{name} is None")
        return None
    if isinstance(value, str):
        value = value.encode()
    elif not isinstance(value, bytes):
        _refuse(f"{name} must be str or bytes, not {type(value).__name__}")
    if b"\0" in value:
        _refuse(f"{name} contains a NUL character (the C string would end there)")
    return value


def _int(name, value, bounds, meaning=""):
    """value as an int within bounds (the C field's range, or narrower)."""
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int):
        _refuse(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        _refuse(f"{name} {value} is out of range ({low}..{high}{meaning})")
    return value


def _payload(data):
    """The event's data: bytes-like or str (UTF-8); None is empty."""
    if data is None:
        return b""
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    _refuse(f"data must be bytes or str, not {type(data).__name__}")


def version():
    """The library's version, e.g. "0.1.0"."""
    return _lib.edge_outbox_version().decode()


def _event(topic, type, data, content_type, priority, ttl_ms, id):
    event = _Event()
    _lib.edge_outbox_event_init(ctypes.byref(event))
    payload = _payload(data)
    buffer = ctypes.create_string_buffer(payload, len(payload))
    event.topic, event.type = _text("topic", topic, required=True), _text("type", type, required=True)
    event.data = ctypes.cast(buffer, ctypes.c_void_p)
    event.data_length = len(payload)
    event.content_type = _text("content_type", content_type)
    event.priority = _int("priority", priority, _INT32)
    event.ttl_ms = _int("ttl_ms", ttl_ms, (0, _INT64[1]), "; 0: no TTL")
    event.id = _text("id", id)
    return event, buffer  # the buffer lives as long as the event is used


class Transaction:
    """One transaction: the application's SQL (execute) and events
    (enqueue) commit together. Made by Outbox.transaction()."""

    def __init__(self, handle):
        self._handle = handle  # None once the transaction has ended

    def _open_handle(self):
        if not self._handle:
            _refuse("the transaction has ended (its with block is over): begin another with outbox.transaction()")
        return self._handle

    def _end(self):
        """The handle, which the caller commits or rolls back; this object
        refuses every use from now on."""
        handle, self._handle = self._open_handle(), None
        return handle

    def execute(self, sql, params=()):
        """Runs one SQL statement with ? parameters (None, int, float, str,
        bytes) on the transaction's connection; returns the rows as tuples."""
        global _sqlite
        if _sqlite is None:
            _sqlite = _load_sqlite()
        sql = _text("sql", sql, required=True)
        db = _lib.edge_outbox_txn_db(self._open_handle())
        if not db:
            _refuse("the transaction belongs to another thread: use it on the thread that began it")
        stmt = ctypes.c_void_p()
        if _sqlite.sqlite3_prepare_v2(db, sql, -1, ctypes.byref(stmt), None) != 0:
            raise SqliteError(_sqlite.sqlite3_errmsg(db).decode(errors="replace"))
        try:
            if _sqlite.sqlite3_bind_parameter_count(stmt) != len(params):
                raise SqliteError(f"{len(params)} parameters for a statement that takes "
                                  f"{_sqlite.sqlite3_bind_parameter_count(stmt)}")
            for i, value in enumerate(params, start=1):
                if value is None:
                    rc = _sqlite.sqlite3_bind_null(stmt, i)
                elif isinstance(value, bool) or isinstance(value, int):
                    rc = _sqlite.sqlite3_bind_int64(stmt, i, _int(f"parameter {i}", int(value), _INT64))
                elif isinstance(value, float):
                    rc = _sqlite.sqlite3_bind_double(stmt, i, value)
                elif isinstance(value, str):
                    raw = value.encode()
                    rc = _sqlite.sqlite3_bind_text(stmt, i, raw, len(raw), _SQLITE_TRANSIENT)
                elif isinstance(value, (bytes, bytearray, memoryview)):
                    raw = bytes(value)
                    rc = _sqlite.sqlite3_bind_blob(stmt, i, raw, len(raw), _SQLITE_TRANSIENT)
                else:
                    _refuse(f"parameter {i} must be None, int, float, str or bytes, not {type(value).__name__}")
                if rc != 0:
                    raise SqliteError(_sqlite.sqlite3_errmsg(db).decode(errors="replace"))
            rows = []
            while True:
                rc = _sqlite.sqlite3_step(stmt)
                if rc == _SQLITE_DONE:
                    return rows
                if rc != _SQLITE_ROW:
                    raise SqliteError(_sqlite.sqlite3_errmsg(db).decode(errors="replace"))
                rows.append(tuple(self._column(stmt, c) for c in range(_sqlite.sqlite3_column_count(stmt))))
        finally:
            _sqlite.sqlite3_finalize(stmt)

    @staticmethod
    def _column(stmt, c):
        kind = _sqlite.sqlite3_column_type(stmt, c)
        if kind == 1:
            return _sqlite.sqlite3_column_int64(stmt, c)
        if kind == 2:
            return _sqlite.sqlite3_column_double(stmt, c)
        if kind == 5:
            return None
        raw = ctypes.string_at(_sqlite.sqlite3_column_blob(stmt, c), _sqlite.sqlite3_column_bytes(stmt, c))
        return raw.decode(errors="replace") if kind == 3 else raw

    def last_insert_rowid(self):
        """The rowid of the last INSERT on the transaction's connection."""
        return self.execute("SELECT last_insert_rowid()")[0][0]

    def enqueue(self, topic, type, data=b"", content_type=None, priority=PRIORITY_NORMAL, ttl_ms=0, id=None):
        """Enqueues an event in the transaction; returns its id. A refused
        event raises OutboxError and leaves the transaction as it was."""
        event, _buffer = _event(topic, type, data, content_type, priority, ttl_ms, id)
        out = ctypes.create_string_buffer(_ID_SIZE)
        _check(_lib.edge_outbox_txn_enqueue(self._open_handle(), ctypes.byref(event), out, _ID_SIZE))
        return out.value.decode()


class Outbox:
    """An outbox in the SQLite file at path (created if missing). Close it
    with close() or use it as a context manager."""

    def __init__(self, path, durability=DURABILITY_FULL, busy_timeout_ms=10000, max_pending_events=0,
                 max_database_bytes=0, file_mode=0, capacity_policy=REJECT_NEW, dropped_event_topic=None):
        self._handle = None
        options = _Options()
        _lib.edge_outbox_options_init(ctypes.byref(options))
        options.durability = _int("durability", durability, _INT32)
        options.busy_timeout_ms = _int("busy_timeout_ms", busy_timeout_ms, _UINT32)
        options.max_pending_events = _int("max_pending_events", max_pending_events, _UINT64, "; 0: unbounded")
        options.max_database_bytes = _int("max_database_bytes", max_database_bytes, _UINT64, "; 0: unbounded")
        options.file_mode = _int("file_mode", file_mode, _UINT32)
        options.capacity_policy = _int("capacity_policy", capacity_policy, _INT32)
        options.dropped_event_topic = _text("dropped_event_topic", dropped_event_topic)
        handle = ctypes.c_void_p()
        _check(_lib.edge_outbox_open(_text("path", os.fsencode(path), required=True), ctypes.byref(options),
                                     ctypes.byref(handle)))
        self._handle = handle

    def close(self):
        if self._handle:
            _check(_lib.edge_outbox_close(self._handle))
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open_handle(self):
        if not self._handle:
            _refuse("the outbox is closed")
        return self._handle

    @contextlib.contextmanager
    def transaction(self):
        """A transaction: committed when the block ends, rolled back when it
        raises (the exception goes on)."""
        txn = ctypes.c_void_p()
        _check(_lib.edge_outbox_begin(self._open_handle(), ctypes.byref(txn)))
        tx = Transaction(txn)
        try:
            yield tx
        except BaseException:
            _lib.edge_outbox_rollback(tx._end())
            raise
        _check(_lib.edge_outbox_commit(tx._end()))

    def enqueue(self, topic, type, data=b"", content_type=None, priority=PRIORITY_NORMAL, ttl_ms=0, id=None):
        """One event in a transaction of its own; returns its id."""
        event, _buffer = _event(topic, type, data, content_type, priority, ttl_ms, id)
        out = ctypes.create_string_buffer(_ID_SIZE)
        _check(_lib.edge_outbox_enqueue(self._open_handle(), ctypes.byref(event), out, _ID_SIZE))
        return out.value.decode()

    def stats(self):
        """The counts as a dict (oldest_pending_age_ms is None when nothing is pending)."""
        stats = _Stats()
        _check(_lib.edge_outbox_get_stats(self._open_handle(), ctypes.byref(stats)))
        result = {name: getattr(stats, name) for name, _ in _Stats._fields_}
        if result["oldest_pending_age_ms"] < 0:
            result["oldest_pending_age_ms"] = None
        return result
