// Tests of halo::NpzReader, stream_as and read_all_as against the NumPy-written fixtures in
// tests/data/npz (regenerate with tests/data/npz/make_fixtures.py; values here mirror it).
#include "halo/graph/npz.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../test_util.h"
#include "halo/graph/error.h"

#ifndef HALO_TEST_DATA_DIR
#error "HALO_TEST_DATA_DIR must name tests/data"
#endif

namespace halo {
namespace {

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(HALO_TEST_DATA_DIR) / "npz" / name;
}

// Runs f and returns the message of the E it throws (a test failure if it throws nothing or
// something else).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

std::vector<std::byte> raw(const NpzReader& r, const std::string& key, std::size_t chunk,
                           std::vector<std::size_t>* chunk_sizes = nullptr) {
  std::vector<std::byte> out;
  r.stream(
      key,
      [&](const std::byte* p, std::size_t n) {
        out.insert(out.end(), p, p + n);
        if (chunk_sizes) chunk_sizes->push_back(n);
      },
      chunk);
  return out;
}

// stream_as collecting values, checking first_index continuity.
template <class T>
std::vector<T> collect(const NpzReader& r, const std::string& key, std::size_t chunk) {
  std::vector<T> out;
  stream_as<T>(
      r, key,
      [&](const T* p, std::size_t n, std::uint64_t first) {
        EXPECT_EQ(first, out.size());
        EXPECT_GT(n, 0u);
        out.insert(out.end(), p, p + n);
      },
      chunk);
  return out;
}

const std::vector<std::int64_t> kEdges = {0, 0, 1, 2, 3, 4, 4, 1, 2, 2, 3, 4, 0, 1};

// ---- the OGB-like arrays, compressed and stored ---------------------------------------------

class BasicArchive : public ::testing::TestWithParam<const char*> {};

TEST_P(BasicArchive, KeysAndInfo) {
  NpzReader r(fixture(GetParam()));
  EXPECT_EQ(r.keys(), (std::vector<std::string>{"edge_index", "node_feat", "node_label",
                                                "num_nodes_list", "num_edges_list"}));
  EXPECT_TRUE(r.contains("edge_index"));
  EXPECT_FALSE(r.contains("edge_index.npy"));
  EXPECT_FALSE(r.contains("nope"));

  NpyArrayInfo e = r.info("edge_index");
  EXPECT_EQ(e.name, "edge_index");
  EXPECT_EQ(e.descr, "<i8");
  EXPECT_FALSE(e.fortran_order);
  EXPECT_EQ(e.shape, (std::vector<std::uint64_t>{2, 7}));
  EXPECT_EQ(e.item_size, 8u);
  EXPECT_EQ(e.count(), 14u);

  NpyArrayInfo f = r.info("node_feat");
  EXPECT_EQ(f.descr, "<f4");
  EXPECT_EQ(f.shape, (std::vector<std::uint64_t>{5, 3}));
  EXPECT_EQ(f.item_size, 4u);

  NpyArrayInfo l = r.info("node_label");
  EXPECT_EQ(l.descr, "<f8");
  EXPECT_EQ(l.shape, (std::vector<std::uint64_t>{5, 1}));

  NpyArrayInfo nn = r.info("num_nodes_list");
  EXPECT_EQ(nn.shape, (std::vector<std::uint64_t>{1}));
  NpyArrayInfo ne = r.info("num_edges_list");
  EXPECT_TRUE(ne.shape.empty());
  EXPECT_EQ(ne.count(), 1u);
  EXPECT_EQ(ne.item_size, 8u);
}

TEST_P(BasicArchive, Values) {
  NpzReader r(fixture(GetParam()));
  EXPECT_EQ(read_all_as<std::int64_t>(r, "edge_index"), kEdges);
  const std::vector<std::int32_t> e32 = read_all_as<std::int32_t>(r, "edge_index");
  EXPECT_EQ(std::vector<std::int64_t>(e32.begin(), e32.end()), kEdges);
  const std::vector<double> ed = read_all_as<double>(r, "edge_index");
  EXPECT_EQ(std::vector<std::int64_t>(ed.begin(), ed.end()), kEdges);

  const std::vector<float> feat = read_all_as<float>(r, "node_feat");
  const std::vector<double> featd = read_all_as<double>(r, "node_feat");
  ASSERT_EQ(feat.size(), 15u);
  ASSERT_EQ(featd.size(), 15u);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(feat[i], static_cast<float>(i) * 0.25f - 1.0f) << i;
    EXPECT_EQ(featd[i], static_cast<double>(i) * 0.25 - 1.0) << i;
  }

