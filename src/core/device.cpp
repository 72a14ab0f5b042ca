// Device names and the registry of device memory functions.
#include "bioinfer/device.h"

#include <array>
#include <mutex>

#include "bioinfer/error.h"

namespace bioinfer {
namespace {

constexpr const char* kTypeNames[] = {"cpu", "cuda"};

struct MemoryRegistry {
    std::mutex mu;
    std::array<DeviceMemory, 2> memory;
    std::array<bool, 2> registered{};
};

MemoryRegistry& registry() {
    static MemoryRegistry* r = new MemoryRegistry();  // leaked: tensors may outlive statics
    return *r;
}

}  // namespace

std::string Device::str() const {
    const std::string t = kTypeNames[size_t(type)];
    return is_host() ? t : t + ":" + std::to_string(index);
}

Device Device::parse(const std::string& s, const std::string& where) {
    const size_t colon = s.find(':');
    const std::string t = s.substr(0, colon);
    Device d;
    if (t == "cpu") d.type = DeviceType::Cpu;
    else if (t == "cuda") d.type = DeviceType::Cuda;
    else fail(where, cat("unknown device '", s, "': expected cpu or cuda[:N]"));
    if (colon != std::string::npos) {
        const std::string n = s.substr(colon + 1);
        BI_CHECK(!n.empty() && n.size() < 4 && n.find_first_not_of("0123456789") == std::string::npos,
                 where, "device '", s, "': expected a device number after ':'");
        d.index = std::stoi(n);
    }
    BI_CHECK(!d.is_host() || d.index == 0, where, "device '", s, "': the host has no number");
    return d;
}

void register_device_memory(DeviceType t, const DeviceMemory& m) {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    BI_CHECK(t != DeviceType::Cpu, "device", "the host's memory is built in");
    BI_CHECK(!r.registered[size_t(t)], "device", kTypeNames[size_t(t)],
             " memory is registered already");
    BI_CHECK(m.alloc && m.free && m.copy && m.zero, "device", "incomplete memory functions for ",
             kTypeNames[size_t(t)]);
    r.memory[size_t(t)] = m;
    r.registered[size_t(t)] = true;
}

const DeviceMemory& device_memory(Device d) {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    BI_CHECK(r.registered[size_t(d.type)], "device", "no backend drives ", d.str(),
             " in this build");
    return r.memory[size_t(d.type)];
}

}  // namespace bioinfer
