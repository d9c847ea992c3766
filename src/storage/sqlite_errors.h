// SPDX-License-Identifier: Apache-2.0
// Turns SQLite failures into edge_outbox::Error with a kind and advice.
#pragma once

#include <filesystem>
#include <string_view>

#include <SQLiteCpp/Exception.h>

#include <edge_outbox/error.h>

namespace edge_outbox {

// The kind an SQLite (extended) result code maps to.
ErrorKind kind_of_sqlite_error(int extended_code) noexcept;

// Error for a failed SQLite call on the given file while doing `what`.
Error sqlite_error(const SQLite::Exception& e, const std::filesystem::path& file, std::string_view what);

}  // namespace edge_outbox
