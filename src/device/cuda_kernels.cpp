#include "device/cuda_kernels.hpp"

#include <dlfcn.h>

#include <vector>

#include "device/kernel_abi.h"
#include "device/shared_library.hpp"

namespace strata::device {

namespace {

// The folder libstrata was loaded from, where an install puts libstrata-cuda beside it.
std::string own_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&cuda_kernels), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string self = info.dli_fname;
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash + 1);
}

Opened<CudaKernels> load(const std::string& path) {
  Opened<CudaKernels> l;
  std::vector<std::string> names;
  if (!path.empty()) {
    names.push_back(path);
  } else {
    if (const auto dir = own_folder(); !dir.empty()) names.push_back(dir + "libstrata-cuda.so");
    names.emplace_back("libstrata-cuda.so");
  }
  SharedLibrary lib(names);
  if (!lib.open()) {
    l.why = "libstrata-cuda (the codecs' CUDA kernels, built where nvcc is found) could not be opened (" +
            lib.why() + ")";
    return l;
  }
  int (*abi)() = nullptr;
  if (!lib.take(abi, "strata_cuda_kernels_abi") || !lib.take(l.api.encode_values, "strata_cuda_encode_values") ||
      !lib.take(l.api.decode_values, "strata_cuda_decode_values")) {
    l.why = lib.name() + " lacks an entry point (" + lib.why() + ")";
    return l;
  }
  if (abi() != STRATA_CUDA_KERNELS_ABI) {
    l.why = lib.name() + " is of kernel ABI " + std::to_string(abi()) + ", this libstrata needs " +
            std::to_string(STRATA_CUDA_KERNELS_ABI);
    return l;
  }
  l.ok = true;
  return l;
}

OpenOnce<CudaKernels> opened;

}  // namespace

const CudaKernels* cuda_kernels(const std::string& path) {
  const auto& o = opened.get([&] { return load(path); });
  return o.ok ? &o.api : nullptr;
}

const std::string& why_no_kernels() {
  return opened.get([] { return load(""); }).why;
}

}  // namespace strata::device
