// SPDX-License-Identifier: Apache-2.0
// The Prometheus text exposition format 0.0.4 (what `GET /metrics` serves):
// families of counters, gauges and histograms, each sample with its labels.
// Pure: builds a string, does no I/O.
//
//   PrometheusText text;
//   text.counter("edge_outbox_ingest_stored_total", "Events stored.", 42);
//   text.gauge("edge_outbox_ingest_connected", "1 while connected.", 1);
//   text.counter("edge_outbox_ingest_rejected_total", "Rejections.", 3, {{"reason", "invalid"}});
//   std::string body = text.str();
//
// Samples of one name form one family (one # HELP and # TYPE line, the help
// and type of its first sample), in the order first added; samples keep
// their order inside it. Help text escapes '\' and line ends; label values
// escape '\', '"' and line ends. Values: the shortest text that reads back
// as the same double, in plain decimals from 1e-6 to 1e15 (42, 0.0005),
// else in the shorter form (1e+20); +Inf, -Inf and NaN.
//
// Throws std::invalid_argument for a metric or label name the format does
// not allow, a label name starting with "__" (reserved), "le" on a histogram
// (the buckets use it), or a name reused with another type.
//
// Thread rule: one thread at a time (a plain value).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/histogram.h"

namespace edge_outbox::host {

// The Content-Type of the format.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { counter, gauge, histogram };

class PrometheusText {
 public:
  // A counter: its name should end in "_total".
  void counter(const std::string& name, const std::string& help, double value, const MetricLabels& labels = {});
  void gauge(const std::string& name, const std::string& help, double value, const MetricLabels& labels = {});
  // The buckets (cumulative, with le="+Inf"), name_sum and name_count.
  void histogram(const std::string& name, const std::string& help, const HistogramSnapshot& value,
                 const MetricLabels& labels = {});
  // The exposition: every family, each line ending in '\n'.
  std::string str() const;

 private:
  struct Family {
    std::string name;
    std::string help;
    MetricType type;
    std::string samples;  // the sample lines, formatted
  };
  Family& family(const std::string& name, const std::string& help, MetricType type, const MetricLabels& labels);

  std::vector<Family> families_;
};

// Label value escaping: '\' -> "\\", '"' -> "\"", line end -> "\n".
std::string escape_label_value(std::string_view value);
// Help text escaping: '\' -> "\\", line end -> "\n".
std::string escape_help(std::string_view help);
// A sample value as the format writes it (see above).
std::string format_sample_value(double value);
// [a-zA-Z_:][a-zA-Z0-9_:]*
bool is_valid_metric_name(std::string_view name) noexcept;
// [a-zA-Z_][a-zA-Z0-9_]*
bool is_valid_label_name(std::string_view name) noexcept;

}  // namespace edge_outbox::host
