// SPDX-License-Identifier: Apache-2.0
// Moved: the CloudEvents codec is now <edge_outbox/wire/cloudevents.h>.
// This forwarding header is kept for one release; include the new path.
#pragma once
#include <edge_outbox/wire/cloudevents.h>
