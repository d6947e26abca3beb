#include "server/oip/sigbus_guard.h"

#include <setjmp.h>
#include <signal.h>

#include <mutex>

namespace tensorops {
namespace {

// The innermost guard of this thread; null outside RunCatchingSigbus.
thread_local sigjmp_buf* t_jump = nullptr;
struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (t_jump != nullptr) siglongjmp(*t_jump, 1);
  // Not ours: hand it to whoever had SIGBUS before (a sanitizer, say), or
  // restore the default action and return, so the faulting access repeats and
  // kills the process as it would have without us.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL);
}

void InstallHandler() {
  struct sigaction action = {};
  action.sa_sigaction = &OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

bool RunCatchingSigbus(const std::function<void()>& fn) {
  static std::once_flag installed;
  std::call_once(installed, InstallHandler);
  sigjmp_buf jump;
  sigjmp_buf* const outer = t_jump;
  // savemask = 1: the handler runs with SIGBUS blocked; siglongjmp must
  // restore the mask or the next fault on this thread could not be caught.
  if (sigsetjmp(jump, 1) != 0) {
    t_jump = outer;
    return false;
  }
  t_jump = &jump;
  fn();
  t_jump = outer;
  return true;
}

}  // namespace tensorops
