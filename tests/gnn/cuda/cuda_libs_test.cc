// cuBLAS and cuSPARSE are loaded on first use, not linked (gnn/src/cuda/cuda_libs.cc): a process
// that never calls them does not map them (they cost ~210 MB before main() when linked), and
// the first call loads the library and reaches the real entry point. Runs without a GPU: the
// status-string entry points need no device. ctest runs each test in a process of its own.
#include <cublas_v2.h>
#include <cusparse.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

bool mapped(const std::string& lib) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream s;
  s << maps.rdbuf();
  return s.str().find(lib) != std::string::npos;
}

TEST(CudaLibs, LoadedOnFirstUseNotAtStart) {
  EXPECT_FALSE(mapped("libcublas"))
      << "libcublas is linked: every process pays for it before main()";
  EXPECT_FALSE(mapped("libcusparse"))
      << "libcusparse is linked: every process pays for it before main()";
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_TRUE(mapped("libcublas.so"));
  EXPECT_FALSE(mapped("libcusparse"));
  EXPECT_STREQ(cusparseGetErrorName(CUSPARSE_STATUS_INVALID_VALUE),
               "CUSPARSE_STATUS_INVALID_VALUE");
  EXPECT_TRUE(mapped("libcusparse.so"));
}

}  // namespace
