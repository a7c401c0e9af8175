#include "runner/job/mpi_util.h"

#include <cstdlib>

#include "base/errors.h"
#include "ringbench/config.h"

#if RINGBENCH_HAVE_MPI
#include <mpi.h>

namespace ringbench::mpi {

bool built_with_mpi() { return true; }

void init() {
  int inited = 0;
  MPI_Initialized(&inited);
  // SERIALIZED: training calls MPI from its communication thread, never from two at once.
  int provided = 0;
  if (!inited && MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed");
  // Errors come back as codes and become exceptions with context, instead of aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void finalize() {
  int inited = 0, done = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&done);
  if (inited && !done) MPI_Finalize();
}

void abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort should not return
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void broadcast(std::string& s, int root) {
  int len = static_cast<int>(s.size());
  MPI_Bcast(&len, 1, MPI_INT, root, MPI_COMM_WORLD);
  s.resize(static_cast<size_t>(len));
  MPI_Bcast(s.data(), len, MPI_CHAR, root, MPI_COMM_WORLD);
}

std::string library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, static_cast<size_t>(len));
  auto nl = v.find_first_of(",\n");
  return nl == std::string::npos ? v : v.substr(0, nl);
}

}  // namespace ringbench::mpi

#else

namespace ringbench::mpi {

namespace {
[[noreturn]] void missing() {
  throw Error("this ringbench was built without MPI (configure with -DRINGBENCH_WITH_MPI=ON "
              "after installing libopenmpi-dev)");
}
}  // namespace

bool built_with_mpi() { return false; }
void init() { missing(); }
void finalize() {}
void abort(int code) { std::_Exit(code); }
int rank() { missing(); }
int size() { missing(); }
void broadcast(std::string&, int) { missing(); }
std::string library_version() { return "none (built without MPI)"; }

}  // namespace ringbench::mpi
#endif
