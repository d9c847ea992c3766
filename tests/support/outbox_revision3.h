// SPDX-License-Identifier: Apache-2.0
// A device database as the release of schema revision 3 made it, and the
// statements that release runs which a later revision could break: those
// that name an index (INDEXED BY) or whose plan used an index revision 4
// dropped. Kept as text, like outbox_schema_v1.h, so that the migration tests
// run what that release ships on a file of a later revision. Never edit them
// to follow the library.
//
// Header-only. Throws SQLite::Exception.
#pragma once

#include <cstdint>
#include <filesystem>

#include <SQLiteCpp/SQLiteCpp.h>

#include "support/outbox_schema_v1.h"

namespace edge_outbox::test {

// Revisions 2 and 3 as that release applies them to a revision-1 file.
inline constexpr const char* outbox_revisions_2_3_ddl = R"sql(
ALTER TABLE outbox ADD COLUMN acked_at INTEGER;
CREATE INDEX outbox_unsent ON outbox(sequence) WHERE published_at IS NULL AND acked_at IS NULL;
CREATE INDEX outbox_unconfirmed ON outbox(sequence) WHERE published_at IS NULL AND acked_at IS NOT NULL;
INSERT OR IGNORE INTO outbox_meta(key, value) VALUES ('confirmed_through', 0), ('sent_through', 0);
INSERT OR REPLACE INTO outbox_meta(key, value) VALUES ('schema_revision', 2);
CREATE INDEX outbox_critical ON outbox(sequence) WHERE published_at IS NULL AND priority = 0;
INSERT OR REPLACE INTO outbox_meta(key, value) VALUES ('schema_revision', 3);
)sql";

// The revision-3 release's reads and writes (its outbox_tables.cpp), with the
// columns cut down to the sequence where it read whole events.
namespace revision3 {
inline constexpr const char* select_unsent =
    "SELECT sequence FROM outbox WHERE published_at IS NULL AND acked_at IS NULL AND sequence > ? ORDER BY "
    "sequence LIMIT ?";
inline constexpr const char* select_evictable =
    "SELECT sequence, priority FROM outbox WHERE published_at IS NULL AND priority > 0 ORDER BY priority DESC, "
    "sequence LIMIT ?";
inline constexpr const char* count_pending_in =
    "SELECT count(*) FROM outbox INDEXED BY outbox_pending WHERE published_at IS NULL AND sequence BETWEEN ? AND ?";
inline constexpr const char* count_unconfirmed_in =
    "SELECT count(*) FROM outbox INDEXED BY outbox_unconfirmed WHERE published_at IS NULL AND acked_at IS NOT NULL "
    "AND sequence BETWEEN ? AND ?";
inline constexpr const char* select_critical =
    "SELECT sequence FROM outbox INDEXED BY outbox_critical WHERE published_at IS NULL AND priority = 0 AND "
    "sequence > ?1 AND (acked_at IS NULL OR sequence <= ?3) ORDER BY sequence LIMIT ?2";
inline constexpr const char* mark_acked_row =
    "UPDATE outbox SET acked_at = :wall WHERE sequence = :seq AND published_at IS NULL AND acked_at IS NULL";
inline constexpr const char* confirm_deleted =
    "DELETE FROM outbox WHERE published_at IS NULL AND acked_at IS NOT NULL AND sequence <= :through";
}  // namespace revision3

// A revision-3 device database in WAL mode with `events` pending events
// written by the revision-1 writer's INSERT (the same in revision 3).
inline void make_revision3_file(const std::filesystem::path& file, std::int64_t events) {
  make_revision1_file(file, events);
  SQLite::Database db(file.string(), SQLite::OPEN_READWRITE);
  SQLite::Transaction tx(db);
  db.exec(outbox_revisions_2_3_ddl);
  tx.commit();
}

}  // namespace edge_outbox::test
