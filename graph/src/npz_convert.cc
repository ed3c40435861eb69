// The typed reads of an .npz array, stream_as and read_all_as: the accepted dtypes, the
// element conversions with their range checks, the chunk carry of elements split between
// reads, and read_all_as's Fortran-to-C reorder. See npz.h for the rules.
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "halo/graph/npz.h"
#include "npz_internal.h"

namespace halo {

static_assert(std::endian::native == std::endian::little,
              "npz_convert.cc reinterprets little-endian payload bytes in place");

using namespace npz_internal;  // parse_descr, shape_str (npz_internal.h)

namespace {

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// ---- conversions ---------------------------------------------------------------------------

enum class Src { kBool, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kF16, kF32, kF64 };

template <class T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, std::int32_t>)
    return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "int64";
  else if constexpr (std::is_same_v<T, float>)
    return "float32";
  else
    return "float64";
}

// Where a conversion error is reported: archive path and entry name.
struct ConvCtx {
  const std::filesystem::path* path;
  const std::string* entry;
  [[noreturn]] void fail(const std::string& what) const {
    throw_input(*path, 0, "entry " + *entry + ": " + what);
  }
};

template <class T, class S>
T convert_one(S v, std::uint64_t index, const ConvCtx& ctx) {
  if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_integral_v<S>);
    if (!std::in_range<T>(v))
      ctx.fail("value " + std::to_string(v) + " at index " + std::to_string(index) +
               " does not fit " + type_name<T>());
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, float> && std::is_same_v<S, double>) {
    if (std::isfinite(v) && std::fabs(v) > static_cast<double>(FLT_MAX))
      ctx.fail("value " + fmt_double(v) + " at index " + std::to_string(index) +
               " does not fit float32");
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <class T, class S>
void convert_run(const std::byte* src, std::size_t n, T* dst, std::uint64_t first,
                 const ConvCtx& ctx) {
  for (std::size_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, src + i * sizeof(S), sizeof(S));
    dst[i] = convert_one<T>(v, first + i, ctx);
  }
}

template <class T>
void convert_bool(const std::byte* src, std::size_t n, T* dst, std::uint64_t, const ConvCtx&) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = src[i] != std::byte{0} ? T(1) : T(0);
}

template <class T>
void convert_half(const std::byte* src, std::size_t n, T* dst, std::uint64_t, const ConvCtx&) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dst[i] = static_cast<T>(half_to_float(bits));
  }
}

template <class T>
using ConvFn = void (*)(const std::byte*, std::size_t, T*, std::uint64_t, const ConvCtx&);

template <class T>
ConvFn<T> pick_converter(Src s) {
  switch (s) {
    case Src::kBool:
      return &convert_bool<T>;
    case Src::kI8:
      return &convert_run<T, std::int8_t>;
    case Src::kI16:
      return &convert_run<T, std::int16_t>;
    case Src::kI32:
      return &convert_run<T, std::int32_t>;
    case Src::kI64:
      return &convert_run<T, std::int64_t>;
    case Src::kU8:
      return &convert_run<T, std::uint8_t>;
    case Src::kU16:
      return &convert_run<T, std::uint16_t>;
    case Src::kU32:
      return &convert_run<T, std::uint32_t>;
    case Src::kU64:
      return &convert_run<T, std::uint64_t>;
    case Src::kF16:  // NOLINT(bugprone-branch-clone): for integer T the three float cases all break
      if constexpr (std::is_floating_point_v<T>) return &convert_half<T>;
      break;
    case Src::kF32:
      if constexpr (std::is_floating_point_v<T>) return &convert_run<T, float>;
      break;
    case Src::kF64:
      if constexpr (std::is_floating_point_v<T>) return &convert_run<T, double>;
      break;
  }
  return nullptr;
}

// Maps an accepted descr to its source type; throws InputError naming the dtype otherwise.
template <class T>
Src classify(const NpyArrayInfo& info, const ConvCtx& ctx) {
  const Descr d = parse_descr(info.descr);
  const std::string to = type_name<T>();
  if (d.ok && d.item_size > 1 && d.order == '>' && std::strchr("biuf", d.kind))
    ctx.fail("big-endian dtype " + info.descr + " is not supported (convert it with " +
             "arr.astype('<" + info.descr.substr(1) + "') in NumPy)");
  const bool le = d.item_size == 1 || d.order == '<' || d.order == '=';
  if (d.ok && le) {
    if (d.kind == 'f' && std::is_integral_v<T>)
      ctx.fail("cannot convert float dtype " + info.descr + " to " + to +
               " (float to integer conversion is not allowed)");
    switch (d.kind) {
      case 'b':
        if (d.item_size == 1) return Src::kBool;
        break;
      case 'i':
        switch (d.item_size) {
          case 1:
            return Src::kI8;
          case 2:
            return Src::kI16;
          case 4:
            return Src::kI32;
          case 8:
            return Src::kI64;
          default:
            break;
        }
        break;
      case 'u':
        switch (d.item_size) {
          case 1:
            return Src::kU8;
          case 2:
            return Src::kU16;
          case 4:
            return Src::kU32;
          case 8:
            return Src::kU64;
          default:
            break;
        }
        break;
      case 'f':
        switch (d.item_size) {
          case 2:
            return Src::kF16;
          case 4:
            return Src::kF32;
          case 8:
            return Src::kF64;
          default:
            break;
        }
        break;
      default:
        break;
    }
  }
  ctx.fail("cannot convert dtype " + info.descr + " to " + to +
           " (supported: little-endian bool, int8-64, uint8-64, float16/32/64)");
}

