#pragma once
// ParameterBuffer: all parameters of a model in one allocation, with gradients and optimizer moments beside them.
//
// storage is [slot, n]: slot 0 parameters, 1 gradients, 2 first moment, 3 second moment. A named block is the same
// [offset, offset + size) range in every slot, so "the gradient of attn0.wq" is a view, zeroing all gradients is one
// kernel and an optimizer step is one pass over the flat arrays. Declare blocks, then allocate(); views handed out
// stay valid as long as the buffer lives (they do not own the memory).
#include <map>
#include <string>
#include <vector>

#include "attnphys/core/views.hpp"

namespace attnphys {

enum class Slot : int { Params = 0, Grads = 1, Moment1 = 2, Moment2 = 3 };
inline constexpr int kNumSlots = 4;

struct ParameterBlock {
  std::string name;
  std::vector<long> shape;
  long offset = 0;
  long size = 0;
  bool decay = true;  // whether AdamW's weight decay applies (off for biases and norms)
};

// A block resolved once by name, when a model declares its parameters: where it starts in the flat slots and its
// shape. Views made from a ParamRef do no name lookup, so forward and backward passes build no strings; it stores
// positions, not pointers, so it stays right for every buffer with the same layout (a copy, set_host, a reloaded
// checkpoint) and needs no re-binding when the storage changes.
struct ParamRef {
  long offset = -1;  // -1: not resolved (the model's declare() has not run)
  long size = 0;
  int rank = 0;
  long extent[3] = {0, 0, 0};
  bool resolved() const { return offset >= 0; }
};

template <class T>
class ParameterBuffer {
 public:
  ParameterBuffer() = default;

  // Declares a block; returns its offset. Names must be unique; allocation must not have happened yet.
  long add(const std::string& name, std::vector<long> shape, bool decay = true);
  // Allocates (zeroed) storage for every declared block.
  void allocate();
  bool allocated() const { return storage_.extent(0) == kNumSlots; }

  long size() const { return total_; }
  const std::vector<ParameterBlock>& blocks() const { return blocks_; }
  const ParameterBlock& block(const std::string& name) const;
  bool has(const std::string& name) const { return index_.count(name) != 0; }

  // The whole flat array of one slot.
  Unmanaged1<T> flat(Slot s = Slot::Params) const;
  Unmanaged1<T> params() const { return flat(Slot::Params); }
  Unmanaged1<T> grads() const { return flat(Slot::Grads); }
  // One block of one slot, as 1-, 2- or 3-d row-major view (the product of the extents must match the block).
  Unmanaged1<T> view1(const std::string& name, Slot s = Slot::Params) const;
  Unmanaged2<T> view2(const std::string& name, Slot s = Slot::Params) const;
  Unmanaged3<T> view3(const std::string& name, Slot s = Slot::Params) const;
  // The same views from a block resolved once (ref() at declare time); only integer checks, no name lookup.
  ParamRef ref(const std::string& name) const;
  Unmanaged1<T> view1(const ParamRef& r, Slot s = Slot::Params) const;
  Unmanaged2<T> view2(const ParamRef& r, Slot s = Slot::Params) const;
  Unmanaged3<T> view3(const ParamRef& r, Slot s = Slot::Params) const;
  // 1 where weight decay applies, 0 elsewhere.
  Unmanaged1<const T> decay_mask() const { return decay_mask_; }

  void zero(Slot s);
  void zero_grads() { zero(Slot::Grads); }

  // Copies between slots and host vectors (for I/O, tests and Python).
  std::vector<T> get_host(Slot s = Slot::Params) const;
  void set_host(const std::vector<T>& values, Slot s = Slot::Params);

 private:
  std::vector<ParameterBlock> blocks_;
  std::map<std::string, std::size_t> index_;
  long total_ = 0;
  View2<T> storage_;
  View1<T> decay_mask_;
  T* slot_ptr(Slot s) const;
  T* ref_ptr(const ParamRef& r, int rank, Slot s) const;
};

extern template class ParameterBuffer<float>;
extern template class ParameterBuffer<double>;

}  // namespace attnphys
