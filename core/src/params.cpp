#include "attnphys/core/params.hpp"

namespace attnphys {

template <class T>
long ParameterBuffer<T>::add(const std::string& name, std::vector<long> shape, bool decay) {
  require(!allocated(), "ParameterBuffer::add('", name, "') after allocate(): declare every block first");
  require(!name.empty(), "ParameterBuffer::add: a block needs a name");
  require(!index_.count(name), "ParameterBuffer::add: block '", name, "' declared twice");
  long size = 1;
  for (long e : shape) {
    require(e >= 0, "ParameterBuffer::add('", name, "'): negative extent ", e);
    size *= e;
  }
  ParameterBlock b{name, std::move(shape), total_, size, decay};
  index_[name] = blocks_.size();
  blocks_.push_back(b);
  total_ += size;
  return b.offset;
}

template <class T>
void ParameterBuffer<T>::allocate() {
  require(!allocated(), "ParameterBuffer::allocate called twice");
  storage_ = View2<T>("attnphys::parameters", kNumSlots, total_);
  decay_mask_ = View1<T>("attnphys::decay_mask", total_);
  auto mask = Kokkos::create_mirror_view(decay_mask_);
  for (const auto& b : blocks_)
    for (long i = 0; i < b.size; ++i) mask(b.offset + i) = b.decay ? T(1) : T(0);
  Kokkos::deep_copy(decay_mask_, mask);
}

template <class T>
const ParameterBlock& ParameterBuffer<T>::block(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    std::string known;
    for (const auto& b : blocks_) known += (known.empty() ? "" : ", ") + b.name;
    fail("no parameter block named '", name, "'; blocks are: ", known);
  }
  return blocks_[it->second];
}

template <class T>
T* ParameterBuffer<T>::slot_ptr(Slot s) const {
  require(allocated(), "ParameterBuffer used before allocate()");
  return storage_.data() + static_cast<long>(s) * total_;
}

template <class T>
Unmanaged1<T> ParameterBuffer<T>::flat(Slot s) const {
  return Unmanaged1<T>(slot_ptr(s), total_);
}

template <class T>
Unmanaged1<T> ParameterBuffer<T>::view1(const std::string& name, Slot s) const {
  const auto& b = block(name);
  return Unmanaged1<T>(slot_ptr(s) + b.offset, b.size);
}

template <class T>
Unmanaged2<T> ParameterBuffer<T>::view2(const std::string& name, Slot s) const {
  const auto& b = block(name);
  require(b.shape.size() == 2, "parameter block '", name, "' has rank ", b.shape.size(), ", not 2");
  return Unmanaged2<T>(slot_ptr(s) + b.offset, b.shape[0], b.shape[1]);
}

template <class T>
Unmanaged3<T> ParameterBuffer<T>::view3(const std::string& name, Slot s) const {
  const auto& b = block(name);
  require(b.shape.size() == 3, "parameter block '", name, "' has rank ", b.shape.size(), ", not 3");
  return Unmanaged3<T>(slot_ptr(s) + b.offset, b.shape[0], b.shape[1], b.shape[2]);
}

template <class T>
ParamRef ParameterBuffer<T>::ref(const std::string& name) const {
  const auto& b = block(name);
  require(b.shape.size() <= 3, "parameter block '", name, "' has rank ", b.shape.size(), "; a ParamRef holds up to 3");
  ParamRef r;
  r.offset = b.offset;
  r.size = b.size;
  r.rank = int(b.shape.size());
  for (int i = 0; i < r.rank; ++i) r.extent[i] = b.shape[i];
  return r;
}

template <class T>
T* ParameterBuffer<T>::ref_ptr(const ParamRef& r, int rank, Slot s) const {
  require(r.resolved(), "parameter block used before the model declared its parameters (call declare() first)");
  require(r.offset + r.size <= total_, "parameter block [", r.offset, ", ", r.offset + r.size,
          ") lies outside this buffer of ", total_, " values: the buffer was not declared by this model");
  require(rank == 1 || r.rank == rank, "parameter block at offset ", r.offset, " has rank ", r.rank, ", not ", rank);
  return slot_ptr(s) + r.offset;
}

template <class T>
Unmanaged1<T> ParameterBuffer<T>::view1(const ParamRef& r, Slot s) const {
  return Unmanaged1<T>(ref_ptr(r, 1, s), r.size);
}

template <class T>
Unmanaged2<T> ParameterBuffer<T>::view2(const ParamRef& r, Slot s) const {
  return Unmanaged2<T>(ref_ptr(r, 2, s), r.extent[0], r.extent[1]);
}

template <class T>
Unmanaged3<T> ParameterBuffer<T>::view3(const ParamRef& r, Slot s) const {
  return Unmanaged3<T>(ref_ptr(r, 3, s), r.extent[0], r.extent[1], r.extent[2]);
}

template <class T>
void ParameterBuffer<T>::zero(Slot s) {
  Kokkos::deep_copy(flat(s), T(0));
}

template <class T>
std::vector<T> ParameterBuffer<T>::get_host(Slot s) const {
  std::vector<T> out(total_);
  Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(out.data(), total_);
  Kokkos::deep_copy(h, flat(s));
  return out;
}

template <class T>
void ParameterBuffer<T>::set_host(const std::vector<T>& values, Slot s) {
  require(long(values.size()) == total_, "ParameterBuffer::set_host: got ", values.size(), " values, the model has ",
          total_, " parameters");
  Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> h(values.data(), total_);
  Kokkos::deep_copy(flat(s), h);
}

template class ParameterBuffer<float>;
template class ParameterBuffer<double>;

}  // namespace attnphys
