// c_api.h: what the C ABI's definitions share (c_api.cpp, testing.cpp, count.cpp): the object behind a handle, and the
// exception wall. Every extern "C" function runs its body inside guarded(), so that no C++ exception crosses
// the ABI, and takes its session through session_of() (a regression trainer through regression_of(), a DCGAN trainer
// through dcgan_of()), so that a bad handle is an error, not a crash.
#pragma once

#include "dcgan.h"
#include "handles.h"
#include "regression.h"
#include "trainer.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace phasebench {

// What a handle names: one trainer.
struct Session {
  Trainer trainer;
};

// This thread's last error message, which pb_last_error returns.
std::string& last_error();

// Runs f and turns every exception into PB_ERROR with its message.
template <class F>
int guarded(F&& f) noexcept {
  try {
    f();
    return PB_OK;
  } catch (const c10::Error& e) {
    last_error() = e.what_without_backtrace();
  } catch (const std::exception& e) {
    last_error() = e.what();
  } catch (...) {
    last_error() = "unknown C++ exception";
  }
  return PB_ERROR;
}

// sessions.cpp: a new session's handle; the session a handle names, held for one call; pb_destroy's removal. The
// same for the regression trainers and the DCGAN trainers, each in a table of their own (pb_regression_create,
// pb_regression_destroy, pb_dcgan_create, pb_dcgan_destroy).
pb_session add_session(std::shared_ptr<Session> session);
std::shared_ptr<Session> session_of(pb_session handle);
void remove_session(pb_session handle);
pb_regression add_regression(std::shared_ptr<RegressionTrainer> trainer);
std::shared_ptr<RegressionTrainer> regression_of(pb_regression handle);
void remove_regression(pb_regression handle);
pb_dcgan add_dcgan(std::shared_ptr<DcganTrainer> trainer);
std::shared_ptr<DcganTrainer> dcgan_of(pb_dcgan handle);
void remove_dcgan(pb_dcgan handle);

template <class T>
void require(T* pointer, const char* name) {
  if (!pointer) throw std::invalid_argument(std::string("null ") + name);
}

inline void copy_out(const std::string& text, char* buffer, int64_t capacity) {
  require(buffer, "buffer");
  if (static_cast<int64_t>(text.size()) + 1 > capacity)
    throw std::length_error("buffer of " + std::to_string(capacity) + " bytes, " +
                            std::to_string(text.size() + 1) + " needed");
  std::memcpy(buffer, text.c_str(), text.size() + 1);
}

}  // namespace phasebench
