// SPDX-License-Identifier: Apache-2.0
#include "support/power_cut_vfs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

namespace edge_outbox::test {
namespace {

constexpr std::int64_t block_size = 4096;

// One file (by path) as this process sees it: its whole content, and the
// blocks that differ from the real file since its last sync.
struct FileImage {
  std::string bytes;
  std::set<std::int64_t> dirty_blocks;
  bool resized = false;  // truncated since the last sync
  bool deleted = false;  // unlinked while open: its path now names another file
  int handles = 0;
};

// The newest write not yet synced: what a cut at a sync tears.
struct LastWrite {
  const std::string* path = nullptr;
  FileImage* image = nullptr;
  std::int64_t offset = 0;
  std::int64_t size = 0;
};

struct VfsState {
  std::mutex mutex;
  sqlite3_vfs* real = nullptr;
  sqlite3_vfs vfs{};
  PowerCutPlan plan;
  PowerCutCounters counters;
  std::map<std::string, FileImage> images;
  std::uint64_t deleted_images = 0;
  LastWrite last_write;
};

// Never destroyed: the process ends with _exit, possibly while other
// threads are inside the VFS.
VfsState& state() {
  static auto* s = new VfsState;
  return *s;
}

// The sqlite3_file SQLite allocates for a file of this VFS; the real VFS's
// file follows it in the same allocation.
struct File {
  sqlite3_file base;
  sqlite3_file* real;
  FileImage* image;          // null: a file that passes straight through
  const std::string* path;   // the key of image in VfsState::images
};
static_assert(sizeof(File) % alignof(std::max_align_t) == 0, "the real file that follows must stay aligned");

File* as_file(sqlite3_file* f) { return reinterpret_cast<File*>(f); }

// A prefix of the bytes [data, data + size) reaches path at offset; a write
// that extends the file extends it to its full end (the size reached the
// disk, part of the content did not).
void tear(const std::string& path, std::int64_t offset, const char* data, std::int64_t size, double fraction) {
  const auto torn = static_cast<std::int64_t>(static_cast<double>(size) * fraction);
  if (torn <= 0) return;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (::pwrite(fd, data, static_cast<std::size_t>(torn), static_cast<off_t>(offset)) != torn) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size < offset + size) (void)::ftruncate(fd, static_cast<off_t>(offset + size));
}

// The power goes. Requires: the state's mutex is held.
[[noreturn]] void cut_locked(VfsState& s, const std::string* path, std::int64_t offset, const char* data,
                             std::int64_t size) {
  if (s.plan.tear_fraction > 0 && path != nullptr && !s.images.at(*path).deleted)
    tear(*path, offset, data, size, s.plan.tear_fraction);
  ::_exit(power_cut_exit_code);
}

// Cuts at the last unsynced write, if any. Requires: the mutex is held.
[[noreturn]] void cut_at_last_write_locked(VfsState& s) {
  const auto& w = s.last_write;
  if (w.image == nullptr) cut_locked(s, nullptr, 0, nullptr, 0);
  const auto end = std::min<std::int64_t>(w.offset + w.size, static_cast<std::int64_t>(w.image->bytes.size()));
  if (end <= w.offset) cut_locked(s, nullptr, 0, nullptr, 0);
  cut_locked(s, w.path, w.offset, w.image->bytes.data() + w.offset, end - w.offset);
}

// Counts one operation; true when the plan cuts the power at it.
bool cut_now_locked(VfsState& s, bool sync) {
  (sync ? s.counters.syncs : s.counters.writes) += 1;
  return s.plan.cut_at != 0 && s.counters.writes + s.counters.syncs == s.plan.cut_at;
}

void mark_dirty(FileImage& image, std::int64_t offset, std::int64_t size) {
  for (auto block = offset / block_size; block <= (offset + size - 1) / block_size; ++block)
    image.dirty_blocks.insert(block);
}

// --- the io methods ---

int file_close(sqlite3_file* f) {
  auto* file = as_file(f);
  if (file->image != nullptr) {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    --file->image->handles;
  }
  const int rc = file->real->pMethods != nullptr ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
  file->base.pMethods = nullptr;
  return rc;
}

int file_read(sqlite3_file* f, void* out, int amount, sqlite3_int64 offset) {
  auto* file = as_file(f);
  if (file->image == nullptr) return file->real->pMethods->xRead(file->real, out, amount, offset);
  auto& s = state();
  std::lock_guard lock(s.mutex);
  const auto& bytes = file->image->bytes;
  const auto size = static_cast<std::int64_t>(bytes.size());
  const auto available = std::clamp<std::int64_t>(size - offset, 0, amount);
  if (available > 0) std::memcpy(out, bytes.data() + offset, static_cast<std::size_t>(available));
  if (available == amount) return SQLITE_OK;
  std::memset(static_cast<char*>(out) + available, 0, static_cast<std::size_t>(amount - available));
  return SQLITE_IOERR_SHORT_READ;
}

int file_write(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
  auto* file = as_file(f);
  if (file->image == nullptr) return file->real->pMethods->xWrite(file->real, data, amount, offset);
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (cut_now_locked(s, false)) cut_locked(s, file->path, offset, static_cast<const char*>(data), amount);
  auto& image = *file->image;
  if (amount <= 0) return SQLITE_OK;
  if (static_cast<std::int64_t>(image.bytes.size()) < offset + amount)
    image.bytes.resize(static_cast<std::size_t>(offset + amount), '\0');
  std::memcpy(image.bytes.data() + offset, data, static_cast<std::size_t>(amount));
  mark_dirty(image, offset, amount);
  s.last_write = LastWrite{file->path, file->image, offset, amount};
  return SQLITE_OK;
}

int file_truncate(sqlite3_file* f, sqlite3_int64 size) {
  auto* file = as_file(f);
  if (file->image == nullptr) return file->real->pMethods->xTruncate(file->real, size);
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (cut_now_locked(s, false)) cut_at_last_write_locked(s);
  auto& image = *file->image;
  if (static_cast<std::int64_t>(image.bytes.size()) < size) mark_dirty(image, static_cast<std::int64_t>(image.bytes.size()),
                                                                      size - static_cast<std::int64_t>(image.bytes.size()));
  image.bytes.resize(static_cast<std::size_t>(size), '\0');
  image.resized = true;
  return SQLITE_OK;
}

// Writes the file's dirty blocks (and its size) through to the real file.
int file_sync(sqlite3_file* f, int flags) {
  auto* file = as_file(f);
  if (file->image == nullptr) return file->real->pMethods->xSync(file->real, flags);
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (cut_now_locked(s, true)) cut_at_last_write_locked(s);
  auto& image = *file->image;
  auto* real = file->real;
  (void)flags;
  const auto size = static_cast<std::int64_t>(image.bytes.size());
  for (const auto block : image.dirty_blocks) {
    const auto offset = block * block_size;
    if (offset >= size) break;
    const auto length = std::min(block_size, size - offset);
    const int rc = real->pMethods->xWrite(real, image.bytes.data() + offset, static_cast<int>(length), offset);
    if (rc != SQLITE_OK) return rc;
  }
  sqlite3_int64 real_size = 0;
  if (const int rc = real->pMethods->xFileSize(real, &real_size); rc != SQLITE_OK) return rc;
  if (real_size != size) {
    if (const int rc = real->pMethods->xTruncate(real, size); rc != SQLITE_OK) return rc;
  }
  // No fsync of the real file: the machine never loses power, only the
  // simulation does, and what reached the kernel survives the process.
  image.dirty_blocks.clear();
  image.resized = false;
  if (s.last_write.image == &image) s.last_write = {};
  return SQLITE_OK;
}

int file_size(sqlite3_file* f, sqlite3_int64* size) {
  auto* file = as_file(f);
  if (file->image == nullptr) return file->real->pMethods->xFileSize(file->real, size);
  auto& s = state();
  std::lock_guard lock(s.mutex);
  *size = static_cast<sqlite3_int64>(file->image->bytes.size());
  return SQLITE_OK;
}

int file_lock(sqlite3_file* f, int level) { return as_file(f)->real->pMethods->xLock(as_file(f)->real, level); }
int file_unlock(sqlite3_file* f, int level) { return as_file(f)->real->pMethods->xUnlock(as_file(f)->real, level); }
int file_check_reserved_lock(sqlite3_file* f, int* out) {
  return as_file(f)->real->pMethods->xCheckReservedLock(as_file(f)->real, out);
}

int file_control(sqlite3_file* f, int op, void* arg) {
  auto* file = as_file(f);
  // A size hint would grow the real file behind the image's back; it is only a hint.
  if (file->image != nullptr && op == SQLITE_FCNTL_SIZE_HINT) return SQLITE_OK;
  return file->real->pMethods->xFileControl(file->real, op, arg);
}

int file_sector_size(sqlite3_file* f) { return as_file(f)->real->pMethods->xSectorSize(as_file(f)->real); }
int file_device_characteristics(sqlite3_file* f) {
  return as_file(f)->real->pMethods->xDeviceCharacteristics(as_file(f)->real);
}

// Shared memory (the WAL index) is not durable anyway: SQLite rebuilds it
// after a crash. It passes straight through.
int file_shm_map(sqlite3_file* f, int page, int page_size, int extend, void volatile** out) {
  return as_file(f)->real->pMethods->xShmMap(as_file(f)->real, page, page_size, extend, out);
}
int file_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  return as_file(f)->real->pMethods->xShmLock(as_file(f)->real, offset, n, flags);
}
void file_shm_barrier(sqlite3_file* f) { as_file(f)->real->pMethods->xShmBarrier(as_file(f)->real); }
int file_shm_unmap(sqlite3_file* f, int delete_flag) {
  return as_file(f)->real->pMethods->xShmUnmap(as_file(f)->real, delete_flag);
}

