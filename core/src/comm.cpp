#include "attnphys/core/comm.hpp"

#include <cstdlib>

#include "attnphys/core/error.hpp"
#include "attnphys/core/runtime.hpp"

#ifdef ATTNPHYS_HAVE_MPI
#include <mpi.h>
#endif

namespace attnphys {

bool mpi_launched() {
#ifdef ATTNPHYS_HAVE_MPI
  // Launchers announce themselves in the environment; a plain run stays single-process without touching MPI
  // (OpenMPI's singleton start is slow and noisy in containers). ATTNPHYS_MPI=1 forces MPI on.
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS", "MPI_LOCALNRANKS"})
    if (std::getenv(var)) return true;
  const char* force = std::getenv("ATTNPHYS_MPI");
  return force && std::string(force) == "1";
#else
  return false;
#endif
}

Comm Comm::world() {
  Comm c;
#ifdef ATTNPHYS_HAVE_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      MPI_Comm_rank(MPI_COMM_WORLD, &c.rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &c.size_);
      c.active_ = true;
    }
  }
#endif
  return c;
}

#ifdef ATTNPHYS_HAVE_MPI
namespace {
template <class T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <class T>
void allreduce(bool active, T* data, long n, MPI_Op op) {
  if (!active || n == 0) return;
  require(n < (1L << 31), "allreduce of ", n, " values exceeds MPI's int count; reduce in chunks");
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), mpi_type<T>(), op, MPI_COMM_WORLD);
}
}  // namespace
void Comm::allreduce_sum(double* d, long n) const { allreduce(active_, d, n, MPI_SUM); }
void Comm::allreduce_sum(float* d, long n) const { allreduce(active_, d, n, MPI_SUM); }
void Comm::allreduce_max(double* d, long n) const { allreduce(active_, d, n, MPI_MAX); }
void Comm::broadcast(double* d, long n, int root) const {
  if (active_ && n) MPI_Bcast(d, static_cast<int>(n), MPI_DOUBLE, root, MPI_COMM_WORLD);
}
void Comm::broadcast(float* d, long n, int root) const {
  if (active_ && n) MPI_Bcast(d, static_cast<int>(n), MPI_FLOAT, root, MPI_COMM_WORLD);
}
void Comm::barrier() const {
  if (active_) MPI_Barrier(MPI_COMM_WORLD);
}
void Comm::send(const float* d, long n, int dest, int tag) const {
  require(active_ && dest >= 0 && dest < size_ && dest != rank_, "Comm::send: no rank ", dest, " to send to (rank ",
          rank_, " of ", size_, ")");
  require(n < (1L << 31), "send of ", n, " values exceeds MPI's int count; send in chunks");
  if (n) MPI_Send(d, static_cast<int>(n), MPI_FLOAT, dest, tag, MPI_COMM_WORLD);
}
void Comm::recv(float* d, long n, int source, int tag) const {
  require(active_ && source >= 0 && source < size_ && source != rank_, "Comm::recv: no rank ", source,
          " to receive from (rank ", rank_, " of ", size_, ")");
  require(n < (1L << 31), "recv of ", n, " values exceeds MPI's int count; receive in chunks");
  if (n) MPI_Recv(d, static_cast<int>(n), MPI_FLOAT, source, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
#else
void Comm::allreduce_sum(double*, long) const {}
void Comm::allreduce_sum(float*, long) const {}
void Comm::allreduce_max(double*, long) const {}
void Comm::broadcast(double*, long, int) const {}
void Comm::broadcast(float*, long, int) const {}
void Comm::barrier() const {}
void Comm::send(const float*, long, int dest, int) const {
  fail("Comm::send: no rank ", dest, " to send to (built without MPI: one rank)");
}
void Comm::recv(float*, long, int source, int) const {
  fail("Comm::recv: no rank ", source, " to receive from (built without MPI: one rank)");
}
#endif

}  // namespace attnphys
