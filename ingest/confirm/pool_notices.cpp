// SPDX-License-Identifier: Apache-2.0
#include "ingest/confirm/pool_notices.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "ingest/confirm/stream_owners.h"

namespace edge_outbox::ingest {
namespace {

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string pool_channel(const std::string& group) {
  return "edge_outbox_pool_" + hex(ownership_score(group, StreamKey{}));
}

std::string member_channel(const std::string& group, const std::string& member) {
  return "edge_outbox_member_" + hex(ownership_score(group, StreamKey{member, ""}));
}

std::string encode_presence(const PoolPresence& presence) {
  nlohmann::json j{{"v", 1}, {"member", presence.member}, {"state", presence.leaving ? "leaving" : "alive"}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<PoolPresence> decode_presence(const std::string& payload) {
  const auto j = nlohmann::json::parse(payload, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  const auto v = j.find("v"), member = j.find("member"), state = j.find("state");
  if (v == j.end() || !v->is_number_integer() || v->get<std::int64_t>() < 1) return std::nullopt;
  if (member == j.end() || !member->is_string() || member->get_ref<const std::string&>().empty()) return std::nullopt;
  if (state == j.end() || !state->is_string()) return std::nullopt;
  const auto& s = state->get_ref<const std::string&>();
  if (s != "alive" && s != "leaving") return std::nullopt;
  return PoolPresence{member->get<std::string>(), s == "leaving"};
}

HandOverPayloads encode_hand_over(const std::vector<HandedStream>& streams, std::size_t max_bytes) {
  static const std::string head = R"({"v":1,"streams":[)", tail = "]}";
  HandOverPayloads out;
  std::string current;
  for (const auto& h : streams) {
    nlohmann::json element = nlohmann::json::array({h.stream.source, h.stream.streamid});
    if (h.from_status) element.push_back(h.device_holds ? nlohmann::json(*h.device_holds) : nlohmann::json(nullptr));
    std::string text;
    try {
      text = element.dump();  // strict: names that are not UTF-8 throw
    } catch (const nlohmann::json::exception&) {
      out.kept.push_back(h);
      continue;
    }
    if (head.size() + text.size() + tail.size() > max_bytes) {
      out.kept.push_back(h);
      continue;
    }
    if (!current.empty() && current.size() + 1 + text.size() + tail.size() > max_bytes) {
      out.payloads.push_back(current + tail);
      current.clear();
    }
    current += current.empty() ? head : ",";
    current += text;
  }
  if (!current.empty()) out.payloads.push_back(current + tail);
  return out;
}

std::optional<std::vector<HandedStream>> decode_hand_over(const std::string& payload) {
  const auto j = nlohmann::json::parse(payload, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  const auto v = j.find("v"), streams = j.find("streams");
  if (v == j.end() || !v->is_number_integer() || v->get<std::int64_t>() < 1) return std::nullopt;
  if (streams == j.end() || !streams->is_array()) return std::nullopt;
  std::vector<HandedStream> out;
  out.reserve(streams->size());
  for (const auto& e : *streams) {
    if (!e.is_array() || e.size() < 2 || e.size() > 3 || !e[0].is_string() || !e[1].is_string()) return std::nullopt;
    HandedStream h{StreamKey{e[0].get<std::string>(), e[1].get<std::string>()}, e.size() == 3, std::nullopt};
    if (e.size() == 3) {
      if (e[2].is_number_integer()) h.device_holds = e[2].get<std::int64_t>();
      else if (!e[2].is_null()) return std::nullopt;
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace edge_outbox::ingest
