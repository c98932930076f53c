// sessions.cpp: the live sessions behind the C ABI's handles. A handle is a 64-bit token, never an address:
// (generation << 32) | (slot << 1) | 1. Every pb_create takes a new generation, so the handle of a destroyed
// session is refused even when a newer session lives in its slot (a freed address, by contrast, is soon handed
// out again). A call holds its session by reference count, never the lock: calls on different sessions never
// wait for one another, and pb_destroy sees a session in use instead of freeing it under a running call.
#include "c_api.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace phasebench {

namespace {

struct Slot {
  std::shared_ptr<Session> session;  // shared with the calls using it (session_of)
  uint32_t generation = 0;
};
std::mutex live_mutex;
std::vector<Slot> live_sessions;  // guarded by live_mutex
uint32_t last_generation = 0;

constexpr uint64_t kSlotLimit = uint64_t(1) << 31;

pb_session handle_of(size_t slot, uint32_t generation) {
  return (uint64_t(generation) << 32) | (uint64_t(slot) << 1) | 1;
}

// The slot a handle names, or throws; call with live_mutex held.
Slot& slot_of(pb_session token) {
  if (!token) throw std::invalid_argument("null session handle");
  const uint64_t slot = (token & 0xFFFFFFFFu) >> 1;
  if (!(token & 1) || slot >= live_sessions.size() || !live_sessions[slot].session ||
      live_sessions[slot].generation != token >> 32)
    throw std::invalid_argument("unknown or destroyed session handle");
  return live_sessions[slot];
}

}  // namespace

std::string& last_error() {
  thread_local std::string message;
  return message;
}

pb_session add_session(std::shared_ptr<Session> session) {
  std::lock_guard<std::mutex> lock(live_mutex);
  auto slot = std::find_if(live_sessions.begin(), live_sessions.end(), [](const Slot& s) { return !s.session; });
  if (slot == live_sessions.end()) {
    if (live_sessions.size() >= kSlotLimit) throw std::length_error("too many live sessions");
    slot = live_sessions.emplace(live_sessions.end());
  }
  slot->session = std::move(session);
  slot->generation = ++last_generation;  // wraps after 2^32 sessions, far beyond any run
  return handle_of(static_cast<size_t>(slot - live_sessions.begin()), slot->generation);
}

// Taken under the lock, which is released before the call does its work.
std::shared_ptr<Session> session_of(pb_session handle) {
  std::lock_guard<std::mutex> lock(live_mutex);
  return slot_of(handle).session;
}

void remove_session(pb_session handle) {
  std::shared_ptr<Session> destroyed;  // freed last, after the lock is released
  std::lock_guard<std::mutex> lock(live_mutex);
  auto& slot = slot_of(handle);
  // Every other reference is a call's, taken under this lock: none can start while it is held.
  if (slot.session.use_count() > 1)
    throw std::runtime_error("session busy: another call is using it; destroy it once that call has returned");
  destroyed = std::move(slot.session);
}

}  // namespace phasebench
