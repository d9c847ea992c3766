/* SPDX-License-Identifier: Apache-2.0 */
/*
 * c_api_enqueue_one PATH BUSY_TIMEOUT_MS: another process writing through
 * the C API (test_c_api_threads runs it). Opens the outbox at PATH with that
 * busy timeout, enqueues one event in a transaction of its own, prints the
 * status name and message, and exits with the edge_outbox_status.
 */
#include <edge_outbox/c/outbox.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: c_api_enqueue_one PATH BUSY_TIMEOUT_MS\n");
    return 100;
  }
  edge_outbox_options options;
  edge_outbox_options_init(&options);
  options.busy_timeout_ms = (uint32_t)strtoul(argv[2], NULL, 10);
  edge_outbox_t* outbox = NULL;
  edge_outbox_status status = edge_outbox_open(argv[1], &options, &outbox);
  if (status == EDGE_OUTBOX_OK) {
    edge_outbox_event event;
    edge_outbox_event_init(&event);
    event.topic = "devices/gw-1/events/other-process";
    event.type = "other.process";
    status = edge_outbox_enqueue(outbox, &event, NULL, 0);
  }
  printf("%s %s\n", edge_outbox_status_name(status), status == EDGE_OUTBOX_OK ? "" : edge_outbox_last_error());
  edge_outbox_close(outbox);
  return (int)status;
}
