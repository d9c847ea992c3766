// SPDX-License-Identifier: Apache-2.0
// The SQLite store's commit statements (ingest/store/commit_algorithm.h's
// CommitStatements): one row per statement, every statement prepared once
// (ingest/store/sqlite_statements.h); and the binding and reading helpers
// the store shares with them.
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: refers to the store's prepared statements and fork runner,
// which must outlive it; owns nothing.
// Durable: what the caller's transaction commits.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ingest/store/commit_algorithm.h"
#include "ingest/store/fork_records.h"
#include "ingest/store/sqlite_statements.h"

namespace edge_outbox::ingest::sqlite {

// A BLOB or TEXT column's bytes ("" for NULL).
std::string blob(const SQLite::Column& c);

// Binds r's stream position and event id at index .. index + 3: NULLs
// unless it has all three of the position (the id NULL when empty).
void bind_position(SQLite::Statement& st, int index, const RejectedRow& r);

class SqliteCommitStatements final : public CommitStatements {
 public:
  SqliteCommitStatements(SqliteStatements& st, SqlRunner& runner);
  std::size_t rows_per_statement() const override;
  void insert_rejected(const std::vector<const RejectedRow*>& rows) override;
  std::vector<bool> insert_events(const std::vector<const EventRow*>& events) override;
  std::vector<EventRow> stored_events(const std::vector<const EventRow*>& events) override;
  std::vector<EventRow> kept_conflicts(const EventRow& e) override;
  void insert_conflict(const EventRow& e) override;
  std::vector<std::int64_t> stored_report_sequences(const EventRow& report,
                                                    const std::vector<wire::SequenceRange>& ranges) override;
  void insert_explained(const std::string& source, const std::string& streamid,
                        const std::vector<ExplainedRange>& ranges) override;
  std::uint64_t record_sequence_forks(const std::vector<const EventRow*>& stored_new, std::int64_t now_ms) override;
  SqlRunner& runner() override;

 private:
  void insert_rejected(const RejectedRow& r);
  SqliteStatements& st_;
  SqlRunner& runner_;
};

}  // namespace edge_outbox::ingest::sqlite
