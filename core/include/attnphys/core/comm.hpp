#pragma once
// The process group. With MPI (built in and launched under mpirun/srun) it wraps MPI_COMM_WORLD; otherwise it is a
// single rank and every collective is the identity. Collectives take host or device views: device data is staged
// through host memory unless the MPI is GPU-aware, which we do not assume.
#include <string>
#include <vector>

namespace attnphys {

class Comm {
 public:
  static Comm world();
  // A one-rank group (this process alone; every collective is the identity), e.g. for a 1-rank reference
  // computed inside an MPI run.
  static Comm self() { return Comm(); }
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }
  bool active() const { return active_; }  // true when MPI runs with more than nothing behind it

  // In-place sums over ranks of a contiguous host buffer.
  void allreduce_sum(double* data, long n) const;
  void allreduce_sum(float* data, long n) const;
  void allreduce_max(double* data, long n) const;
  double allreduce_sum(double x) const {
    allreduce_sum(&x, 1);
    return x;
  }
  void broadcast(double* data, long n, int root = 0) const;
  void broadcast(float* data, long n, int root = 0) const;
  void barrier() const;
  // Point-to-point transfer of a contiguous host buffer (blocking; tags match a send to its receive). Only
  // meaningful with more than one rank: on a one-rank group there is no peer and both fail.
  void send(const float* data, long n, int dest, int tag = 0) const;
  void recv(float* data, long n, int source, int tag = 0) const;

 private:
  int rank_ = 0;
  int size_ = 1;
  bool active_ = false;
};

// True when the process was started by an MPI launcher (mpirun, srun) and attnphys was built with MPI.
bool mpi_launched();

}  // namespace attnphys
