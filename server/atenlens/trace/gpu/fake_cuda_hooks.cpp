// atenlens: CUDA hooks that say "CUDA is here" in a CPU-only build of libtorch.
//
// The autograd engine asks at::detail::getCUDAHooks() (via at::accelerator) for the current
// stream of the device a gradient lives on; in a CPU-only build the default hooks say there is no
// CUDA and backward through fake 'cuda' tensors aborts. libtorch creates its hooks singleton once,
// lazily, from this registry, so the library must be loaded before `import torch` for these hooks
// to be the ones it picks. Nothing here touches a GPU: every query answers for one idle device.
#include <ATen/core/Generator.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstring>
#include <mutex>
#include <random>

namespace {

// A CUDA generator's host-side state (seed and Philox offset: what torch.cuda.Generator holds and
// get_state()/set_state() exchange as 16 bytes). No random numbers are drawn from it: fake tensors
// have no values; it exists so `torch.Generator(device="cuda")`, seeding and generator= arguments
// work as on a GPU build.
class SimulatedCudaGenerator final : public c10::GeneratorImpl {
 public:
  explicit SimulatedCudaGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::CUDA, index < 0 ? 0 : index),
                           c10::DispatchKeySet(c10::DispatchKey::CUDA)) {}
  void set_current_seed(uint64_t seed) override { seed_ = seed; offset_ = 0; }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t fresh = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    set_current_seed(fresh);
    return fresh;
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16, "RNG state must be 16 bytes (seed and offset) for a CUDA generator");
    const auto* bytes = static_cast<const uint8_t*>(state.data());
    std::memcpy(&seed_, bytes, 8);
    std::memcpy(&offset_, bytes + 8, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto size = static_cast<int64_t>(16);
    auto storage = c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), size, c10::GetCPUAllocator(), /*resizable=*/true);
    auto state = c10::make_intrusive<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), caffe2::TypeMeta::Make<uint8_t>());
    state->set_sizes_contiguous({size});
    auto* bytes = static_cast<uint8_t*>(state->mutable_data());
    std::memcpy(bytes, &seed_, 8);
    std::memcpy(bytes + 8, &offset_, 8);
    return state;
  }

 private:
  SimulatedCudaGenerator* clone_impl() const override {
    auto* copy = new SimulatedCudaGenerator(device().index());
    copy->seed_ = seed_;
    copy->offset_ = offset_;
    return copy;
  }
  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

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
  const at::Generator& getDefaultGenerator(c10::DeviceIndex /*device_index*/ = -1) const override {
    static std::once_flag once;
    static at::Generator generator;
    std::call_once(once, [] { generator = at::make_generator<SimulatedCudaGenerator>(0); });
    return generator;
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override {
    return at::make_generator<SimulatedCudaGenerator>(device_index);
  }
};

}  // namespace

namespace at {
C10_REGISTER_TYPED_CLASS(CUDAHooksRegistry, "CUDAHooks", SimulatedCudaHooks)
}

// Lets the loader confirm that libtorch picked these hooks (false if it created its own first).
extern "C" int atenlens_cuda_hooks_active() { return at::detail::getCUDAHooks().hasCUDA(); }
