// StagedFile: O_DIRECT writes from aligned staging chunks (staged_file.h).
#include "storage/staged_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "imagepack/files.h"
#include "storage/fd_io.h"

namespace imagepack::internal {

bool DirectIoPays(int fd) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return false;
  return fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC;
}

namespace {

constexpr size_t kHugePage = 2 << 20;

struct Chunk {
  uint64_t index = 0;  // covers file bytes [index * chunk_bytes, (index + 1) * chunk_bytes)
  uint8_t* mem = nullptr;
  std::atomic<size_t> filled{0};
};

}  // namespace

struct StagedFile::Impl {
  std::string path;
  int direct_fd = -1;
  int buffered_fd = -1;
  StagedFileOptions opts;

  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, Chunk*> filling;  // chunks with bytes still to come
  std::deque<Chunk*> queued;           // complete, waiting for a writer thread
  std::vector<uint8_t*> spare;         // memory of written chunks, reused
  int writing = 0;
  std::atomic<uint64_t> put_bytes{0};  // every Put's size: the file is complete when it equals the size
  bool stop = false;
  Status error;
  std::vector<std::thread> threads;

  ~Impl() {
    {
      std::lock_guard<std::mutex> g(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    for (auto& [k, c] : filling) Drop(c);
    for (Chunk* c : queued) Drop(c);
    for (uint8_t* m : spare) std::free(m);
    if (direct_fd >= 0) ::close(direct_fd);
  }

  void Drop(Chunk* c) {
    std::free(c->mem);
    delete c;
  }

  // Writes n bytes at `at` (both aligned) through the direct descriptor. A
  // short direct write (a nearly full disk) is finished through the
  // buffered one, which then reports the real reason if it fails too.
  Status WriteAt(const uint8_t* p, size_t n, uint64_t at) const {
    while (n > 0) {
      const ssize_t w = ::pwrite(direct_fd, p, n, static_cast<off_t>(at));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Status::FromErrno("write " + path, errno);
      if (w == 0 || static_cast<size_t>(w) % kDirectAlign != 0)
        return PwriteAll(buffered_fd, p + w, n - static_cast<size_t>(w), at + static_cast<uint64_t>(w), path);
      p += w;
      n -= static_cast<size_t>(w);
      at += static_cast<uint64_t>(w);
    }
    return Status::Ok();
  }

  void WriterLoop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || !queued.empty(); });
      if (stop) return;
      Chunk* c = queued.front();
      queued.pop_front();
      ++writing;
      const bool failed = !error.ok();  // read under the lock: another writer thread sets it
      lk.unlock();
      Status st = failed ? Status::Ok() : WriteAt(c->mem, opts.chunk_bytes, c->index * opts.chunk_bytes);
      lk.lock();
      --writing;
      if (!st.ok() && error.ok()) error = st;
      // Kept for the next chunk: the chunks alive at once are bounded (those
      // being filled, queued, written), and fresh memory costs page faults
      // and zeroing.
      spare.push_back(c->mem);
      delete c;
      cv.notify_all();
    }
  }

  // The chunk holding file byte `at`, created on first use.
  Result<Chunk*> ChunkFor(uint64_t index) {
    std::lock_guard<std::mutex> g(mu);
    if (!error.ok()) return error;
    auto it = filling.find(index);
    if (it != filling.end()) return it->second;
    uint8_t* mem = nullptr;
    if (!spare.empty()) {
      mem = spare.back();
      spare.pop_back();
    } else {
      // Huge pages where the chunk size allows: pinning the chunk's pages
      // for each direct write costs per page (a few % of a raw pack's CPU
      // with 4 KB pages).
      const bool huge = opts.chunk_bytes % kHugePage == 0;
      mem = static_cast<uint8_t*>(std::aligned_alloc(huge ? kHugePage : kDirectAlign, opts.chunk_bytes));
      if (!mem) return error = Status::IOError("out of memory for a staging chunk of " + path);
      if (huge) ::madvise(mem, opts.chunk_bytes, MADV_HUGEPAGE);  // advice only: no error if refused
    }
    auto* c = new Chunk;
    c->index = index;
    c->mem = mem;
    filling.emplace(index, c);
    return c;
  }

  // Hands a complete chunk to the writer threads; waits while max_queued
  // chunks are already waiting.
  Status Submit(Chunk* c) {
    std::unique_lock<std::mutex> lk(mu);
    filling.erase(c->index);
    cv.wait(lk, [&] { return !error.ok() || stop || queued.size() < static_cast<size_t>(opts.max_queued); });
    if (!error.ok()) {
      Drop(c);
      return error;
    }
    queued.push_back(c);
    cv.notify_all();
    return Status::Ok();
  }

  Status Fill(uint64_t at, const uint8_t* data, size_t size) {
    const size_t cb = opts.chunk_bytes;
    put_bytes.fetch_add(size, std::memory_order_relaxed);
    while (size > 0) {
      const uint64_t index = at / cb;
      const size_t off = static_cast<size_t>(at % cb);
      const size_t n = std::min(size, cb - off);
      auto c = ChunkFor(index);
      if (!c.ok()) return c.status();
      if (data) std::memcpy(c.value()->mem + off, data, n);
      else std::memset(c.value()->mem + off, 0, n);
      // The thread that completes a chunk submits it; acq_rel orders every
      // thread's bytes before the write.
      if (c.value()->filled.fetch_add(n, std::memory_order_acq_rel) + n == cb)
        IMAGEPACK_RETURN_IF_ERROR(Submit(c.value()));
      at += n;
      size -= n;
      if (data) data += n;
    }
    return Status::Ok();
  }
};

