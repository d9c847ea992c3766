// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirm/idle_streams.h"

namespace edge_outbox::ingest {

IdleStreams::Admit IdleStreams::admit(const std::string& device_topic, const StreamKey& stream) {
  if (with_outcome_.contains(stream) || device_of_idle_.contains(stream)) return Admit::known;
  auto& idle = idle_[device_topic];
  if (idle.size() >= max_per_device_) return Admit::over_bound;
  idle.insert(stream);
  device_of_idle_.emplace(stream, device_topic);
  return Admit::new_idle;
}

void IdleStreams::has_outcome(const StreamKey& stream) {
  with_outcome_.insert(stream);
  const auto it = device_of_idle_.find(stream);
  if (it == device_of_idle_.end()) return;
  const auto device = idle_.find(it->second);
  if (device != idle_.end()) {
    device->second.erase(stream);
    if (device->second.empty()) idle_.erase(device);
  }
  device_of_idle_.erase(it);
}

void IdleStreams::add_idle(const std::string& device_topic, const StreamKey& stream) {
  if (with_outcome_.contains(stream) || device_of_idle_.contains(stream)) return;
  idle_[device_topic].insert(stream);
  device_of_idle_.emplace(stream, device_topic);
}

std::size_t IdleStreams::idle_count(const std::string& device_topic) const {
  const auto it = idle_.find(device_topic);
  return it == idle_.end() ? 0 : it->second.size();
}

}  // namespace edge_outbox::ingest
