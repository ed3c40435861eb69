// The CUDA SpMM's host-side policy (spmm_policy.h), on any machine: which kernel a plan starts
// with, what each cuSPARSE status means at each stage with and without strict mode, the
// alignment rule, the environment variables; and the storage release hooks the plans are freed
// by.
#include "halo/gnn/spmm_policy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "halo/gnn/sparse.h"
#include "halo/graph/error.h"

namespace halo {
namespace {

// Sets (or unsets, for nullptr) an environment variable for one scope.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(SpmmPolicy, SettingsComeFromTheEnvironment) {
  {
    const EnvVar k("HALO_CUDA_SPMM", nullptr), s("HALO_CUDA_SPMM_STRICT", nullptr);
    const SpmmSettings d = spmm_settings_from_env();
    EXPECT_EQ(d.requested, SpmmKernel::kAlg3);
    EXPECT_FALSE(d.strict);
  }
  for (SpmmKernel want : {SpmmKernel::kAlg3, SpmmKernel::kAlg2, SpmmKernel::kOwn}) {
    const EnvVar k("HALO_CUDA_SPMM", spmm_kernel_name(want)), s("HALO_CUDA_SPMM_STRICT", "1");
    const SpmmSettings got = spmm_settings_from_env();
    EXPECT_EQ(got.requested, want) << spmm_kernel_name(want);
    EXPECT_TRUE(got.strict);
  }
  {
    const EnvVar k("HALO_CUDA_SPMM", "fastest");
    try {
      spmm_settings_from_env();
      ADD_FAILURE() << "HALO_CUDA_SPMM=fastest accepted";
    } catch (const ParamError& e) {
      EXPECT_NE(std::string(e.what()).find("HALO_CUDA_SPMM=fastest"), std::string::npos);
    }
  }
  {
    const EnvVar k("HALO_CUDA_SPMM", nullptr), s("HALO_CUDA_SPMM_STRICT", "yes");
    EXPECT_THROW(spmm_settings_from_env(), ParamError);
  }
}

TEST(SpmmPolicy, FirstChoice) {
  std::string why;
  EXPECT_EQ(spmm_first_choice({SpmmKernel::kAlg3, false}, 64, &why), SpmmKernel::kAlg3);
  EXPECT_EQ(why, "");
  EXPECT_EQ(spmm_first_choice({SpmmKernel::kAlg2, true}, 256, &why), SpmmKernel::kAlg2);
  EXPECT_EQ(spmm_first_choice({SpmmKernel::kOwn, false}, 64, &why), SpmmKernel::kOwn);
  EXPECT_EQ(why, "");  // asked for: no reason to give
  // Width 1 (cuSPARSE may go to SpMV) and rows that are not 16-byte aligned take the own kernel.
  EXPECT_EQ(spmm_first_choice({SpmmKernel::kAlg3, true}, 1, &why), SpmmKernel::kOwn);
  EXPECT_EQ(why, "width 1");
  for (std::int64_t w : {2, 7, 33, 47, 257}) {
    why.clear();
    EXPECT_EQ(spmm_first_choice({SpmmKernel::kAlg3, true}, w, &why), SpmmKernel::kOwn) << w;
    EXPECT_NE(why.find("not a multiple of 4"), std::string::npos) << w << ": " << why;
  }
  for (std::int64_t w : {4, 8, 40, 128, 256}) {
    why.clear();
    EXPECT_EQ(spmm_first_choice({SpmmKernel::kAlg3, true}, w, &why), SpmmKernel::kAlg3) << w;
  }
}

TEST(SpmmPolicy, AlignmentIsSixteenBytes) {
  alignas(64) static float buf[32];
  EXPECT_TRUE(cusparse_aligned(buf));
  EXPECT_TRUE(cusparse_aligned(buf + 4));
  EXPECT_TRUE(cusparse_aligned(buf + 12));
  for (int i : {1, 2, 3, 5, 7, 9}) EXPECT_FALSE(cusparse_aligned(buf + i)) << i;
  EXPECT_TRUE(cusparse_aligned(nullptr));
}

// Each status at each stage, lenient and strict: what is a decline, what is an error.
TEST(SpmmPolicy, StatusesAtEachStage) {
  const SpmmSettings lenient{SpmmKernel::kAlg3, false}, strict{SpmmKernel::kAlg3, true};
  const std::string what = "the CSR SpMM of 10 rows at width 8";
  for (SpmmStage stage : {SpmmStage::kBufferSize, SpmmStage::kPreprocess, SpmmStage::kCall}) {
    const std::string at = "stage " + std::to_string(int(stage));
    EXPECT_FALSE(spmm_declined(SpmmStatus::kSuccess, stage, lenient, "c", "OK", what)) << at;
    EXPECT_FALSE(spmm_declined(SpmmStatus::kSuccess, stage, strict, "c", "OK", what)) << at;
    for (SpmmStatus st : {SpmmStatus::kNotSupported, SpmmStatus::kInsufficientResources}) {
      EXPECT_TRUE(spmm_declined(st, stage, lenient, "c", "S", what)) << at;
      EXPECT_THROW(spmm_declined(st, stage, strict, "c", "S", what), SystemError) << at;
    }
    EXPECT_THROW(spmm_declined(SpmmStatus::kOther, stage, lenient, "c", "S", what), SystemError);
  }
  // INVALID_VALUE declines the plan (bufferSize, preprocess) but is an error from the call.
  EXPECT_TRUE(
      spmm_declined(SpmmStatus::kInvalidValue, SpmmStage::kBufferSize, lenient, "c", "S", what));
  EXPECT_TRUE(
      spmm_declined(SpmmStatus::kInvalidValue, SpmmStage::kPreprocess, lenient, "c", "S", what));
  try {
    spmm_declined(SpmmStatus::kInvalidValue, SpmmStage::kCall, lenient, "cusparseSpMM",
                  "CUSPARSE_STATUS_INVALID_VALUE", what);
    ADD_FAILURE() << "INVALID_VALUE from the call taken as a decline";
  } catch (const SystemError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cusparseSpMM"), std::string::npos) << m;
    EXPECT_NE(m.find("CUSPARSE_STATUS_INVALID_VALUE"), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
  try {
    spmm_declined(SpmmStatus::kNotSupported, SpmmStage::kBufferSize, strict,
                  "cusparseSpMM_bufferSize", "CUSPARSE_STATUS_NOT_SUPPORTED", what);
    ADD_FAILURE() << "a decline passed in strict mode";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("HALO_CUDA_SPMM_STRICT=1"), std::string::npos);
  }
}

// Release hooks hear of device storage only: host matrices (storage_id 0) never call them, and
// a removed hook is not called again. (A device upload's release is tested with the GPU tests:
// CudaBackendTest.SpmmStateIsFreedWithItsOperator.)
TEST(SparseMatrixRelease, HooksIgnoreHostMatrices) {
  std::vector<std::uint64_t> heard;
  const int id = add_storage_release_hook([&](std::uint64_t s) { heard.push_back(s); });
  {
    SparseMatrix a;
    a.rows = a.cols = 2;
    a.offsets = {0, 1, 2};
    a.indices = {1, 0};
    a.values = {1.f, 1.f};
    SparseMatrix b = a;
    b = std::move(a);
  }
  EXPECT_TRUE(heard.empty());
  remove_storage_release_hook(id);
  const int other = add_storage_release_hook([](std::uint64_t) {});
  EXPECT_NE(other, id);
  remove_storage_release_hook(other);
}

}  // namespace
}  // namespace halo
