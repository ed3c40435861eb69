// NpzReader: the archive's API (keys, info, stream) over its open container (npz_zip.cc), and
// the streaming of one member's payload (stored, or zlib raw inflate) with its CRC-32 and size
// checks. The .npy header is npy_header.cc's, the typed conversions npz_convert.cc's. See npz.h.
#include "halo/graph/npz.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <new>

#include "halo/graph/error.h"
#include "npz_internal.h"

namespace halo {
using namespace npz_internal;  // Archive, EntryReader, read_header (npz_internal.h)

namespace {

constexpr std::size_t kInfoReadBytes = std::size_t{1} << 16;

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

}  // namespace

namespace npz_internal {

EntryReader::EntryReader(const Archive& a, const Entry& e, std::size_t io_bytes)
    : a_(a), e_(e), pos_(a.data_start(e)), in_left_(e.csize) {
  if (e_.method == 8) {
    in_.resize(static_cast<std::size_t>(
        std::min<std::uint64_t>({io_bytes, kMaxZlibCall, std::max<std::uint64_t>(e.csize, 1)})));
    if (inflateInit2(&z_, -MAX_WBITS) != Z_OK) a_.fail(e_, "zlib inflateInit2 failed");
    inflating_ = true;
  }
}

EntryReader::~EntryReader() {
  if (inflating_) inflateEnd(&z_);
}

std::size_t EntryReader::read(std::byte* dst, std::size_t n) {
  std::size_t got = 0;
  if (e_.method == 0) {
    got = static_cast<std::size_t>(std::min<std::uint64_t>(n, in_left_));
    a_.read_at(dst, got, pos_);
    pos_ += got;
    in_left_ -= got;
  } else {
    while (got < n && !stream_end_) {
      if (z_.avail_in == 0 && in_left_ > 0) refill();
      const std::size_t want = std::min(n - got, kMaxZlibCall);
      z_.next_out = reinterpret_cast<Bytef*>(dst + got);
      z_.avail_out = static_cast<uInt>(want);
      const int ret = inflate(&z_, Z_NO_FLUSH);
      got += want - z_.avail_out;
      if (ret == Z_STREAM_END) {
        stream_end_ = true;
      } else if (ret == Z_OK || ret == Z_BUF_ERROR) {
        if (z_.avail_out > 0 && z_.avail_in == 0 && in_left_ == 0)
          a_.fail(e_, "deflate data ends early (truncated entry)");
      } else if (ret == Z_MEM_ERROR) {
        throw std::bad_alloc();
      } else {
        a_.fail(e_, std::string("corrupt deflate data (zlib: ") +
                        (z_.msg ? z_.msg : "error " + std::to_string(ret)) + ")");
      }
    }
  }
  if (got > e_.usize - out_total_)
    a_.fail(e_, "inflates to more than the declared " + std::to_string(e_.usize) + " bytes");
  out_total_ += got;
  for (std::size_t done = 0; done < got;) {
    const std::size_t k = std::min(got - done, kMaxZlibCall);
    crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(dst + done), k);
    done += k;
  }
  return got;
}

void EntryReader::finish() {
  if (e_.method == 8 && !stream_end_) {
    std::byte probe[64];
    if (read(probe, sizeof probe) != 0 || !stream_end_)
      a_.fail(e_, "inflates to more than the declared " + std::to_string(e_.usize) + " bytes");
  }
  if (out_total_ != e_.usize)
    a_.fail(e_, "holds " + std::to_string(out_total_) + " bytes, the directory says " +
                    std::to_string(e_.usize) + " (truncated entry?)");
  if (in_left_ != 0 || z_.avail_in != 0)
    a_.fail(e_, "compressed data continues after the end of the deflate stream");
  if (crc_ != e_.crc)
    a_.fail(e_, "CRC-32 mismatch (computed " + hex32(static_cast<std::uint32_t>(crc_)) +
                    ", expected " + hex32(e_.crc) + "): corrupt data");
}

void EntryReader::refill() {
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(in_.size(), in_left_));
  a_.read_at(in_.data(), n, pos_);
  pos_ += n;
  in_left_ -= n;
  z_.next_in = in_.data();
  z_.avail_in = static_cast<uInt>(n);
}

}  // namespace npz_internal

// ---- public API ----------------------------------------------------------------------------

std::uint64_t NpyArrayInfo::count() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

struct NpzReader::Impl {
  Archive ar;
  ~Impl() {
    if (ar.fd >= 0) ::close(ar.fd);
  }
};

NpzReader::NpzReader(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
  impl_->ar.path = path;
  impl_->ar.open_file();
  impl_->ar.read_directory();
}

NpzReader::~NpzReader() = default;
NpzReader::NpzReader(NpzReader&& other) noexcept = default;
NpzReader& NpzReader::operator=(NpzReader&& other) noexcept = default;

const std::filesystem::path& NpzReader::path() const { return impl_->ar.path; }

std::vector<std::string> NpzReader::keys() const {
  std::vector<std::string> out;
  out.reserve(impl_->ar.entries.size());
  for (const Entry& e : impl_->ar.entries) out.push_back(e.name.substr(0, e.name.size() - 4));
  return out;
}

bool NpzReader::contains(const std::string& key) const { return impl_->ar.by_key.count(key) != 0; }

NpyArrayInfo NpzReader::info(const std::string& key) const {
  const Entry& e = impl_->ar.find(key);
  EntryReader rd(impl_->ar, e, kInfoReadBytes);
  return read_header(rd).info;
}

void NpzReader::stream(const std::string& key,
                       const std::function<void(const std::byte*, std::size_t)>& fn,
                       std::size_t chunk_bytes) const {
  if (chunk_bytes == 0) throw ParamError(path().string() + ": chunk_bytes must be positive");
  const Entry& e = impl_->ar.find(key);
  EntryReader rd(impl_->ar, e, chunk_bytes);
  const ParsedHeader h = read_header(rd);
  std::uint64_t left = h.payload_bytes;
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes, left)));
  while (left > 0) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), left));
    if (rd.read(buf.data(), n) != n)
      impl_->ar.fail(e, "ends " + std::to_string(left) + " bytes early (truncated entry?)");
    fn(buf.data(), n);
    left -= n;
  }
  rd.finish();
}

}  // namespace halo
