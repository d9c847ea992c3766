// SPDX-License-Identifier: Apache-2.0
// The SQLite store's streams row update: see sqlite_stream_status.h.
#include "ingest/store/sqlite_stream_status.h"

#include <cstdint>
#include <optional>

#include "ingest/store/stream_rows.h"
#include "ingest/store/stream_walk.h"

namespace edge_outbox::ingest::sqlite {

void upsert_stream_status(SqliteStatements& statements, const std::string& described, const std::string& device_topic,
                          const wire::StreamStatus& status) {
  const std::string json = stream_status_json(described, device_topic, status);
  std::optional<wire::StreamStatus> recorded;
  std::optional<std::int64_t> walk_floor;
  auto& read = *statements.select_floor;
  read.tryReset();
  read.clearBindings();
  read.bind(1, status.source);
  read.bind(2, status.streamid);
  if (read.executeStep()) {
    recorded.emplace();
    recorded->floor = read.getColumn(0).getInt64();
    recorded->committed = read.getColumn(1).getInt64();
    if (!read.getColumn(2).isNull()) walk_floor = read.getColumn(2).getInt64();
  }
  read.tryReset();
  const StreamRowUpdate update = on_stream_status(recorded, walk_floor, status);
  if (!update.replace_status) {
    auto& st = *statements.update_walk_floor;
    st.tryReset();
    st.clearBindings();
    if (update.walk_floor) st.bind(1, static_cast<std::int64_t>(*update.walk_floor));
    st.bind(2, status.source);
    st.bind(3, status.streamid);
    st.exec();
    st.tryReset();
    return;
  }
  auto& st = *statements.upsert_stream;
  st.tryReset();
  st.clearBindings();
  st.bind(1, status.source);
  st.bind(2, status.streamid);
  st.bind(3, device_topic);
  st.bind(4, static_cast<std::int64_t>(status.floor));
  st.bind(5, static_cast<std::int64_t>(status.committed));
  st.bind(6, static_cast<std::int64_t>(status.pending));
  st.bind(7, static_cast<std::int64_t>(status.unconfirmed));
  st.bind(8, std::string(wire::to_string(status.confirmation)));
  st.bind(9, json);
  st.bind(10, static_cast<std::int64_t>(wall_ms()));
  if (update.walk_floor) st.bind(11, static_cast<std::int64_t>(*update.walk_floor));
  st.exec();
  st.tryReset();
}

}  // namespace edge_outbox::ingest::sqlite
