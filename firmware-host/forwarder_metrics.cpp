// SPDX-License-Identifier: Apache-2.0
#include "forwarder_metrics.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "host/prometheus_text.h"

namespace edge_outbox::device {

namespace {

double as_value(std::uint64_t n) { return static_cast<double>(n); }

}  // namespace

std::string forwarder_metrics_text(const ForwarderSnapshot& s) {
  const ForwarderStats& f = s.forwarder;
  host::PrometheusText text;
  if (s.outbox) {
    const OutboxStats& o = *s.outbox;
    text.gauge("edge_outbox_forwarder_pending_events",
               "Events in the outbox not yet settled (sent and unconfirmed ones included).", as_value(o.pending));
    text.gauge("edge_outbox_forwarder_oldest_pending_age_seconds",
               "Age of the oldest pending event (0 when none is pending).",
               o.oldest_pending_age ? std::chrono::duration<double>(*o.oldest_pending_age).count() : 0.0);
    text.gauge("edge_outbox_forwarder_unconfirmed_events",
               "Events acknowledged by the broker and waiting for the server's confirmation.",
               as_value(o.unconfirmed));
    text.gauge("edge_outbox_forwarder_dead_events", "Dead-lettered events kept in the outbox.", as_value(o.dead));
    text.counter("edge_outbox_forwarder_dropped_total",
                 "Events evicted by the drop_oldest capacity policy, over the database's life.",
                 as_value(o.dropped_total));
    text.gauge("edge_outbox_forwarder_database_bytes", "Size of the database file.", as_value(o.database_bytes));
    text.gauge("edge_outbox_forwarder_wal_bytes", "Size of the database's -wal file.", as_value(o.wal_bytes));
  }
  text.counter("edge_outbox_forwarder_published_total",
               "Events delivered (acknowledged, or confirmed with confirmation on) since the forwarder started.",
               as_value(f.published_total));
  text.counter("edge_outbox_forwarder_messages_acknowledged_total",
               "MQTT messages of events acknowledged by the broker (a batch is one).",
               as_value(f.messages_acknowledged));
  text.counter("edge_outbox_forwarder_dead_lettered_total", "Events dead-lettered since the forwarder started.",
               as_value(f.dead_lettered));
  text.counter("edge_outbox_forwarder_failures_total", "Publish attempts refused since the forwarder started.",
               as_value(f.failures));
  text.counter("edge_outbox_forwarder_reconnects_total", "Connections made after the first.",
               as_value(f.reconnects));
  text.counter("edge_outbox_forwarder_ack_timeouts_total",
               "Connections dropped for want of acknowledgements (ack timeout).", as_value(f.ack_timeouts));
  text.counter("edge_outbox_forwarder_resends_total", "Times the unconfirmed events were sent again.",
               as_value(f.resends));
  text.counter("edge_outbox_forwarder_hinted_resends_total",
               "Events sent again because the server's confirmation said it misses them (resend hints).",
               as_value(f.hinted_resends));
  text.counter("edge_outbox_forwarder_confirmations_refused_total",
               "Confirmations that proved nothing the device could check; nothing was deleted for them.",
               as_value(f.confirmations_refused));
  text.counter("edge_outbox_forwarder_epochs_started_total",
               "Fork notices that named this device, which then moved to a new stream id.",
               as_value(f.epochs_started));
  text.counter("edge_outbox_forwarder_fork_notices_ignored_total",
               "Fork notices for this device's stream that started no epoch (another branch's, or too soon).",
               as_value(f.fork_notices_ignored));
  text.counter("edge_outbox_forwarder_wire_bytes_total",
               "MQTT PUBLISH and PUBACK packet bytes of events (no TCP/TLS, CONNECT or PINGREQ).",
               as_value(f.wire_bytes));
  text.gauge("edge_outbox_forwarder_in_flight_messages", "MQTT messages sent and not yet acknowledged.",
             as_value(f.in_flight));
  text.gauge("edge_outbox_forwarder_connected", "1 while connected to the broker, else 0.", f.connected ? 1 : 0);
  text.gauge("edge_outbox_forwarder_last_publish_timestamp_seconds",
             "Wall-clock time of the last acknowledgement (0: none yet).",
             static_cast<double>(f.last_publish_wall_ms) / 1000.0);
  text.gauge("edge_outbox_forwarder_database_writable", "1 while the database can be read and written, else 0.",
             s.database_problem.empty() ? 1 : 0);
  text.gauge("edge_outbox_forwarder_database_replaced",
             "1 when the database file was deleted or replaced under the daemon (it exits to be restarted), else 0.",
             s.database_replaced.empty() ? 0 : 1);
  return text.str();
}

host::Health forwarder_health(const ForwarderSnapshot& s) {
  host::Health health;
  const auto add = [&health](const std::string& reason) {
    health.ok = false;
    health.reason += (health.reason.empty() ? "" : "; ") + reason;
  };
  if (!s.forwarder.connected)
    add("not connected to the broker" +
        (s.forwarder.last_error.empty() ? std::string() : " (last error: " + s.forwarder.last_error + ")"));
  if (!s.database_problem.empty()) add(s.database_problem);
  if (!s.database_replaced.empty()) add(s.database_replaced);
  return health;
}

ForwarderSnapshot take_forwarder_snapshot(const Forwarder& forwarder, const Outbox& outbox,
                                          const std::filesystem::path& database,
                                          const std::optional<FileIdentity>& opened) {
  ForwarderSnapshot s;
  s.forwarder = forwarder.stats();
  try {
    s.outbox = outbox.stats();
  } catch (const std::exception& e) {
    s.database_problem = "the database cannot be read: " + std::string(e.what());
  }
  if (s.database_problem.empty() && ::access(database.c_str(), W_OK) != 0)
    s.database_problem = "the database " + database.string() + " is not writable: " + std::strerror(errno);
  if (opened) s.database_replaced = database_replaced_problem(database, *opened, identity_of(database));
  return s;
}

std::unique_ptr<host::MetricsEndpoint> serve_forwarder_metrics(std::string_view listen, const Forwarder& forwarder,
                                                               const Outbox& outbox, std::filesystem::path database,
                                                               std::optional<FileIdentity> opened) {
  return std::make_unique<host::MetricsEndpoint>(
      listen,
      [&forwarder, &outbox, database, opened] {
        return forwarder_metrics_text(take_forwarder_snapshot(forwarder, outbox, database, opened));
      },
      [&forwarder, &outbox, database, opened] {
        return forwarder_health(take_forwarder_snapshot(forwarder, outbox, database, opened));
      });
}

}  // namespace edge_outbox::device
