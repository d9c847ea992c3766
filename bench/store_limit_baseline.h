// SPDX-License-Identifier: Apache-2.0
// The store's own insert rate, for bench_ingest's ingest_vs_store_limit_ratio
// keys: the rows the ingest stores for a batched device (one source, one
// stream, sequence 1..n, a 120-byte payload, the attributes the forwarder
// sends), inserted straight into the ingest's `events` table with one
// multi-row `INSERT ... ON CONFLICT (source, event_id) DO NOTHING` and one
// transaction per `per_commit` rows, as the ingest commits a batch. Nothing
// is decoded, classified, checked for conflicts or confirmed: what is left
// is the store's cost of the rows themselves.
//
// Requires: the ingest's schema exists in the store (open the ingest's
// store on it once first) and holds none of these ids.
// Thread rule: plain functions; they use their own connection.
// Errors: std::runtime_error naming the failed statement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace edge_outbox::bench {

// SQLite in WAL mode with synchronous=FULL, as the ingest's store with
// --sqlite-sync full. Returns the seconds the inserts took.
double sqlite_store_limit(const std::string& path, std::uint64_t rows, std::size_t per_commit,
                          const std::string& id_prefix);
// PostgreSQL at uri (libpq, parameters in text form, one statement per
// commit in autocommit as the ingest's group commit is one transaction).
double postgres_store_limit(const std::string& uri, std::uint64_t rows, std::size_t per_commit,
                            const std::string& id_prefix);

}  // namespace edge_outbox::bench
