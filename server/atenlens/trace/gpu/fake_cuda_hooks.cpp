// atenlens: CUDA hooks that say "CUDA is here" in a CPU-only build of libtorch.
//
// The autograd engine asks at::detail::getCUDAHooks() (via at::accelerator) for the current
// stream of the device a gradient lives on; in a CPU-only build the default hooks say there is no
// CUDA and backward through fake 'cuda' tensors aborts. libtorch creates its hooks singleton once,
// lazily, from this registry, so the library must be loaded before `import torch` for these hooks
// to be the ones it picks. Nothing here touches a GPU: every query answers for one idle device.
#include <ATen/detail/CUDAHooksInterface.h>

namespace {

class SimulatedCudaHooks final : public at::CUDAHooksInterface {
 public:
  explicit SimulatedCudaHooks(at::CUDAHooksArgs /*args*/) {}
  void init() const override {}
  bool hasCUDA() const override { return true; }
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override { return false; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex current_device() const override { return 0; }
  int getNumGPUs() const override { return 1; }
  void deviceSynchronize(c10::DeviceIndex /*device_index*/) const override {}
};

}  // namespace

namespace at {
C10_REGISTER_TYPED_CLASS(CUDAHooksRegistry, "CUDAHooks", SimulatedCudaHooks)
}

// Lets the loader confirm that libtorch picked these hooks (false if it created its own first).
extern "C" int atenlens_cuda_hooks_active() { return at::detail::getCUDAHooks().hasCUDA(); }
