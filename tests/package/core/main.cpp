// SPDX-License-Identifier: Apache-2.0
// core_consumer DB_FILE: an application that brings its own MQTT client and
// links edge_outbox::core only. It enqueues three events into an outbox in
// DB_FILE, forwards them through MemoryPublisher (an in-memory Publisher that
// acknowledges every message) until nothing is pending, and prints
// "forwarded <n> published <n> pending <n>". Exit status 0 only if all three
// were acknowledged and none is left pending.
#include <edge_outbox/error.h>
#include <edge_outbox/event.h>
#include <edge_outbox/forwarder.h>
#include <edge_outbox/outbox.h>
#include <edge_outbox/publisher.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

namespace {

// A Publisher that is always connected and acknowledges every message at
// once, counting them in *received (which the caller owns and keeps alive).
// Thread rule: any thread; the callbacks run inside start() and publish().
class MemoryPublisher final : public edge_outbox::Publisher {
 public:
  explicit MemoryPublisher(std::atomic<int>* received) : received_(received) {}

  void set_connection_handler(edge_outbox::ConnectionHandler handler) override { handler_ = std::move(handler); }
  void start() override {
    edge_outbox::ConnectionEvent up;  // by name: the struct gains members (broker)
    up.connected = true;
    up.version = edge_outbox::MqttVersion::v5;
    if (handler_) handler_(up);
  }
  void stop(std::chrono::milliseconds) override {}
  void publish(edge_outbox::OutgoingMessage, edge_outbox::PublishCallback done) override {
    received_->fetch_add(1);
    done(edge_outbox::PublishResult{});
  }
  bool connected() const override { return true; }
  edge_outbox::MqttVersion version() const override { return edge_outbox::MqttVersion::v5; }
  void notify_connectivity() override {}
  void drop_connection(const std::string&) override {}

 private:
  std::atomic<int>* received_;
  edge_outbox::ConnectionHandler handler_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: core_consumer DB_FILE\n";
    return 2;
  }
  try {
    constexpr int events = 3;
    edge_outbox::Outbox outbox(argv[1]);
    for (int i = 0; i < events; ++i) {
      edge_outbox::Event event;
      event.topic = "site/1/temperature";
      event.type = "com.example.temperature";
      event.payload = std::to_string(20 + i);
      outbox.enqueue(std::move(event));
    }

    std::atomic<int> received{0};
    edge_outbox::ForwarderOptions options;
    options.source = "urn:example:core-consumer";
    edge_outbox::Forwarder forwarder(outbox, std::make_unique<MemoryPublisher>(&received), options);
    forwarder.start();
    forwarder.stop(std::chrono::seconds(20));  // returns once nothing is pending

    const auto published = forwarder.stats().published_total;
    const auto pending = outbox.stats().pending;
    std::cout << "forwarded " << received.load() << " published " << published << " pending " << pending << "\n";
    return received.load() == events && published == events && pending == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  } catch (const edge_outbox::Error& e) {
    std::cerr << "edge_outbox error " << edge_outbox::to_string(e.kind()) << ": " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return EXIT_FAILURE;
}
