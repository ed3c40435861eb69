// cuBLAS and cuSPARSE, loaded when the CUDA backend first needs them instead of linked: their
// static initialisers alone (cuBLASLt's above all) take ~210 MB of resident memory in every
// process that links them, before main() — so every CPU-only halo rank paid for a GPU library
// it never called (measured: `halo version` 262 MB resident linked, 9 MB without CUDA).
//
// Each entry point halo calls is defined here under its C name, so the backend's code calls
// cublasSgemm & co. as usual; the first call dlopens the library (its soname from the headers'
// major version) and every call forwards to the resolved symbol. When the library cannot be
// loaded the calls fail with the library's "not initialised" status and the status strings say
// why, so the CUDA backend's checks report it as they report any other failure.
#include <cublas_v2.h>
#include <cusparse.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace {

// One shared library, opened on first use.
struct Lazy {
  const char* soname;
  void* handle = nullptr;
  std::string why_not;
  std::once_flag once;

  void* symbol(const char* name) {
    std::call_once(once, [this] {
      handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
      if (!handle) why_not = std::string(soname) + " could not be loaded (" + dlerror() + ")";
    });
    if (!handle) return nullptr;
    void* p = dlsym(handle, name);
    if (!p) why_not = std::string(soname) + " lacks " + name;
    return p;
  }
};

#define HALO_STR2(x) #x
#define HALO_STR(x) HALO_STR2(x)
Lazy g_cublas{"libcublas.so." HALO_STR(CUBLAS_VER_MAJOR)};
Lazy g_cusparse{"libcusparse.so." HALO_STR(CUSPARSE_VER_MAJOR)};

