// The little of MPI that ringbench uses outside the baseline: start-up, rank/size, one string
// broadcast for the bootstrap, and the library's version for the metadata. Without MPI in the
// build these throw an Error that says so.
#pragma once

#include <string>

namespace ringbench::mpi {

bool built_with_mpi();
void init();
void finalize();
[[noreturn]] void abort(int code);  // MPI_Abort on the world: ends every rank
int rank();
int size();
void broadcast(std::string& s, int root);
std::string library_version();  // "Open MPI v4.1.4, ..." (first line)

}  // namespace ringbench::mpi
