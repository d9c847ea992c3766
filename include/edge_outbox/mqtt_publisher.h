// SPDX-License-Identifier: Apache-2.0
// Moved: the Paho-backed Publisher is now <edge_outbox/mqtt/publisher.h>.
// This forwarding header is kept for one release; include the new path.
#pragma once
#include <edge_outbox/mqtt/publisher.h>
