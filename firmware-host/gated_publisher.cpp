// SPDX-License-Identifier: Apache-2.0
#include "gated_publisher.h"

#include <utility>

#include <edge_outbox/error.h>

namespace edge_outbox::sim {

GatedPublisher::GatedPublisher(Factory factory, std::chrono::milliseconds stop_timeout)
    : factory_(std::move(factory)), stop_timeout_(stop_timeout) {}

GatedPublisher::~GatedPublisher() { stop(stop_timeout_); }

std::shared_ptr<Publisher> GatedPublisher::make_inner_locked() {
  std::shared_ptr<Publisher> inner = factory_();
  auto generation = ++generation_;
  inner->set_connection_handler([this, generation](const ConnectionEvent& ev) {
    ConnectionHandler handler;
    {
      std::lock_guard lock(mutex_);
      if (generation != generation_ || !online_ || stopped_) return;
      if (ev.connected) version_ = ev.version;
      handler = handler_;
    }
    if (handler) handler(ev);
  });
  for (const auto& [filter, handler] : subscriptions_) {
    inner->subscribe(filter, [this, generation, handler = handler](const IncomingMessage& m) {
      {
        std::lock_guard lock(mutex_);
        if (generation != generation_ || !online_ || stopped_) return;
      }
      handler(m);
    });
  }
  inner_ = inner;
  return inner;
}

void GatedPublisher::set_online(bool online) {
  std::shared_ptr<Publisher> retired, fresh;
  ConnectionHandler handler;
  MqttVersion version = MqttVersion::v5;
  {
    std::lock_guard lock(mutex_);
    if (online == online_ || stopped_) return;
    online_ = online;
    if (!started_) return;
    if (online) {
      fresh = make_inner_locked();
    } else {
      retired = std::move(inner_);
      ++generation_;
      handler = handler_;
      version = version_;
    }
  }
  if (fresh) fresh->start();
  if (retired) {
    // Completes every outstanding publish (not_sent unless acknowledged).
    retired->stop(stop_timeout_);
    ConnectionEvent ev;
    ev.connected = false;
    ev.version = version;
    ev.reason = "simulated outage (--offline-schedule)";
    if (handler) handler(ev);
  }
}

bool GatedPublisher::online() const {
  std::lock_guard lock(mutex_);
  return online_;
}

void GatedPublisher::set_connection_handler(ConnectionHandler handler) {
  std::lock_guard lock(mutex_);
  handler_ = std::move(handler);
}

void GatedPublisher::subscribe(std::string topic_filter, MessageHandler handler) {
  std::lock_guard lock(mutex_);
  if (started_) throw Error(ErrorKind::invalid_argument, "subscribe must come before start()");
  subscriptions_.emplace_back(std::move(topic_filter), std::move(handler));
}

void GatedPublisher::start() {
  std::shared_ptr<Publisher> fresh;
  {
    std::lock_guard lock(mutex_);
    if (started_ || stopped_) return;
    started_ = true;
    if (online_) fresh = make_inner_locked();
  }
  if (fresh) fresh->start();
}

void GatedPublisher::stop(std::chrono::milliseconds timeout) {
  std::shared_ptr<Publisher> retired;
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    retired = std::move(inner_);
  }
  if (retired) retired->stop(timeout);
}

void GatedPublisher::publish(OutgoingMessage message, PublishCallback done) {
  std::shared_ptr<Publisher> inner;
  {
    std::lock_guard lock(mutex_);
    inner = inner_;
  }
  if (!inner) {
    PublishResult result;
    result.status = PublishResult::Status::not_sent;
    result.reason = "offline (simulated outage)";
    done(std::move(result));
    return;
  }
  inner->publish(std::move(message), std::move(done));
}

bool GatedPublisher::connected() const {
  std::shared_ptr<Publisher> inner;
  {
    std::lock_guard lock(mutex_);
    inner = inner_;
  }
  return inner && inner->connected();
}

MqttVersion GatedPublisher::version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

void GatedPublisher::notify_connectivity() {
  std::shared_ptr<Publisher> inner;
  {
    std::lock_guard lock(mutex_);
    inner = inner_;
  }
  if (inner) inner->notify_connectivity();
}

void GatedPublisher::drop_connection(const std::string& reason) {
  std::shared_ptr<Publisher> inner;
  {
    std::lock_guard lock(mutex_);
    inner = inner_;
  }
  if (inner) inner->drop_connection(reason);
}

}  // namespace edge_outbox::sim
