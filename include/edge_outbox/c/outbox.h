/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C API of edge-outbox (libedge-outbox.so.0), for applications that are
 * not C++: open an outbox in the application's SQLite file, write the
 * application's own rows and enqueue events in one transaction, read its
 * statistics. A forwarder (the edge-outbox-forwarder daemon, or a C++
 * Forwarder in another process) sends the events. C11; nothing in it throws.
 *
 * Errors: every function that can fail returns an edge_outbox_status
 * (EDGE_OUTBOX_OK or one code per kind of failure) and leaves a message for
 * the calling thread: edge_outbox_last_error() returns it. The message is
 * per thread, so it is there also when there is no handle (a failed open).
 *
 * Thread rule: one edge_outbox_t may be shared by any number of threads;
 * their calls and transactions run one at a time, first come first served.
 * A transaction (edge_outbox_txn_t) belongs to the thread that began it:
 * enqueue into it, use its sqlite3 connection, commit or roll it back on
 * that thread only, and make no other call on the same edge_outbox_t from
 * that thread while it is open (such a call returns
 * EDGE_OUTBOX_INVALID_ARGUMENT instead of waiting for itself). Other
 * threads' calls on the handle wait until it ends, each wait at most the
 * handle's busy_timeout_ms: EDGE_OUTBOX_BUSY then. The owner is known by a
 * number the library gives each thread once, never by its thread id, so a
 * new thread that the system gives an ended thread's id is not taken for
 * it.
 *
 * A thread that ends (returns from its start function or calls
 * pthread_exit) while a transaction of its is open has it rolled back as it
 * ends, on that thread (a thread_local destructor of this library), and
 * freed: nothing of it is written, and the handle, this process's other
 * handles and other processes can write at once. It happens on the owning
 * thread because the locks the transaction holds must be released by the
 * thread that took them, and at once rather than at another thread's next
 * call so that another process, which makes no call here, is not kept out.
 * A process that ends releases its locks anyway (the file is left as
 * before the transaction). Do not end a thread inside a transaction on
 * purpose: commit or roll back.
 *
 * Ownership: edge_outbox_open makes a handle that edge_outbox_close frees.
 * edge_outbox_begin makes a transaction that edge_outbox_commit or
 * edge_outbox_rollback frees (also when they fail, unless called from
 * another thread than the one that began it: that call is refused and the
 * transaction stays open), or the end of its thread. A call with a
 * transaction that has ended, or that another thread began, returns
 * EDGE_OUTBOX_INVALID_ARGUMENT without reading through the pointer (the
 * library looks it up among the calling thread's open transactions; a
 * later transaction of the same thread may get the same address, so do not
 * keep ended pointers). A handle must not be used after edge_outbox_close
 * or while it closes. Strings passed in are copied; nothing keeps a pointer
 * to them after the call returns.
 */
#ifndef EDGE_OUTBOX_C_OUTBOX_H
#define EDGE_OUTBOX_C_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#if defined(EDGE_OUTBOX_C_BUILDING)
#define EDGE_OUTBOX_C_EXPORT __attribute__((visibility("default")))
#else
#define EDGE_OUTBOX_C_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* SQLite's connection type (sqlite3.h declares the same). */
typedef struct sqlite3 sqlite3;

typedef struct edge_outbox_handle edge_outbox_t;
typedef struct edge_outbox_txn edge_outbox_txn_t;

/* What a call did. One code per edge_outbox::ErrorKind of the C++ library,
 * plus EDGE_OUTBOX_NO_MEMORY. */
