// SPDX-License-Identifier: Apache-2.0
#include "ingest/store/pg_pool_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>

#include "ingest/store/store.h"

namespace edge_outbox::ingest::pg {

PgPoolChannel::PgPoolChannel(std::string uri) : uri_(std::move(uri)), described_(elide_password(uri_)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

PgPoolChannel::~PgPoolChannel() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void PgPoolChannel::fail(const std::string& what) {
  const std::string message = conn_ ? PQerrorMessage(conn_.get()) : "no connection";
  if (conn_ && PQstatus(conn_.get()) != CONNECTION_OK) conn_.reset();
  throw StoreError(StoreError::Kind::transient, "", "pool channel on PostgreSQL " + described_ + ": " + what + ": " + message);
}

void PgPoolChannel::await_socket(short events, std::chrono::steady_clock::time_point deadline, const char* what) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  pollfd fd{PQsocket(conn_.get()), events, 0};
  const int ready = left.count() > 0 ? ::poll(&fd, 1, static_cast<int>(left.count())) : 0;
  if (ready < 0 && errno == EINTR) return;
  if (ready <= 0) {
    conn_.reset();  // a server or a link that stalls: the next call connects anew
    throw StoreError(StoreError::Kind::transient, "",
                     "pool channel on PostgreSQL " + described_ + ": " + what + " timed out");
  }
}

void PgPoolChannel::connect() {
  listening_.clear();
  const auto deadline = std::chrono::steady_clock::now() + connect_timeout;
  conn_.reset(PQconnectStart(uri_.c_str()));
  if (!conn_ || PQstatus(conn_.get()) == CONNECTION_BAD) fail("cannot connect");
  for (;;) {
    switch (PQconnectPoll(conn_.get())) {
      case PGRES_POLLING_OK:
        if (PQsetnonblocking(conn_.get(), 1) != 0) fail("cannot connect");
        return;
      case PGRES_POLLING_FAILED:
        fail("cannot connect");
      case PGRES_POLLING_READING:
        await_socket(POLLIN, deadline, "connecting");
        break;
      default:
        await_socket(POLLOUT, deadline, "connecting");
        break;
    }
  }
}

void PgPoolChannel::run(const char* sql, int n, const char* const* values, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + statement_timeout;
  if (PQsendQueryParams(conn_.get(), sql, n, nullptr, values, nullptr, nullptr, 0) == 0) fail(what);
  for (;;) {
    const int flushed = PQflush(conn_.get());
    if (flushed < 0) fail(what);
    if (flushed == 0) break;
    await_socket(POLLIN | POLLOUT, deadline, what);
    if (PQconsumeInput(conn_.get()) == 0) fail(what);
  }
  bool ok = true;
  for (;;) {
    while (PQisBusy(conn_.get()) != 0) {
      await_socket(POLLIN, deadline, what);
      if (PQconsumeInput(conn_.get()) == 0) fail(what);
    }
    Result r(PQgetResult(conn_.get()));
    if (!r) break;
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) ok = false;
  }
  if (!ok) fail(what);
}

bool PgPoolChannel::ensure_listening(const std::vector<std::string>& channels) {
  if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK && listening_ == channels) return false;
  const bool reconnected = !conn_ || PQstatus(conn_.get()) != CONNECTION_OK;
  if (reconnected) connect();
  for (const auto& channel : channels) {
    // Channel names are the pool's own (pool_notices.h): lowercase, no quotes.
    const std::string sql = "LISTEN \"" + channel + "\"";
    run(sql.c_str(), 0, nullptr, "LISTEN");
  }
  listening_ = channels;
  return reconnected;
}

void PgPoolChannel::notify(const std::string& channel, const std::string& payload) {
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) fail("not connected");
  const char* values[2] = {channel.c_str(), payload.c_str()};
  run("SELECT pg_notify($1, $2)", 2, values, "pg_notify");
}

std::vector<PoolNotice> PgPoolChannel::take_notices() {
  std::vector<PoolNotice> out;
  while (PGnotify* n = PQnotifies(conn_.get())) {
    out.push_back(PoolNotice{n->relname, n->extra ? n->extra : ""});
    PQfreemem(n);
  }
  return out;
}

std::vector<PoolNotice> PgPoolChannel::wait(std::chrono::milliseconds timeout) {
  if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) {  // a plain wait that wake() ends
    pollfd fd{wake_fd_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(timeout.count())) > 0) {
      std::uint64_t count = 0;
      (void)::read(wake_fd_, &count, sizeof count);
    }
    return {};
  }
  // Notices that came with the replies of earlier statements.
  if (PQconsumeInput(conn_.get()) == 0) fail("reading");
  auto out = take_notices();
  if (!out.empty()) return out;
  pollfd fds[2] = {{PQsocket(conn_.get()), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int ready = ::poll(fds, 2, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) fail("poll");
  if (fds[1].revents & POLLIN) {
    std::uint64_t count = 0;
    (void)::read(wake_fd_, &count, sizeof count);
  }
  if (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) {
    if (PQconsumeInput(conn_.get()) == 0) fail("reading");
    out = take_notices();
  }
  return out;
}

void PgPoolChannel::wake() noexcept {
  const std::uint64_t one = 1;
  (void)::write(wake_fd_, &one, sizeof one);
}

}  // namespace edge_outbox::ingest::pg
