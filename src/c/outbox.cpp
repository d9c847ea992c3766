// SPDX-License-Identifier: Apache-2.0
// The entry points of the C API (include/edge_outbox/c/outbox.h). Each one
// catches everything (c_api::guarded) and reports it as a status and the
// thread's message.
#include <edge_outbox/c/outbox.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <edge_outbox/error.h>
#include <edge_outbox/outbox.h>

#include "c/c_conversions.h"
#include "c/c_status.h"
#include "c/handle_turn.h"
#include "storage/open_transaction.h"

using edge_outbox::Error;
using edge_outbox::ErrorKind;
namespace c_api = edge_outbox::c_api;

struct edge_outbox_handle {
  edge_outbox_handle(const char* path, const edge_outbox::OutboxOptions& options)
      : outbox(path, options), turn(options.busy_timeout) {}

  edge_outbox::Outbox outbox;
  // Held by a thread for each of its calls and for its open transaction.
  c_api::HandleTurn turn;
};

struct edge_outbox_txn {
  explicit edge_outbox_txn(edge_outbox_handle& handle) : owner(handle), open(std::in_place, handle.outbox) {}

  edge_outbox_handle& owner;  // whose turn the transaction's thread holds
  std::optional<edge_outbox::OpenTransaction> open;
};

namespace {

void require(bool condition, const char* message) {
  if (!condition) throw Error(ErrorKind::invalid_argument, message);
}

// Ends txn (commit or roll back), gives its handle's turn back and frees
// it, on every path. Called on the thread that began it.
edge_outbox_status end_transaction(edge_outbox_txn* txn, bool commit) noexcept;

// The transactions open on this thread. A thread that ends with some open
// (it returned or called pthread_exit between edge_outbox_begin and the
// commit) has them rolled back here, on that thread, as it ends: the
// Outbox's mutex and the write locks are released by the thread that took
// them, at once, and no other thread has to notice.
struct ThreadTransactions {
  std::vector<edge_outbox_txn*> open;

  ThreadTransactions() = default;
  ThreadTransactions(const ThreadTransactions&) = delete;
  ThreadTransactions& operator=(const ThreadTransactions&) = delete;
  ~ThreadTransactions();
};

// Set once this thread's ThreadTransactions is gone (another thread_local
// destructor may call in later); trivially destructible, so still readable.
thread_local bool thread_transactions_gone = false;

ThreadTransactions& this_thread_transactions() {
  thread_local ThreadTransactions transactions;
  return transactions;
}

ThreadTransactions::~ThreadTransactions() {
  while (!open.empty()) end_transaction(open.back(), false);
  thread_transactions_gone = true;
}

// Whether txn is open on this thread. Looked up among this thread's open
// transactions, never read through the pointer: a transaction that has
// ended (freed) or another thread's is not touched.
bool open_on_this_thread(const edge_outbox_txn* txn) {
  if (thread_transactions_gone) return false;
  const auto& open = this_thread_transactions().open;
  return std::find(open.begin(), open.end(), txn) != open.end();
}

// Requires: txn is open on this thread.
void require_own_transaction(const edge_outbox_txn* txn) {
  require(open_on_this_thread(txn),
          "the transaction is not open on this thread: it belongs to another thread (use it on the thread that "
          "began it), or it has ended (committed, rolled back, or its thread ended)");
}

// The handle's turn for one call.
class CallTurn {
 public:
  explicit CallTurn(edge_outbox_handle& handle) : turn_(handle.turn) { turn_.take(c_api::this_thread_token()); }
  ~CallTurn() { turn_.give_back(); }
  CallTurn(const CallTurn&) = delete;
  CallTurn& operator=(const CallTurn&) = delete;

 private:
  c_api::HandleTurn& turn_;
};

edge_outbox_status end_transaction(edge_outbox_txn* txn, bool commit) noexcept {
  const auto status = c_api::guarded([&] {
    if (commit) txn->open->commit();
  });
  const auto ended = c_api::guarded([&] { txn->open.reset(); });  // rolls back unless committed
  txn->owner.turn.give_back();
  auto& open = this_thread_transactions().open;
  open.erase(std::remove(open.begin(), open.end(), txn), open.end());
  delete txn;
  return status != EDGE_OUTBOX_OK ? status : ended;
}

void copy_id(const std::string& id, char* id_out, std::size_t id_out_size) {
  if (id_out == nullptr) return;
  std::memcpy(id_out, id.c_str(), std::min(id.size() + 1, id_out_size));
  id_out[id_out_size - 1] = '\0';
}

void require_id_room(const edge_outbox_event& event, const char* id_out, std::size_t id_out_size) {
  require(id_out == nullptr || id_out_size >= c_api::id_size_needed(event),
          "id_out_size is too small for the event's id (EDGE_OUTBOX_ID_SIZE always suffices)");
}

// Ends txn (commit or roll back) and frees it, when called on its thread.
edge_outbox_status finish(edge_outbox_txn* txn, bool commit) noexcept {
  if (txn == nullptr) return c_api::fail(EDGE_OUTBOX_INVALID_ARGUMENT, "the transaction is NULL");
  const auto own = c_api::guarded([&] { require_own_transaction(txn); });
  if (own != EDGE_OUTBOX_OK) return own;
  return end_transaction(txn, commit);
}

}  // namespace

