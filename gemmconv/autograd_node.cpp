// The autograd node of a module's steady call (gemmconv/_node.py says why it is C++).
//
// A steady call (ops._Steady) is a module's call that reads as one of its earlier ones, whose
// forward and backward ran as kept CUDA graphs. Its node saves the input and the weight as
// torch's nodes do, and on the backward launches the kept graph of the output gradient's
// call without entering Python: it allocates the gradients as the Python backward did, and
// launches the graph captured for exactly these addresses. Anything else (no graph kept for
// these addresses, another layout, a graph being captured, graphs paused, a double backward)
// calls the Python backward, which may then tell the node's table of a graph to launch next
// time. So Python never runs on autograd's device thread in a steady training step.
//
// Built at first use against the installed torch (CPU wheels too: no CUDA header is read;
// the two driver calls are looked up in libcuda at the first launch).
#include <torch/extension.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

namespace ag = torch::autograd;
namespace py = pybind11;

// torch 2.13 holds nodes in intrusive_ptrs, older releases in shared_ptrs.
using NodePtr = decltype(std::declval<ag::Node&>().getptr());

template <typename T>
NodePtr make_node() {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<ag::Node>>) {
    return std::make_shared<T>();
  } else {
    return c10::make_intrusive<T>();
  }
}

// CUDA driver calls (CUresult cuGraphLaunch(CUgraphExec, CUstream) and cuStreamIsCapturing
// (CUstream, CUstreamCaptureStatus*)); runtime and driver handles are the same pointers.
struct Driver {
  int (*launch)(void*, void*) = nullptr;
  int (*capturing)(void*, int*) = nullptr;
};

const Driver& driver() {
  static const Driver found = [] {
    Driver d;
    if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {   // (torch loaded it)
      d.launch = reinterpret_cast<int (*)(void*, void*)>(dlsym(lib, "cuGraphLaunch"));
      d.capturing = reinterpret_cast<int (*)(void*, int*)>(dlsym(lib, "cuStreamIsCapturing"));
    }
    return d;
  }();
  return found;
}

// What a node's backward did: launched a kept graph, or called Python, and why.
enum Outcome {
  LAUNCHED, NOT_CUDA, CREATE_GRAPH, CAPTURING, NO_KIND, NO_GRAPH, PAUSED, LET_GO, N_OUTCOMES
};
const char* const OUTCOME_NAMES[N_OUTCOMES] = {
    "launched",                 // the kept graph, no Python
    "not a CUDA gradient",      // (or none: autograd passed an undefined one)
    "create_graph",             // a backward that records its own graph
    "a capture",                // the stream is being captured (or no CUDA driver found)
    "no such backward",         // no graph kept yet for this kind of backward
    "no graph at these addresses",
    "graphs paused",
    "graph let go",
};

// The graphs gemmconv.graphs keeps, by its serial numbers: graphs.py adds one at its
// capture and drops it when it lets the graph go, so a table never launches a freed graph
// (a handle's value may come back for another graph; a serial never does).
struct Registry {
  std::mutex mutex;
  std::unordered_map<int64_t, void*> graphs;   // serial: cudaGraphExec_t
  std::unordered_set<int64_t> launched;        // serials launched here since graphs.py asked
  bool paused = false;                         // graphs.paused()
  std::array<std::atomic<int64_t>, N_OUTCOMES> outcomes{};   // backwards, by outcome
};

Registry& registry() {
  static Registry* r = new Registry();   // (never destroyed: nodes may outlive the module)
  return *r;
}

// A gradient as the Python backward allocated it.
struct Layout {
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype;
};

// The backwards of one kind (what is asked, the output gradient's strides and alignment,
// the precision policy and workspace limit of the forward) that ran as graphs, and the
// graphs kept for them by the addresses they read and write.
struct Entry {
  std::array<bool, 3> need;
  std::vector<int64_t> grad_strides;
  int64_t align, compute, limit;
  std::array<std::optional<Layout>, 3> grads;
  std::vector<std::pair<std::array<int64_t, 6>, int64_t>> graphs;   // addresses: serial
};

// One steady call's table (ops._Steady keeps it; its nodes share it).
struct Table {
  static constexpr size_t MAX_ENTRIES = 16, MAX_GRAPHS = 8;
  std::mutex mutex;
  std::vector<Entry> entries;

