// SPDX-License-Identifier: Apache-2.0
// salvage (edge_outbox/salvage.h): the order of the work. Reading one table
// is salvage_scan.h's; whether the -wal lost commits is wal_tail.h's.
#include <edge_outbox/salvage.h>

#include <fcntl.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <set>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include <edge_outbox/error.h>
#include <edge_outbox/options.h>
#include <edge_outbox/wire/dropped_report.h>

#include "storage/database.h"
#include "storage/dropped_events.h"
#include "storage/outbox_tables.h"
#include "storage/salvage_pages.h"
#include "storage/salvage_scan.h"
#include "storage/sqlite_errors.h"
#include "storage/uuid.h"
#include "storage/wal_tail.h"

namespace edge_outbox {
namespace {

// The page size the file's header gives (bytes 16-17, big-endian; 1 means
// 65,536); 0 when unreadable or not a power of two from 512.
std::uint64_t header_page_size(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char bytes[18] = {};
  if (!in.read(reinterpret_cast<char*>(bytes), sizeof bytes)) return 0;
  std::uint64_t size = (std::uint64_t{bytes[16]} << 8) | bytes[17];
  if (size == 1) size = 65536;
  if (size < 512 || (size & (size - 1)) != 0) return 0;
  return size;
}

namespace fs = std::filesystem;

struct SchemaObject {
  std::string type, name, table, sql;
};

struct Column {
  std::string name;
  std::string type;
  int pk = 0;
};

const std::set<std::string> library_tables = {"outbox", "outbox_dead", "outbox_meta"};

fs::path with_suffix(const fs::path& p, const char* suffix) {
  auto out = p;
  out += suffix;
  return out;
}

// The scratch files next to `to`: removed when salvage returns or throws.
struct ScratchFiles {
  std::vector<fs::path> paths;
  ~ScratchFiles() {
    std::error_code ec;
    for (const auto& p : paths) fs::remove(p, ec);
  }
  void clear_now() {
    std::error_code ec;
    for (const auto& p : paths) fs::remove(p, ec);
  }
};

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with_words(const std::string& sql, const std::string& words) {
  std::string squeezed;
  for (const char c : upper(sql)) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!squeezed.empty() && squeezed.back() != ' ') squeezed += ' ';
    } else {
      squeezed += c;
    }
    if (squeezed.size() >= words.size()) break;
  }
  return squeezed.rfind(words, 0) == 0;
}

bool without_rowid(const std::string& sql) {
  auto s = upper(sql);
  while (!s.empty() && (std::isspace(static_cast<unsigned char>(s.back())) || s.back() == ';')) s.pop_back();
  const auto at = s.rfind("ROWID");
  if (at == std::string::npos || at + 5 != s.size()) return false;
  auto before = s.substr(0, at);
  while (!before.empty() && std::isspace(static_cast<unsigned char>(before.back()))) before.pop_back();
  return before.size() >= 7 && before.substr(before.size() - 7) == "WITHOUT";
}

std::vector<Column> columns_of(SQLite::Database& db, const std::string& schema, const std::string& table) {
  std::vector<Column> out;
  SQLite::Statement q(db, "PRAGMA " + schema + ".table_info(" + quoted(table) + ")");
  while (q.executeStep()) out.push_back({q.getColumn(1).getString(), upper(q.getColumn(2).getString()), q.getColumn(5).getInt()});
  return out;
}

// The columns to copy besides the rowid: all but the rowid's alias (an
// INTEGER PRIMARY KEY of a rowid table).
std::vector<std::string> copied_columns(const std::vector<Column>& columns, bool rowid_table) {
  int keys = 0;
  for (const auto& c : columns) keys += c.pk > 0 ? 1 : 0;
  std::vector<std::string> out;
  for (const auto& c : columns)
    if (!(rowid_table && keys == 1 && c.pk == 1 && c.type == "INTEGER")) out.push_back(c.name);
  return out;
}

