// SPDX-License-Identifier: Apache-2.0
// StreamRouter tells the Confirmer which streams it confirms itself and
// takes the others to the member that does (ConfirmPool, confirm_pool.h).
// Without one, a Confirmer confirms every stream it hears of.
//
// Thread rule: any thread; neither call blocks on the network.
#pragma once

#include <vector>

#include "ingest/confirm/pool_notices.h"
#include "ingest/model/stream_key.h"

namespace edge_outbox::ingest {

class StreamRouter {
 public:
  virtual ~StreamRouter() = default;
  // Whether this member confirms `stream` now.
  virtual bool owns(const StreamKey& stream) = 0;
  // Streams this member does not own, for their owners.
  virtual void hand_over(std::vector<HandedStream> streams) = 0;
};

}  // namespace edge_outbox::ingest