// Version 2: shared memory, no memory-mapped reads (they would bypass the image).
const sqlite3_io_methods io_methods = {
    2,
    file_close,
    file_read,
    file_write,
    file_truncate,
    file_sync,
    file_size,
    file_lock,
    file_unlock,
    file_check_reserved_lock,
    file_control,
    file_sector_size,
    file_device_characteristics,
    file_shm_map,
    file_shm_lock,
    file_shm_barrier,
    file_shm_unmap,
    nullptr,
    nullptr,
};

// --- the VFS methods ---

sqlite3_vfs* real_vfs() { return state().real; }

int vfs_open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  auto* file = as_file(f);
  file->base.pMethods = nullptr;
  file->real = reinterpret_cast<sqlite3_file*>(file + 1);
  file->real->pMethods = nullptr;
  file->image = nullptr;
  file->path = nullptr;
  const int rc = real_vfs()->xOpen(real_vfs(), name, file->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    if (file->real->pMethods != nullptr) file->real->pMethods->xClose(file->real);
    return rc;
  }
  const bool durable_kind = (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL)) != 0;
  if (name != nullptr && durable_kind) {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    auto [it, added] = s.images.try_emplace(name);
    if (added) {
      // What the disk holds: everything the earlier processes synced.
      sqlite3_int64 size = 0;
      int load = file->real->pMethods->xFileSize(file->real, &size);
      if (load == SQLITE_OK && size > 0) {
        it->second.bytes.resize(static_cast<std::size_t>(size));
        load = file->real->pMethods->xRead(file->real, it->second.bytes.data(), static_cast<int>(size), 0);
      }
      if (load != SQLITE_OK) {
        s.images.erase(it);
        file->real->pMethods->xClose(file->real);
        return load;
      }
    }
    ++it->second.handles;
    file->image = &it->second;
    file->path = &it->first;
  }
  file->base.pMethods = &io_methods;
  return SQLITE_OK;
}

