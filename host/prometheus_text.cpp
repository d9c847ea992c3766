// SPDX-License-Identifier: Apache-2.0
#include "host/prometheus_text.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace edge_outbox::host {

namespace {

bool name_char(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

std::string labels_text(const MetricLabels& labels, const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && !extra) return {};
  std::string out = "{";
  const auto add = [&out](const std::pair<std::string, std::string>& label) {
    if (out.size() > 1) out += ',';
    out += label.first;
    out += "=\"";
    out += escape_label_value(label.second);
    out += '"';
  };
  for (const auto& label : labels) add(label);
  if (extra) add(*extra);
  out += '}';
  return out;
}

void add_sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name;
  out += labels;
  out += ' ';
  out += format_sample_value(value);
  out += '\n';
}

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::counter: return "counter";
    case MetricType::gauge: return "gauge";
    case MetricType::histogram: break;
  }
  return "histogram";
}

}  // namespace

bool is_valid_metric_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true)) return false;
  return true;
}

bool is_valid_label_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false)) return false;
  return true;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  // Plain decimals in the usual range (0.0005, not 5e-04), else whichever
  // form is shorter.
  const double magnitude = std::fabs(value);
  const bool plain = magnitude == 0 || (magnitude >= 1e-6 && magnitude < 1e15);
  const auto result = plain ? std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed)
                            : std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

PrometheusText::Family& PrometheusText::family(const std::string& name, const std::string& help, MetricType type,
                                               const MetricLabels& labels) {
  if (!is_valid_metric_name(name)) throw std::invalid_argument("not a Prometheus metric name: '" + name + "'");
  for (const auto& label : labels) {
    if (!is_valid_label_name(label.first) || label.first.starts_with("__"))
      throw std::invalid_argument("not a Prometheus label name: '" + label.first + "' (metric " + name + ")");
    if (type == MetricType::histogram && label.first == "le")
      throw std::invalid_argument("a histogram cannot have the label le (metric " + name + ")");
  }
  for (auto& f : families_) {
    if (f.name != name) continue;
    if (f.type != type)
      throw std::invalid_argument("metric " + name + " is a " + type_name(f.type) + ", not a " +
                                  type_name(type));
    return f;
  }
  families_.push_back(Family{name, help, type, {}});
  return families_.back();
}

void PrometheusText::counter(const std::string& name, const std::string& help, double value,
                             const MetricLabels& labels) {
  add_sample(family(name, help, MetricType::counter, labels).samples, name, labels_text(labels), value);
}

void PrometheusText::gauge(const std::string& name, const std::string& help, double value,
                           const MetricLabels& labels) {
  add_sample(family(name, help, MetricType::gauge, labels).samples, name, labels_text(labels), value);
}

void PrometheusText::histogram(const std::string& name, const std::string& help, const HistogramSnapshot& value,
                               const MetricLabels& labels) {
  auto& out = family(name, help, MetricType::histogram, labels).samples;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= value.upper_bounds.size(); ++i) {
    if (i < value.bucket_counts.size()) cumulative += value.bucket_counts[i];
    const std::pair<std::string, std::string> le{
        "le", i < value.upper_bounds.size() ? format_sample_value(value.upper_bounds[i]) : "+Inf"};
    add_sample(out, name + "_bucket", labels_text(labels, &le), static_cast<double>(cumulative));
  }
  const std::string plain = labels_text(labels);
  add_sample(out, name + "_sum", plain, value.sum);
  add_sample(out, name + "_count", plain, static_cast<double>(value.count));
}

std::string PrometheusText::str() const {
  std::string out;
  for (const auto& f : families_) {
    out += "# HELP " + f.name + ' ' + escape_help(f.help) + '\n';
    out += "# TYPE " + f.name + ' ' + type_name(f.type) + '\n';
    out += f.samples;
  }
  return out;
}

}  // namespace edge_outbox::host