  const std::vector<double> label = read_all_as<double>(r, "node_label");
  ASSERT_EQ(label.size(), 5u);
  EXPECT_EQ(label[0], 0.0);
  EXPECT_EQ(label[1], 1.0);
  EXPECT_TRUE(std::isnan(label[2]));
  EXPECT_EQ(label[3], 3.0);
  EXPECT_EQ(label[4], 2.0);
  const std::vector<float> labelf = read_all_as<float>(r, "node_label");
  EXPECT_TRUE(std::isnan(labelf[2]));
  EXPECT_EQ(labelf[4], 2.0f);

  EXPECT_EQ(read_all_as<std::int64_t>(r, "num_nodes_list"), std::vector<std::int64_t>{5});
  EXPECT_EQ(read_all_as<std::int32_t>(r, "num_edges_list"), std::vector<std::int32_t>{7});

  // Float to integer is refused whatever the values.
  const std::string msg = error_of<InputError>([&] { read_all_as<std::int64_t>(r, "node_feat"); });
  EXPECT_NE(msg.find("node_feat.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<f4"), std::string::npos) << msg;
  EXPECT_NE(msg.find(GetParam()), std::string::npos) << msg;
  EXPECT_THROW(read_all_as<std::int32_t>(r, "node_label"), InputError);
}

TEST_P(BasicArchive, RawChunksAreExactAndIdentical) {
  NpzReader r(fixture(GetParam()));
  for (const std::string& key : r.keys()) {
    const NpyArrayInfo info = r.info(key);
    const std::vector<std::byte> whole = raw(r, key, std::size_t{1} << 22);
    ASSERT_EQ(whole.size(), info.count() * info.item_size) << key;
    for (std::size_t chunk : {1u, 7u, 13u, 64u, 4096u}) {
      std::vector<std::size_t> sizes;
      EXPECT_EQ(raw(r, key, chunk, &sizes), whole) << key << " chunk " << chunk;
      for (std::size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(sizes[i], chunk);
      if (!sizes.empty()) {
        EXPECT_LE(sizes.back(), chunk);
        EXPECT_GT(sizes.back(), 0u);
      }
    }
  }
  // The payload of edge_index is the little-endian int64 values.
  const std::vector<std::byte> e = raw(r, "edge_index", 7);
  ASSERT_EQ(e.size(), kEdges.size() * 8);
  std::vector<std::int64_t> v(kEdges.size());
  std::memcpy(v.data(), e.data(), e.size());
  EXPECT_EQ(v, kEdges);
}

TEST_P(BasicArchive, StreamAsTinyChunks) {
  NpzReader r(fixture(GetParam()));
  for (std::size_t chunk : {1u, 3u, 7u, 8u, 9u, 1000u}) {
    EXPECT_EQ(collect<std::int64_t>(r, "edge_index", chunk), kEdges) << chunk;
    EXPECT_EQ(collect<float>(r, "node_feat", chunk), read_all_as<float>(r, "node_feat"));
    const std::vector<double> l = collect<double>(r, "node_label", chunk);
    ASSERT_EQ(l.size(), 5u);
    EXPECT_TRUE(std::isnan(l[2]));
    EXPECT_EQ(l[4], 2.0);
  }
  // Chunk 7 on int64: elements straddle chunks; first_index must still count elements.
  std::vector<std::uint64_t> firsts;
  stream_as<std::int64_t>(
      r, "edge_index",
      [&](const std::int64_t*, std::size_t, std::uint64_t first) { firsts.push_back(first); }, 7);
  EXPECT_EQ(firsts.front(), 0u);
  EXPECT_TRUE(std::is_sorted(firsts.begin(), firsts.end()));
}

TEST_P(BasicArchive, MissingKeyNamesTheAvailableOnes) {
  NpzReader r(fixture(GetParam()));
  const std::string msg = error_of<InputError>([&] { r.info("labels"); });
  EXPECT_NE(msg.find("labels"), std::string::npos) << msg;
  EXPECT_NE(msg.find("edge_index, node_feat, node_label"), std::string::npos) << msg;
  EXPECT_THROW(r.stream("labels", [](const std::byte*, std::size_t) {}), InputError);
  EXPECT_THROW(read_all_as<double>(r, "labels"), InputError);
}

TEST_P(BasicArchive, ZeroChunkIsAParamError) {
  NpzReader r(fixture(GetParam()));
  EXPECT_THROW(r.stream(
                   "edge_index", [](const std::byte*, std::size_t) {}, 0),
               ParamError);
  EXPECT_THROW(collect<std::int64_t>(r, "edge_index", 0), ParamError);
}

TEST_P(BasicArchive, CallbackExceptionPropagatesAndReaderStaysUsable) {
  NpzReader r(fixture(GetParam()));
  EXPECT_THROW(r.stream("edge_index",
                        [](const std::byte*, std::size_t) { throw std::runtime_error("stop"); }),
               std::runtime_error);
  EXPECT_EQ(read_all_as<std::int64_t>(r, "edge_index"), kEdges);
}

INSTANTIATE_TEST_SUITE_P(Npz, BasicArchive,
                         ::testing::Values("basic_compressed.npz", "basic_stored.npz"));

TEST(Npz, CompressedAndStoredPayloadsMatch) {
  NpzReader c(fixture("basic_compressed.npz"));
  NpzReader s(fixture("basic_stored.npz"));
  for (const std::string& key : c.keys()) EXPECT_EQ(raw(c, key, 5), raw(s, key, 11)) << key;
}

TEST(Npz, MoveKeepsTheArchive) {
  NpzReader a(fixture("basic_compressed.npz"));
  NpzReader b(std::move(a));
  EXPECT_EQ(read_all_as<std::int64_t>(b, "edge_index"), kEdges);
  NpzReader c(fixture("basic_stored.npz"));
  c = std::move(b);
  EXPECT_EQ(read_all_as<std::int64_t>(c, "edge_index"), kEdges);
  EXPECT_EQ(c.path(), fixture("basic_compressed.npz"));
}

// ---- dtypes and conversion rules ------------------------------------------------------------

TEST(NpzDtypes, Integers) {
  NpzReader r(fixture("dtypes.npz"));
  EXPECT_EQ(r.info("i1").descr, "|i1");
  EXPECT_EQ(r.info("u1").descr, "|u1");
  EXPECT_EQ(r.info("b1").descr, "|b1");
  EXPECT_EQ(read_all_as<std::int32_t>(r, "i1"), (std::vector<std::int32_t>{-128, -1, 0, 127}));
  EXPECT_EQ(read_all_as<std::int64_t>(r, "u1"), (std::vector<std::int64_t>{0, 7, 255}));
  EXPECT_EQ(read_all_as<std::int32_t>(r, "i2"), (std::vector<std::int32_t>{-32768, -1, 32767}));
  EXPECT_EQ(read_all_as<std::int32_t>(r, "u2"), (std::vector<std::int32_t>{0, 65535}));
  EXPECT_EQ(read_all_as<std::int32_t>(r, "i4"),
            (std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), -1,
                                       std::numeric_limits<std::int32_t>::max()}));
  EXPECT_EQ(read_all_as<std::int64_t>(r, "u4"),
            (std::vector<std::int64_t>{0, 2147483647, 4294967295}));
  EXPECT_EQ(read_all_as<double>(r, "u8"),
            (std::vector<double>{0.0, 9223372036854775807.0, 9223372036854775808.0}));
  EXPECT_EQ(read_all_as<std::int64_t>(r, "i8_big"),
            (std::vector<std::int64_t>{0, 1, 2, 3, 4, 3000000000, -5}));
  EXPECT_EQ(read_all_as<std::int32_t>(r, "b1"), (std::vector<std::int32_t>{1, 0, 1}));
  EXPECT_EQ(read_all_as<float>(r, "b1"), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(read_all_as<float>(r, "i2"), (std::vector<float>{-32768, -1, 32767}));
}

