// Bindings for core: runtime info, gemm, deterministic random fills, parameter buffers, optimizers, schedules and
// parameter checkpoints.
#include <Kokkos_Core.hpp>

#include "attnphys/core/parallel.hpp"
#include "attnphys/core/gemm.hpp"
#include "attnphys/core/hdf5_io.hpp"
#include "attnphys/core/optim.hpp"
#include "attnphys/core/random.hpp"
#include "attnphys/core/runtime.hpp"
#include "bindings.hpp"

namespace attnphys::python {

std::atomic<long>& live_objects() {
  static std::atomic<long> n{0};
  return n;
}

namespace {

template <class T>
Array<T> gemm_py(Array<T> a, Array<T> b, bool trans_a, bool trans_b) {
  require(a.ndim() == 2 && b.ndim() == 2, "gemm expects two 2-d arrays, got shapes ", shape_str(a), " and ",
          shape_str(b));
  const long m = trans_a ? a.shape(1) : a.shape(0), k = trans_a ? a.shape(0) : a.shape(1);
  const long kb = trans_b ? b.shape(1) : b.shape(0), n = trans_b ? b.shape(0) : b.shape(1);
  require(k == kb, "gemm: inner dimensions differ: op(a) is ", m, "x", k, ", op(b) is ", kb, "x", n);
  View2<T> A("a", a.shape(0), a.shape(1)), B("b", b.shape(0), b.shape(1)), C("c", m, n);
  Kokkos::deep_copy(A, HostView2<const T>(a.data(), a.shape(0), a.shape(1)));
  Kokkos::deep_copy(B, HostView2<const T>(b.data(), b.shape(0), b.shape(1)));
  {
    py::gil_scoped_release release;
    gemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', T(1), A, B, T(0), C);
  }
  Array<T> out({m, n});
  Kokkos::deep_copy(HostView2<T>(out.mutable_data(), m, n), C);
  return out;
}

template <class T>
struct PyParameterBuffer {
  ParameterBuffer<T> buf;
  LiveToken token;
};

template <class T>
void bind_buffer(py::module_& m, const char* name) {
  using PB = PyParameterBuffer<T>;
  py::class_<PB>(m, name, "Flat parameter buffer: parameters, gradients and optimizer moments by named block")
      .def(py::init<>())
      .def("add", [](PB& p, const std::string& n, std::vector<long> shape, bool decay) {
        return p.buf.add(n, shape, decay);
      }, py::arg("name"), py::arg("shape"), py::arg("decay") = true)
      .def("allocate", [](PB& p) { p.buf.allocate(); })
      .def_property_readonly("size", [](const PB& p) { return p.buf.size(); })
      .def_property_readonly("names", [](const PB& p) {
        std::vector<std::string> n;
        for (const auto& b : p.buf.blocks()) n.push_back(b.name);
        return n;
      })
      .def("get", [](const PB& p, const std::string& slot) {
        static const std::map<std::string, Slot> slots{{"params", Slot::Params}, {"grads", Slot::Grads},
                                                       {"moment1", Slot::Moment1}, {"moment2", Slot::Moment2}};
        auto it = slots.find(slot);
        require(it != slots.end(), "unknown slot '", slot, "': use params, grads, moment1 or moment2");
        auto v = p.buf.get_host(it->second);
        Array<T> out(long(v.size()));
        std::copy(v.begin(), v.end(), out.mutable_data());
        return out;
      }, py::arg("slot") = "params")
      .def("set", [](PB& p, Array<T> values, const std::string& slot) {
        require(values.ndim() == 1 && values.shape(0) == p.buf.size(), "expected a 1-d array of ", p.buf.size(),
                " values, got shape ", shape_str(values));
        std::vector<T> v(values.data(), values.data() + values.shape(0));
        p.buf.set_host(v, slot == "grads" ? Slot::Grads : slot == "params" ? Slot::Params
                                                                            : (fail("slot must be params or grads, got '", slot, "'"), Slot::Params));
      }, py::arg("values"), py::arg("slot") = "params")
      .def("save", [](const PB& p, const std::string& path) {
        h5::Writer w(path, "parameters", 1);
        h5::write_parameters(w, "/model", p.buf, true);
        w.commit();
      }, py::arg("path"), "write parameters and optimizer moments to HDF5 (temporary file, then rename)")
      .def("load", [](PB& p, const std::string& path) {
        h5::Reader r(path, "parameters", 1);
        h5::read_parameters(r, "/model", p.buf, true);
      }, py::arg("path"));
}

template <class T>
void bind_optimizer_step(py::class_<Optimizer>& cls) {
  cls.def("step", [](Optimizer& o, PyParameterBuffer<T>& p, double lr) { o.step(p.buf, lr); }, py::arg("buffer"),
          py::arg("lr"));
}

}  // namespace

void bind_core(py::module_& m) {
  m.def("info", []() {
    RuntimeInfo i = runtime_info();
    py::dict d;
    d["version"] = i.version;
    d["git_revision"] = i.git_revision;
    d["kokkos_version"] = i.kokkos_version;
    d["default_execution_space"] = i.default_execution_space;
    d["execution_spaces"] = i.execution_spaces;
    d["concurrency"] = i.concurrency;
    d["host_threads"] = i.host_threads;
    d["blas"] = i.blas;
    d["blas_vendor"] = i.blas_vendor;
    d["blas_version"] = i.blas_version;
    d["blas_core"] = i.blas_core;
    d["blas_threads"] = i.blas_threads;
    d["blas_thread_timeout"] = i.blas_thread_timeout;
    d["amx_bf16"] = i.amx_bf16;
    d["amx_reason"] = i.amx_reason;
    d["bf16_attention"] = i.bf16_attention;
    d["openblas_coretype"] = i.blas_coretype_env;
    d["cpu_model"] = i.cpu_model;
    d["cpu_simd"] = i.cpu_simd;
    d["blas_warning"] = i.blas_warning;
    d["mpi"] = py::dict(py::arg("enabled") = i.mpi_enabled, py::arg("ranks") = i.mpi_ranks,
                        py::arg("rank") = i.mpi_rank);
    return d;
  }, "Kokkos version, execution spaces, concurrency, BLAS and MPI of this build");
  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "threads for attnphys' host kernels (under Kokkos Serial) and for OpenBLAS, like torch.set_num_threads; "
        "results do not depend on it");
  m.def("get_num_threads", &get_num_threads,
        "what set_num_threads sets: the threads of attnphys' host kernels under Kokkos Serial; with another backend "
        "(whose own threads run the kernels) OpenBLAS' threads, so that saving and restoring it keeps the state");
  m.def("gemm", &gemm_py<double>, py::arg("a"), py::arg("b"), py::arg("trans_a") = false, py::arg("trans_b") = false);
  m.def("gemm", &gemm_py<float>, py::arg("a"), py::arg("b"), py::arg("trans_a") = false, py::arg("trans_b") = false);
  m.def("random_normal", [](long n, std::uint64_t seed, std::uint64_t stream) {
    require(n >= 0, "random_normal: n must be >= 0, got ", n);
    View1<double> v("v", n);
    fill_normal(v, seed, stream);
    Array<double> out(n);
    Kokkos::deep_copy(HostView1<double>(out.mutable_data(), n), v);
    return out;
  }, py::arg("n"), py::arg("seed"), py::arg("stream") = 0);
  m.def("random_uniform", [](long n, std::uint64_t seed, std::uint64_t stream) {
    require(n >= 0, "random_uniform: n must be >= 0, got ", n);
    View1<double> v("v", n);
    fill_uniform(v, seed, stream);
    Array<double> out(n);
    Kokkos::deep_copy(HostView1<double>(out.mutable_data(), n), v);
    return out;
  }, py::arg("n"), py::arg("seed"), py::arg("stream") = 0);

