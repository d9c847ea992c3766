/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C API (edge_outbox/c/outbox.h) from a C11 program: the application's
 * row and its event commit together through the transaction's sqlite3
 * connection, a rollback leaves nothing, failures give a status and a
 * message, and bad input is refused without writing. Prints each failed
 * check and exits 1 if any failed.
 */
#include <edge_outbox/c/outbox.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures = 0;

#define CHECK(condition)                                                          \
  do {                                                                            \
    if (!(condition)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #condition); \
      ++failures;                                                                 \
    }                                                                             \
  } while (0)

/* The status must be expected, and a failure must leave a message. */
#define CHECK_STATUS(call, expected)                                                                 \
  do {                                                                                               \
    edge_outbox_status status_ = (call);                                                             \
    if (status_ != (expected)) {                                                                     \
      fprintf(stderr, "%s:%d: %s returned %s (%s), expected %s\n", __FILE__, __LINE__, #call,       \
              edge_outbox_status_name(status_), edge_outbox_last_error(), edge_outbox_status_name(expected)); \
      ++failures;                                                                                    \
    } else if (status_ != EDGE_OUTBOX_OK && edge_outbox_last_error()[0] == '\0') {                   \
      fprintf(stderr, "%s:%d: %s failed without a message\n", __FILE__, __LINE__, #call);          \
      ++failures;                                                                                    \
    }                                                                                                \
  } while (0)

/* What a call from another thread returned. */
struct other_thread {
  edge_outbox_t* outbox;
  edge_outbox_txn_t* txn;
  edge_outbox_status status;
  char message[256];
};

static void* commit_from_other_thread(void* arg) {
  struct other_thread* t = arg;
  t->status = edge_outbox_commit(t->txn);
  snprintf(t->message, sizeof t->message, "%s", edge_outbox_last_error());
  return NULL;
}

static void* enqueue_from_other_thread(void* arg) {
  struct other_thread* t = arg;
  edge_outbox_event event;
  edge_outbox_event_init(&event);
  event.topic = "devices/gw-1/events/other-thread";
  event.type = "other.thread";
  t->status = edge_outbox_enqueue(t->outbox, &event, NULL, 0);
  snprintf(t->message, sizeof t->message, "%s", edge_outbox_last_error());
  return NULL;
}

static long long count_rows(sqlite3* db, const char* table) {
  char sql[128];
  sqlite3_stmt* stmt = NULL;
  long long n = -1;
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return n;
}

/* Rows of a table counted from a connection of its own (what another
 * process sees). */
static long long count_committed(const char* path, const char* table) {
  sqlite3* db = NULL;
  long long n = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) n = count_rows(db, table);
  sqlite3_close(db);
  return n;
}

static uint64_t pending(edge_outbox_t* outbox) {
  edge_outbox_stats stats;
  CHECK_STATUS(edge_outbox_get_stats(outbox, &stats), EDGE_OUTBOX_OK);
  return stats.pending;
}

static edge_outbox_event reading_event(const char* data) {
  edge_outbox_event event;
  edge_outbox_event_init(&event);
  event.topic = "devices/gw-1/events/reading";
  event.type = "reading.recorded";
  event.data = data;
  event.data_length = strlen(data);
  event.content_type = "application/json";
  return event;
}

/* The application's row and the event in one transaction. */
static edge_outbox_status record(edge_outbox_t* outbox, double value, int commit) {
  edge_outbox_txn_t* txn = NULL;
  edge_outbox_status status = edge_outbox_begin(outbox, &txn);
  if (status != EDGE_OUTBOX_OK) return status;
  char sql[128];
  snprintf(sql, sizeof sql, "INSERT INTO readings(value) VALUES (%f)", value);
  if (sqlite3_exec(edge_outbox_txn_db(txn), sql, NULL, NULL, NULL) != SQLITE_OK) {
    edge_outbox_rollback(txn);
    return EDGE_OUTBOX_INTERNAL;
  }
  edge_outbox_event event = reading_event("{\"value\":1}");
  char id[EDGE_OUTBOX_ID_SIZE];
  status = edge_outbox_txn_enqueue(txn, &event, id, sizeof id);
  if (status != EDGE_OUTBOX_OK) {
    edge_outbox_rollback(txn);
    return status;
  }
  CHECK(strlen(id) == 36);
  return commit ? edge_outbox_commit(txn) : edge_outbox_rollback(txn);
}