TEST(NpzDtypes, NarrowingIsRangeChecked) {
  NpzReader r(fixture("dtypes.npz"));
  std::string msg = error_of<InputError>([&] { read_all_as<std::int32_t>(r, "i8_big"); });
  EXPECT_NE(msg.find("entry i8_big.npy: value 3000000000 at index 5 does not fit int32"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("dtypes.npz"), std::string::npos) << msg;
  msg = error_of<InputError>([&] { collect<std::int32_t>(r, "i8_neg", 3); });
  EXPECT_NE(msg.find("value -3000000000 at index 1 does not fit int32"), std::string::npos) << msg;
  msg = error_of<InputError>([&] { read_all_as<std::int32_t>(r, "u4"); });
  EXPECT_NE(msg.find("value 4294967295 at index 2 does not fit int32"), std::string::npos) << msg;
  msg = error_of<InputError>([&] { read_all_as<std::int64_t>(r, "u8"); });
  EXPECT_NE(msg.find("value 9223372036854775808 at index 2 does not fit int64"), std::string::npos)
      << msg;
  // Values before the bad one were delivered, in order.
  std::vector<std::int32_t> seen;
  EXPECT_THROW(stream_as<std::int32_t>(
                   r, "i8_big",
                   [&](const std::int32_t* p, std::size_t n, std::uint64_t) {
                     seen.insert(seen.end(), p, p + n);
                   },
                   8),
               InputError);
  EXPECT_EQ(seen, (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
}

TEST(NpzDtypes, Float16) {
  NpzReader r(fixture("dtypes.npz"));
  EXPECT_EQ(r.info("f2").descr, "<f2");
  EXPECT_EQ(r.info("f2").item_size, 2u);
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<float> v =
        pass == 0 ? read_all_as<float>(r, "f2") : collect<float>(r, "f2", 3);  // straddles
    ASSERT_EQ(v.size(), 12u);
    EXPECT_EQ(v[0], 0.0f);
    EXPECT_FALSE(std::signbit(v[0]));
    EXPECT_EQ(v[1], 1.0f);
    EXPECT_EQ(v[2], -2.0f);
    EXPECT_EQ(v[3], 0.5f);
    EXPECT_EQ(v[4], 65504.0f);
    EXPECT_EQ(v[5], std::ldexp(1.0f, -14));         // smallest normal
    EXPECT_EQ(v[6], std::ldexp(1.0f, -24));         // smallest subnormal
    EXPECT_EQ(v[7], 3.0f * std::ldexp(1.0f, -16));  // subnormal
    EXPECT_EQ(v[8], std::numeric_limits<float>::infinity());
    EXPECT_EQ(v[9], -std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(v[10]));
    EXPECT_EQ(v[11], 0.0f);
    EXPECT_TRUE(std::signbit(v[11]));
  }
  const std::vector<double> d = read_all_as<double>(r, "f2");
  EXPECT_EQ(d[6], std::ldexp(1.0, -24));
  EXPECT_EQ(d[4], 65504.0);
  const std::string msg = error_of<InputError>([&] { read_all_as<std::int32_t>(r, "f2"); });
  EXPECT_NE(msg.find("<f2"), std::string::npos) << msg;
}

TEST(NpzDtypes, HalfToFloatAllPatterns) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = half_to_float(h);
    const std::uint32_t exp = (b >> 10) & 31, mant = b & 1023;
    const bool neg = (b & 0x8000) != 0;
    EXPECT_EQ(std::signbit(f), neg) << b;
    if (exp == 31) {
      if (mant == 0) {
        EXPECT_TRUE(std::isinf(f)) << b;
      } else {
        EXPECT_TRUE(std::isnan(f)) << b;
      }
      continue;
    }
    const double mag =
        exp == 0 ? std::ldexp(static_cast<double>(mant), -24)
                 : std::ldexp(static_cast<double>(1024 + mant), static_cast<int>(exp) - 25);
    EXPECT_EQ(static_cast<double>(f), neg ? -mag : mag) << b;
  }
}

