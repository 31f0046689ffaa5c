// curatedev: a small out-of-tree PyTorch backend used as a test target.
//
// It is a real PrivateUse1 device (renamed "curatedev" from Python) whose
// memory is host memory. A handful of kernels are registered directly
// (allocation, copies, views, item()); every other operator reaches one boxed
// fallback that runs it on CPU, but only when a run-time allowlist names it.
// Operators outside the allowlist fail with the dispatcher's own "Could not
// run ..." message, so the backend behaves like a device that lacks kernels.
#include <torch/extension.h>

#include <ATen/EmptyTensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

namespace curatedev {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;

// ---------------------------------------------------------------- allocator
// Host memory tagged with the PrivateUse1 device, so tensors are real
// PrivateUse1 tensors while kernels can still read them through CPU aliases.
void host_delete(void* ptr) { c10::free_cpu(ptr); }

struct HostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    return {data, data, &host_delete, c10::Device(kDevice, 0)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &host_delete; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    default_copy_data(dst, src, n);
  }
};

HostAllocator g_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

// ------------------------------------------------------------- device guard
// One device, one default stream: enough for DeviceGuard and autograd.
struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check(d);
    return c10::Device(kDevice, 0);
  }
  c10::Device getDevice() const override { return c10::Device(kDevice, 0); }
  void setDevice(c10::Device d) const override { check(d); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void synchronizeDevice(const c10::DeviceIndex) const override {}

 private:
  static void check(c10::Device d) {
    TORCH_CHECK(d.index() <= 0, "curatedev has one device (index 0), got ", d);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

// -------------------------------------------------------------------- hooks
// Autograd's engine asks the backend's hooks whether a device context exists
// before running backward on it; one always-ready host device.
struct Hooks final : at::PrivateUse1HooksInterface {
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
};

Hooks g_hooks;

// ---------------------------------------------------------- run-time policy
// Filled from Python (env vars at import, setters at run time). Names are
// canonical "ns::name.overload"; bases are "ns::name".
struct Policy {
  std::shared_mutex mu;
  bool all_ops = false;
  bool all_dtypes = false;
  std::unordered_set<std::string> ops, op_bases;        // user allowlist
  std::unordered_set<std::string> always, always_bases;  // input construction
  std::unordered_set<std::string> lowp, lowp_bases;      // bf16 round-trip
  std::set<c10::ScalarType> dtypes;
};

Policy g_policy;

// Depth of "harness" scopes on this thread (printing a tensor): diagnostics
// must never fail on a missing op and hide the error they are reporting.
thread_local int g_harness_depth = 0;

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// "ns::add_" also matches base entry "ns::add": in-place forms share a base.
bool matches(const std::string& name, const std::string& full,
             const std::unordered_set<std::string>& names,
             const std::unordered_set<std::string>& bases) {
  if (names.count(full) || bases.count(name)) return true;
  if (!name.empty() && name.back() == '_') {
    return bases.count(name.substr(0, name.size() - 1)) > 0;
  }
  return false;
}

// --------------------------------------------------------- error messages
// Rebuild the dispatcher's "missing kernel" report (OperatorEntry::reportError)
// as it would read if this backend registered no fallback: the computed
// table minus our own PrivateUse1 fallback row.
[[noreturn]] void report_missing_kernel(const c10::OperatorHandle& op) {
  std::istringstream table(op.dumpComputedTable());
  std::ostringstream kept, keys;
  std::string line;
  bool first = true;
  while (std::getline(table, line)) {
    if (line.rfind("PrivateUse1: ", 0) == 0 &&
        line.find("[backend fallback]") != std::string::npos) {
      continue;
    }
    kept << line << "\n";
    std::string key = line.substr(0, line.find(':'));
    if (key == "Undefined") continue;  // listAllDispatchKeys skips it too
    keys << (first ? "" : ", ") << key;
    first = false;
  }
  const std::string name = c10::toString(op.operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "Could not run '", name, "' with arguments from the '",
      c10::get_privateuse1_backend(), "' backend. This could be because ",
      "the operator doesn't exist for this backend, or was omitted during ",
      "the selective/custom build process (if using custom build). If you are a ",
      "Facebook employee using PyTorch on mobile, please visit ",
      "https://fburl.com/ptmfixes for possible resolutions. '", name,
      "' is only available for these backends: [", keys.str(), "].\n\n",
      kept.str());
}

std::string dtype_list() {
  std::ostringstream out;
  bool first = true;
  for (auto t : g_policy.dtypes) {
    out << (first ? "" : ", ") << c10::toString(t);
    first = false;
  }
  return out.str();
}

// Worded like ATen's AT_DISPATCH error ("add_stub" not implemented for
// 'Half'), which also raises NotImplementedError, so one classifier rule
// covers real CPU/CUDA dtype gaps and this backend's.
void check_dtype(const std::string& full, const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kDevice) return;
  if (g_policy.dtypes.count(t.scalar_type())) return;
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "\"", full, "\" not implemented for '",
      c10::toString(t.scalar_type()), "' on ", c10::get_privateuse1_backend(),
      " (allowed dtypes: ", dtype_list(), ")");
}

void check_dtypes(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                  const std::string& full) {
  const auto& args = op.schema().arguments();
  const size_t base = stack.size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_out()) continue;  // outputs follow the inputs' dtype
    const c10::IValue& v = stack[base + i];
    if (v.isTensor()) {
      check_dtype(full, v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) check_dtype(full, t);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) check_dtype(full, e.toTensor());
      }
    }
  }
}