std::vector<std::string> shared_columns(const std::vector<std::string>& in, const std::vector<Column>& target) {
  std::vector<std::string> out;
  for (const auto& c : in)
    if (std::any_of(target.begin(), target.end(), [&](const Column& t) { return t.name == c; })) out.push_back(c);
  return out;
}

template <typename T>
std::optional<T> try_read(const std::function<T()>& read) {
  try {
    return read();
  } catch (const SQLite::Exception&) {
    return std::nullopt;
  }
}

std::optional<std::int64_t> meta_integer(SQLite::Database& db, const char* key, const std::string& schema = "main") {
  return try_read<std::optional<std::int64_t>>([&]() -> std::optional<std::int64_t> {
           SQLite::Statement q(db, "SELECT value FROM " + schema + ".outbox_meta WHERE key = ?");
           q.bind(1, key);
           if (!q.executeStep()) return std::nullopt;
           return q.getColumn(0).getInt64();
         })
      .value_or(std::nullopt);
}

void fsync_path(const fs::path& p, int flags) {
  const int fd = ::open(p.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void add_span(std::vector<SequenceSpan>& spans, std::int64_t first, std::int64_t last) {
  if (first > last) return;
  if (!spans.empty() && spans.back().last + 1 >= first)
    spans.back().last = std::max(spans.back().last, last);
  else
    spans.push_back({first, last});
}

// [first, last] less the sorted `held` sequences.
void add_span_without(std::vector<SequenceSpan>& spans, std::int64_t first, std::int64_t last,
                      const std::vector<std::int64_t>& held) {
  auto it = std::lower_bound(held.begin(), held.end(), first);
  std::int64_t at = first;
  for (; it != held.end() && *it <= last; ++it) {
    if (*it > at) add_span(spans, at, *it - 1);
    at = *it + 1;
  }
  add_span(spans, at, last);
}

}  // namespace

SalvageResult salvage(const fs::path& damaged, const fs::path& to, const SalvageOptions& options) {
  const auto log = [&](LogLevel level, const std::string& message) {
    if (options.log) options.log(level, message);
  };
  std::error_code ec;
  if (!fs::is_regular_file(damaged, ec))
    throw Error(ErrorKind::io, damaged.string() + " is not a readable file: nothing to salvage");
  if (fs::exists(to, ec) || fs::exists(with_suffix(to, "-wal"), ec))
    throw Error(ErrorKind::invalid_argument,
                to.string() + " exists: salvage writes a new file only; name one that does not exist");
  const auto clock = options.clock ? options.clock : system_clock();

  // The input is copied aside, with its -wal: SQLite's WAL recovery and the
  // reads then touch only the copy.
  const auto input = with_suffix(to, ".salvage-input");
  const auto building = with_suffix(to, ".salvage-new");
  ScratchFiles scratch{{input, with_suffix(input, "-wal"), with_suffix(input, "-shm"), with_suffix(input, "-journal"),
                        building, with_suffix(building, "-wal"), with_suffix(building, "-shm"),
                        with_suffix(building, "-journal")}};
  scratch.clear_now();  // an interrupted salvage's
  const auto damaged_wal = with_suffix(damaged, "-wal");
  std::uint64_t wal_bytes = 0, db_bytes = 0;
  try {
    fs::copy_file(damaged, input);
    db_bytes = fs::file_size(input);
    // A file cut inside a page: SQLite reads the missing part of its last
    // page as zeros, and a row there may read back whole but wrong. The
    // part page goes; its rows are reported corrupt.
    if (const auto page = header_page_size(input); page > 0 && db_bytes % page != 0) {
      db_bytes -= db_bytes % page;
      fs::resize_file(input, db_bytes);
    }
    if (fs::exists(damaged_wal)) {
      fs::copy_file(damaged_wal, with_suffix(input, "-wal"));
      wal_bytes = fs::file_size(with_suffix(input, "-wal"));
    }
  } catch (const fs::filesystem_error& e) {
    throw Error(ErrorKind::io, std::string("salvage cannot copy the damaged file aside next to ") + to.string() +
                                   ": " + e.what() + " (is there room, and may this user write there?)");
  }

  SalvageResult result;
  try {
    // The copy's own connection: the schema, the WAL's state, the counters.
    auto src_connection = std::make_unique<SQLite::Database>(input.string(), SQLite::OPEN_READWRITE);
    auto& src = *src_connection;
    // A file shorter than its header says is read as far as it goes (as
    // sqlite3's .recover does), not refused whole.
    src.exec("PRAGMA writable_schema = ON");
    std::vector<SchemaObject> schema;
    try {
      SQLite::Statement q(src, "SELECT type, name, tbl_name, sql FROM sqlite_schema");
      while (q.executeStep())
        schema.push_back({q.getColumn(0).getString(), q.getColumn(1).getString(), q.getColumn(2).getString(),
                          q.getColumn(3).isNull() ? std::string() : q.getColumn(3).getString()});
    } catch (const SQLite::Exception& e) {
      if (!is_damage(e.getErrorCode())) throw;
      throw Error(ErrorKind::corrupt, damaged.string() + ": its schema (page 1) cannot be read (" + e.what() +
                                          "): salvage cannot find the tables; nothing was written. `sqlite3 " +
                                          damaged.string() + " .recover` may still find rows");
    }
    auto has_table = [&](const std::string& name) {
      return std::any_of(schema.begin(), schema.end(),
                         [&](const SchemaObject& o) { return o.type == "table" && o.name == name; });
    };
    if (!has_table("outbox_meta") || !has_table("outbox"))
      throw Error(ErrorKind::invalid_argument,
                  damaged.string() + " is not an edge-outbox database (no outbox_meta or outbox table)");
    if (const auto version = meta_integer(src, "schema_version"); version && *version > current_schema_version)
      throw Error(ErrorKind::schema_too_new, damaged.string() + " has outbox schema version " +
                                                 std::to_string(*version) + ": salvage it with a newer edge-outbox");

    std::int64_t accepted_frames = 0;
    if (wal_bytes > 0) {
      accepted_frames = try_read<std::int64_t>([&] {
                          SQLite::Statement q(src, "PRAGMA wal_checkpoint(PASSIVE)");
                          q.executeStep();
                          return q.getColumn(1).getInt64();
                        }).value_or(0);
    }
    const bool wal_lost = wal_may_hold_lost_commits(with_suffix(input, "-wal"), accepted_frames);
    src.exec("PRAGMA query_only = ON");
    src.exec("PRAGMA cell_size_check = ON");
    const auto sequence_read = try_read<std::optional<std::int64_t>>([&]() -> std::optional<std::int64_t> {
      SQLite::Statement q(src, "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'");
      if (!q.executeStep()) return std::int64_t{0};
      return q.getColumn(0).getInt64();
    });
    result.sequence_known = sequence_read && *sequence_read;
    const std::int64_t recorded_sequence = result.sequence_known ? **sequence_read : 0;
    std::vector<std::pair<std::string, std::int64_t>> app_sequences;
    try {
      SQLite::Statement q(src, "SELECT name, seq FROM sqlite_sequence");
      while (q.executeStep())
        if (!library_tables.count(q.getColumn(0).getString()))
          app_sequences.emplace_back(q.getColumn(0).getString(), q.getColumn(1).getInt64());
    } catch (const SQLite::Exception& e) {
      result.notes.push_back(std::string("sqlite_sequence could not be read whole (") + e.what() +
                             "): the application's AUTOINCREMENT tables continue above their highest rowid copied");
    }
    sqlite3* in = src.getHandle();

    // The new file, made by the library's creation path, then filled in one
    // transaction, its journal in memory and unsynced (the file is not at
    // `to` until it is complete and synced).
    ConnectionSettings settings;
    settings.mode = OpenMode::create;
    settings.durability = Durability::normal;
    settings.clock = clock;
    settings.log = options.log;
    { Connection made(building, settings); }
    SQLite::Database out(building.string(), SQLite::OPEN_READWRITE);
    sqlite3* target = out.getHandle();
    // A journal in memory: a failed read rolls back its statement alone.
    out.exec("PRAGMA journal_mode = MEMORY");
    out.exec("PRAGMA synchronous = OFF");
    out.exec("PRAGMA cache_size = -32768");
    out.exec("PRAGMA cell_size_check = ON");
    out.exec("PRAGMA writable_schema = ON");  // the copy may be shorter than its header says
    {
      SQLite::Statement attach(out, "ATTACH ? AS src");
      attach.bind(1, input.string());
      attach.exec();
    }
    out.exec("BEGIN");

    // The library's indexes go until the rows are in (an index built at the
    // end is a sort, not 100,000 random inserts).
    std::vector<std::string> library_indexes;
    {
      SQLite::Statement q(out, "SELECT name, sql FROM main.sqlite_schema WHERE type = 'index' AND sql IS NOT NULL");
      std::vector<std::string> names;
      while (q.executeStep()) {
        names.push_back(q.getColumn(0).getString());
        library_indexes.push_back(q.getColumn(1).getString());
      }
      q.reset();
      for (const auto& n : names) out.exec("DROP INDEX main." + quoted(n));
    }

    // The application's tables, as written, before their rows.
    std::vector<const SchemaObject*> app_tables;
    for (const auto& o : schema) {
      if (o.type != "table" || library_tables.count(o.name) || o.name.rfind("sqlite_", 0) == 0) continue;
      if (starts_with_words(o.sql, "CREATE VIRTUAL TABLE")) {
        result.tables.push_back({o.name, 0, false, "a virtual table: not copied (rebuild it from its source)"});
        continue;
      }
      try {
        out.exec(o.sql);
        app_tables.push_back(&o);
      } catch (const SQLite::Exception& e) {
        result.tables.push_back({o.name, 0, false, std::string("cannot be created: ") + e.what()});
      }
    }

    // outbox_meta: the stream id, counters, sessions and boot records.
    const auto meta = copy_whole_table(in, target, "outbox_meta", {"key", "value"}, "INSERT OR REPLACE",
                                       "key NOT IN ('schema_version', 'schema_revision')");
    result.stream_kept = meta.complete;
    if (!meta.complete)
      result.notes.push_back("outbox_meta could not be read whole (" + std::to_string(meta.copied) +
                             " keys read): keys not read start afresh, and without the stream id the new file "
                             "begins a new stream");

    // The outbox's rows, and its dead letters.
    const auto outbox_columns =
        shared_columns(copied_columns(columns_of(out, "src", "outbox"), true), columns_of(out, "main", "outbox"));
    const auto events = copy_rowid_table(in, target, "outbox", outbox_columns);
    TableCopy dead;
    if (has_table("outbox_dead")) {
      const auto dead_columns = shared_columns(copied_columns(columns_of(out, "src", "outbox_dead"), true),
                                               columns_of(out, "main", "outbox_dead"));
      dead = copy_rowid_table(in, target, "outbox_dead", dead_columns);
    }
    std::vector<std::int64_t> dead_sequences;
    {
      SQLite::Statement q(out, "SELECT sequence FROM main.outbox_dead ORDER BY sequence");
      while (q.executeStep()) dead_sequences.push_back(q.getColumn(0).getInt64());
    }
    // The outbox rows on whole leaves that a damaged interior page hides
    // from SQL: read from the pages' bytes, where the scan found the rowids
    // unreadable, if they are laid out as outbox rows (not outbox_dead's,
    // whose 15th column is the reason, text).
    if (!events.unreadable.empty()) {
      const auto src_columns = columns_of(out, "src", "outbox");
      const auto main_columns = columns_of(out, "main", "outbox");
      auto position = [&](const char* name) -> std::optional<std::size_t> {
        for (std::size_t i = 0; i < src_columns.size(); ++i)
          if (src_columns[i].name == name) return i;
        return std::nullopt;
      };
      const auto alias = position("sequence");
      std::vector<std::size_t> texts, integers;
      for (const char* name : {"event_id", "topic", "type", "content_type", "created_boot"})
        if (const auto at = position(name)) texts.push_back(*at);
      for (const char* name : {"priority", "created_at", "created_mono", "attempts"})
        if (const auto at = position(name)) integers.push_back(*at);
      const auto published_at = position("published_at");
      std::vector<std::size_t> copied_positions;
      std::string names, marks = "?1";
      for (std::size_t i = 0; i < src_columns.size(); ++i) {
        if (alias && i == *alias) continue;
        if (!std::any_of(main_columns.begin(), main_columns.end(),
                         [&](const Column& c) { return c.name == src_columns[i].name; }))
          continue;
        copied_positions.push_back(i);
        names += ", " + quoted(src_columns[i].name);
        marks += ", ?" + std::to_string(copied_positions.size() + 1);
      }
      SQLite::Statement put(out, "INSERT OR IGNORE INTO main.outbox (rowid" + names + ") VALUES (" + marks + ")");
      auto hidden = [&](std::int64_t rowid) {
        for (const auto& r : events.unreadable)
          if (rowid >= r.first && rowid <= r.last) return true;
        return false;
      };
      auto is_outbox_row = [&](const RawRow& row) {
        if (row.values.size() > src_columns.size() || texts.size() < 5 || integers.size() < 4) return false;
        auto field = [&](std::size_t i) { return i < row.values.size() ? row.values[i] : RawValue{}; };
        if (alias && field(*alias).type != RawValue::Type::null) return false;
        for (const auto i : texts)
          if (field(i).type != RawValue::Type::text || field(i).bytes.empty()) return false;
        for (const auto i : integers)
          if (field(i).type != RawValue::Type::integer) return false;
        return !published_at || field(*published_at).type == RawValue::Type::null ||
               field(*published_at).type == RawValue::Type::integer;
      };
      const auto wanted = [&](std::int64_t rowid) {
        return hidden(rowid) && !std::binary_search(dead_sequences.begin(), dead_sequences.end(), rowid);
      };
      for_each_leaf_row(input, wanted, [&](const RawRow& row) {
        if (!is_outbox_row(row)) return;
        put.reset();
        put.clearBindings();
        put.bind(1, static_cast<std::int64_t>(row.rowid));
        for (std::size_t k = 0; k < copied_positions.size(); ++k) {
          const auto i = copied_positions[k];
          if (i >= row.values.size()) continue;
          const auto& v = row.values[i];
          const int at = static_cast<int>(k) + 2;
          switch (v.type) {
            case RawValue::Type::null: break;
            case RawValue::Type::integer: put.bind(at, static_cast<std::int64_t>(v.integer)); break;
            case RawValue::Type::real: put.bind(at, v.real); break;
            case RawValue::Type::text: put.bind(at, v.bytes); break;
            case RawValue::Type::blob: put.bind(at, v.bytes.data(), static_cast<int>(v.bytes.size())); break;
          }
        }
        if (put.exec() == 1) ++result.events_from_pages;
      });
    }

    // Where the scan met damage, the rows that damage hid without an error,
    // or garbage that parsed as a row: the event_id index (its own pages)
    // lists every row with its id; a row it lists that was not copied, or was
    // copied with another id, is lost. And a row without an id, topic or type
    // is no row the library wrote.
    std::vector<std::int64_t> suspect;
    {
      SQLite::Statement garbage(out, "DELETE FROM main.outbox WHERE event_id = '' OR topic = '' OR type = '' "
                                     "RETURNING sequence");
      while (garbage.executeStep()) suspect.push_back(garbage.getColumn(0).getInt64());
    }
    const bool has_id_index = std::any_of(schema.begin(), schema.end(), [](const SchemaObject& o) {
      return o.type == "index" && o.name == "sqlite_autoindex_outbox_1";
    });
    if (has_id_index && !events.complete) {
      out.exec("CREATE TEMP TABLE salvage_ids (sequence INTEGER PRIMARY KEY, event_id TEXT)");
      copy_index_entries(in, target, "outbox", "sqlite_autoindex_outbox_1", "event_id", "temp.salvage_ids");
      SQLite::Statement missing(out, "SELECT i.sequence FROM temp.salvage_ids i WHERE NOT EXISTS (SELECT 1 FROM "
                                     "main.outbox o WHERE o.sequence = i.sequence) AND NOT EXISTS (SELECT 1 FROM "
                                     "main.outbox_dead d WHERE d.sequence = i.sequence)");
      while (missing.executeStep()) suspect.push_back(missing.getColumn(0).getInt64());
      SQLite::Statement other(out, "DELETE FROM main.outbox WHERE sequence IN (SELECT o.sequence FROM main.outbox o "
                                   "JOIN temp.salvage_ids i ON i.sequence = o.sequence WHERE o.event_id IS NOT "
                                   "i.event_id) RETURNING sequence");
      while (other.executeStep()) suspect.push_back(other.getColumn(0).getInt64());
    }
    std::sort(suspect.begin(), suspect.end());
    suspect.erase(std::unique(suspect.begin(), suspect.end()), suspect.end());
    const std::int64_t highest =
        std::max(out.execAndGet("SELECT coalesce(max(sequence), 0) FROM main.outbox").getInt64(),
                 dead_sequences.empty() ? std::int64_t{0} : dead_sequences.back());
    result.events = static_cast<std::uint64_t>(out.execAndGet("SELECT count(*) FROM main.outbox").getInt64());
    result.dead = dead.copied;

    // The application's rows.
    for (const auto* t : app_tables) {
      SalvagedTable copied;
      copied.name = t->name;
      const bool rowid = !without_rowid(t->sql);
      const auto columns = copied_columns(columns_of(out, "src", t->name), rowid);
      const auto c = rowid ? copy_rowid_table(in, target, t->name, columns) : copy_whole_table(in, target, t->name, columns);
      copied.rows = c.copied;
      copied.complete = c.complete;
      result.tables.push_back(copied);
    }
    // Their AUTOINCREMENT counters, where readable (the copy raised them to
    // the highest rowid copied).
    {
      SQLite::Statement raise(out, "UPDATE main.sqlite_sequence SET seq = max(seq, ?2) WHERE name = ?1");
      for (const auto& [name, seq] : app_sequences) {
        raise.reset();
        raise.bind(1, name);
        raise.bind(2, seq);
        raise.exec();
      }
    }

    // The bound on the sequences the damaged file could have held.
    const auto sent_through = meta_integer(out, "sent_through").value_or(0);  // main's: copied
    const auto confirmed_through = meta_integer(out, "confirmed_through").value_or(0);
    const std::int64_t bound = std::max({recorded_sequence, highest, sent_through, confirmed_through});
    std::int64_t margin = 0;
    if (wal_lost) {
      margin += static_cast<std::int64_t>(wal_bytes / 16) + 1;
      result.notes.push_back("the -wal holds frames SQLite could not use (torn or damaged): the commits in them are "
                             "lost; the sequences they may have used are reported as corrupt");
    }
    if (!result.sequence_known) {
      margin += static_cast<std::int64_t>(db_bytes / 16) + 1;
      result.notes.push_back("sqlite_sequence could not be read: the next sequence is set above what the file's "
                             "size could hold");
    }
    result.sequence_bound = bound;
    result.margin = margin;
    const std::int64_t lowest = std::max<std::int64_t>(1, confirmed_through + 1);
    // What the new file holds has an outcome: pending or dead.
    std::vector<std::int64_t> held;
    {
      SQLite::Statement q(out, "SELECT sequence FROM main.outbox UNION SELECT sequence FROM main.outbox_dead "
                               "ORDER BY 1");
      while (q.executeStep()) held.push_back(q.getColumn(0).getInt64());
    }
    auto lost = events.unreadable;
    for (const auto s : suspect) lost.push_back({s, s});
    std::sort(lost.begin(), lost.end(), [](const RowidRange& a, const RowidRange& b) { return a.first < b.first; });
    for (const auto& r : lost) {
      const auto first = std::max(r.first, lowest);
      const auto last = std::min(r.last, bound);
      if (first <= last) add_span_without(result.corrupt, first, last, held);
    }
    if (margin > 0) add_span(result.corrupt, bound + 1, bound + margin);
    for (const auto& r : dead.unreadable) add_span(result.dead_lost, std::max<std::int64_t>(r.first, 1), std::min(r.last, bound));
    {
      SQLite::Statement set(out, "UPDATE main.sqlite_sequence SET seq = ? WHERE name = 'outbox'");
      set.bind(1, bound + margin);
      if (set.exec() == 0) {
        SQLite::Statement add(out, "INSERT INTO main.sqlite_sequence(name, seq) VALUES ('outbox', ?)");
        add.bind(1, bound + margin);
        add.exec();
      }
    }

    // Indexes, then views; the report; triggers last, so that none fired.
    for (const auto& sql : library_indexes) out.exec(sql);
    auto create = [&](const SchemaObject& o) {
      try {
        out.exec(o.sql);
      } catch (const SQLite::Exception& e) {
        result.notes.push_back(o.type + " " + o.name + " cannot be created: " + e.what());
      }
    };
    auto is_app_object = [&](const SchemaObject& o, const char* type) {
      return o.type == type && !o.sql.empty() && !library_tables.count(o.table) &&
             std::any_of(app_tables.begin(), app_tables.end(), [&](const SchemaObject* t) { return t->name == o.table; });
    };
    for (const auto& o : schema)
      if (is_app_object(o, "index")) create(o);
    for (const auto& o : schema)
      if (o.type == "view" && !o.sql.empty()) create(o);

    std::string topic = options.dropped_event_topic;
    if (topic.empty()) {
      SQLite::Statement newest(out, "SELECT topic FROM (SELECT sequence, topic FROM outbox WHERE type = "
                                    "'outbox.dropped' AND priority = 0 UNION ALL SELECT sequence, topic FROM "
                                    "outbox_dead WHERE type = 'outbox.dropped') ORDER BY sequence DESC LIMIT 1");
      topic = newest.executeStep() ? newest.getColumn(0).getString() : OutboxOptions{}.dropped_event_topic;
    }
    if (!result.corrupt.empty()) {
      OutboxTables tables(out, *clock, clock->boot_id(), current_schema_revision);
      UuidV7Generator ids;
      DroppedNews news;
      for (const auto& s : result.corrupt) news.dead.push_back({s.first, s.last, std::string(wire::dead_reason_corrupt)});
      result.report_sequence = add_dropped_report(tables, ids, *clock, topic, news).sequence;
    }
    for (const auto& o : schema)
      if (o.type == "trigger" && !o.sql.empty()) create(o);
    out.exec("COMMIT");
    out.exec("DETACH src");
    out.exec("PRAGMA writable_schema = OFF");
    out.exec("PRAGMA journal_mode = WAL");
    result.stream_id = out.execAndGet("SELECT value FROM outbox_meta WHERE key = 'stream_id'").getString();
  } catch (const SQLite::Exception& e) {
    throw sqlite_error(e, damaged, "salvaging");
  }

  // Durable, then at `to`.
  fsync_path(building, O_RDONLY);
  fs::rename(building, to, ec);
  if (ec) throw Error(ErrorKind::io, "salvage cannot move the new file to " + to.string() + ": " + ec.message());
  fsync_path(fs::absolute(to).parent_path(), O_RDONLY | O_DIRECTORY);
  log(LogLevel::info, "salvaged " + damaged.string() + " into " + to.string());
  return result;
}

}  // namespace edge_outbox