int vfs_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  {
    auto& s = state();
    std::lock_guard lock(s.mutex);
    auto it = s.images.find(name);
    if (it != s.images.end()) {
      if (s.last_write.image == &it->second) s.last_write = {};
      if (it->second.handles == 0) {
        s.images.erase(it);
      } else {
        // Still open: its handles keep the unlinked file, and the path is
        // free for a new one. Moving the node keeps the handles' pointers.
        auto node = s.images.extract(it);
        node.key() = std::string(name) + " (deleted " + std::to_string(++s.deleted_images) + ")";
        node.mapped().deleted = true;
        s.images.insert(std::move(node));
      }
    }
  }
  return real_vfs()->xDelete(real_vfs(), name, sync_dir);
}

int vfs_access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return real_vfs()->xAccess(real_vfs(), name, flags, out);
}
int vfs_full_pathname(sqlite3_vfs*, const char* name, int size, char* out) {
  return real_vfs()->xFullPathname(real_vfs(), name, size, out);
}
void* vfs_dl_open(sqlite3_vfs*, const char* name) { return real_vfs()->xDlOpen(real_vfs(), name); }
void vfs_dl_error(sqlite3_vfs*, int size, char* out) { real_vfs()->xDlError(real_vfs(), size, out); }
void (*vfs_dl_sym(sqlite3_vfs*, void* handle, const char* symbol))(void) {
  return real_vfs()->xDlSym(real_vfs(), handle, symbol);
}
void vfs_dl_close(sqlite3_vfs*, void* handle) { real_vfs()->xDlClose(real_vfs(), handle); }
int vfs_randomness(sqlite3_vfs*, int size, char* out) { return real_vfs()->xRandomness(real_vfs(), size, out); }
int vfs_sleep(sqlite3_vfs*, int microseconds) { return real_vfs()->xSleep(real_vfs(), microseconds); }
int vfs_current_time(sqlite3_vfs*, double* out) { return real_vfs()->xCurrentTime(real_vfs(), out); }
int vfs_get_last_error(sqlite3_vfs*, int size, char* out) {
  return real_vfs()->xGetLastError(real_vfs(), size, out);
}
int vfs_current_time_int64(sqlite3_vfs*, sqlite3_int64* out) {
  return real_vfs()->xCurrentTimeInt64(real_vfs(), out);
}

}  // namespace

