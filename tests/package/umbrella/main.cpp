// SPDX-License-Identifier: Apache-2.0
// consumer DB_FILE: opens an outbox in DB_FILE, enqueues one event, makes
// (and never starts) a Paho-backed MqttPublisher, round-trips a batch of two
// events through zstd (so that the link needs libzstd), and prints
// "enqueued <id> pending <n> cloudevents <version> publisher buffer <n> zstd batch <n>".
// Exit status 0 only if it all worked. Opens no connection.
#include <edge_outbox/wire/batch.h>
#include <edge_outbox/wire/cloudevents.h>
#include <edge_outbox/error.h>
#include <edge_outbox/event.h>
#include <edge_outbox/mqtt/publisher.h>
#include <edge_outbox/outbox.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer DB_FILE\n";
    return 2;
  }
  try {
    edge_outbox::Outbox outbox(argv[1]);
    edge_outbox::Event event;
    event.topic = "site/1/temperature";
    event.type = "com.example.temperature";
    event.payload = "21.5";
    const std::string id = outbox.enqueue(event);
    const auto pending = outbox.stats().pending;

    edge_outbox::MqttPublisherOptions publisher_options;
    publisher_options.uri = "mqtt://127.0.0.1:1883";
    const edge_outbox::MqttPublisher publisher(publisher_options);

    namespace ce = edge_outbox::cloudevents;
    ce::CloudEvent reading;
    reading.id = id;
    reading.source = "package-test";
    reading.type = event.type;
    const std::vector<std::string> elements(2, ce::encode_batch_element(reading));
    const auto batch = ce::encode_batch(elements, ce::Compression::zstd);
    const auto decoded = ce::decode_batch(batch.payload, batch.user_properties, {});

    std::cout << "enqueued " << id << " pending " << pending << " cloudevents " << ce::spec_version
              << " publisher buffer " << publisher.max_buffered_messages() << " zstd batch " << decoded.size()
              << "\n";
    return pending == 1 && decoded.size() == 2 && decoded[1].event ? EXIT_SUCCESS : EXIT_FAILURE;
  } catch (const edge_outbox::Error& e) {
    std::cerr << "edge_outbox error " << edge_outbox::to_string(e.kind()) << ": " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return EXIT_FAILURE;
}