  void add(std::array<bool, 3> need, std::vector<int64_t> grad_strides, int64_t align,
           int64_t compute, int64_t limit, std::vector<std::optional<at::Tensor>> grads,
           std::array<int64_t, 6> addresses, int64_t serial) {
    TORCH_CHECK(grads.size() == 3, "three gradients (input, weight, bias) expected");
    std::lock_guard<std::mutex> lock(mutex);
    Entry* entry = find(need, grad_strides, align, compute, limit);
    if (entry == nullptr) {
      if (entries.size() >= MAX_ENTRIES) entries.clear();
      entries.push_back({need, std::move(grad_strides), align, compute, limit, {}, {}});
      entry = &entries.back();
    }
    for (size_t i = 0; i < 3; ++i) {
      entry->grads[i].reset();
      if (grads[i] && grads[i]->defined()) {
        const at::Tensor& g = *grads[i];
        entry->grads[i] = Layout{g.sizes().vec(), g.strides().vec(), g.scalar_type()};
      }
    }
    if (entry->graphs.size() >= MAX_GRAPHS) entry->graphs.clear();
    entry->graphs.emplace_back(addresses, serial);
  }

  Entry* find(const std::array<bool, 3>& need, at::IntArrayRef grad_strides, int64_t align,
              int64_t compute, int64_t limit) {
    for (Entry& e : entries) {
      if (e.need == need && grad_strides.equals(e.grad_strides) && e.align == align &&
          e.compute == compute && e.limit == limit) {
        return &e;
      }
    }
    return nullptr;
  }

  size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    size_t n = 0;
    for (const Entry& e : entries) n += e.graphs.size();
    return n;
  }
};

// A Python object a node holds: released under the GIL, on whichever thread frees the node.
struct PyRef {
  PyObject* object;
  explicit PyRef(py::handle h) : object(h.inc_ref().ptr()) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      Py_DECREF(object);
    }
  }
};

PyObject* python_backward = nullptr;   // ops._steady_backward (set_python_backward)

struct SteadyBackward : ag::Node {
  ag::SavedVariable input, weight;
  std::shared_ptr<Table> table;
  std::unique_ptr<PyRef> steady;   // the ops._Steady, for the Python backward
  void* stream = nullptr;          // the forward's, which autograd runs the backward on
  int64_t compute = 0, limit = 0;

  std::string name() const override { return "gemmconv::ConvTransposeBackward"; }

  void release_variables() override {
    input.reset_data();
    weight.reset_data();
  }

  ag::variable_list apply(ag::variable_list&& grads) override {
    at::Tensor x = input.unpack(), w = weight.unpack();   // (checks versions, as torch's)
    const std::array<bool, 3> need = {task_should_compute_output(0),
                                      task_should_compute_output(1),
                                      task_should_compute_output(2)};
    const at::Tensor& grad_out = grads[0];
    ag::variable_list out(3);
    const Outcome outcome = at::GradMode::is_enabled()                  ? CREATE_GRAPH
                            : !grad_out.defined() || !grad_out.is_cuda() ? NOT_CUDA
                                                                         : launch(grad_out, x, w, need, out);
    ++registry().outcomes[outcome];
    if (outcome == LAUNCHED) return out;
    py::gil_scoped_acquire gil;
    try {
      py::object result = py::reinterpret_borrow<py::object>(python_backward)(
          py::handle(steady->object), grad_out.defined() ? py::cast(grad_out) : py::none(),
          x, w, py::make_tuple(need[0], need[1], need[2]));
      out.clear();
      for (py::handle g : result) out.push_back(g.is_none() ? at::Tensor() : g.cast<at::Tensor>());
      return out;
    } catch (py::error_already_set& e) {
      e.restore();   // (as torch's Python nodes: the engine hands the exception itself on)
      python_error error;
      error.persist();
      throw std::move(error);
    }
  }

