// The C++ side of a module's steady call (gemmconv/_node.py says why it is C++).
//
// A steady call (ops._Steady) is a module's call that reads as one of its earlier ones, whose
// forward and backward ran as kept CUDA graphs. Its forward launches the kept graph of its
// addresses without entering Python: it allocates the output as the Python forward did, and
// launches the graph captured for exactly these addresses. Its node saves the input and the
// weight as torch's nodes do, and on the backward does the same with the output gradient's
// call. Anything else (no graph kept for these addresses, another layout, a graph being
// captured, graphs paused, a double backward) calls Python, which may then tell the call's
// table of a graph to launch next time. So a steady call's Python ends at its key's lookup
// (ops.module_conv_transpose), and none runs on autograd's device thread.
//
// It also gives Python autocast's cached cast (autocast_cast), which torch keeps in C++ only.
//
// Built at first use against the installed torch (CPU wheels too: no CUDA header is read;
// the two driver calls are looked up in libcuda at the first launch).
#include <torch/extension.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
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
  std::array<std::atomic<int64_t>, 2> forwards{};            // launched here, in Python
};

Registry& registry() {
  static Registry* r = new Registry();   // (never destroyed: nodes may outlive the module)
  return *r;
}

// Whether the driver calls were found and ``stream`` is not being captured: a kept graph
// launched into a capture would run outside it.
bool can_launch(void* stream) {
  const Driver& d = driver();
  int status = 0;
  return d.launch != nullptr && d.capturing != nullptr && d.capturing(stream, &status) == 0 &&
         status == 0;
}

int64_t address(const at::Tensor& t) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
}

// Graphs of one call, serial numbers of graphs.py, kept by the stream they were captured for
// (graphs on one stream share a memory pool: launched on another, two could run at once)
// and the addresses they read and write.
template <size_t N>
using Graphs = std::vector<std::pair<std::array<int64_t, N>, int64_t>>;

template <size_t N>
void remember(Graphs<N>& graphs, const std::array<int64_t, N>& key, int64_t serial,
              size_t most) {
  for (auto& kept : graphs) {
    if (kept.first == key) {   // (told again: a call that ran Python while paused)
      kept.second = serial;
      return;
    }
  }
  if (graphs.size() >= most) graphs.clear();
  graphs.emplace_back(key, serial);
}

// Launches the graph of ``graphs`` kept for ``key`` (the stream, then the addresses), its
// table's lock held: LAUNCHED, or why not (NO_GRAPH, PAUSED, LET_GO: then forgotten here).
template <size_t N>
Outcome launch_kept(Graphs<N>& graphs, const std::array<int64_t, N>& key) {
  for (auto it = graphs.begin(); it != graphs.end(); ++it) {
    if (it->first != key) continue;
    Registry& r = registry();
    std::lock_guard<std::mutex> kept(r.mutex);   // (held over the launch: no let-go meanwhile)
    if (r.paused) return PAUSED;
    auto graph = r.graphs.find(it->second);
    if (graph == r.graphs.end()) {   // let go by graphs.py
      graphs.erase(it);
      return LET_GO;
    }
    const int error = driver().launch(graph->second, reinterpret_cast<void*>(key[0]));
    TORCH_CHECK(error == 0, "gemmconv: launching a kept graph failed (CUresult ", error, ")");
    r.launched.insert(it->second);
    return LAUNCHED;
  }
  return NO_GRAPH;
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
  Graphs<7> graphs;   // stream; output gradient, input, weight, their gradients
};

// One steady call's table (ops._Steady keeps it; its nodes share it): its nodes' name, its
// forward's output layout and graphs, and its kinds of backward.
struct Table {
  static constexpr size_t MAX_ENTRIES = 16, MAX_GRAPHS = 8;
  const std::string name;   // its nodes' (grad_fn's): the op the call is
  std::mutex mutex;
  std::optional<Layout> output;
  Graphs<5> forwards;   // stream; input, weight, bias (0 for none), output
  std::vector<Entry> entries;

  explicit Table(std::string name) : name(std::move(name)) {}

  void add_forward(const at::Tensor& out, std::array<int64_t, 5> key, int64_t serial) {
    std::lock_guard<std::mutex> lock(mutex);
    output = Layout{out.sizes().vec(), out.strides().vec(), out.scalar_type()};
    remember(forwards, key, serial, MAX_GRAPHS);
  }

