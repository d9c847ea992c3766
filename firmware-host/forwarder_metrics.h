// SPDX-License-Identifier: Apache-2.0
// edge-outbox-forwarder's metrics and health (--metrics-listen,
// docs/metrics.md): the Prometheus text of ForwarderStats and OutboxStats,
// and /healthz's verdict. The text and the verdict are pure functions of a
// snapshot; serve_forwarder_metrics() takes the snapshots from the running
// Forwarder and the Outbox open on its database.
#pragma once

#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "database_identity.h"
#include "host/metrics_endpoint.h"

namespace edge_outbox::device {

// What the metrics are made of, read at one scrape.
struct ForwarderSnapshot {
  ForwarderStats forwarder;
  // The database's counts; nullopt when they cannot be read (then
  // database_problem says why).
  std::optional<OutboxStats> outbox;
  // Empty when the database file is readable and writable by this process.
  std::string database_problem;
  // Empty while the database's path names the file the daemon opened (see
  // database_identity.h); else what became of it.
  std::string database_replaced;
};

// The exposition of every edge_outbox_forwarder_* metric (the database's
// gauges are left out when snapshot.outbox is empty).
std::string forwarder_metrics_text(const ForwarderSnapshot& snapshot);
// Healthy while connected to the broker and the database is writable and
// still the file at its path; else the reasons, "; "-separated.
host::Health forwarder_health(const ForwarderSnapshot& snapshot);

// Reads the snapshot: Forwarder::stats(), Outbox::stats() (a read
// transaction), whether this process may write `database`, and whether
// the path still names the file opened as `opened` (when given).
ForwarderSnapshot take_forwarder_snapshot(const Forwarder& forwarder, const Outbox& outbox,
                                          const std::filesystem::path& database,
                                          const std::optional<FileIdentity>& opened = std::nullopt);

// Serves /metrics and /healthz on `listen` from the live objects.
// Requires: forwarder and outbox outlive the endpoint (stop or destroy it
// first). Throws as MetricsEndpoint's constructor.
std::unique_ptr<host::MetricsEndpoint> serve_forwarder_metrics(std::string_view listen, const Forwarder& forwarder,
                                                               const Outbox& outbox, std::filesystem::path database,
                                                               std::optional<FileIdentity> opened = std::nullopt);

}  // namespace edge_outbox::device