  bind_buffer<double>(m, "ParameterBuffer");
  bind_buffer<float>(m, "ParameterBufferF32");

  py::class_<Optimizer> opt(m, "Optimizer", "SGD / Adam / AdamW with PyTorch's update rules");
  opt.def(py::init([](const std::string& kind, double lr, double momentum, double beta1, double beta2, double eps,
                      double weight_decay) {
            OptimizerOptions o;
            o.kind = parse_optimizer_kind(kind);
            o.lr = lr;
            o.momentum = momentum;
            o.beta1 = beta1;
            o.beta2 = beta2;
            o.eps = eps;
            o.weight_decay = weight_decay;
            return Optimizer(o);
          }),
          py::arg("kind") = "adamw", py::arg("lr") = 1e-3, py::arg("momentum") = 0.0, py::arg("beta1") = 0.9,
          py::arg("beta2") = 0.999, py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0)
      .def_property_readonly("steps_taken", &Optimizer::steps_taken);
  bind_optimizer_step<double>(opt);
  bind_optimizer_step<float>(opt);

  m.def("clip_grad_norm", [](PyParameterBuffer<double>& p, double max_norm) { return clip_grad_norm(p.buf, max_norm); },
        py::arg("buffer"), py::arg("max_norm"));
  m.def("scheduled_lr", [](const std::string& kind, double base, long step, long warmup, long total, double min_ratio) {
    ScheduleOptions s;
    s.kind = parse_schedule_kind(kind);
    s.warmup_steps = warmup;
    s.total_steps = total;
    s.min_lr_ratio = min_ratio;
    s.validate();
    return scheduled_lr(s, base, step);
  }, py::arg("kind"), py::arg("base_lr"), py::arg("step"), py::arg("warmup_steps") = 0, py::arg("total_steps") = 1000,
        py::arg("min_lr_ratio") = 0.0);

  m.def("_live_objects", []() { return live_objects().load(); });
  m.def("_finalize_if_safe", []() {
    if (live_objects().load() == 0 && is_initialized()) {
      finalize();
      return true;
    }
    return false;
  });
}

}  // namespace attnphys::python
