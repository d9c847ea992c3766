// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/stream_status.h>

#include <limits>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_numbers.h"
#include "utf8.h"

namespace edge_outbox::wire {

namespace {

using nlohmann::json;
using detail::non_negative_member;

constexpr std::string_view events_level = "events";

std::vector<std::string_view> levels_of(std::string_view topic) {
  std::vector<std::string_view> levels;
  std::size_t start = 0;
  while (true) {
    const auto slash = topic.find('/', start);
    levels.push_back(topic.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) return levels;
    start = slash + 1;
  }
}

// The text of `topic` before its first "events" level (without the slash),
// if there is such a level and something before it.
std::optional<std::string> before_events_level(std::string_view topic, std::size_t skip_levels) {
  const auto levels = levels_of(topic);
  std::size_t offset = 0;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (i >= skip_levels && levels[i] == events_level) {
      if (i == skip_levels) return std::nullopt;
      return std::string(topic.substr(0, offset - 1));
    }
    offset += levels[i].size() + 1;
  }
  return std::nullopt;
}

json parse_object(std::string_view payload) {
  // nlohmann's parser would end the text at a NUL byte and ignore the rest.
  if (payload.find('\0') != std::string_view::npos) return json(json::value_t::discarded);
  auto doc = json::parse(payload.begin(), payload.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return json(json::value_t::discarded);
  return doc;
}

std::optional<std::string> non_empty_string(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  auto text = it->get<std::string>();
  if (text.empty()) return std::nullopt;
  return text;
}

void require_utf8(const std::string& text, const char* what) {
  if (!cloudevents::detail::is_valid_utf8(text))
    throw std::invalid_argument(std::string(what) + " is not valid UTF-8");
}

void require_non_negative(std::int64_t n, const char* what) {
  if (n < 0) throw std::invalid_argument(std::string(what) + " must not be negative");
}

// Resend hints: ascending, disjoint, above through, at most
// max_missing_ranges.
bool valid_missing(const std::vector<SequenceRange>& missing, std::int64_t through) {
  if (missing.size() > max_missing_ranges) return false;
  std::int64_t after = through;
  for (const auto& r : missing) {
    if (r.first <= after || r.last < r.first) return false;
    after = r.last;
  }
  return true;
}

// "v": absent reads as 1; otherwise an integer from 1 to INT_MAX.
std::optional<int> version_member(const json& doc) {
  if (!doc.contains("v")) return 1;
  const auto v = non_negative_member(doc, "v");
  if (!v || *v < 1 || *v > std::numeric_limits<int>::max()) return std::nullopt;
  return static_cast<int>(*v);
}

// A status's "session" object; nullopt when it is not one.
std::optional<Session> session_member(const json& object) {
  const auto n = non_negative_member(object, "n");
  auto id = non_empty_string(object, "id");
  if (!n || *n < 1 || !id || id->size() > max_session_id_bytes) return std::nullopt;
  Session session{*n, std::move(*id), {}};
  if (const auto prev = object.find("prev_id"); prev != object.end()) {
    if (!prev->is_string()) return std::nullopt;
    session.prev_id = prev->get<std::string>();
    if (session.prev_id.size() > max_session_id_bytes) return std::nullopt;
  }
  return session;
}

}  // namespace

std::string confirm_topic(std::string_view device_topic, std::string_view streamid) {
  return std::string(device_topic) + "/confirm/" + std::string(streamid);
}

std::string stream_status_topic(std::string_view device_topic, std::string_view streamid) {
  return std::string(device_topic) + "/status/" + std::string(streamid);
}

std::optional<std::string> stream_status_filter_for(std::string_view events_filter) {
  // "$share/<group>/<filter>": the group's two levels stay in front.
  const std::size_t skip = events_filter.starts_with("$share/") ? 2 : 0;
  auto before = before_events_level(events_filter, skip);
  if (!before) return std::nullopt;
  return *before + "/status/+";
}

std::optional<StatusTopic> parse_stream_status_topic(std::string_view topic) {
  const auto last = topic.rfind('/');
  if (last == std::string_view::npos || last == 0) return std::nullopt;
  const auto streamid = topic.substr(last + 1);
  const auto rest = topic.substr(0, last);
  const auto middle = rest.rfind('/');
  if (middle == std::string_view::npos || middle == 0) return std::nullopt;
  if (rest.substr(middle + 1) != "status" || streamid.empty()) return std::nullopt;
  return StatusTopic{std::string(rest.substr(0, middle)), std::string(streamid)};
}

std::string encode_confirmation(const Confirmation& c) {
  require_utf8(c.streamid, "confirmation: streamid");
  require_non_negative(c.through, "confirmation: through");
  json doc = json::object();
  if (c.version >= 2) {
    if (c.from < 1) throw std::invalid_argument("confirmation: from must be at least 1");
    if (c.through < c.from - 1) throw std::invalid_argument("confirmation: through must be at least from - 1");
    require_non_negative(c.digest.count, "confirmation: count");
    if (!valid_missing(c.missing, c.through))
      throw std::invalid_argument("confirmation: missing must be at most 32 ascending, disjoint ranges above through");
    doc["v"] = c.version;
  }
  doc["streamid"] = c.streamid;
  if (c.version >= 2) doc["from"] = c.from;
  doc["through"] = c.through;
  if (c.version >= 2) {
    doc["digest"] = digest_hex(c.digest.hash);
    doc["count"] = c.digest.count;
    if (!c.missing.empty()) {
      json ranges = json::array();
      for (const auto& r : c.missing) ranges.push_back(json::array({r.first, r.last}));
      doc["missing"] = std::move(ranges);
    }
  }
  return doc.dump();
}

std::optional<Confirmation> decode_confirmation(std::string_view payload) {
  if (payload.size() > max_confirmation_bytes) return std::nullopt;
  const auto doc = parse_object(payload);
  if (doc.is_discarded()) return std::nullopt;
  auto streamid = non_empty_string(doc, "streamid");
  const auto through = non_negative_member(doc, "through");
  const auto version = version_member(doc);
  if (!streamid || !through || !version) return std::nullopt;
  Confirmation c;
  c.streamid = std::move(*streamid);
  c.through = *through;
  c.version = *version;
  if (c.version < 2) return c;
  const auto from = non_negative_member(doc, "from");
  const auto count = non_negative_member(doc, "count");
  const auto digest = doc.find("digest");
  if (!from || *from < 1 || c.through < *from - 1 || !count || digest == doc.end() || !digest->is_string())
    return std::nullopt;
  const auto hash = parse_digest_hex(digest->get_ref<const std::string&>());
  if (!hash) return std::nullopt;
  c.from = *from;
  c.digest = OutcomeDigest{*hash, *count};
  if (const auto missing = doc.find("missing"); missing != doc.end()) {
    if (!missing->is_array() || missing->size() > max_missing_ranges) return std::nullopt;
    for (const auto& pair : *missing) {
      if (!pair.is_array() || pair.size() != 2) return std::nullopt;
      const auto first = detail::non_negative_int64(pair[0]);
      const auto last = detail::non_negative_int64(pair[1]);
      if (!first || !last) return std::nullopt;
      c.missing.push_back({*first, *last});
    }
    if (!valid_missing(c.missing, c.through)) return std::nullopt;
  }
  return c;
}

std::string_view to_string(StreamStatus::Mode mode) noexcept {
  return mode == StreamStatus::Mode::server ? "server" : "broker";
}

std::string encode_stream_status(const StreamStatus& s) {
  require_utf8(s.source, "stream status: source");
  require_utf8(s.streamid, "stream status: streamid");
  if (s.floor < 1) throw std::invalid_argument("stream status: floor must be at least 1");
  require_non_negative(s.committed, "stream status: committed");
  require_non_negative(s.pending, "stream status: pending");
  require_non_negative(s.unconfirmed, "stream status: unconfirmed");
  json doc = json::object();
  if (s.version >= 2) doc["v"] = s.version;
  doc["source"] = s.source;
  doc["streamid"] = s.streamid;
  doc["floor"] = s.floor;
  doc["committed"] = s.committed;
  doc["pending"] = s.pending;
  doc["unconfirmed"] = s.unconfirmed;
  doc["confirmation"] = std::string(to_string(s.confirmation));
  if (s.confirmed_through) {
    require_non_negative(*s.confirmed_through, "stream status: confirmed_through");
    doc["confirmed_through"] = *s.confirmed_through;
  }
  if (s.waiting_ms) {
    require_non_negative(*s.waiting_ms, "stream status: waiting_ms");
    doc["waiting_ms"] = *s.waiting_ms;
  }
  require_non_negative(s.refused, "stream status: refused");
  if (s.refused > 0) doc["refused"] = s.refused;
  if (s.session) {
    const auto& session = *s.session;
    if (session.n < 1) throw std::invalid_argument("stream status: session n must be at least 1");
    if (session.id.empty() || session.id.size() > max_session_id_bytes ||
        session.prev_id.size() > max_session_id_bytes)
      throw std::invalid_argument("stream status: a session id must have 1 to 64 bytes");
    require_utf8(session.id, "stream status: session id");
    require_utf8(session.prev_id, "stream status: session prev_id");
    json object = {{"n", session.n}, {"id", session.id}};
    if (!session.prev_id.empty()) object["prev_id"] = session.prev_id;
    doc["session"] = std::move(object);
  }
  return doc.dump();
}

std::optional<StreamStatus> decode_stream_status(std::string_view payload) {
  if (payload.size() > max_stream_status_bytes) return std::nullopt;
  const auto doc = parse_object(payload);
  if (doc.is_discarded()) return std::nullopt;
  StreamStatus s;
  auto source = non_empty_string(doc, "source");
  auto streamid = non_empty_string(doc, "streamid");
  const auto floor = non_negative_member(doc, "floor");
  const auto committed = non_negative_member(doc, "committed");
  const auto pending = non_negative_member(doc, "pending");
  if (!source || !streamid || !floor || *floor < 1 || !committed || !pending) return std::nullopt;
  s.source = std::move(*source);
  s.streamid = std::move(*streamid);
  s.floor = *floor;
  s.committed = *committed;
  s.pending = *pending;
  if (doc.contains("unconfirmed")) {
    const auto unconfirmed = non_negative_member(doc, "unconfirmed");
    if (!unconfirmed) return std::nullopt;
    s.unconfirmed = *unconfirmed;
  }
  if (const auto mode = doc.find("confirmation"); mode != doc.end()) {
    if (*mode == "server") s.confirmation = StreamStatus::Mode::server;
    else if (*mode != "broker") return std::nullopt;
  }
  s.confirmed_through = non_negative_member(doc, "confirmed_through");
  s.waiting_ms = non_negative_member(doc, "waiting_ms");
  s.refused = non_negative_member(doc, "refused").value_or(0);
  const auto version = version_member(doc);
  if (!version) return std::nullopt;
  s.version = *version;
  if (const auto it = doc.find("session"); it != doc.end()) {
    if (!it->is_object()) return std::nullopt;
    auto session = session_member(*it);
    if (!session) return std::nullopt;
    s.session = std::move(*session);
  }
  return s;
}

}  // namespace edge_outbox::wire
