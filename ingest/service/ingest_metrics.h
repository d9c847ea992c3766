// SPDX-License-Identifier: Apache-2.0
// The ingest's metrics and health (--metrics-listen, docs/metrics.md): the
// Prometheus text of its counters, and /healthz's verdict. The text and the
// verdict are pure functions of a snapshot; serve_ingest_metrics() takes
// the snapshots from the running Writer, Subscriber and Confirmer.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include <edge_outbox/clock.h>

#include "host/histogram.h"
#include "host/metrics_endpoint.h"
#include "ingest/confirm/confirmer.h"
#include "ingest/intake/message_intake.h"
#include "ingest/intake/subscriber.h"
#include "ingest/commit/writer.h"
#include "ingest/service/retainer.h"

namespace edge_outbox::ingest {

// What the metrics are made of, read at one scrape.
struct IngestSnapshot {
  Counters counters;
  ConfirmerCounters confirmer;
  host::HistogramSnapshot commit_latency;
  std::size_t pending_rows = 0;  // submitted, not yet committed
  bool connected = false;        // to the broker
  bool store_failing = false;    // the last commit attempt failed
  // How long the Writer's current group commit has been pending (see
  // Writer::commit_pending_since); zero while it waits for rows.
  std::chrono::milliseconds commit_pending{0};
  std::uint64_t events_deleted_by_retention = 0;  // Retainer::deleted(); 0 without --retention
  // The early acknowledgement queue (message_intake.h): messages
  // acknowledged on receipt and not yet committed, and their bytes.
  std::size_t early_ack_queue_messages = 0;
  std::size_t early_ack_queue_bytes = 0;
};

// How long a store commit may stay pending before /healthz says so
// (--commit-pending-max).
inline constexpr std::chrono::milliseconds default_commit_pending_max{30000};

// The exposition of every edge_outbox_ingest_* metric.
std::string ingest_metrics_text(const IngestSnapshot& snapshot);
// Healthy while connected and the store takes commits (no failed attempt
// since the last success, and no commit pending longer than
// commit_pending_max); else the reasons, "; "-separated.
host::Health ingest_health(const IngestSnapshot& snapshot,
                           std::chrono::milliseconds commit_pending_max = default_commit_pending_max);

// Reads the snapshot at `now`: never blocks on the broker
// (Subscriber::connected() reads a flag), nor on the store (the Writer
// holds no lock during a store call), only on the Writer's and
// Confirmer's locks.
IngestSnapshot take_snapshot(const Writer& writer, const Subscriber& subscriber, const Confirmer& confirmer,
                             std::chrono::steady_clock::time_point now, const MessageIntake* intake = nullptr);

// Serves /metrics and /healthz on `listen` from the live objects
// (retainer: null without --retention; the early acknowledgement queue from
// `intake`, when given), each snapshot taken at the clock's steady_now().
// Requires: writer, subscriber, confirmer, clock, retainer and intake
// outlive the endpoint (stop or destroy it first). Throws as
// MetricsEndpoint's constructor.
std::unique_ptr<host::MetricsEndpoint> serve_ingest_metrics(
    std::string_view listen, const Writer& writer, const Subscriber& subscriber, const Confirmer& confirmer,
    const Clock& clock, std::chrono::milliseconds commit_pending_max = default_commit_pending_max,
    const Retainer* retainer = nullptr, const MessageIntake* intake = nullptr);

}  // namespace edge_outbox::ingest
