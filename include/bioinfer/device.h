// Devices: where a tensor's buffer lives and where a backend runs its kernels. The host (CPU) is
// built in; a backend for another device registers that device's memory functions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace bioinfer {

enum class DeviceType : uint8_t { Cpu, Cuda };

struct Device {
    DeviceType type = DeviceType::Cpu;
    int index = 0;
    bool is_host() const { return type == DeviceType::Cpu; }
    bool operator==(const Device&) const = default;
    std::string str() const;  // "cpu", "cuda:0"
    // "cpu", "cuda", "cuda:1"; anything else is an error naming `where`.
    static Device parse(const std::string& s, const std::string& where);
};

inline constexpr Device kHost{};

// The memory functions of a device other than the host, given by the backend that drives it.
// copy moves bytes between this device and the host or within this device.
struct DeviceMemory {
    void* (*alloc)(Device d, size_t bytes) = nullptr;
    void (*free)(Device d, void* p) = nullptr;
    void (*copy)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) = nullptr;
    void (*zero)(Device d, void* p, size_t bytes) = nullptr;
};
// Registers the memory functions of a device type (once; again is an error).
void register_device_memory(DeviceType t, const DeviceMemory& m);
// The memory functions of a device type; an error naming the device when none is registered.
const DeviceMemory& device_memory(Device d);

}  // namespace bioinfer
