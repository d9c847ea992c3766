// SPDX-License-Identifier: Apache-2.0
// The PostgreSQL store's commit statements (ingest/store/commit_algorithm.h's
// CommitStatements): multi-row INSERTs of rows_per_statement() rows at most,
// text as binary-format parameters with explicit lengths, on the store's
// connection; and the stored versions read back for comparison.
//
// Thread rule: one thread at a time, as the Store that owns it.
// Ownership: refers to the store's connection and fork runner, which must
// outlive it; owns nothing.
// Durable: what the caller's transaction commits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ingest/store/commit_algorithm.h"
#include "ingest/store/fork_records.h"
#include "ingest/store/pg_connection.h"

namespace edge_outbox::ingest::pg {

// Appends the row's stream position and event id: four NULLs unless it has
// all three of the position (the id NULL when empty).
void add_position(Params& p, const RejectedRow& row);

class PgCommitStatements final : public CommitStatements {
 public:
  PgCommitStatements(PgConnection& conn, SqlRunner& runner);
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
  PgConnection& conn_;
  SqlRunner& runner_;
  std::map<std::size_t, std::string> insert_sql_;  // rows -> the INSERT of that many events
};

}  // namespace edge_outbox::ingest::pg