typedef enum edge_outbox_status {
  EDGE_OUTBOX_OK = 0,
  EDGE_OUTBOX_INVALID_ARGUMENT = 1, /* bad input or misuse; nothing was written */
  EDGE_OUTBOX_STORAGE_FULL = 2,     /* outbox limits reached or the disk is full; nothing was written */
  EDGE_OUTBOX_CORRUPT = 3,          /* the file is not an edge-outbox/SQLite database or is damaged */
  EDGE_OUTBOX_BUSY = 4,             /* another thread, handle or process held the outbox past the busy timeout */
  EDGE_OUTBOX_DUPLICATE_ID = 5,     /* an event with this id is already in the outbox */
  EDGE_OUTBOX_SCHEMA_TOO_NEW = 6,   /* the file was written by a newer edge-outbox */
  EDGE_OUTBOX_IO = 7,               /* the operating system refused (permissions, missing file) */
  EDGE_OUTBOX_NOT_FOUND = 8,        /* a named event or file does not exist */
  EDGE_OUTBOX_BROKER_REJECTED = 9,  /* the MQTT broker refused (not returned by this API today) */
  EDGE_OUTBOX_CONNECTION = 10,      /* the MQTT broker could not be reached (idem) */
  EDGE_OUTBOX_STOPPED = 11,         /* the object was stopped or is shutting down */
  EDGE_OUTBOX_INTERNAL = 12,        /* a bug in edge-outbox; please report it */
  EDGE_OUTBOX_NO_MEMORY = 13        /* an allocation failed */
} edge_outbox_status;

typedef enum edge_outbox_durability {
  EDGE_OUTBOX_DURABILITY_FULL = 0,  /* a commit is on stable storage when it returns */
  EDGE_OUTBOX_DURABILITY_NORMAL = 1 /* survives a process crash; a power loss may take the newest commits */
} edge_outbox_durability;

typedef enum edge_outbox_capacity_policy {
  EDGE_OUTBOX_REJECT_NEW = 0, /* a full outbox refuses the enqueue: EDGE_OUTBOX_STORAGE_FULL */
  EDGE_OUTBOX_DROP_OLDEST = 1 /* evict the lowest-priority, oldest pending events (never critical ones) */
} edge_outbox_capacity_policy;

typedef enum edge_outbox_priority {
  EDGE_OUTBOX_PRIORITY_CRITICAL = 0,
  EDGE_OUTBOX_PRIORITY_NORMAL = 1,
  EDGE_OUTBOX_PRIORITY_LOW = 2
} edge_outbox_priority;

/* How edge_outbox_open opens the file. Fill it with
 * edge_outbox_options_init, then change what you need. The enum-valued
 * fields are ints (of a fixed size, and a value outside the enum is refused
 * rather than undefined). */
typedef struct edge_outbox_options {
  int durability;                             /* an edge_outbox_durability; default FULL */
  uint32_t busy_timeout_ms;                   /* default 10000 */
  uint64_t max_pending_events;                /* 0: unbounded (default) */
  uint64_t max_database_bytes;                /* 0: unbounded (default) */
  unsigned file_mode;                         /* permission bits of a created file; 0: the library's 0600 */
  int capacity_policy;                        /* an edge_outbox_capacity_policy; default REJECT_NEW */
  const char* dropped_event_topic;            /* NULL: "edge-outbox/dropped" */
} edge_outbox_options;

/* One event to enqueue. Fill it with edge_outbox_event_init, then set at
 * least topic, type and the data. The rules for each field: the C++
 * header edge_outbox/event.h. */
typedef struct edge_outbox_event {
  const char* topic;        /* MQTT topic name */
  const char* type;         /* CloudEvents type, e.g. "reading.recorded" */
  const void* data;         /* the payload bytes, sent as they are; may be NULL when data_length is 0 */
  size_t data_length;
  const char* content_type; /* NULL: "application/octet-stream" */
  int priority;             /* an edge_outbox_priority; default NORMAL */
  int64_t ttl_ms;           /* 0: no time to live; else dead-lettered as "expired" after this long */
  const char* id;           /* NULL: a fresh UUIDv7; else a stable id of 1..128 printable ASCII characters */
} edge_outbox_event;

/* The outbox's counts, from edge_outbox_get_stats. */
typedef struct edge_outbox_stats {
  uint64_t pending;              /* not yet settled, unconfirmed included */
  uint64_t unconfirmed;          /* acknowledged by the broker, waiting for the server's confirmation */
  uint64_t dead;                 /* dead letters */
  uint64_t published_total;
  uint64_t dropped_total;        /* evicted by DROP_OLDEST, ever */
  uint64_t database_bytes;
  uint64_t wal_bytes;
  int64_t oldest_pending_age_ms; /* -1 when nothing is pending */
} edge_outbox_stats;