template <class F>
F* resolve(Lazy& lib, const char* name) {
  return reinterpret_cast<F*>(lib.symbol(name));
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  static auto* const fn = resolve<decltype(cublasCreate_v2)>(g_cublas, "cublasCreate_v2");
  return fn ? fn(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  static auto* const fn = resolve<decltype(cublasDestroy_v2)>(g_cublas, "cublasDestroy_v2");
  return fn ? fn(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  // cublasGemmEx is overloaded in C++ (cudaDataType / cublasComputeType_t): name the C one.
  using GemmEx =
      cublasStatus_t(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                     const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                     const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  static auto* const fn = resolve<GemmEx>(g_cublas, "cublasGemmEx");
  return fn ? fn(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
                 Ctype, ldc, computeType, algo)
            : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  static auto* const fn = resolve<decltype(cublasGetStatusName)>(g_cublas, "cublasGetStatusName");
  return fn ? fn(status) : g_cublas.why_not.c_str();
}

const char* cublasGetStatusString(cublasStatus_t status) {
  static auto* const fn =
      resolve<decltype(cublasGetStatusString)>(g_cublas, "cublasGetStatusString");
  return fn ? fn(status) : g_cublas.why_not.c_str();
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static auto* const fn = resolve<decltype(cublasSetMathMode)>(g_cublas, "cublasSetMathMode");
  return fn ? fn(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  static auto* const fn =
      resolve<decltype(cublasSetPointerMode_v2)>(g_cublas, "cublasSetPointerMode_v2");
  return fn ? fn(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  static auto* const fn = resolve<decltype(cublasSetStream_v2)>(g_cublas, "cublasSetStream_v2");
  return fn ? fn(handle, streamId) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  static auto* const fn = resolve<decltype(cublasSgemm_v2)>(g_cublas, "cublasSgemm_v2");
  return fn ? fn(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
            : CUBLAS_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseCreate(cusparseHandle_t* handle) {
  static auto* const fn = resolve<decltype(cusparseCreate)>(g_cusparse, "cusparseCreate");
  return fn ? fn(handle) : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseCreateConstCsr(cusparseConstSpMatDescr_t* spMatDescr, int64_t rows,
                                        int64_t cols, int64_t nnz, const void* csrRowOffsets,
                                        const void* csrColInd, const void* csrValues,
                                        cusparseIndexType_t csrRowOffsetsType,
                                        cusparseIndexType_t csrColIndType,
                                        cusparseIndexBase_t idxBase, cudaDataType valueType) {
  static auto* const fn =
      resolve<decltype(cusparseCreateConstCsr)>(g_cusparse, "cusparseCreateConstCsr");
  return fn ? fn(spMatDescr, rows, cols, nnz, csrRowOffsets, csrColInd, csrValues,
                 csrRowOffsetsType, csrColIndType, idxBase, valueType)
            : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseCreateConstDnMat(cusparseConstDnMatDescr_t* dnMatDescr, int64_t rows,
                                          int64_t cols, int64_t ld, const void* values,
                                          cudaDataType valueType, cusparseOrder_t order) {
  static auto* const fn =
      resolve<decltype(cusparseCreateConstDnMat)>(g_cusparse, "cusparseCreateConstDnMat");
  return fn ? fn(dnMatDescr, rows, cols, ld, values, valueType, order)
            : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseCreateDnMat(cusparseDnMatDescr_t* dnMatDescr, int64_t rows, int64_t cols,
                                     int64_t ld, void* values, cudaDataType valueType,
                                     cusparseOrder_t order) {
  static auto* const fn = resolve<decltype(cusparseCreateDnMat)>(g_cusparse, "cusparseCreateDnMat");
  return fn ? fn(dnMatDescr, rows, cols, ld, values, valueType, order)
            : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseDestroy(cusparseHandle_t handle) {
  static auto* const fn = resolve<decltype(cusparseDestroy)>(g_cusparse, "cusparseDestroy");
  return fn ? fn(handle) : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseDestroyDnMat(cusparseConstDnMatDescr_t dnMatDescr) {
  static auto* const fn =
      resolve<decltype(cusparseDestroyDnMat)>(g_cusparse, "cusparseDestroyDnMat");
  return fn ? fn(dnMatDescr) : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseDestroySpMat(cusparseConstSpMatDescr_t spMatDescr) {
  static auto* const fn =
      resolve<decltype(cusparseDestroySpMat)>(g_cusparse, "cusparseDestroySpMat");
  return fn ? fn(spMatDescr) : CUSPARSE_STATUS_NOT_INITIALIZED;
}

const char* cusparseGetErrorName(cusparseStatus_t status) {
  static auto* const fn =
      resolve<decltype(cusparseGetErrorName)>(g_cusparse, "cusparseGetErrorName");
  return fn ? fn(status) : g_cusparse.why_not.c_str();
}

const char* cusparseGetErrorString(cusparseStatus_t status) {
  static auto* const fn =
      resolve<decltype(cusparseGetErrorString)>(g_cusparse, "cusparseGetErrorString");
  return fn ? fn(status) : g_cusparse.why_not.c_str();
}

cusparseStatus_t cusparseSetStream(cusparseHandle_t handle, cudaStream_t streamId) {
  static auto* const fn = resolve<decltype(cusparseSetStream)>(g_cusparse, "cusparseSetStream");
  return fn ? fn(handle, streamId) : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseSpMM(cusparseHandle_t handle, cusparseOperation_t opA,
                              cusparseOperation_t opB, const void* alpha,
                              cusparseConstSpMatDescr_t matA, cusparseConstDnMatDescr_t matB,
                              const void* beta, cusparseDnMatDescr_t matC, cudaDataType computeType,
                              cusparseSpMMAlg_t alg, void* externalBuffer) {
  static auto* const fn = resolve<decltype(cusparseSpMM)>(g_cusparse, "cusparseSpMM");
  return fn ? fn(handle, opA, opB, alpha, matA, matB, beta, matC, computeType, alg, externalBuffer)
            : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseSpMM_bufferSize(cusparseHandle_t handle, cusparseOperation_t opA,
                                         cusparseOperation_t opB, const void* alpha,
                                         cusparseConstSpMatDescr_t matA,
                                         cusparseConstDnMatDescr_t matB, const void* beta,
                                         cusparseDnMatDescr_t matC, cudaDataType computeType,
                                         cusparseSpMMAlg_t alg, size_t* bufferSize) {
  static auto* const fn =
      resolve<decltype(cusparseSpMM_bufferSize)>(g_cusparse, "cusparseSpMM_bufferSize");
  return fn ? fn(handle, opA, opB, alpha, matA, matB, beta, matC, computeType, alg, bufferSize)
            : CUSPARSE_STATUS_NOT_INITIALIZED;
}

cusparseStatus_t cusparseSpMM_preprocess(cusparseHandle_t handle, cusparseOperation_t opA,
                                         cusparseOperation_t opB, const void* alpha,
                                         cusparseConstSpMatDescr_t matA,
                                         cusparseConstDnMatDescr_t matB, const void* beta,
                                         cusparseDnMatDescr_t matC, cudaDataType computeType,
                                         cusparseSpMMAlg_t alg, void* externalBuffer) {
  static auto* const fn =
      resolve<decltype(cusparseSpMM_preprocess)>(g_cusparse, "cusparseSpMM_preprocess");
  return fn ? fn(handle, opA, opB, alpha, matA, matB, beta, matC, computeType, alg, externalBuffer)
            : CUSPARSE_STATUS_NOT_INITIALIZED;
}

}  // extern "C"