StagedFile::StagedFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StagedFile::~StagedFile() = default;

Result<std::unique_ptr<StagedFile>> StagedFile::Open(const std::string& path, int buffered_fd,
                                                     const StagedFileOptions& opts) {
  if (opts.chunk_bytes == 0 || opts.chunk_bytes % kDirectAlign != 0 || opts.io_threads < 1 || opts.max_queued < 1)
    return Status::InvalidArgument("staging chunks must be a positive multiple of 4096 bytes");
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->buffered_fd = buffered_fd;
  impl->opts = opts;
  // A second fd of the same open file, through /proc (not by name: the
  // name may have been swapped for a link since it was created).
  const std::string by_fd = "/proc/self/fd/" + std::to_string(buffered_fd);
  impl->direct_fd = ::open(by_fd.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (impl->direct_fd < 0) {
    const int e = errno;
    if (e == EINVAL) return Status::NotSupported(path + ": the file system does not support O_DIRECT");
    return Status::FromErrno("open " + path + " for direct writes", e);
  }
  Impl* p = impl.get();
  for (int i = 0; i < opts.io_threads; ++i) impl->threads.emplace_back([p] { p->WriterLoop(); });
  return std::unique_ptr<StagedFile>(new StagedFile(std::move(impl)));
}

Status StagedFile::Put(uint64_t at, const void* data, size_t size) {
  return impl_->Fill(at, static_cast<const uint8_t*>(data), size);
}

Status StagedFile::PutZeros(uint64_t at, size_t size) { return impl_->Fill(at, nullptr, size); }

Status StagedFile::status() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  return impl_->error;
}

Status StagedFile::Close(uint64_t size) {
  Impl& m = *impl_;
  const size_t cb = m.opts.chunk_bytes;
  std::unique_lock<std::mutex> lk(m.mu);
  m.cv.wait(lk, [&] { return m.queued.empty() && m.writing == 0; });
  if (!m.error.ok()) return m.error;
  const uint64_t put = m.put_bytes.load();
  if (put != size)
    return m.error = Status::IOError(m.path + ": " + std::to_string(put) + " bytes were put for a file of " +
                                     std::to_string(size) + " bytes");
  const uint64_t last = size / cb;  // the partial chunk, if size is not a multiple
  const size_t tail = static_cast<size_t>(size % cb);
  for (auto& [index, c] : m.filling) {
    const size_t filled = c->filled.load(std::memory_order_acquire);
    if (index == last && filled == tail) continue;
    const uint64_t begin = index * cb;
    return m.error = Status::IOError(m.path + ": bytes " + std::to_string(begin) + ".." +
                                     std::to_string(begin + cb - 1) + " were put only in part (" +
                                     std::to_string(filled) + " bytes) before closing at " +
                                     std::to_string(size) + " bytes");
  }
  if (tail > 0) {
    auto it = m.filling.find(last);
    if (it == m.filling.end())
      return m.error = Status::IOError(m.path + ": bytes " + std::to_string(last * cb) + ".." +
                                       std::to_string(size - 1) + " were never put");
    Chunk* c = it->second;
    const size_t rounded = (tail + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    std::memset(c->mem + tail, 0, rounded - tail);
    Status st = m.WriteAt(c->mem, rounded, last * cb);
    if (!st.ok()) return m.error = st;
  }
  if (::ftruncate(m.direct_fd, static_cast<off_t>(size)) != 0)
    return m.error = Status::FromErrno("truncate " + m.path, errno);
  return Status::Ok();
}

}  // namespace imagepack::internal
