// sessions.cpp: the live objects behind the C ABI's handles, each kind in a table of its own (handles.h says what a
// handle is): the MNIST sessions, the regression trainers and the DCGAN trainers.
#include "c_api.h"

#include <atomic>

namespace phasebench {

namespace {

HandleTable<Session>& live_sessions() {
  static HandleTable<Session> table("session");
  return table;
}

HandleTable<RegressionTrainer>& live_regressions() {
  static HandleTable<RegressionTrainer> table("regression");
  return table;
}

HandleTable<DcganTrainer>& live_dcgans() {
  static HandleTable<DcganTrainer> table("dcgan");
  return table;
}

}  // namespace

uint32_t next_handle_generation() {
  static std::atomic<uint32_t> last{0};
  return ++last;
}

std::string& last_error() {
  thread_local std::string message;
  return message;
}

pb_session add_session(std::shared_ptr<Session> session) { return live_sessions().add(std::move(session)); }
std::shared_ptr<Session> session_of(pb_session handle) { return live_sessions().get(handle); }
void remove_session(pb_session handle) { live_sessions().remove(handle); }

pb_regression add_regression(std::shared_ptr<RegressionTrainer> trainer) {
  return live_regressions().add(std::move(trainer));
}
std::shared_ptr<RegressionTrainer> regression_of(pb_regression handle) { return live_regressions().get(handle); }
void remove_regression(pb_regression handle) { live_regressions().remove(handle); }

pb_dcgan add_dcgan(std::shared_ptr<DcganTrainer> trainer) { return live_dcgans().add(std::move(trainer)); }
std::shared_ptr<DcganTrainer> dcgan_of(pb_dcgan handle) { return live_dcgans().get(handle); }
void remove_dcgan(pb_dcgan handle) { live_dcgans().remove(handle); }

}  // namespace phasebench