  // The gradients into ``out`` by the graph kept for these addresses (LAUNCHED), or why not.
  Outcome launch(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& w,
                 const std::array<bool, 3>& need, ag::variable_list& out) {
    const Driver& d = driver();
    int status = 0;
    if (d.launch == nullptr || d.capturing == nullptr || d.capturing(stream, &status) != 0 ||
        status != 0) {
      return CAPTURING;
    }
    std::lock_guard<std::mutex> lock(table->mutex);
    const auto align = static_cast<int64_t>(reinterpret_cast<uintptr_t>(grad_out.data_ptr()) % 16);
    Entry* entry = table->find(need, grad_out.strides(), align, compute, limit);
    if (entry == nullptr) return NO_KIND;
    std::array<int64_t, 6> addresses = {address(grad_out), address(x), address(w), 0, 0, 0};
    for (size_t i = 0; i < 3; ++i) {
      if (!need[i]) continue;
      if (!entry->grads[i]) return NO_KIND;
      const Layout& l = *entry->grads[i];
      out[i] = at::empty_strided(l.sizes, l.strides, x.options().dtype(l.dtype));
      addresses[3 + i] = address(out[i]);
    }
    for (auto it = entry->graphs.begin(); it != entry->graphs.end(); ++it) {
      if (it->first != addresses) continue;
      Registry& r = registry();
      std::lock_guard<std::mutex> kept(r.mutex);   // (held over the launch: no let-go meanwhile)
      if (r.paused) return PAUSED;
      auto graph = r.graphs.find(it->second);
      if (graph == r.graphs.end()) {   // let go by graphs.py
        entry->graphs.erase(it);
        return LET_GO;
      }
      const int error = d.launch(graph->second, stream);
      TORCH_CHECK(error == 0, "gemmconv: launching a kept backward graph failed (CUresult ",
                  error, ")");
      r.launched.insert(it->second);
      return LAUNCHED;
    }
    return NO_GRAPH;
  }

  static int64_t address(const at::Tensor& t) {
    return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
  }
};

void attach(at::Tensor out, const at::Tensor& x, const at::Tensor& w,
            const std::optional<at::Tensor>& bias, py::object steady,
            std::shared_ptr<Table> table, int64_t stream, int64_t compute, int64_t limit) {
  TORCH_CHECK(python_backward != nullptr, "gemmconv: set_python_backward first");
  TORCH_CHECK(!out.requires_grad(), "gemmconv: the output of a steady call has a history already");
  NodePtr node = make_node<SteadyBackward>();
  auto* self = static_cast<SteadyBackward*>(node.get());
  self->set_next_edges(ag::collect_next_edges(x, w, bias.value_or(at::Tensor())));
  self->input = ag::SavedVariable(x, false);
  self->weight = ag::SavedVariable(w, false);
  self->table = std::move(table);
  self->steady = std::make_unique<PyRef>(steady);
  self->stream = reinterpret_cast<void*>(static_cast<uintptr_t>(stream));
  self->compute = compute;
  self->limit = limit;
  ag::create_gradient_edge(out, std::move(node));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Table, std::shared_ptr<Table>>(m, "Table")
      .def(py::init<>())
      .def("add", &Table::add, py::call_guard<py::gil_scoped_release>())
      .def("__len__", &Table::size);
  m.def("attach", &attach);
  m.def("set_python_backward", [](py::object f) {
    Py_XDECREF(python_backward);
    python_backward = f.inc_ref().ptr();
  });
  m.def("keep", [](int64_t serial, int64_t exec) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.graphs[serial] = reinterpret_cast<void*>(static_cast<uintptr_t>(exec));
  });
  m.def("let_go", [](int64_t serial) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.graphs.erase(serial);
    r.launched.erase(serial);
  }, py::call_guard<py::gil_scoped_release>());
  m.def("set_paused", [](bool paused) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.paused = paused;
  }, py::call_guard<py::gil_scoped_release>());
  m.def("outcomes", [] {   // {outcome: backwards since the last reset_outcomes()}
    py::dict counts;
    for (int i = 0; i < N_OUTCOMES; ++i) counts[OUTCOME_NAMES[i]] = registry().outcomes[i].load();
    return counts;
  });
  m.def("reset_outcomes", [] {
    for (auto& count : registry().outcomes) count = 0;
  });
  m.def("launched", [] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<int64_t> serials(r.launched.begin(), r.launched.end());
    r.launched.clear();
    return serials;
  });
}
