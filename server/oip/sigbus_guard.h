// Runs code that touches a caller's shared memory, surviving a SIGBUS.
//
// A co-located client may shrink (ftruncate) a POSIX shared-memory object
// after registering it; the kernel then unmaps the pages past the new end from
// every mapping, and the next access raises SIGBUS, which by default kills the
// whole server. fstat before each use catches the common case with a clear
// error; this guard closes the race between that check and the copy.
//
// RunCatchingSigbus installs (once) a SIGBUS handler that, when the faulting
// thread is inside RunCatchingSigbus, jumps back out of `fn` with
// siglongjmp; a SIGBUS anywhere else goes to the previous handler (or the
// default action), so real bugs still crash. `fn` must only copy memory (a
// kernel's run_range): the jump skips destructors, so it must not allocate,
// lock or own resources while it may fault.
//
// Thread-safety: safe from any number of threads at once (the state is
// per thread).
#ifndef TENSOROPS_SERVER_OIP_SIGBUS_GUARD_H_
#define TENSOROPS_SERVER_OIP_SIGBUS_GUARD_H_

#include <functional>

namespace tensorops {

// Runs fn(); false if it was cut short by a SIGBUS (what it wrote so far stays).
bool RunCatchingSigbus(const std::function<void()>& fn);

}  // namespace tensorops

#endif  // TENSOROPS_SERVER_OIP_SIGBUS_GUARD_H_
