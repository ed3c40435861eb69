// Parallel gzip: one member per block, compressed on all cores, appended in order.
#include "halo/graph/gzip_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include "halo/graph/error.h"
#include "halo/graph/staging.h"

namespace halo {
namespace {

std::string gzip_member(const std::string& text, int level, const std::filesystem::path& path) {
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw SystemError(path.string() + ": deflateInit2 failed");
  std::string out(deflateBound(&zs, uLong(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = uInt(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw SystemError(path.string() + ": deflate failed");
  return out;
}

}  // namespace

GzipWriter::GzipWriter(const std::filesystem::path& path, int level) : path_(path), level_(level) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_system(path, "cannot create");
}

GzipWriter::~GzipWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void GzipWriter::write_blocks(const std::vector<std::string>& blocks) {
  std::vector<std::string> packed(blocks.size());
  const std::int64_t nb = std::int64_t(blocks.size());
  std::exception_ptr err;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t i = 0; i < nb; ++i) {
    try {
      if (!blocks[std::size_t(i)].empty())
        packed[std::size_t(i)] = gzip_member(blocks[std::size_t(i)], level_, path_);
    } catch (...) {
#pragma omp critical
      err = std::current_exception();
    }
  }
  if (err) std::rethrow_exception(err);
  for (const auto& p : packed) {
    write_all(fd_, path_, p.data(), p.size());
    wrote_ = wrote_ || !p.empty();
  }
}

void GzipWriter::close() {
  if (fd_ < 0) return;
  // An empty file is not valid gzip: write one empty member so readers see an empty stream.
  if (!wrote_) {
    const std::string empty = gzip_member("", level_, path_);
    write_all(fd_, path_, empty.data(), empty.size());
  }
  sync_fd(fd_, path_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_system(path_, "close failed");
}

}  // namespace halo