/* An id buffer of this size holds any event id and its terminating NUL. */
#define EDGE_OUTBOX_ID_SIZE 129

/* "0.1.0": the library's version. Never NULL. */
EDGE_OUTBOX_C_EXPORT const char* edge_outbox_version(void);

/* A stable lower-case name such as "storage_full" for an
 * edge_outbox_status ("unknown" for a value that is none). Never NULL. */
EDGE_OUTBOX_C_EXPORT const char* edge_outbox_status_name(int status);

/* The message of the last failed call on this thread (empty when none
 * failed yet). Valid until the next call into this library on this thread. */
EDGE_OUTBOX_C_EXPORT const char* edge_outbox_last_error(void);

/* The defaults. Requires: options is not NULL. */
EDGE_OUTBOX_C_EXPORT void edge_outbox_options_init(edge_outbox_options* options);

/* An empty event with the default content type, priority and no TTL.
 * Requires: event is not NULL. */
EDGE_OUTBOX_C_EXPORT void edge_outbox_event_init(edge_outbox_event* event);

/* Opens or creates the outbox in the SQLite file at path (the application's
 * own tables may live there too), creating the outbox tables if missing.
 * options may be NULL for the defaults. On success *outbox is the handle;
 * on failure it is NULL. */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_open(const char* path, const edge_outbox_options* options,
                                                         edge_outbox_t** outbox);

/* Closes the handle and frees it. NULL is allowed (does nothing). Waits
 * for another thread's call or transaction on it (up to the busy timeout:
 * EDGE_OUTBOX_BUSY, closing nothing); returns EDGE_OUTBOX_INVALID_ARGUMENT,
 * closing nothing, while a transaction of the calling thread is open on it.
 * Requires: no other thread uses the handle after this call. */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_close(edge_outbox_t* outbox);

/* Begins a write transaction (BEGIN IMMEDIATE): waits for the other
 * threads' calls and transactions on this handle, then for the writers of
 * this process's other handles, then for other processes, each wait up to
 * the busy timeout (then EDGE_OUTBOX_BUSY). On success *txn is the
 * transaction. */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_begin(edge_outbox_t* outbox, edge_outbox_txn_t** txn);

/* The SQLite connection the transaction runs on: write the application's
 * own tables through it (sqlite3_exec, sqlite3_prepare_v2...), and they
 * commit or roll back with the events. Do not begin, commit or roll back on
 * it, do not close it, do not touch the outbox_* tables, and do not keep it
 * past the transaction. NULL for a NULL txn or from another thread than the
 * one that began it. */
EDGE_OUTBOX_C_EXPORT sqlite3* edge_outbox_txn_db(edge_outbox_txn_t* txn);

/* Validates and enqueues the event in the transaction. If id_out is not
 * NULL, the event's id is written there (NUL-terminated; id_out_size of
 * EDGE_OUTBOX_ID_SIZE always suffices). A refused event
 * (EDGE_OUTBOX_INVALID_ARGUMENT, DUPLICATE_ID, STORAGE_FULL) leaves the
 * transaction as it was: it may go on and commit. */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_txn_enqueue(edge_outbox_txn_t* txn,
                                                                const edge_outbox_event* event, char* id_out,
                                                                size_t id_out_size);

/* Commits the transaction and frees it, also when the commit fails (the
 * transaction is then rolled back). From another thread than the one that
 * began it, or for a transaction that has ended:
 * EDGE_OUTBOX_INVALID_ARGUMENT, nothing done. */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_commit(edge_outbox_txn_t* txn);

/* Rolls the transaction back (nothing of it stays) and frees it. */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_rollback(edge_outbox_txn_t* txn);

/* One event in a transaction of its own (begin, enqueue, commit). */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_enqueue(edge_outbox_t* outbox, const edge_outbox_event* event,
                                                            char* id_out, size_t id_out_size);

/* Fills *stats. */
EDGE_OUTBOX_C_EXPORT edge_outbox_status edge_outbox_get_stats(edge_outbox_t* outbox, edge_outbox_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* EDGE_OUTBOX_C_OUTBOX_H */