// Whether a Fortran-order array of this shape has the same element order as C order.
bool layout_is_c(const NpyArrayInfo& info) {
  if (!info.fortran_order) return true;
  std::size_t big = 0;
  for (std::uint64_t d : info.shape) big += d > 1 ? 1 : 0;
  return big <= 1;
}

// stream_as with the Fortran check optional: without it elements come in file order.
template <class T>
void stream_converted(const NpzReader& r, const std::string& key,
                      const std::function<void(const T*, std::size_t, std::uint64_t)>& fn,
                      std::size_t chunk_bytes, bool allow_fortran) {
  const NpyArrayInfo info = r.info(key);
  const std::string entry = key + ".npy";
  const ConvCtx ctx{&r.path(), &entry};
  const ConvFn<T> conv = pick_converter<T>(classify<T>(info, ctx));
  if (!allow_fortran && !layout_is_c(info))
    ctx.fail("Fortran-order arrays with 2 or more dimensions (shape " + shape_str(info.shape) +
             ") are not supported by stream_as; save with np.ascontiguousarray");
  if (chunk_bytes == 0) throw ParamError(r.path().string() + ": chunk_bytes must be positive");
  const std::size_t isz = info.item_size;
  const std::uint64_t count = info.count();
  std::vector<T> out(
      static_cast<std::size_t>(std::min<std::uint64_t>(chunk_bytes / isz + 1, count)));
  std::array<std::byte, 8> carry{};
  std::size_t carry_n = 0;
  std::uint64_t next = 0;
  r.stream(
      key,
      [&](const std::byte* p, std::size_t n) {
        std::size_t k = 0;
        if (carry_n > 0) {
          const std::size_t take = std::min(isz - carry_n, n);
          std::memcpy(carry.data() + carry_n, p, take);
          carry_n += take;
          p += take;
          n -= take;
          if (carry_n < isz) return;
          conv(carry.data(), 1, out.data(), next, ctx);
          k = 1;
          carry_n = 0;
        }
        const std::size_t whole = n / isz;
        conv(p, whole, out.data() + k, next + k, ctx);
        k += whole;
        carry_n = n - whole * isz;
        std::memcpy(carry.data(), p + whole * isz, carry_n);
        if (k > 0) {
          fn(out.data(), k, next);
          next += k;
        }
      },
      chunk_bytes);
}

}  // namespace

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    const float v = std::ldexp(static_cast<float>(mant), -24);  // subnormal: exact in float
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

template <class T>
void stream_as(const NpzReader& r, const std::string& key,
               const std::function<void(const T*, std::size_t, std::uint64_t)>& fn,
               std::size_t chunk_bytes) {
  stream_converted<T>(r, key, fn, chunk_bytes, false);
}

template <class T>
std::vector<T> read_all_as(const NpzReader& r, const std::string& key) {
  const NpyArrayInfo info = r.info(key);
  const std::string entry = key + ".npy";
  classify<T>(info, ConvCtx{&r.path(), &entry});  // reject the dtype before allocating
  const std::uint64_t count = info.count();
  std::vector<T> v;
  if (count > v.max_size())
    throw_input(
        r.path(), 0,
        "entry " + key + ".npy: " + std::to_string(count) + " elements are too many to read whole");
  v.reserve(static_cast<std::size_t>(count));
  stream_converted<T>(
      r, key, [&](const T* p, std::size_t n, std::uint64_t) { v.insert(v.end(), p, p + n); },
      std::size_t{1} << 22, true);
  if (layout_is_c(info) || v.empty()) return v;
  // Fortran order: the first axis varies fastest in v. Walk v in order, tracking the C index.
  const std::size_t nd = info.shape.size();
  std::vector<std::uint64_t> cstride(nd, 1);
  for (std::size_t d = nd - 1; d-- > 0;) cstride[d] = cstride[d + 1] * info.shape[d + 1];
  std::vector<std::uint64_t> idx(nd, 0);
  std::vector<T> c(v.size());
  std::uint64_t ci = 0;
  for (std::size_t f = 0; f < v.size(); ++f) {
    c[static_cast<std::size_t>(ci)] = v[f];
    for (std::size_t d = 0; d < nd; ++d) {
      ci += cstride[d];
      if (++idx[d] < info.shape[d]) break;
      ci -= cstride[d] * info.shape[d];
      idx[d] = 0;
    }
  }
  return c;
}

#define HALO_NPZ_INSTANTIATE(T)                                                                \
  template void stream_as<T>(const NpzReader&, const std::string&,                             \
                             const std::function<void(const T*, std::size_t, std::uint64_t)>&, \
                             std::size_t);                                                     \
  template std::vector<T> read_all_as<T>(const NpzReader&, const std::string&);
HALO_NPZ_INSTANTIATE(std::int32_t)
HALO_NPZ_INSTANTIATE(std::int64_t)
HALO_NPZ_INSTANTIATE(float)
HALO_NPZ_INSTANTIATE(double)
#undef HALO_NPZ_INSTANTIATE

}  // namespace halo