TEST(NpzDtypes, Float64ToFloat32) {
  NpzReader r(fixture("dtypes.npz"));
  const std::string msg = error_of<InputError>([&] { read_all_as<float>(r, "f8_big"); });
  EXPECT_NE(msg.find("at index 1 does not fit float32"), std::string::npos) << msg;
  EXPECT_EQ(read_all_as<double>(r, "f8_big"), (std::vector<double>{1.5, 1e300}));
  const std::vector<float> inf = read_all_as<float>(r, "f8_inf");
  EXPECT_EQ(inf[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(inf[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(inf[2]));
}

TEST(NpzDtypes, BigEndianIsRejectedButReadableRaw) {
  NpzReader r(fixture("dtypes.npz"));
  const NpyArrayInfo info = r.info("be_i4");
  EXPECT_EQ(info.descr, ">i4");
  EXPECT_EQ(info.item_size, 4u);
  for (int t = 0; t < 2; ++t) {
    const std::string msg =
        t == 0 ? error_of<InputError>([&] { read_all_as<std::int32_t>(r, "be_i4"); })
               : error_of<InputError>([&] { read_all_as<double>(r, "be_i4"); });
    EXPECT_NE(msg.find("big-endian dtype >i4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("be_i4.npy"), std::string::npos) << msg;
  }
  // 1, -2, 70000 as big-endian int32.
  const std::vector<std::byte> b = raw(r, "be_i4", 5);
  const unsigned char want[] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe, 0, 1, 0x11, 0x70};
  ASSERT_EQ(b.size(), sizeof want);
  EXPECT_EQ(std::memcmp(b.data(), want, sizeof want), 0);
}

TEST(NpzDtypes, NonNumericIsRejected) {
  NpzReader r(fixture("dtypes.npz"));
  EXPECT_EQ(r.info("c8").item_size, 8u);
  EXPECT_EQ(r.info("u3").descr, "<U3");
  EXPECT_EQ(r.info("u3").item_size, 12u);
  std::string msg = error_of<InputError>([&] { read_all_as<double>(r, "c8"); });
  EXPECT_NE(msg.find("cannot convert dtype <c8 to float64"), std::string::npos) << msg;
  msg = error_of<InputError>([&] { read_all_as<std::int64_t>(r, "u3"); });
  EXPECT_NE(msg.find("<U3"), std::string::npos) << msg;
  EXPECT_EQ(raw(r, "u3", 7).size(), 24u);  // raw streaming works for any dtype
}

TEST(NpzDtypes, EmptyAndMultiDimensional) {
  NpzReader r(fixture("dtypes.npz"));
  const NpyArrayInfo e = r.info("empty");
  EXPECT_EQ(e.shape, (std::vector<std::uint64_t>{0, 3}));
  EXPECT_EQ(e.count(), 0u);
  EXPECT_TRUE(read_all_as<float>(r, "empty").empty());
  int calls = 0;
  stream_as<float>(r, "empty", [&](const float*, std::size_t, std::uint64_t) { ++calls; });
  r.stream("empty", [&](const std::byte*, std::size_t) { ++calls; });
  EXPECT_EQ(calls, 0);

  std::vector<std::int32_t> want(24);
  for (int i = 0; i < 24; ++i) want[i] = i;
  EXPECT_EQ(read_all_as<std::int32_t>(r, "i2_3d"), want);
  EXPECT_EQ(collect<std::int32_t>(r, "i2_3d", 5), want);
}

// ---- Fortran order --------------------------------------------------------------------------

TEST(NpzFortran, StreamRejectsReadAllTransposes) {
  NpzReader r(fixture("fortran.npz"));
  EXPECT_TRUE(r.info("f2d").fortran_order);
  EXPECT_TRUE(r.info("f3d").fortran_order);
  EXPECT_FALSE(r.info("c2d").fortran_order);
  EXPECT_FALSE(r.info("f1d").fortran_order);  // NumPy writes 1-d arrays as C order
  const std::string msg = error_of<InputError>([&] { collect<std::int32_t>(r, "f2d", 64); });
  EXPECT_NE(msg.find("Fortran"), std::string::npos) << msg;
  EXPECT_NE(msg.find("f2d.npy"), std::string::npos) << msg;

  EXPECT_EQ(read_all_as<std::int32_t>(r, "f2d"), (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(read_all_as<std::int32_t>(r, "c2d"), (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5}));
  // The file holds the column-major order.
  const std::vector<std::byte> b = raw(r, "f2d", 3);
  std::vector<std::int32_t> file_order(6);
  std::memcpy(file_order.data(), b.data(), b.size());
  EXPECT_EQ(file_order, (std::vector<std::int32_t>{0, 3, 1, 4, 2, 5}));

  std::vector<double> want(24);
  for (int i = 0; i < 24; ++i) want[i] = i;
  EXPECT_EQ(read_all_as<double>(r, "f3d"), want);
  EXPECT_EQ(read_all_as<std::int64_t>(r, "f1d"), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

// ---- ZIP64 and .npy header versions ----------------------------------------------------------

TEST(NpzZip64, HandBuiltArchive) {
  // ZIP64 EOCD record + locator, ZIP64 extra fields in local headers and (all three fields /
  // offset only / none after other extras) in the central directory, archive comment.
  NpzReader r(fixture("zip64.npz"));
  EXPECT_EQ(r.keys(), (std::vector<std::string>{"v1", "v2", "v3"}));
  EXPECT_EQ(read_all_as<std::int64_t>(r, "v1"), (std::vector<std::int64_t>{0, 11, 22, 33, 44}));
  EXPECT_EQ(read_all_as<float>(r, "v2"),
            (std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f}));
  EXPECT_EQ(r.info("v2").shape, (std::vector<std::uint64_t>{3, 2}));
  EXPECT_EQ(read_all_as<std::int32_t>(r, "v3"), (std::vector<std::int32_t>{-1, 2, 3, -4}));
  EXPECT_EQ(r.info("v3").descr, "<i4");
  for (const std::string& key : r.keys()) EXPECT_EQ(raw(r, key, 7), raw(r, key, 1 << 20)) << key;
}

// ---- damaged archives -----------------------------------------------------------------------

TEST(NpzErrors, TruncatedArchive) {
  const std::string msg = error_of<InputError>([] { NpzReader r(fixture("truncated.npz")); });
  EXPECT_NE(msg.find("truncated.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("end of central directory"), std::string::npos) << msg;
}

TEST(NpzErrors, TruncatedDeflateEntry) {
  NpzReader r(fixture("truncated_entry.npz"));
  const std::string msg = error_of<InputError>([&] { raw(r, "a", 16); });
  EXPECT_NE(msg.find("entry a.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(NpzErrors, CorruptStoredPayloadFailsTheCrc) {
  NpzReader r(fixture("corrupt_stored.npz"));
  EXPECT_EQ(r.info("node_feat").shape, (std::vector<std::uint64_t>{5, 3}));  // header intact
  const std::string msg = error_of<InputError>([&] { read_all_as<float>(r, "node_feat"); });
  EXPECT_NE(msg.find("corrupt_stored.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("entry node_feat.npy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CRC-32 mismatch"), std::string::npos) << msg;
  EXPECT_EQ(read_all_as<std::int64_t>(r, "edge_index"), kEdges);  // other entries are fine
}

TEST(NpzErrors, CorruptDeflateData) {
  NpzReader r(fixture("corrupt_compressed.npz"));
  const std::string msg = error_of<InputError>([&] { raw(r, "edge_index", 7); });
  EXPECT_NE(msg.find("entry edge_index.npy"), std::string::npos) << msg;
  EXPECT_EQ(read_all_as<float>(r, "node_feat").size(), 15u);
}

TEST(NpzErrors, UnsupportedMethod) {
  NpzReader r(fixture("bzip2.npz"));
  EXPECT_EQ(r.keys(), std::vector<std::string>{"a"});
  const std::string msg = error_of<InputError>([&] { r.info("a"); });
  EXPECT_NE(msg.find("unsupported compression method 12 (bzip2)"), std::string::npos) << msg;
}

TEST(NpzErrors, NotAZipAndMissingFile) {
  const std::string msg = error_of<InputError>([] { NpzReader r(fixture("make_fixtures.py")); });
  EXPECT_NE(msg.find("not a zip archive"), std::string::npos) << msg;
  EXPECT_THROW(NpzReader r(fixture("no_such_file.npz")), SystemError);
  EXPECT_THROW(NpzReader r(fixture("")), InputError);  // a directory
}

// ---- hand-built hostile archives ---------------------------------------------------------------

// One member of a zip written by build_zip: bytes as stored, and what the headers claim.
struct ZipMember {
  std::string name, data;
  std::uint16_t method = 0, flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t csize = 0, usize = 0;
  bool zip64 = false;  // 0xFFFFFFFF sizes in the central directory, ZIP64 extra holds them
  bool drop_zip64_extra = false;  // ... but without the extra field
};

// A .npy file of int64 values 0..n-1.
std::string npy_i64(std::uint64_t n) {
  std::string s = npy_prefix("<i8", n, 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::int64_t>(i);
    s.append(reinterpret_cast<const char*>(&v), 8);
  }
  return s;
}

std::uint32_t crc_of(const std::string& s) {
  return static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

ZipMember stored(const std::string& name, const std::string& content) {
  return {name, content, 0, 0, crc_of(content), content.size(), content.size()};
}

ZipMember deflated(const std::string& name, const std::string& content) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, content.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(content.data()));
  z.avail_in = static_cast<uInt>(content.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return {name, out, 8, 0, crc_of(content), out.size(), content.size()};
}

void put16(std::string& s, std::uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, std::uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}
void put64(std::string& s, std::uint64_t v) {
  put32(s, static_cast<std::uint32_t>(v));
  put32(s, static_cast<std::uint32_t>(v >> 32));
}

// A zip archive of the members, headers as they claim (no ZIP64 end records).
std::string build_zip(const std::vector<ZipMember>& ms) {
  std::string out, cd;
  for (const ZipMember& m : ms) {
    const auto off = static_cast<std::uint32_t>(out.size());
    put32(out, 0x04034b50);
    put16(out, 20);
    put16(out, m.flags);
    put16(out, m.method);
    put32(out, 0);  // time, date
    put32(out, m.crc);
    put32(out, static_cast<std::uint32_t>(m.csize));
    put32(out, static_cast<std::uint32_t>(m.usize));
    put16(out, static_cast<std::uint32_t>(m.name.size()));
    put16(out, 0);
    out += m.name + m.data;
    std::string extra;
    if (m.zip64 && !m.drop_zip64_extra) {
      put16(extra, 0x0001);
      put16(extra, 16);
      put64(extra, m.usize);
      put64(extra, m.csize);
    }
    put32(cd, 0x02014b50);
    put16(cd, 45);
    put16(cd, 45);
    put16(cd, m.flags);
    put16(cd, m.method);
    put32(cd, 0);
    put32(cd, m.crc);
    put32(cd, m.zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(m.csize));
    put32(cd, m.zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(m.usize));
    put16(cd, static_cast<std::uint32_t>(m.name.size()));
    put16(cd, static_cast<std::uint32_t>(extra.size()));
    put16(cd, 0);  // comment
    put16(cd, 0);  // disk
    put16(cd, 0);  // internal attributes
    put32(cd, 0);  // external attributes
    put32(cd, off);
    cd += m.name + extra;
  }
  const auto cd_off = static_cast<std::uint32_t>(out.size());
  out += cd;
  put32(out, 0x06054b50);
  put32(out, 0);
  put16(out, static_cast<std::uint32_t>(ms.size()));
  put16(out, static_cast<std::uint32_t>(ms.size()));
  put32(out, static_cast<std::uint32_t>(cd.size()));
  put32(out, cd_off);
  put16(out, 0);
  return out;
}

class NpzHostile : public ::testing::Test {
 protected:
  // Writes the archive and returns its path.
  std::filesystem::path write(const std::string& bytes) {
    auto p = dir_ / "x.npz";
    test::write_text(p, bytes);
    return p;
  }
  // The InputError message of opening the archive and streaming every array.
  std::string read_error(const std::string& bytes) {
    const auto p = write(bytes);
    return error_of<InputError>([&] {
      NpzReader r(p);
      for (const std::string& k : r.keys()) raw(r, k, 64);
    });
  }
  test::TempDir dir_;
};

TEST_F(NpzHostile, ValidHandBuiltArchiveReads) {
  // The builder itself is sound: the hostile cases below differ from this in one field.
  for (const ZipMember& m : {stored("a.npy", npy_i64(100)), deflated("a.npy", npy_i64(100))}) {
    NpzReader r(write(build_zip({m, stored("b.npy", npy_i64(3))})));
    EXPECT_EQ(r.keys(), (std::vector<std::string>{"a", "b"}));
    const auto v = read_all_as<std::int64_t>(r, "a");
    ASSERT_EQ(v.size(), 100u);
    EXPECT_EQ(v[99], 99);
  }
  ZipMember big = deflated("a.npy", npy_i64(100));
  big.zip64 = true;
  NpzReader r(write(build_zip({big})));
  EXPECT_EQ(read_all_as<std::int64_t>(r, "a").size(), 100u);
}

TEST_F(NpzHostile, DuplicateNames) {
  const auto p = write(build_zip({stored("a.npy", npy_i64(2)), stored("a.npy", npy_i64(3))}));
  const std::string msg = error_of<InputError>([&] { NpzReader r(p); });
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("duplicate entry a.npy"), std::string::npos) << msg;
}

TEST_F(NpzHostile, CrcMismatch) {
  for (ZipMember m : {stored("a.npy", npy_i64(50)), deflated("a.npy", npy_i64(50))}) {
    m.crc ^= 1;
    const std::string msg = read_error(build_zip({m}));
    EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
    EXPECT_NE(msg.find("entry a.npy: CRC-32 mismatch ("), std::string::npos) << msg;
    char want[32];
    std::snprintf(want, sizeof want, "expected %08x", m.crc);
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
  }
}

TEST_F(NpzHostile, EncryptedEntry) {
  ZipMember m = stored("a.npy", npy_i64(4));
  m.flags = 1;
  NpzReader r(write(build_zip({m})));
  EXPECT_EQ(r.keys(), std::vector<std::string>{"a"});
  const std::string msg = error_of<InputError>([&] { r.info("a"); });
  EXPECT_NE(msg.find("entry a.npy: encrypted entries are not supported"), std::string::npos) << msg;
}

TEST_F(NpzHostile, UnsupportedMethod) {
  ZipMember m = deflated("a.npy", npy_i64(4));
  m.method = 14;
  NpzReader r(write(build_zip({m})));
  const std::string msg = error_of<InputError>([&] { r.info("a"); });
  EXPECT_NE(msg.find("entry a.npy: unsupported compression method 14 (lzma)"), std::string::npos)
      << msg;
}

TEST_F(NpzHostile, LyingSizes) {
  // Stored with differing sizes.
  ZipMember m = stored("a.npy", npy_i64(8));
  m.usize += 8;
  std::string msg = read_error(build_zip({m}));
  EXPECT_NE(msg.find("entry a.npy: stored entry with compressed size"), std::string::npos) << msg;

  // Deflate data that inflates to less than declared (header and CRC match the short data's
  // claim of 16 values, but only 8 are there).
  std::string shorter =
      npy_prefix("<i8", 16, 0) + npy_i64(8).substr(npy_prefix("<i8", 8, 0).size());
  m = deflated("a.npy", shorter);
  m.usize += 64;
  msg = read_error(build_zip({m}));
  EXPECT_NE(msg.find("entry a.npy: ends 64 bytes early (truncated entry?)"), std::string::npos)
      << msg;

  // ... and to more than declared.
  std::string longer =
      npy_prefix("<i8", 8, 0) + npy_i64(16).substr(npy_prefix("<i8", 16, 0).size());
  m = deflated("a.npy", longer);
  m.usize -= 64;
  msg = read_error(build_zip({m}));
  EXPECT_NE(msg.find("entry a.npy: inflates to more than the declared " + std::to_string(m.usize)),
            std::string::npos)
      << msg;

  // A declared size no deflate stream of this length can reach (zip bomb guard).
  m = deflated("a.npy", npy_i64(8));
  m.usize = std::uint64_t{1} << 31;
  msg = read_error(build_zip({m}));
  EXPECT_NE(msg.find("entry a.npy: declared size 2147483648 is impossible"), std::string::npos)
      << msg;

  // Compressed data running past the end of the file.
  m = stored("a.npy", npy_i64(8));
  m.csize = m.usize = 1000;
  msg = read_error(build_zip({m}));
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("entry a.npy"), std::string::npos) << msg;
}

TEST_F(NpzHostile, Zip64ExtraMissing) {
  ZipMember m = stored("a.npy", npy_i64(8));
  m.zip64 = true;
  m.drop_zip64_extra = true;
  const std::string msg = read_error(build_zip({m}));
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("central directory"), std::string::npos) << msg;
}

TEST_F(NpzHostile, BadCentralDirectory) {
  std::string z = build_zip({stored("a.npy", npy_i64(8)), stored("b.npy", npy_i64(8))});
  const std::size_t cd = z.rfind(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  z[cd + 1] = 'X';  // the second entry's signature
  std::string msg = read_error(z);
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("central directory"), std::string::npos) << msg;
  // A central directory that claims more entries than it holds.
  z = build_zip({stored("a.npy", npy_i64(8))});
  z[z.size() - 12] = 5;  // total entries
  z[z.size() - 14] = 5;  // entries on this disk
  msg = read_error(z);
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
}

TEST_F(NpzHostile, BadLocalHeader) {
  // A local header whose name length lies moves the data start into the central directory.
  std::string z = build_zip({stored("a.npy", npy_i64(8))});
  z[26] = 15;
  NpzReader r(write(z));
  std::string msg = error_of<InputError>([&] { r.info("a"); });
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("entry a.npy: 192 bytes of data at offset 45 run past the central directory"),
            std::string::npos)
      << msg;
  // A damaged local header signature.
  z = build_zip({stored("a.npy", npy_i64(8))});
  z[1] = 'X';
  NpzReader r2(write(z));
  msg = error_of<InputError>([&] { r2.info("a"); });
  EXPECT_NE(msg.find("entry a.npy: no local file header at offset 0"), std::string::npos) << msg;
}

TEST_F(NpzHostile, LocalHeaderNamingAnotherMember) {
  // The central directory says a.npy; the local header before the data says b.npy.
  std::string z = build_zip({stored("a.npy", npy_i64(8))});
  ASSERT_EQ(z[30], 'a');  // the local header's name follows its 30 fixed bytes
  z[30] = 'b';
  NpzReader r(write(z));
  const std::string msg = error_of<InputError>([&] { r.info("a"); });
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("entry a.npy: local header names 'b.npy'"), std::string::npos) << msg;
}

TEST_F(NpzHostile, NpyHeaderOverOneMebibyte) {
  // A version 2.0 .npy header whose 4-byte length claims just over the 1 MiB cap: refused by
  // its length before anything of that size is allocated or read.
  std::string npy = std::string("\x93NUMPY", 6) + '\x02' + '\x00';
  const std::uint32_t claimed = (1u << 20) + 8;
  for (int b = 0; b < 4; ++b) npy += static_cast<char>((claimed >> (8 * b)) & 0xff);
  npy += "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }\n";
  NpzReader r(write(build_zip({stored("a.npy", npy)})));
  const std::string msg = error_of<InputError>([&] { r.info("a"); });
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
  EXPECT_NE(msg.find(".npy header of 1048584 bytes is too long"), std::string::npos) << msg;
}

TEST_F(NpzHostile, TruncatedInsideTheData) {
  // The end record is intact but the file lost bytes: sizes point past the end.
  std::string z = build_zip({stored("a.npy", npy_i64(64))});
  const std::size_t cut = 200;
  z.erase(cut, 300);
  const std::string msg = read_error(z);
  EXPECT_NE(msg.find("x.npz"), std::string::npos) << msg;
}

TEST(Npz, StreamsFromSeveralThreadsAtOnce) {
  // npz.h: one NpzReader may be streamed from several threads at once. Arrays large enough
  // (800 KB each, read 64 bytes at a time) that the threads' reads interleave.
  test::TempDir dir;
  const auto path = dir / "big.npz";
  constexpr std::uint64_t kN = 100000;
  test::write_text(path, build_zip({stored("s.npy", npy_i64(kN)), deflated("d.npy", npy_i64(kN))}));
  const NpzReader r(path);
  std::vector<int> bad(4, 0);
  // Streams key once, counting wrong values, a short count or an error as bad.
  auto check = [&](const char* key, int& errors) {
    try {
      std::uint64_t next = 0;
      stream_as<std::int64_t>(
          r, key,
          [&](const std::int64_t* v, std::size_t n, std::uint64_t first) {
            for (std::size_t i = 0; i < n; ++i)
              errors += v[i] != static_cast<std::int64_t>(first + i) ? 1 : 0;
            next = first + n;
          },
          64);
      errors += next != kN ? 1 : 0;
    } catch (const std::exception& e) {  // must not leave the thread (std::terminate)
      ADD_FAILURE() << e.what();
      ++errors;
    }
  };
  std::vector<std::thread> ts;
  for (std::size_t t = 0; t < bad.size(); ++t)
    ts.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep)
        for (const char* key : {"s", "d"}) check(key, bad[t]);
    });
  for (std::thread& t : ts) t.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace halo
