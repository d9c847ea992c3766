// SPDX-License-Identifier: Apache-2.0
// host/prometheus_text.h and host/histogram.h: the exposition text, its
// escaping, families, histograms and the names it refuses.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "host/histogram.h"
#include "host/prometheus_text.h"

using edge_outbox::host::Histogram;
using edge_outbox::host::HistogramSnapshot;
using edge_outbox::host::PrometheusText;
namespace host = edge_outbox::host;

TEST_CASE("a counter and a gauge: HELP, TYPE and the sample") {
  PrometheusText text;
  text.counter("x_stored_total", "Events stored.", 42);
  text.gauge("x_connected", "1 while connected.", 1);
  CHECK(text.str() ==
        "# HELP x_stored_total Events stored.\n"
        "# TYPE x_stored_total counter\n"
        "x_stored_total 42\n"
        "# HELP x_connected 1 while connected.\n"
        "# TYPE x_connected gauge\n"
        "x_connected 1\n");
}

TEST_CASE("samples of one name form one family, in the order added") {
  PrometheusText text;
  text.counter("x_rejected_total", "Rejections.", 3, {{"reason", "invalid"}});
  text.gauge("x_other", "Other.", 0);
  text.counter("x_rejected_total", "ignored help", 5, {{"reason", "too_large"}});
  CHECK(text.str() ==
        "# HELP x_rejected_total Rejections.\n"
        "# TYPE x_rejected_total counter\n"
        "x_rejected_total{reason=\"invalid\"} 3\n"
        "x_rejected_total{reason=\"too_large\"} 5\n"
        "# HELP x_other Other.\n"
        "# TYPE x_other gauge\n"
        "x_other 0\n");
}

TEST_CASE("label values and help text are escaped") {
  PrometheusText text;
  text.gauge("x_info", "Back\\slash and\nline.", 1, {{"a", "q\"uote"}, {"b", "back\\slash\nnext"}});
  CHECK(text.str() ==
        "# HELP x_info Back\\\\slash and\\nline.\n"
        "# TYPE x_info gauge\n"
        "x_info{a=\"q\\\"uote\",b=\"back\\\\slash\\nnext\"} 1\n");
}

TEST_CASE("sample values: exact integers, shortest decimals, infinities and NaN") {
  CHECK(host::format_sample_value(0) == "0");
  CHECK(host::format_sample_value(1e20) == "1e+20");
  CHECK(host::format_sample_value(0.0005) == "0.0005");
  CHECK(host::format_sample_value(1e-7) == "1e-07");
  CHECK(host::format_sample_value(9007199254740991.0) == "9007199254740991");
  CHECK(host::format_sample_value(0.0025) == "0.0025");
  CHECK(host::format_sample_value(-1.5) == "-1.5");
  CHECK(host::format_sample_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(host::format_sample_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(host::format_sample_value(std::nan("")) == "NaN");
}

TEST_CASE("a histogram: cumulative buckets with le, +Inf, _sum and _count") {
  Histogram h({0.001, 0.01, 0.1});
  h.observe(0.0005);
  h.observe(0.001);  // on the bound: that bucket
  h.observe(0.05);
  h.observe(3);      // beyond every bound: +Inf only
  PrometheusText text;
  text.histogram("x_commit_seconds", "Commit latency.", h.snapshot(), {{"store", "sqlite"}});
  CHECK(text.str() ==
        "# HELP x_commit_seconds Commit latency.\n"
        "# TYPE x_commit_seconds histogram\n"
        "x_commit_seconds_bucket{store=\"sqlite\",le=\"0.001\"} 2\n"
        "x_commit_seconds_bucket{store=\"sqlite\",le=\"0.01\"} 2\n"
        "x_commit_seconds_bucket{store=\"sqlite\",le=\"0.1\"} 3\n"
        "x_commit_seconds_bucket{store=\"sqlite\",le=\"+Inf\"} 4\n"
        "x_commit_seconds_sum{store=\"sqlite\"} 3.0515\n"
        "x_commit_seconds_count{store=\"sqlite\"} 4\n");
}

TEST_CASE("an empty histogram has zero buckets, sum and count") {
  Histogram h(host::latency_seconds_buckets());
  PrometheusText text;
  text.histogram("x_seconds", "Latency.", h.snapshot());
  const std::string s = text.str();
  CHECK(s.find("x_seconds_bucket{le=\"0.0005\"} 0\n") != std::string::npos);
  CHECK(s.find("x_seconds_bucket{le=\"+Inf\"} 0\n") != std::string::npos);
  CHECK(s.find("x_seconds_sum 0\nx_seconds_count 0\n") != std::string::npos);
}

TEST_CASE("histogram bounds must be finite and ascending") {
  CHECK_THROWS_AS(Histogram({0.1, 0.1}), std::invalid_argument);
  CHECK_THROWS_AS(Histogram({0.2, 0.1}), std::invalid_argument);
  CHECK_THROWS_AS(Histogram({std::numeric_limits<double>::infinity()}), std::invalid_argument);
  CHECK_NOTHROW(Histogram({}));
}

TEST_CASE("names the format does not allow are refused") {
  PrometheusText text;
  CHECK_THROWS_AS(text.gauge("1abc", "h", 1), std::invalid_argument);
  CHECK_THROWS_AS(text.gauge("a-b", "h", 1), std::invalid_argument);
  CHECK_THROWS_AS(text.gauge("", "h", 1), std::invalid_argument);
  CHECK_THROWS_AS(text.gauge("ok", "h", 1, {{"a:b", "v"}}), std::invalid_argument);
  CHECK_THROWS_AS(text.gauge("ok", "h", 1, {{"__name", "v"}}), std::invalid_argument);
  CHECK_THROWS_AS(text.histogram("h", "h", Histogram({1}).snapshot(), {{"le", "1"}}), std::invalid_argument);
  CHECK_NOTHROW(text.gauge("ns:sub_name", "h", 1, {{"_label1", "v"}}));
  CHECK(host::is_valid_metric_name("a:b_c9"));
  CHECK_FALSE(host::is_valid_label_name("a:b"));
}

TEST_CASE("a name reused with another type is refused") {
  PrometheusText text;
  text.counter("x_total", "h", 1);
  CHECK_THROWS_AS(text.gauge("x_total", "h", 1), std::invalid_argument);
}