// ------------------------------------------------------------------ kernels
// A CPU tensor viewing the same host bytes as a curatedev tensor.
at::Tensor host_alias(const at::Tensor& t) {
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(),
                       t.options().device(at::kCPU));
}

// Reduced-precision mode: results pass through bfloat16, as on hardware
// that computes some ops at lower precision than the tensor's dtype.
void round_through_bf16(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0 || t.device().type() != kDevice) return;
  auto st = t.scalar_type();
  if (st != at::kFloat && st != at::kDouble && st != at::kHalf) return;
  at::Tensor h = host_alias(t);
  h.copy_(h.to(at::kBFloat16));
}

at::Tensor empty_memory_format(at::IntArrayRef size,
                               std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout,
                               std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  const c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(
      size, &g_allocator, ks, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout,
                         std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  const c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, &g_allocator, ks,
                                           c10::dtype_or_default(dtype));
}

// Both directions and device-to-device: all memory is host memory. The
// source's lazy conj/neg bits are applied here (see the Conjugate/Negative
// fallthroughs below), as CPU copy_ does.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst,
                     bool non_blocking) {
  if (self.numel() == 0) return dst;
  at::Tensor src = self;
  if (self.device().type() == kDevice) {
    src = host_alias(self);
    if (self.is_conj()) src = src.conj();
    if (self.is_neg()) src = src._neg_view();
  }
  at::Tensor out = dst.device().type() == kDevice ? host_alias(dst) : dst;
  out.copy_(src);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::_local_scalar_dense(host_alias(self));
}

// --------------------------------------------------------------- fallback
void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& opname = op.operator_name();
  const std::string full = full_name(opname);
  bool lowp = false;
  if (g_harness_depth == 0) {
    std::shared_lock<std::shared_mutex> lock(g_policy.mu);
    const bool construction =
        matches(opname.name, full, g_policy.always, g_policy.always_bases);
    if (!construction) {
      if (!g_policy.all_ops &&
          !matches(opname.name, full, g_policy.ops, g_policy.op_bases)) {
        lock.unlock();
        report_missing_kernel(op);
      }
      if (!g_policy.all_dtypes) check_dtypes(op, *stack, full);
      lowp = matches(opname.name, full, g_policy.lowp, g_policy.lowp_bases);
    }
  }
  // error_on_views: a view op run on CPU would return a copy, not an alias,
  // and silently break in-place writes through it; raise instead.
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);
  if (!lowp) return;
  const size_t n = op.schema().returns().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    const c10::IValue& v = (*stack)[i];
    if (v.isTensor()) round_through_bf16(v.toTensor());
  }
}

// ------------------------------------------------------- Python-side setters
void set_ops(bool all, const std::vector<std::string>& names,
             const std::vector<std::string>& bases) {
  std::unique_lock<std::shared_mutex> lock(g_policy.mu);
  g_policy.all_ops = all;
  g_policy.ops = {names.begin(), names.end()};
  g_policy.op_bases = {bases.begin(), bases.end()};
}

void set_always(const std::vector<std::string>& names,
                const std::vector<std::string>& bases) {
  std::unique_lock<std::shared_mutex> lock(g_policy.mu);
  g_policy.always = {names.begin(), names.end()};
  g_policy.always_bases = {bases.begin(), bases.end()};
}

void set_low_precision(const std::vector<std::string>& names,
                       const std::vector<std::string>& bases) {
  std::unique_lock<std::shared_mutex> lock(g_policy.mu);
  g_policy.lowp = {names.begin(), names.end()};
  g_policy.lowp_bases = {bases.begin(), bases.end()};
}

void set_dtypes(bool all, const std::vector<at::ScalarType>& dtypes) {
  std::unique_lock<std::shared_mutex> lock(g_policy.mu);
  g_policy.all_dtypes = all;
  g_policy.dtypes = {dtypes.begin(), dtypes.end()};
}

void register_hooks() {
  static std::once_flag once;
  std::call_once(once, [] { at::RegisterPrivateUse1HooksInterface(&g_hooks); });
}

void enter_harness() { ++g_harness_depth; }
void exit_harness() { --g_harness_depth; }

}  // namespace curatedev

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &curatedev::empty_memory_format);
  m.impl("empty_strided", &curatedev::empty_strided);
  m.impl("_copy_from", &curatedev::copy_from);
  m.impl("_copy_from_and_resize", &curatedev::copy_from_and_resize);
  m.impl("_local_scalar_dense", &curatedev::local_scalar_dense);
  // ATen's own metadata-only implementations work on any strided backend.
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("resize_", &at::native::resize_);
  m.impl("view_as_real", &at::native::view_as_real);
  m.impl("view_as_complex", &at::native::view_as_complex);
}

// Without these, the Conjugate/Negative fallbacks materialise a lazily
// conjugated source by cloning it on the device, which copies through
// _copy_from again: endless recursion. copy_from applies the bits itself.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&curatedev::fallback>());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "curatedev: PrivateUse1 test backend with run-time allowlists";
  m.def("set_ops", &curatedev::set_ops);
  m.def("set_always", &curatedev::set_always);
  m.def("set_low_precision", &curatedev::set_low_precision);
  m.def("set_dtypes", &curatedev::set_dtypes);
  m.def("register_hooks", &curatedev::register_hooks);
  m.def("enter_harness", &curatedev::enter_harness);
  m.def("exit_harness", &curatedev::exit_harness);
}
