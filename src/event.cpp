#include <edge_outbox/event.h>

#include <nlohmann/json.hpp>

#include <edge_outbox/error.h>

namespace edge_outbox {

std::string_view to_string(Priority priority) noexcept {
  switch (priority) {
    case Priority::critical: return "critical";
    case Priority::normal: return "normal";
    case Priority::low: return "low";
  }
  return "unknown";
}

Priority priority_from_string(std::string_view name) {
  if (name == "critical") return Priority::critical;
  if (name == "normal") return Priority::normal;
  if (name == "low") return Priority::low;
  throw Error(ErrorKind::invalid_argument,
              "unknown priority '" + std::string(name) + "': use critical, normal or low");
}

Event& Event::json(const nlohmann::json& data) {
  payload = data.dump();
  content_type = "application/json";
  return *this;
}

}  // namespace edge_outbox
