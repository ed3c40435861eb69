// `halo._halo`: the C++ libraries for Python (python/halo wraps it). Datasets open as read-only
// NumPy views of the mapped files (zero-copy) and are written from NumPy arrays with the checks
// and staged write of `halo convert`; every command runs in-process through the CLI's own code
// (run_command), so flags, defaults and messages are the command line's. halo's exceptions
// become halo.InputError / ParamError / SystemError (all halo.Error) with the CLI's one line.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "halo/graph/dataset.h"
#include "halo/graph/error.h"

namespace py = pybind11;
namespace fs = std::filesystem;

namespace halo {
namespace {

// A read-only NumPy view of n x cols elements at data, keeping `keep` (the mapped dataset) alive.
template <class T>
py::array view(const std::shared_ptr<const GraphDataset>& keep, const T* data, std::size_t n,
               std::size_t cols = 0) {
  auto* holder = new std::shared_ptr<const GraphDataset>(keep);
  py::capsule base(holder,
                   [](void* p) { delete static_cast<std::shared_ptr<const GraphDataset>*>(p); });
  std::vector<py::ssize_t> shape{py::ssize_t(cols ? n / cols : n)};
  if (cols) shape.push_back(py::ssize_t(cols));
  static const T kEmpty{};  // NumPy wants a pointer even for no elements
  py::array a(py::dtype::of<T>(), shape, {}, data ? data : &kEmpty, base);
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
  py::dict r;
  r["name"] = d->name;
  r["fingerprint"] = d->fingerprint;
  r["directed"] = d->directed;
  r["num_nodes"] = d->num_nodes();
  r["num_edges"] = d->graph.num_edges();
  r["offsets"] = view(d, d->graph.offsets.data(), d->graph.offsets.size());
  r["indices"] = view(d, d->graph.indices.data(), d->graph.indices.size());
  r["edge_weights"] = d->graph.values.empty()
                          ? py::object(py::none())
                          : view(d, d->graph.values.data(), d->graph.values.size());
  r["features"] = d->num_features > 0 ? py::object(view(d, d->features.data(), d->features.size(),
                                                        std::size_t(d->num_features)))
                                      : py::object(py::none());
  r["labels"] =
      d->label_cols > 0
          ? py::object(view(d, d->labels.data(), d->labels.size(), std::size_t(d->label_cols)))
          : py::object(py::none());
  r["label_kind"] = label_kind_name(d->label_kind);
  r["num_classes"] = d->num_classes;
  py::dict splits;
  for (const Split& s : d->splits) {
    py::dict one;
    one["train"] = view(d, s.train.data(), s.train.size());
    one["valid"] = view(d, s.valid.data(), s.valid.size());
    one["test"] = view(d, s.test.data(), s.test.size());
    splits[py::str(s.name)] = one;
  }
  r["splits"] = splits;
  r["original_ids"] = d->original_ids.empty()
                          ? py::object(py::none())
                          : view(d, d->original_ids.data(), d->original_ids.size());
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
  if (src.ndim() != 1 || dst.ndim() != 1 || src.size() != dst.size())
    bad("edges: expected sources and destinations of one length");
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

// Runs `halo ARGS...` in this process; its exit status (errors raise).
int run(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"halo"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> ptrs;
  ptrs.reserve(argv.size() + 1);
  for (auto& a : argv) ptrs.push_back(a.data());
  ptrs.push_back(nullptr);
  py::gil_scoped_release nogil;
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
    } catch (const std::filesystem::filesystem_error& e) {
      // as the CLI words it: the path that cannot be looked at is the input's problem
      const std::string path = e.path1().empty() ? "filesystem" : e.path1().string();
      input((path + ": " + e.code().message()).c_str());
    }
  });
  m.def("open_dataset", &halo::open_dataset, py::arg("path"), py::arg("validate"),
        "The dataset at path as read-only NumPy views of its mapped arrays, and its metadata.");
  m.def("write_dataset", &halo::write_dataset, py::arg("path"), py::arg("num_nodes"),
        py::arg("src"), py::arg("dst"), py::arg("weight"), py::arg("x"), py::arg("y"),
        py::arg("multilabel"), py::arg("splits"), py::arg("directed"), py::arg("name"),
        py::arg("overwrite"), "Writes a native dataset from normalised arrays (halo._dataset).");
  m.def("run", &halo::run, py::arg("args"),
        "Runs `halo ARGS...` in this process; returns its exit status, raises halo.Error.");
  m.attr("__version__") = HALO_VERSION;
}