  void add(std::array<bool, 3> need, std::vector<int64_t> grad_strides, int64_t align,
           int64_t compute, int64_t limit, std::vector<std::optional<at::Tensor>> grads,
           std::array<int64_t, 7> key, int64_t serial) {
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
    remember(entry->graphs, key, serial, MAX_GRAPHS);
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

  size_t size() {   // the backwards' graphs
    std::lock_guard<std::mutex> lock(mutex);
    size_t n = 0;
    for (const Entry& e : entries) n += e.graphs.size();
    return n;
  }

  size_t forward_graphs() {
    std::lock_guard<std::mutex> lock(mutex);
    return forwards.size();
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

  std::string name() const override { return table->name; }

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
    if (!can_launch(stream)) return CAPTURING;
    std::lock_guard<std::mutex> lock(table->mutex);
    const auto align = static_cast<int64_t>(reinterpret_cast<uintptr_t>(grad_out.data_ptr()) % 16);
    Entry* entry = table->find(need, grad_out.strides(), align, compute, limit);
    if (entry == nullptr) return NO_KIND;
    std::array<int64_t, 7> key = {reinterpret_cast<int64_t>(stream), address(grad_out),
                                  address(x), address(w), 0, 0, 0};
    for (size_t i = 0; i < 3; ++i) {
      if (need[i] && !entry->grads[i]) return NO_KIND;
    }
    for (size_t i = 0; i < 3; ++i) {
      if (!need[i]) continue;
      const Layout& l = *entry->grads[i];
      out[i] = at::empty_strided(l.sizes, l.strides, x.options().dtype(l.dtype));
      key[4 + i] = address(out[i]);
    }
    const Outcome outcome = launch_kept(entry->graphs, key);
    if (outcome != LAUNCHED) {
      // Freed before the Python backward allocates its own: held, they would push its
      // gradients to other blocks, and the graph it keeps there would never match ours.
      for (at::Tensor& g : out) g.reset();
    }
    return outcome;
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

// A steady call's output by the forward graph kept for its addresses (with its node where
// ``grad``: attach's arguments), or None where none is kept for them: the caller's Python
// then runs the call and tells the table of the graph it launched (_Steady.with_node).
// ``x``: the input as the module got it (``unbatched``: without the batch dim).
std::optional<at::Tensor> forward(at::Tensor x, const at::Tensor& w,
                                  const std::optional<at::Tensor>& bias, py::object steady,
                                  std::shared_ptr<Table> table, int64_t stream, int64_t compute,
                                  int64_t limit, bool unbatched, bool grad) {
  void* s = reinterpret_cast<void*>(static_cast<uintptr_t>(stream));
  Registry& r = registry();
  if (!x.is_cuda() || !can_launch(s)) {
    ++r.forwards[1];
    return std::nullopt;
  }
  const c10::DeviceGuard device(x.device());   // (the output's allocation, the launch)
  if (unbatched) x = x.unsqueeze(0);
  at::Tensor out;
  {
    std::lock_guard<std::mutex> lock(table->mutex);
    if (!table->output) {
      ++r.forwards[1];
      return std::nullopt;
    }
    const Layout& l = *table->output;
    out = at::empty_strided(l.sizes, l.strides, x.options().dtype(l.dtype));
    const std::array<int64_t, 5> key = {
        stream, address(x), address(w), bias && bias->defined() ? address(*bias) : 0,
        address(out)};
    if (launch_kept(table->forwards, key) != LAUNCHED) {
      ++r.forwards[1];
      return std::nullopt;
    }
  }
  ++r.forwards[0];
  if (grad) attach(out, x, w, bias, std::move(steady), std::move(table), stream, compute, limit);
  return unbatched ? out.squeeze(0) : out;
}

// A convolution's argument as autocast hands it to torch's own convolutions: through
// autocast's cache, which keeps a leaf parameter's cast until the outermost autocast region
// ends. A layer called several times in one region (a sampling loop, convert's timing of a
// model) then casts its weight once, as torch's layers do, and finds it at the same address
// each call (its kept graphs read it there). Tensors autocast leaves alone (float64, not
// floating point, on another device) come back as they are.
at::Tensor autocast_cast(const at::Tensor& t, at::ScalarType dtype, const at::Device& device) {
  return at::autocast::cached_cast(dtype, t, device.type());
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Table, std::shared_ptr<Table>>(m, "Table")
      .def(py::init([](std::string name) { return std::make_shared<Table>(std::move(name)); }),
           py::arg("name") = "gemmconv::ConvTransposeBackward")
      .def("add", &Table::add, py::call_guard<py::gil_scoped_release>())
      .def("add_forward", &Table::add_forward, py::call_guard<py::gil_scoped_release>())
      .def("forward_graphs", &Table::forward_graphs)
      .def("__len__", &Table::size);
  m.def("autocast_cast", &autocast_cast);
  m.def("attach", &attach);
  m.def("forward", &forward);
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
  m.def("forwards", [] {   // {"launched": forwards here, "in Python": handed to Python}
    py::dict counts;
    counts["launched"] = registry().forwards[0].load();
    counts["in Python"] = registry().forwards[1].load();
    return counts;
  });
  m.def("reset_outcomes", [] {   // (and the forwards' counts)
    for (auto& count : registry().outcomes) count = 0;
    for (auto& count : registry().forwards) count = 0;
  });
  m.def("launched", [] {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::vector<int64_t> serials(r.launched.begin(), r.launched.end());
    r.launched.clear();
    return serials;
  });
}
