// `halo._halo`: the C++ libraries for Python (python/halo wraps it). Datasets open as read-only
// NumPy views of the mapped files (zero-copy) and are written from NumPy arrays with the checks
// and staged write of `halo convert`; every command runs in-process through the CLI's own code
// (run_command), so flags, defaults and messages are the command line's. halo's exceptions
// become halo.InputError / ParamError / SystemError (all halo.Error) with the CLI's one line.
#include <pybind11/eval.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <new>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"
#include "halo/graph/progress.h"
#include "halo/graph/text.h"
#include "halo/runtime/memory/memory_model.h"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace halo {
namespace {

// Keeps `keep` (the mapped dataset) alive for as long as a view of it lives: the views' base.
py::capsule keeper(const std::shared_ptr<const GraphDataset>& keep) {
  auto* holder = new std::shared_ptr<const GraphDataset>(keep);
  return py::capsule(holder,
                     [](void* p) { delete static_cast<std::shared_ptr<const GraphDataset>*>(p); });
}

// A read-only C-order NumPy view of n (rows x cols, or 1-D when cols is 0) elements at data, its
// base `base`. Shape and strides come from n, cols and sizeof(T) alone, never from a NumPy
// dtype: pybind11 before 2.12 reads a dtype's item size at NumPy 1's PyArray_Descr offsets,
// and under NumPy 2 (which moved it) reads 0, which made every stride 0 (issue #35, class 17).
template <class T>
py::array view(py::handle base, const T* data, std::size_t n, std::size_t cols = 0) {
  const auto item = py::ssize_t(sizeof(T));
  std::vector<py::ssize_t> shape{py::ssize_t(cols ? n / cols : n)};
  std::vector<py::ssize_t> strides{cols ? item * py::ssize_t(cols) : item};
  if (cols) {
    shape.push_back(py::ssize_t(cols));
    strides.push_back(item);
  }
  static const T kEmpty{};  // NumPy wants a pointer even for no elements
  py::array_t<T> a(std::move(shape), std::move(strides), data ? data : &kEmpty, base);
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

// The dataset at path, mapped: its meta and arrays as read-only views. validate runs the
// structure checks `halo train` runs (ids in range, symmetry, finite features, labels, splits),
// which read every page; without it only meta.json and the arrays' sizes are checked.
py::dict open_dataset(const fs::path& path, bool validate) {
  std::shared_ptr<const GraphDataset> d;
  {
    py::gil_scoped_release nogil;
    ReadOptions opt;
    opt.verify_checksums = validate;
    d = std::make_shared<const GraphDataset>(validate ? read_graph_dataset(path, opt)
                                                      : map_graph_dataset(path, opt));
  }
  const py::capsule base = keeper(d);
  py::dict r;
  r["name"] = d->name;
  r["fingerprint"] = d->fingerprint;
  r["directed"] = d->directed;
  r["num_nodes"] = d->num_nodes();
  r["num_edges"] = d->graph.num_edges();
  r["offsets"] = view(base, d->graph.offsets.data(), d->graph.offsets.size());
  r["indices"] = view(base, d->graph.indices.data(), d->graph.indices.size());
  r["edge_weights"] = d->graph.values.empty()
                          ? py::object(py::none())
                          : view(base, d->graph.values.data(), d->graph.values.size());
  r["features"] = d->num_features > 0
                      ? py::object(view(base, d->features.data(), d->features.size(),
                                        std::size_t(d->num_features)))
                      : py::object(py::none());
  r["labels"] =
      d->label_cols > 0
          ? py::object(view(base, d->labels.data(), d->labels.size(), std::size_t(d->label_cols)))
          : py::object(py::none());
  r["label_kind"] = label_kind_name(d->label_kind);
  r["num_classes"] = d->num_classes;
  py::dict splits;
  for (const Split& s : d->splits) {
    py::dict one;
    one["train"] = view(base, s.train.data(), s.train.size());
    one["valid"] = view(base, s.valid.data(), s.valid.size());
    one["test"] = view(base, s.test.data(), s.test.size());
    splits[py::str(s.name)] = one;
  }
  r["splits"] = splits;
  r["original_ids"] = d->original_ids.empty()
                          ? py::object(py::none())
                          : view(base, d->original_ids.data(), d->original_ids.size());
  return r;
}

using I64 = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using F32 = py::array_t<float, py::array::c_style | py::array::forcecast>;
using I32 = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

[[noreturn]] void bad(const std::string& what) { throw InputError(what); }

// ids (any shape) in [0, n): names the first entry outside, as `what[i]`.
void check_range(const std::string& what, const std::int64_t* ids, std::int64_t count,
                 std::int64_t n, const char* kind = "node id") {
  for (std::int64_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= n)
      bad(what + "[" + std::to_string(i) + "]: " + kind + " " + std::to_string(ids[i]) +
          " outside [0, " + std::to_string(n) + ")");
}

Array<NodeId> node_ids(const std::string& what, const I64& a, std::int64_t n) {
  if (a.ndim() != 1)
    bad(what + ": expected a 1-D array of node ids, got " + std::to_string(a.ndim()) +
        " dimensions");
  check_range(what, a.data(), a.size(), n);
  std::vector<NodeId> v(a.data(), a.data() + a.size());
  return Array<NodeId>(std::move(v));
}

// A split's arrays are the files split.NAME.{train,valid,test}.bin of the dataset folder, listed
// by that name in meta.json, so NAME must give a plain file name that the reader accepts (no
// '/', not "." or "..": read_meta's rule for array names, graph/src/dataset.cc) and the file
// system can hold (no NUL, at most 255 bytes), and be one `--split NAME` can select (not
// empty); no control characters, which no terminal shows. ParamError naming it (escaped).
void check_split_name(const std::string& name) {
  constexpr std::size_t kMaxName = 255 - std::string_view("split..train.bin").size();
  std::string why;
  if (name.empty())
    why = "is empty";
  else if (name == "." || name == "..")
    why = "is '" + name + "'";
  else if (name.find('/') != std::string::npos)
    why = "contains '/'";
  else if (std::any_of(name.begin(), name.end(),
                       [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    why = "contains a control character";
  else if (name.size() > kMaxName)
    why = "is " + std::to_string(name.size()) + " bytes long";
  if (!why.empty())
    throw ParamError("splits: the split name '" + printable(name) + "' " + why +
                     " (a split name is part of its files' names: 1 to " +
                     std::to_string(kMaxName) + " bytes, no '/', control characters, '.' or '..')");
}

// Refuses (ParamError) a write whose CSR build needs more memory than is available, before
// allocating: the offsets and the build's cursor (16 bytes a node), the edges and both
// directions of the index (16 bytes an edge, 28 weighted), the features' and labels' copies.
void refuse_impossible_write(std::int64_t n, std::int64_t m, bool weighted, std::int64_t x_size,
                             std::int64_t y_size) {
  const double need = 16.0 * double(n + 1) + (weighted ? 28.0 : 16.0) * double(m) +
                      4.0 * double(x_size) + 4.0 * double(y_size);
  const AvailableMemory avail = available_memory();
  if (avail.bytes <= 0 || need <= double(avail.bytes)) return;
  throw ParamError("write_dataset: " + std::to_string(n) + " nodes and " + std::to_string(m) +
                   " edges need about " + format_bytes(std::uint64_t(need)) + ", but only " +
                   format_bytes(std::uint64_t(avail.bytes)) + " is available (" + avail.source +
                   "); check num_nodes");
}

// Writes a native dataset from arrays (python/halo/_dataset.py normalises the inputs: src and
// dst int64 edges, x float32 [n x F], y int32 [n x C] with -1 for missing, splits name ->
// (train, valid, test)), with the checks of `halo convert`, staged: nothing is left on error.
void write_dataset(const fs::path& path, std::int64_t n, const I64& src, const I64& dst,
                   const std::optional<F32>& weight, const std::optional<F32>& x,
                   const std::optional<I32>& y, bool multilabel,
                   const std::map<std::string, std::array<I64, 3>>& splits, bool directed,
                   const std::string& name, bool overwrite) {
  if (n < 0 || n > std::int64_t(INT32_MAX))
    throw ParamError("num_nodes: " + std::to_string(n) + " outside [0, 2^31 - 1]");
  for (const auto& named : splits) check_split_name(named.first);  // before anything is written
  if (src.ndim() != 1 || dst.ndim() != 1 || src.size() != dst.size())
    bad("edges: expected sources and destinations of one length");
  refuse_impossible_write(n, src.size(), weight.has_value(), x ? x->size() : 0, y ? y->size() : 0);
  check_range("edge_index[0]", src.data(), src.size(), n);
  check_range("edge_index[1]", dst.data(), dst.size(), n);
  GraphDataset d;
  d.name = name;
  d.directed = directed;
  EdgeList el;
  el.num_nodes = n;
  el.src.assign(src.data(), src.data() + src.size());
  el.dst.assign(dst.data(), dst.data() + dst.size());
  if (weight) {
    if (weight->ndim() != 1 || weight->size() != src.size())
      bad("edge_weight: expected one weight per edge (" + std::to_string(src.size()) + "), got " +
          std::to_string(weight->size()));
    for (py::ssize_t i = 0; i < weight->size(); ++i)
      if (!std::isfinite(weight->data()[i]))
        bad("edge_weight[" + std::to_string(i) + "]: not a finite number");
    el.weight.assign(weight->data(), weight->data() + weight->size());
  }
  if (x) {
    if (x->ndim() != 2 || x->shape(0) != n)
      bad("x: expected a [num_nodes x features] = [" + std::to_string(n) + " x F] matrix");
    const float* v = x->data();
    const std::int64_t cols = x->shape(1);
    for (std::int64_t i = 0; i < x->size(); ++i)
      if (!std::isfinite(v[i]))
        bad("x[" + std::to_string(i / cols) + "][" + std::to_string(i % cols) +
            "]: not a finite number (" + std::to_string(v[i]) + ")");
    d.num_features = cols;
    d.features = Array<float>(std::vector<float>(v, v + x->size()));
  }
  if (y) {
    if (y->ndim() != 2 || y->shape(0) != n)
      bad("y: expected one label (or label row) per node (" + std::to_string(n) + ")");
    const std::int32_t* v = y->data();
    const std::int64_t cols = y->shape(1);
    std::int32_t mx = -1;
    for (std::int64_t i = 0; i < y->size(); ++i) {
      if (v[i] < -1 || (multilabel && v[i] > 1))
        bad("y[" + std::to_string(i / cols) + "]: label " + std::to_string(v[i]) + ", expected " +
            (multilabel ? "0, 1 or missing (NaN, -1)" : "a class id >= 0 or missing (NaN, -1)"));
      mx = std::max(mx, v[i]);
    }
    d.label_cols = cols;
    d.label_kind = multilabel ? LabelKind::kMultilabel : LabelKind::kMulticlass;
    d.num_classes = multilabel ? 2 : mx + 1;
    d.labels = Array<std::int32_t>(std::vector<std::int32_t>(v, v + y->size()));
  }
  for (const auto& [split, parts] : splits) {
    Split s;
    s.name = split;
    const char* names[3] = {"train", "valid", "test"};
    Array<NodeId>* out[3] = {&s.train, &s.valid, &s.test};
    for (int i = 0; i < 3; ++i)
      *out[i] = node_ids("splits['" + split + "']['" + names[i] + "']", parts[std::size_t(i)], n);
    d.splits.push_back(std::move(s));
  }
  py::gil_scoped_release nogil;
  BuildOptions bo;
  bo.symmetrize = !directed;
  d.graph = build_csr(std::move(el), bo);
  validate_graph_dataset(d, path);  // what every reader checks (split overlaps, label sizes)
  write_graph_dataset(d, path, overwrite);
}

// The first entries of each array as write_dataset reads them (array_t's ndim, shape, data).
py::tuple read_back(const I64& i, const F32& f, const I32& l) {
  auto seen = [](const auto& a) {
    std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
    std::vector<double> values(a.data(), a.data() + a.size());
    return py::make_tuple(shape, values);
  };
  return py::make_tuple(seen(i), seen(f), seen(l));
}

// What differs between the arrays this module makes and takes and what NumPy itself reads from
// them ("" when nothing does). A pybind11 that reads NumPy's structs with another NumPy's
// layout gives garbage silently (class 17: every stride 0 under NumPy 2), so `import halo`
// refuses instead. Checked through NumPy's own attributes: two views (int64 rows, float32) and
// three inputs converted as write_dataset converts them (a cast, a transposed, a strided one).
std::string numpy_mismatch() {
  static const std::int64_t kIds[6] = {1, -2, 3, -4, 5, std::int64_t(1) << 40};
  static const float kXs[3] = {0.5f, -1.5f, 2.5f};
  py::dict scope;
  scope["np"] = py::module_::import("numpy");
  scope["ids"] = view(py::none(), kIds, 6, 2);
  scope["xs"] = view(py::none(), kXs, 3);
  scope["read_back"] = py::cpp_function(&read_back);
  py::exec(R"py(
def mismatch():
    if ids.strides != (16, 8) or xs.strides != (4,):
        return "views have strides %s and %s, expected (16, 8) and (4,)" % (ids.strides, xs.strides)
    if ids.tolist() != [[1, -2], [3, -4], [5, 1 << 40]] or xs.tolist() != [0.5, -1.5, 2.5]:
        return "views read %s and %s" % (ids.tolist(), xs.tolist())
    if ids.flags.writeable or xs.dtype != np.float32 or ids.dtype != np.int64:
        return "views are writeable or of other types (%s, %s)" % (ids.dtype, xs.dtype)
    i = np.arange(6, dtype=np.float64).reshape(2, 3).T
    f = np.arange(8, dtype=np.int32)[::2]
    l = np.arange(4, dtype=np.int64).reshape(2, 2)
    want = tuple((list(a.shape), [float(v) for v in a.ravel()]) for a in (i, f, l))
    got = read_back(i, f, l)
    if tuple((list(s), list(v)) for s, v in got) != want:
        return "arrays given read as %s, expected %s" % (got, want)
    return ""
result = mismatch()
)py",
           scope);
  return scope["result"].cast<std::string>();
}

// A stream buffer that takes everything and keeps nothing.
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return traits_type::not_eof(c); }
};

// Sends `stream` to `to` for its lifetime, then back (an error leaving the command included).
class Redirect {
 public:
  Redirect(std::ostream& stream, std::streambuf* to) : stream_(stream), saved_(stream.rdbuf(to)) {}
  ~Redirect() { stream_.rdbuf(saved_); }
  Redirect(const Redirect&) = delete;
  Redirect& operator=(const Redirect&) = delete;

 private:
  std::ostream& stream_;
  std::streambuf* saved_;
};

// Runs `halo ARGS...` in this process; its exit status (errors raise). Without echo, the
// command's report is dropped: what it writes to std::cout (halo train's epoch and summary
// lines) and its footer on std::clog ("train in 1.23 s, peak memory ..."), for a library call
// returns its results instead of printing them. Warnings and progress, written to stderr itself,
// still show. The streams are the process's: two commands run at once from two threads share
// the choice of the later one.
int run(const std::vector<std::string>& args, bool echo) {
  std::vector<std::string> argv{"halo"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> ptrs;
  ptrs.reserve(argv.size() + 1);
  for (auto& a : argv) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  py::gil_scoped_release nogil;
  NullBuffer drop;
  const Redirect out(std::cout, echo ? std::cout.rdbuf() : &drop);
  const Redirect footer(std::clog, echo ? std::clog.rdbuf() : &drop);
  return cli::run_command(int(argv.size()), ptrs.data());
}

}  // namespace
}  // namespace halo

PYBIND11_MODULE(_halo, m) {
  m.doc() = "halo's C++ libraries (use the halo package)";
  static py::exception<halo::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<halo::InputError> input(m, "InputError", error.ptr());
  static py::exception<halo::ParamError> param(m, "ParamError", error.ptr());
  static py::exception<halo::SystemError> system(m, "SystemError", error.ptr());
  // NOLINTNEXTLINE(performance-unnecessary-value-param): pybind11's translator signature
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const halo::InputError& e) {
      input(e.what());
    } catch (const halo::ParamError& e) {
      param(e.what());
    } catch (const halo::SystemError& e) {
      system(e.what());
    } catch (const halo::Error& e) {
      error(e.what());
    } catch (const std::bad_alloc&) {
      // as the CLI words it (pybind11 would raise MemoryError: std::bad_alloc, not halo.Error)
      system("out of memory");
    } catch (const std::filesystem::filesystem_error& e) {
      // as the CLI words it: the path that cannot be looked at is the input's problem
      const std::string path = e.path1().empty() ? "filesystem" : e.path1().string();
      input((path + ": " + e.code().message()).c_str());
    }
  });
  // Before anything else: a build that reads this NumPy's arrays wrong is refused, not used.
  if (const std::string what = halo::numpy_mismatch(); !what.empty())
    throw py::import_error(
        "halo._halo was built with pybind11 " PYBIND11_TOSTRING(PYBIND11_VERSION_MAJOR) "." PYBIND11_TOSTRING(
            PYBIND11_VERSION_MINOR) "." PYBIND11_TOSTRING(PYBIND11_VERSION_PATCH) " against NumPy " HALO_NUMPY_VERSION
        " and reads NumPy " + py::module_::import("numpy").attr("__version__").cast<std::string>() +
        "'s arrays wrong (" + what + "); rebuild halo against this NumPy (cmake -DPython_EXECUTABLE=" +
        py::module_::import("sys").attr("executable").cast<std::string>() +
        " with pybind11 >= 2.12 installed for it, then make)");
  m.def("open_dataset", &halo::open_dataset, py::arg("path"), py::arg("validate"),
        "The dataset at path as read-only NumPy views of its mapped arrays, and its metadata.");
  m.def("write_dataset", &halo::write_dataset, py::arg("path"), py::arg("num_nodes"),
        py::arg("src"), py::arg("dst"), py::arg("weight"), py::arg("x"), py::arg("y"),
        py::arg("multilabel"), py::arg("splits"), py::arg("directed"), py::arg("name"),
        py::arg("overwrite"), "Writes a native dataset from normalised arrays (halo._dataset).");
  m.def("check_split_name", &halo::check_split_name, py::arg("name"),
        "Raises ParamError where name cannot name a split (halo.write_dataset's rule).");
  m.def("run", &halo::run, py::arg("args"), py::arg("echo") = true,
        "Runs `halo ARGS...` in this process; returns its exit status, raises halo.Error. "
        "echo=False drops its report (stdout and the footer on stderr).");
  m.attr("__version__") = HALO_VERSION;
}
