// handles.h: the live objects behind the C ABI's handles, one table per kind (sessions.cpp holds the MNIST sessions'
// and the regression trainers'). A handle is a 64-bit token, never an address: (generation << 32) | (slot << 1) | 1.
// Every new object takes a new generation from one counter shared by every table, so the handle of a destroyed
// object is refused even when a newer one lives in its slot (a freed address, by contrast, is soon handed out again),
// and a handle of one table never names a live object of another. A call holds its object by reference count, never
// the lock: calls on different objects never wait for one another, and removal sees an object in use instead of
// freeing it under a running call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace phasebench {

// The generation of the next object of any table (sessions.cpp); wraps after 2^32 objects, far beyond any run.
uint32_t next_handle_generation();

template <class T>
class HandleTable {
 public:
  // `noun` names the handles in errors: "null session handle", "unknown or destroyed session handle".
  explicit HandleTable(std::string noun) : noun_(std::move(noun)) {}

  uint64_t add(std::shared_ptr<T> object) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto slot = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.object; });
    if (slot == slots_.end()) {
      if (slots_.size() >= kSlotLimit) throw std::length_error("too many live " + noun_ + "s");
      slot = slots_.emplace(slots_.end());
    }
    slot->object = std::move(object);
    slot->generation = next_handle_generation();
    return (uint64_t(slot->generation) << 32) | (uint64_t(slot - slots_.begin()) << 1) | 1;
  }

  // Taken under the lock, which is released before the call does its work.
  std::shared_ptr<T> get(uint64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    return slot_of(handle).object;
  }

  void remove(uint64_t handle) {
    std::shared_ptr<T> removed;  // freed last, after the lock is released
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = slot_of(handle);
    // Every other reference is a call's, taken under this lock: none can start while it is held.
    if (slot.object.use_count() > 1)
      throw std::runtime_error(noun_ + " busy: another call is using it; destroy it once that call has returned");
    removed = std::move(slot.object);
  }

 private:
  struct Slot {
    std::shared_ptr<T> object;  // shared with the calls using it (get)
    uint32_t generation = 0;
  };
  static constexpr uint64_t kSlotLimit = uint64_t(1) << 31;

  // The slot a handle names, or throws; call with mutex_ held.
  Slot& slot_of(uint64_t token) {
    if (!token) throw std::invalid_argument("null " + noun_ + " handle");
    const uint64_t slot = (token & 0xFFFFFFFFu) >> 1;
    if (!(token & 1) || slot >= slots_.size() || !slots_[slot].object || slots_[slot].generation != token >> 32)
      throw std::invalid_argument("unknown or destroyed " + noun_ + " handle");
    return slots_[slot];
  }

  const std::string noun_;
  std::mutex mutex_;
  std::vector<Slot> slots_;  // guarded by mutex_
};

}  // namespace phasebench
