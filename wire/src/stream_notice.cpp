// SPDX-License-Identifier: Apache-2.0
#include <edge_outbox/wire/stream_notice.h>

#include <stdexcept>

#include <nlohmann/json.hpp>

#include <edge_outbox/wire/stream_status.h>

#include "json_numbers.h"
#include "utf8.h"

namespace edge_outbox::wire {

namespace {

using nlohmann::json;

constexpr std::size_t max_notice_id_bytes = 256;

void require_text(const std::string& text, const char* what) {
  if (text.empty()) throw std::invalid_argument(std::string("stream notice: ") + what + " must not be empty");
  if (!cloudevents::detail::is_valid_utf8(text))
    throw std::invalid_argument(std::string("stream notice: ") + what + " is not valid UTF-8");
}

std::optional<std::string> short_string(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return std::nullopt;
  auto text = it->get<std::string>();
  if (text.empty() || text.size() > max_notice_id_bytes) return std::nullopt;
  return text;
}

}  // namespace

std::string encode_stream_notice(const StreamNotice& n) {
  require_text(n.streamid, "streamid");
  json doc = {{"v", confirmation_protocol_version}, {"streamid", n.streamid}};
  if (n.kind == StreamNotice::Kind::refused) {
    require_text(n.reason, "reason");
    doc["refused"] = n.reason;
  } else if (!n.session.empty()) {
    require_text(n.session, "session");
    doc["fork"] = {{"session", n.session}};
  } else {
    if (n.sequence < 1) throw std::invalid_argument("stream notice: a fork names a session or a sequence >= 1");
    require_text(n.event_id, "event id");
    doc["fork"] = {{"sequence", n.sequence}, {"id", n.event_id}};
  }
  return doc.dump();
}

std::optional<StreamNotice> decode_stream_notice(std::string_view payload) {
  if (payload.size() > max_confirmation_bytes || payload.find('\0') != std::string_view::npos) return std::nullopt;
  const auto doc = json::parse(payload.begin(), payload.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  const auto version = detail::non_negative_member(doc, "v");
  if (!version || *version < 2) return std::nullopt;
  StreamNotice notice;
  const auto streamid = doc.find("streamid");
  if (streamid == doc.end() || !streamid->is_string() || streamid->get<std::string>().empty()) return std::nullopt;
  notice.streamid = streamid->get<std::string>();
  if (const auto refused = doc.find("refused"); refused != doc.end()) {
    if (!refused->is_string() || refused->get<std::string>().empty()) return std::nullopt;
    notice.kind = StreamNotice::Kind::refused;
    notice.reason = refused->get<std::string>();
    return notice;
  }
  const auto fork = doc.find("fork");
  if (fork == doc.end() || !fork->is_object()) return std::nullopt;
  notice.kind = StreamNotice::Kind::fork;
  if (auto session = short_string(*fork, "session")) {
    notice.session = std::move(*session);
    return notice;
  }
  const auto sequence = detail::non_negative_member(*fork, "sequence");
  auto id = short_string(*fork, "id");
  if (!sequence || *sequence < 1 || !id) return std::nullopt;
  notice.sequence = *sequence;
  notice.event_id = std::move(*id);
  return notice;
}

}  // namespace edge_outbox::wire
