// strata._C: the backend class torch.distributed instantiates for "strata", and what the
// DDP comm hook needs beyond c10d (compressed allreduce, residual snapshots).
#include <torch/csrc/utils/pybind.h>

#include "backend.hpp"

namespace py = pybind11;
using strata::torch_backend::StrataBackend;

namespace {
std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}
}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "strata's torch.distributed backend";
  py::module_::import("torch.distributed");  // registers c10d's Backend, Store and Work types
  m.def("_drain_all", &strata::torch_backend::CompletionThread::drain_all, py::call_guard<py::gil_scoped_release>());
  py::class_<StrataBackend, c10d::Backend, c10::intrusive_ptr<StrataBackend>>(m, "StrataBackend")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s,
                       bool enable_reconfigure) {
             return c10::make_intrusive<StrataBackend>(store, rank, size, millis(timeout_s), enable_reconfigure);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
           py::arg("enable_reconfigure") = false, py::call_guard<py::gil_scoped_release>())
      .def("allreduce_compressed", &StrataBackend::allreduce_compressed, py::arg("tensor"), py::arg("spec"),
           py::arg("key"), py::call_guard<py::gil_scoped_release>())
      .def("save_residuals",
           [](StrataBackend& b) {
             std::vector<std::byte> v;
             {
               py::gil_scoped_release nogil;
               v = b.save_residuals();
             }
             return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
           })
      .def("restore_residuals",
           [](StrataBackend& b, const py::bytes& saved) {
             const std::string s = saved;
             py::gil_scoped_release nogil;
             try {
               b.restore_residuals(std::as_bytes(std::span(s.data(), s.size())));
             } catch (const strata::InvalidArgument& e) {
               TORCH_CHECK_VALUE(false, "strata: ", e.what());
             }
           })
      .def("reset_residuals", [](StrataBackend& b, const std::string& key) { b.reset_residuals(key); },
           py::arg("key") = "", py::call_guard<py::gil_scoped_release>())
      .def("locality",
           [](StrataBackend& b, int rank) {
             const auto& l = b.communicator().locality(rank);
             return py::dict(py::arg("region") = l.region, py::arg("cluster") = l.cluster, py::arg("rack") = l.rack,
                             py::arg("host") = l.host, py::arg("local_rank") = l.local_rank);
           })
      .def("lost_ranks", [](StrataBackend& b) { return b.communicator().lost_ranks(); })
      .def("_shrink", &StrataBackend::shrink, py::arg("lost"), py::arg("arbiter") = nullptr,
           py::call_guard<py::gil_scoped_release>())
      // strata.torch.shrink on torch with the reconfigure API (reconfigure.hpp).
      .def(
          "_shrink_in_place",
          [](StrataBackend& b, const std::vector<int>& lost, double timeout_s,
             const c10::intrusive_ptr<c10d::Store>& arbiter) { b.shrink_in_place(lost, millis(timeout_s), arbiter); },
          py::arg("lost"), py::arg("timeout_s"), py::arg("arbiter") = nullptr, py::call_guard<py::gil_scoped_release>())
      .def("share_state", &StrataBackend::share_state, py::arg("tensors"), py::arg("root") = 0,
           py::arg("residuals") = false, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("transport", [](StrataBackend& b) { return strata::to_string(b.communicator().transport()); })
      .def("traffic", [](StrataBackend& b) {
        const auto t = b.communicator().traffic();
        return py::dict(py::arg("wan_bytes_sent") = t.wan_bytes_sent, py::arg("wan_wire_bytes_sent") = t.wan_wire_bytes_sent,
                        py::arg("wan_bytes_received") = t.wan_bytes_received, py::arg("wan_bytes_resent") = t.wan_bytes_resent,
                        py::arg("device_to_host_bytes") = t.device_to_host_bytes,
                        py::arg("host_to_device_bytes") = t.host_to_device_bytes);
      });
}
