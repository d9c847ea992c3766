/* SPDX-License-Identifier: Apache-2.0 */
/* c_consumer DB: enqueues one event through the installed C API and prints
 * "version V pending N". */
#include <edge_outbox/c/outbox.h>

#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: c_consumer DB\n");
    return 2;
  }
  edge_outbox_t* outbox = NULL;
  edge_outbox_event event;
  edge_outbox_stats stats;
  edge_outbox_event_init(&event);
  event.topic = "devices/c/events/hello";
  event.type = "hello";
  if (edge_outbox_open(argv[1], NULL, &outbox) != EDGE_OUTBOX_OK ||
      edge_outbox_enqueue(outbox, &event, NULL, 0) != EDGE_OUTBOX_OK ||
      edge_outbox_get_stats(outbox, &stats) != EDGE_OUTBOX_OK) {
    fprintf(stderr, "c_consumer: %s\n", edge_outbox_last_error());
    edge_outbox_close(outbox);
    return 1;
  }
  printf("version %s pending %llu\n", edge_outbox_version(), (unsigned long long)stats.pending);
  return edge_outbox_close(outbox) == EDGE_OUTBOX_OK ? 0 : 1;
}
