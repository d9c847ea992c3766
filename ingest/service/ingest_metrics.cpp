// SPDX-License-Identifier: Apache-2.0
#include "ingest/service/ingest_metrics.h"

#include "host/duration.h"
#include "host/prometheus_text.h"
#include "ingest/model/rejection_reason.h"

namespace edge_outbox::ingest {

namespace {

double as_value(std::uint64_t n) { return static_cast<double>(n); }

}  // namespace

std::string ingest_metrics_text(const IngestSnapshot& s) {
  const Counters& c = s.counters;
  host::PrometheusText text;
  text.counter("edge_outbox_ingest_messages_total", "MQTT messages received (a batch message is one).",
               as_value(c.messages));
  text.counter("edge_outbox_ingest_received_total",
               "Rows received: events and rejections (a batch message gives one per element).", as_value(c.received));
  text.counter("edge_outbox_ingest_stored_total", "Events stored (new (source, id)).", as_value(c.stored));
  text.counter("edge_outbox_ingest_duplicates_total",
               "Events whose (source, id) was already stored with the same content.", as_value(c.duplicates));
  text.counter("edge_outbox_ingest_conflicts_total",
               "Events whose (source, id) was already stored with other content (kept in the conflicts table).",
               as_value(c.conflicts));
  for (const auto reason : all_rejection_reasons)
    text.counter("edge_outbox_ingest_rejected_total", "Messages or batch elements kept in the rejected table, by reason.",
                 as_value(c.rejected_by_reason[static_cast<std::size_t>(reason)]),
                 {{"reason", std::string(to_string(reason))}});
  text.counter("edge_outbox_ingest_store_errors_total", "Failed commit attempts (transient and permanent).",
               as_value(c.store_errors));
  text.counter("edge_outbox_ingest_commits_total", "Store transactions committed (group commits).",
               as_value(c.commits));
  text.histogram("edge_outbox_ingest_commit_duration_seconds", "Time each successful store commit took.",
                 s.commit_latency);
  text.counter("edge_outbox_ingest_invalid_time_total", "Stored events whose time was not RFC 3339.",
               as_value(c.invalid_time));
  text.counter("edge_outbox_ingest_rejected_pruned_total",
               "Oldest rejected rows deleted to stay under --rejected-max-bytes.", as_value(c.rejected_pruned));
  text.counter("edge_outbox_ingest_retained_ignored_total", "Retained deliveries ignored.",
               as_value(c.retained_ignored));
  text.counter("edge_outbox_ingest_early_acked_total",
               "Messages with the confirmation mark acknowledged on receipt, before their commit.",
               as_value(c.early_acked));
  text.counter("edge_outbox_ingest_stream_statuses_total", "Stream statuses recorded.",
               as_value(s.confirmer.statuses));
  text.counter("edge_outbox_ingest_stream_statuses_invalid_total", "Messages on a status topic that were not valid.",
               as_value(s.confirmer.statuses_invalid));
  text.counter("edge_outbox_ingest_stream_statuses_refused_total",
               "Statuses of new streams refused: their device topic had too many streams with no event.",
               as_value(s.confirmer.statuses_refused));
  text.counter("edge_outbox_ingest_confirmations_total", "Confirmations handed to the MQTT client.",
               as_value(s.confirmer.confirmations));
  text.counter("edge_outbox_ingest_streams_handed_over_total",
               "Streams touched here and handed to the pool member that confirms them (--share-group on PostgreSQL).",
               as_value(s.confirmer.streams_handed_over));
  text.counter("edge_outbox_ingest_streams_taken_over_total",
               "Streams other pool members handed here to confirm, or taken over when the pool changed.",
               as_value(s.confirmer.streams_taken_over));
  text.counter("edge_outbox_ingest_source_conflicts_total",
               "Statuses, events and rejected positions refused: their source is bound to another device topic.",
               as_value(c.source_conflicts + s.confirmer.source_conflicts));
  text.counter("edge_outbox_ingest_forks_detected_total",
               "Forks detected: a status whose session the stream's history cannot place, or an event stored at a "
               "sequence that holds another id.",
               as_value(c.forks_detected + s.confirmer.forks_detected));
  text.counter("edge_outbox_ingest_moved_duplicates_total",
               "Events stored before under another stream position, recorded at their new one (moved duplicates).",
               as_value(c.moved_duplicates));
  text.counter("edge_outbox_ingest_events_deleted_by_retention_total",
               "Events deleted by --retention (received before the retention, settled and confirmed).",
               as_value(s.events_deleted_by_retention));
  text.gauge("edge_outbox_ingest_pending_rows", "Rows received and not yet committed.",
             static_cast<double>(s.pending_rows));
  text.gauge("edge_outbox_ingest_early_ack_queue_messages",
             "Messages acknowledged on receipt and not yet committed (--early-ack-queue-messages).",
             static_cast<double>(s.early_ack_queue_messages));
  text.gauge("edge_outbox_ingest_early_ack_queue_bytes", "Their bytes (--early-ack-queue-bytes).",
             static_cast<double>(s.early_ack_queue_bytes));
  text.gauge("edge_outbox_ingest_connected", "1 while connected to the broker, else 0.", s.connected ? 1 : 0);
  text.gauge("edge_outbox_ingest_store_failing", "1 from a failed commit attempt until the next success, else 0.",
             s.store_failing ? 1 : 0);
  text.gauge("edge_outbox_ingest_commit_pending_seconds",
             "How long the store commit in progress has been pending (0 when none is).",
             std::chrono::duration<double>(s.commit_pending).count());
  return text.str();
}

host::Health ingest_health(const IngestSnapshot& s, std::chrono::milliseconds commit_pending_max) {
  host::Health health;
  const auto add = [&health](const std::string& reason) {
    health.ok = false;
    health.reason += (health.reason.empty() ? "" : "; ") + reason;
  };
  if (!s.connected) add("not connected to the broker");
  if (s.store_failing) add("the store is failing: the last commit attempt failed (see the log)");
  if (s.commit_pending > commit_pending_max)
    add("a store commit has been pending for " + host::format_duration(s.commit_pending) + " (more than " +
        host::format_duration(commit_pending_max) + "): the store takes nothing (a lock held by another client?)");
  return health;
}

IngestSnapshot take_snapshot(const Writer& writer, const Subscriber& subscriber, const Confirmer& confirmer,
                             std::chrono::steady_clock::time_point now, const MessageIntake* intake) {
  IngestSnapshot s;
  if (intake) {
    const auto depth = intake->early_ack_queue();
    s.early_ack_queue_messages = depth.messages;
    s.early_ack_queue_bytes = depth.bytes;
  }
  s.counters = writer.counters();
  s.commit_latency = writer.commit_latency();
  s.pending_rows = writer.pending();
  s.store_failing = writer.failing();
  if (const auto since = writer.commit_pending_since(); since && now > *since)
    s.commit_pending = std::chrono::duration_cast<std::chrono::milliseconds>(now - *since);
  s.confirmer = confirmer.counters();
  s.connected = subscriber.connected();
  return s;
}

std::unique_ptr<host::MetricsEndpoint> serve_ingest_metrics(std::string_view listen, const Writer& writer,
                                                            const Subscriber& subscriber, const Confirmer& confirmer,
                                                            const Clock& clock,
                                                            std::chrono::milliseconds commit_pending_max,
                                                            const Retainer* retainer, const MessageIntake* intake) {
  const auto snapshot = [&writer, &subscriber, &confirmer, &clock, retainer, intake] {
    IngestSnapshot s = take_snapshot(writer, subscriber, confirmer, clock.steady_now(), intake);
    if (retainer) s.events_deleted_by_retention = retainer->deleted();
    return s;
  };
  return std::make_unique<host::MetricsEndpoint>(
      listen, [snapshot] { return ingest_metrics_text(snapshot()); },
      [snapshot, commit_pending_max] { return ingest_health(snapshot(), commit_pending_max); });
}

}  // namespace edge_outbox::ingest