extern "C" {

const char* edge_outbox_version(void) { return EDGE_OUTBOX_VERSION; }

const char* edge_outbox_status_name(int status) {
  switch (status) {
    case EDGE_OUTBOX_OK: return "ok";
    case EDGE_OUTBOX_INVALID_ARGUMENT: return "invalid_argument";
    case EDGE_OUTBOX_STORAGE_FULL: return "storage_full";
    case EDGE_OUTBOX_CORRUPT: return "corrupt";
    case EDGE_OUTBOX_BUSY: return "busy";
    case EDGE_OUTBOX_DUPLICATE_ID: return "duplicate_id";
    case EDGE_OUTBOX_SCHEMA_TOO_NEW: return "schema_too_new";
    case EDGE_OUTBOX_IO: return "io";
    case EDGE_OUTBOX_NOT_FOUND: return "not_found";
    case EDGE_OUTBOX_BROKER_REJECTED: return "broker_rejected";
    case EDGE_OUTBOX_CONNECTION: return "connection";
    case EDGE_OUTBOX_STOPPED: return "stopped";
    case EDGE_OUTBOX_INTERNAL: return "internal";
    case EDGE_OUTBOX_NO_MEMORY: return "no_memory";
  }
  return "unknown";
}

const char* edge_outbox_last_error(void) { return c_api::last_error(); }

void edge_outbox_options_init(edge_outbox_options* options) {
  if (options == nullptr) return;
  *options = edge_outbox_options{};
  options->durability = EDGE_OUTBOX_DURABILITY_FULL;
  options->busy_timeout_ms = 10'000;
  options->capacity_policy = EDGE_OUTBOX_REJECT_NEW;
}

void edge_outbox_event_init(edge_outbox_event* event) {
  if (event == nullptr) return;
  *event = edge_outbox_event{};
  event->priority = EDGE_OUTBOX_PRIORITY_NORMAL;
}

edge_outbox_status edge_outbox_open(const char* path, const edge_outbox_options* options, edge_outbox_t** outbox) {
  if (outbox == nullptr) return c_api::fail(EDGE_OUTBOX_INVALID_ARGUMENT, "outbox (the result) is NULL");
  *outbox = nullptr;
  return c_api::guarded([&] {
    require(path != nullptr && *path != '\0', "path is NULL or empty");
    edge_outbox_options defaults;
    edge_outbox_options_init(&defaults);
    *outbox = new edge_outbox_handle(path, c_api::outbox_options_from(options != nullptr ? *options : defaults));
  });
}

edge_outbox_status edge_outbox_close(edge_outbox_t* outbox) {
  if (outbox == nullptr) return EDGE_OUTBOX_OK;
  return c_api::guarded([&] {
    // Waits for another thread's transaction like any call; refused for
    // this thread's own. The turn goes with the handle.
    outbox->turn.take(c_api::this_thread_token());
    delete outbox;
  });
}

edge_outbox_status edge_outbox_begin(edge_outbox_t* outbox, edge_outbox_txn_t** txn) {
  if (txn == nullptr) return c_api::fail(EDGE_OUTBOX_INVALID_ARGUMENT, "txn (the result) is NULL");
  *txn = nullptr;
  return c_api::guarded([&] {
    require(outbox != nullptr, "outbox is NULL");
    require(!thread_transactions_gone, "this thread is ending (its thread_local objects are being destroyed): begin "
                                       "transactions on a thread that goes on");
    auto& open = this_thread_transactions().open;
    open.reserve(open.size() + 1);  // so that recording the transaction below cannot fail
    outbox->turn.take(c_api::this_thread_token());
    try {
      auto begun = std::make_unique<edge_outbox_txn>(*outbox);
      open.push_back(begun.get());
      *txn = begun.release();
    } catch (...) {
      outbox->turn.give_back();
      throw;
    }
  });
}

sqlite3* edge_outbox_txn_db(edge_outbox_txn_t* txn) {
  if (txn == nullptr || !open_on_this_thread(txn)) return nullptr;
  return txn->open->transaction().db().getHandle();
}

edge_outbox_status edge_outbox_txn_enqueue(edge_outbox_txn_t* txn, const edge_outbox_event* event, char* id_out,
                                           size_t id_out_size) {
  return c_api::guarded([&] {
    require(txn != nullptr, "the transaction is NULL");
    require(event != nullptr, "event is NULL");
    require_own_transaction(txn);
    require_id_room(*event, id_out, id_out_size);
    copy_id(txn->open->transaction().enqueue(c_api::event_from(*event)), id_out, id_out_size);
  });
}

edge_outbox_status edge_outbox_commit(edge_outbox_txn_t* txn) { return finish(txn, true); }

edge_outbox_status edge_outbox_rollback(edge_outbox_txn_t* txn) { return finish(txn, false); }

edge_outbox_status edge_outbox_enqueue(edge_outbox_t* outbox, const edge_outbox_event* event, char* id_out,
                                       size_t id_out_size) {
  return c_api::guarded([&] {
    require(outbox != nullptr, "outbox is NULL");
    require(event != nullptr, "event is NULL");
    require_id_room(*event, id_out, id_out_size);
    CallTurn turn(*outbox);
    copy_id(outbox->outbox.enqueue(c_api::event_from(*event)), id_out, id_out_size);
  });
}

edge_outbox_status edge_outbox_get_stats(edge_outbox_t* outbox, edge_outbox_stats* stats) {
  return c_api::guarded([&] {
    require(outbox != nullptr, "outbox is NULL");
    require(stats != nullptr, "stats is NULL");
    CallTurn turn(*outbox);
    const auto s = outbox->outbox.stats();
    *stats = edge_outbox_stats{};
    stats->pending = s.pending;
    stats->unconfirmed = s.unconfirmed;
    stats->dead = s.dead;
    stats->published_total = s.published_total;
    stats->dropped_total = s.dropped_total;
    stats->database_bytes = s.database_bytes;
    stats->wal_bytes = s.wal_bytes;
    stats->oldest_pending_age_ms = s.oldest_pending_age ? s.oldest_pending_age->count() : -1;
  });
}

}  // extern "C"