int main(void) {
  char dir[] = "/tmp/test_c_api.XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  char path[256];
  snprintf(path, sizeof path, "%s/app.db", dir);

  CHECK(strcmp(edge_outbox_version(), EDGE_OUTBOX_EXPECTED_VERSION) == 0);
  CHECK(strcmp(edge_outbox_status_name(EDGE_OUTBOX_STORAGE_FULL), "storage_full") == 0);
  CHECK(strcmp(edge_outbox_status_name(99), "unknown") == 0);

  edge_outbox_t* outbox = NULL;
  CHECK_STATUS(edge_outbox_open(path, NULL, &outbox), EDGE_OUTBOX_OK);
  if (outbox == NULL) return 1;

  /* The application's table, created through a transaction's connection. */
  edge_outbox_txn_t* txn = NULL;
  CHECK_STATUS(edge_outbox_begin(outbox, &txn), EDGE_OUTBOX_OK);
  CHECK(sqlite3_exec(edge_outbox_txn_db(txn), "CREATE TABLE readings(id INTEGER PRIMARY KEY, value REAL)", NULL,
                     NULL, NULL) == SQLITE_OK);
  CHECK_STATUS(edge_outbox_commit(txn), EDGE_OUTBOX_OK);

  /* Committed: the row and the event, both visible to another connection. */
  CHECK_STATUS(record(outbox, 21.5, 1), EDGE_OUTBOX_OK);
  CHECK(count_committed(path, "readings") == 1);
  CHECK(count_committed(path, "outbox") == 1);
  CHECK(pending(outbox) == 1);

  /* Rolled back: neither. */
  CHECK_STATUS(record(outbox, 22.5, 0), EDGE_OUTBOX_OK);
  CHECK(count_committed(path, "readings") == 1);
  CHECK(count_committed(path, "outbox") == 1);
  CHECK(pending(outbox) == 1);

  /* Inside a transaction, its own uncommitted row is visible on its
   * connection and not to another one. */
  CHECK_STATUS(edge_outbox_begin(outbox, &txn), EDGE_OUTBOX_OK);
  CHECK(sqlite3_exec(edge_outbox_txn_db(txn), "INSERT INTO readings(value) VALUES (1)", NULL, NULL, NULL) ==
        SQLITE_OK);
  CHECK(count_rows(edge_outbox_txn_db(txn), "readings") == 2);
  CHECK(count_committed(path, "readings") == 1);

  /* Calls on the handle from the thread whose transaction is open are
   * refused instead of waiting for themselves. */
  edge_outbox_event event = reading_event("{}");
  edge_outbox_stats stats;
  edge_outbox_txn_t* second = NULL;
  CHECK_STATUS(edge_outbox_enqueue(outbox, &event, NULL, 0), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(strstr(edge_outbox_last_error(), "transaction of this thread") != NULL);
  CHECK_STATUS(edge_outbox_get_stats(outbox, &stats), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK_STATUS(edge_outbox_begin(outbox, &second), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(second == NULL);
  CHECK_STATUS(edge_outbox_close(outbox), EDGE_OUTBOX_INVALID_ARGUMENT);

  /* Bad events are refused and leave the transaction as it was. */
  char id[EDGE_OUTBOX_ID_SIZE];
  event.topic = "devices/+/events";
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, sizeof id), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(strstr(edge_outbox_last_error(), "topic") != NULL);
  event = reading_event("{}");
  event.topic = NULL;
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, sizeof id), EDGE_OUTBOX_INVALID_ARGUMENT);
  event = reading_event("{}");
  event.priority = 7;
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, sizeof id), EDGE_OUTBOX_INVALID_ARGUMENT);
  event = reading_event("{}");
  event.ttl_ms = -1;
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, sizeof id), EDGE_OUTBOX_INVALID_ARGUMENT);
  event = reading_event("{}");
  event.data = NULL;
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, sizeof id), EDGE_OUTBOX_INVALID_ARGUMENT);
  event = reading_event("{}");
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, 10), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(strstr(edge_outbox_last_error(), "id_out_size") != NULL);
  CHECK_STATUS(edge_outbox_txn_enqueue(NULL, &event, id, sizeof id), EDGE_OUTBOX_INVALID_ARGUMENT);

  /* A stable id given by the application, then the same id again. */
  event.id = "reading-42";
  event.priority = EDGE_OUTBOX_PRIORITY_CRITICAL;
  event.ttl_ms = 60000;
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, sizeof id), EDGE_OUTBOX_OK);
  CHECK(strcmp(id, "reading-42") == 0);
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, id, sizeof id), EDGE_OUTBOX_DUPLICATE_ID);
  CHECK(strstr(edge_outbox_last_error(), "reading-42") != NULL);
  CHECK_STATUS(edge_outbox_commit(txn), EDGE_OUTBOX_OK);
  CHECK(count_committed(path, "readings") == 2);
  CHECK(pending(outbox) == 2);

  /* One event in a transaction of its own. */
  event = reading_event("");
  event.data = NULL;
  CHECK_STATUS(edge_outbox_enqueue(outbox, &event, id, sizeof id), EDGE_OUTBOX_OK);
  CHECK(pending(outbox) == 3);
  CHECK(count_committed(path, "outbox") == 3);
  CHECK_STATUS(edge_outbox_get_stats(outbox, &stats), EDGE_OUTBOX_OK);
  CHECK(stats.oldest_pending_age_ms >= 0);
  CHECK(stats.dead == 0);
  CHECK(stats.database_bytes > 0);

  /* Fill up to 8 pending. */
  for (int i = 0; i < 5; ++i) CHECK_STATUS(edge_outbox_enqueue(outbox, &event, NULL, 0), EDGE_OUTBOX_OK);
  CHECK(pending(outbox) == 8);

  /* Threads: another thread cannot end this thread's transaction, and its
   * own call waits for the transaction instead of failing. */
  CHECK_STATUS(edge_outbox_begin(outbox, &txn), EDGE_OUTBOX_OK);
  struct other_thread other = {outbox, txn, EDGE_OUTBOX_OK, ""};
  pthread_t thread;
  CHECK(pthread_create(&thread, NULL, commit_from_other_thread, &other) == 0);
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK(other.status == EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(strstr(other.message, "another thread") != NULL);
  struct other_thread waiter = {outbox, NULL, EDGE_OUTBOX_INTERNAL, ""};
  CHECK(pthread_create(&thread, NULL, enqueue_from_other_thread, &waiter) == 0);
  CHECK_STATUS(edge_outbox_txn_enqueue(txn, &event, NULL, 0), EDGE_OUTBOX_OK);
  CHECK_STATUS(edge_outbox_commit(txn), EDGE_OUTBOX_OK);
  CHECK(pthread_join(thread, NULL) == 0);
  CHECK_STATUS(waiter.status, EDGE_OUTBOX_OK);
  CHECK(pending(outbox) == 10);

  /* NULL arguments. */
  CHECK_STATUS(edge_outbox_commit(NULL), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK_STATUS(edge_outbox_rollback(NULL), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK_STATUS(edge_outbox_begin(NULL, &txn), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK_STATUS(edge_outbox_get_stats(outbox, NULL), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(edge_outbox_txn_db(NULL) == NULL);
  CHECK_STATUS(edge_outbox_close(outbox), EDGE_OUTBOX_OK);
  CHECK_STATUS(edge_outbox_close(NULL), EDGE_OUTBOX_OK);

  /* Reopened: the events are still there, and a bounded outbox refuses. */
  edge_outbox_options options;
  edge_outbox_options_init(&options);
  options.max_pending_events = 10;
  options.durability = EDGE_OUTBOX_DURABILITY_NORMAL;
  CHECK_STATUS(edge_outbox_open(path, &options, &outbox), EDGE_OUTBOX_OK);
  if (outbox == NULL) return 1;
  CHECK(pending(outbox) == 10);
  CHECK_STATUS(record(outbox, 30.0, 1), EDGE_OUTBOX_STORAGE_FULL);
  CHECK(count_committed(path, "readings") == 2);
  CHECK_STATUS(edge_outbox_close(outbox), EDGE_OUTBOX_OK);

  /* Bad options and files. */
  edge_outbox_options_init(&options);
  options.capacity_policy = 5;
  CHECK_STATUS(edge_outbox_open(path, &options, &outbox), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(outbox == NULL);
  CHECK(strstr(edge_outbox_last_error(), "capacity_policy") != NULL);
  edge_outbox_options_init(&options);
  options.file_mode = 0400;
  CHECK_STATUS(edge_outbox_open(path, &options, &outbox), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK(strstr(edge_outbox_last_error(), "file_mode") != NULL);

  /* A file created for an application and a forwarder of one group. */
  char shared[256];
  snprintf(shared, sizeof shared, "%s/shared.db", dir);
  edge_outbox_options_init(&options);
  options.file_mode = 0660;
  CHECK_STATUS(edge_outbox_open(shared, &options, &outbox), EDGE_OUTBOX_OK);
  struct stat st;
  CHECK(stat(shared, &st) == 0 && (st.st_mode & 0777) == 0660);
  CHECK_STATUS(edge_outbox_close(outbox), EDGE_OUTBOX_OK);
  CHECK_STATUS(edge_outbox_open(NULL, NULL, &outbox), EDGE_OUTBOX_INVALID_ARGUMENT);
  CHECK_STATUS(edge_outbox_open(path, NULL, NULL), EDGE_OUTBOX_INVALID_ARGUMENT);

  char not_sqlite[256];
  snprintf(not_sqlite, sizeof not_sqlite, "%s/notes.txt", dir);
  FILE* f = fopen(not_sqlite, "w");
  CHECK(f != NULL);
  if (f != NULL) {
    for (int i = 0; i < 200; ++i) fputs("this is not an SQLite database\n", f);
    fclose(f);
  }
  CHECK_STATUS(edge_outbox_open(not_sqlite, NULL, &outbox), EDGE_OUTBOX_CORRUPT);
  CHECK(outbox == NULL);

  char no_dir[256];
  snprintf(no_dir, sizeof no_dir, "%s/missing/app.db", dir);
  CHECK_STATUS(edge_outbox_open(no_dir, NULL, &outbox), EDGE_OUTBOX_IO);

  char command[512];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", dir);
  if (failures != 0) {
    fprintf(stderr, "test_c_api: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_c_api: all checks passed\n");
  return 0;
}
