// atenlens: a CUDA DeviceGuardImpl that does nothing, for CPU-only builds of libtorch.
//
// A CPU-only libtorch has no CUDA entry in c10's device guard registry, so any C++ path that
// opens a CUDA device guard or asks for the current CUDA stream (Tensor.to/.cuda/.copy_ bindings,
// the autograd engine's InputMetadata) aborts, even for fake tensors that never touch memory.
// Registering this implementation at load time makes those paths work on fake 'cuda' tensors.
// It registers only when the slot is empty: a CUDA build keeps its real implementation.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>

namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::DeviceType;
using c10::Stream;
using c10::StreamId;

constexpr DeviceIndex kMaxDevices = 64;   // accepts any index a program may name; count is separate
constexpr DeviceIndex kDeviceCount = 1;   // what torch reports as the number of simulated GPUs

class NoOpCudaGuard final : public c10::impl::DeviceGuardImplInterface {
 public:
  DeviceType type() const override { return DeviceType::CUDA; }

  Device exchangeDevice(Device device) const override {
    Device previous = getDevice();
    setDevice(device);
    return previous;
  }
  Device getDevice() const override { return Device(DeviceType::CUDA, current_); }
  void setDevice(Device device) const override { uncheckedSetDevice(device); }
  void uncheckedSetDevice(Device device) const noexcept override {
    if (device.index() >= 0 && device.index() < kMaxDevices) current_ = device.index();
  }

  // Streams are ids only; each device remembers which one is current on this thread.
  Stream getStream(Device device) const noexcept override {
    DeviceIndex i = clamp(device.index());
    return Stream(Stream::UNSAFE, Device(DeviceType::CUDA, i), current_stream_[i]);
  }
  Stream getDefaultStream(Device device) const override {
    return Stream(Stream::DEFAULT, Device(DeviceType::CUDA, clamp(device.index())));
  }
  Stream getNewStream(Device device, int /*priority*/) const override {
    return getDefaultStream(device);
  }
  Stream getStreamFromGlobalPool(Device device, bool /*high_priority*/) const override {
    return getDefaultStream(device);
  }
  Stream exchangeStream(Stream stream) const noexcept override {
    DeviceIndex i = clamp(stream.device_index());
    StreamId previous = current_stream_[i];
    current_stream_[i] = stream.id();
    return Stream(Stream::UNSAFE, Device(DeviceType::CUDA, i), previous);
  }

  DeviceIndex deviceCount() const noexcept override { return kDeviceCount; }

  // Events and synchronization complete at once: there is no device work to wait for.
  void record(void** /*event*/, const Stream& /*stream*/, const DeviceIndex /*device_index*/,
              const c10::EventFlag /*flag*/) const override {}
  void block(void* /*event*/, const Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* /*event*/, const DeviceIndex /*device_index*/) const noexcept override {}
  bool queryStream(const Stream& /*stream*/) const override { return true; }
  void synchronizeStream(const Stream& /*stream*/) const override {}
  void synchronizeEvent(void* /*event*/) const override {}
  void synchronizeDevice(const DeviceIndex /*device_index*/) const override {}
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const Stream& /*stream*/) const override {}
  double elapsedTime(void* /*start*/, void* /*end*/, const DeviceIndex /*device_index*/) const override {
    return 0.0;
  }

 private:
  static DeviceIndex clamp(DeviceIndex i) { return (i < 0 || i >= kMaxDevices) ? current_ : i; }
  static thread_local DeviceIndex current_;
  static thread_local std::array<StreamId, kMaxDevices> current_stream_;
};

thread_local DeviceIndex NoOpCudaGuard::current_ = 0;
thread_local std::array<StreamId, kMaxDevices> NoOpCudaGuard::current_stream_{};

struct RegisterAtLoad {
  RegisterAtLoad() {
    auto& slot = c10::impl::device_guard_impl_registry[static_cast<size_t>(DeviceType::CUDA)];
    if (slot.load() == nullptr) slot.store(new NoOpCudaGuard());
  }
} register_at_load;

}  // namespace

// Lets the loader confirm that a CUDA guard is registered (ours or a real one).
extern "C" int atenlens_cuda_guard_registered() {
  return c10::impl::device_guard_impl_registry[static_cast<size_t>(c10::DeviceType::CUDA)].load() != nullptr;
}