void install_power_cut_vfs(const PowerCutPlan& plan) {
  if (sqlite3_initialize() != SQLITE_OK) throw std::runtime_error("sqlite3_initialize failed");
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (s.real != nullptr) throw std::logic_error("install_power_cut_vfs: already installed in this process");
  s.real = sqlite3_vfs_find(nullptr);
  if (s.real == nullptr) throw std::runtime_error("no default SQLite VFS");
  s.plan = plan;
  auto& v = s.vfs;
  v.iVersion = 2;
  v.szOsFile = static_cast<int>(sizeof(File)) + s.real->szOsFile;
  v.mxPathname = s.real->mxPathname;
  v.zName = "edge-outbox-power-cut";
  v.xOpen = vfs_open;
  v.xDelete = vfs_delete;
  v.xAccess = vfs_access;
  v.xFullPathname = vfs_full_pathname;
  v.xDlOpen = vfs_dl_open;
  v.xDlError = vfs_dl_error;
  v.xDlSym = vfs_dl_sym;
  v.xDlClose = vfs_dl_close;
  v.xRandomness = vfs_randomness;
  v.xSleep = vfs_sleep;
  v.xCurrentTime = vfs_current_time;
  v.xGetLastError = vfs_get_last_error;
  v.xCurrentTimeInt64 = vfs_current_time_int64;
  if (sqlite3_vfs_register(&v, 1) != SQLITE_OK) throw std::runtime_error("sqlite3_vfs_register failed");
}

void power_cut_now() {
  auto& s = state();
  s.mutex.lock();  // never released: the process ends here
  cut_at_last_write_locked(s);
}

PowerCutCounters power_cut_counters() {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  return s.counters;
}

}  // namespace edge_outbox::test
