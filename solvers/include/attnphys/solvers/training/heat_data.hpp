#pragma once
// Training data for the heat surrogate: pairs (u(t), u(t + Δt)) on a 1D, 2D or 3D grid, either produced on the fly
// by our own finite-difference reference solver (Crank–Nicolson 1D, Peaceman–Rachford ADI 2D, Douglas ADI 3D — one
// sample at a time in 3D, each on its own problem for a family —, run with steps fine enough that its time error
// is far below what a surrogate can reach) from random initial conditions, or read from an HDF5 file (data.file):
// one written by `attnphys heat dataset` or any file in PDEBench's layout.
//
// Sample i of a given seed (or row i of the file) is always the same field, whatever the batch or rank that makes
// it, so the train / validation / test split is a split of sample index ranges: [0, n_train),
// [n_train, n_train + n_val), then test. One sample gives several pairs when data.horizons lists several multiples
// of the base horizon, or when a file holds more snapshots than one pair needs (every start snapshot that has its
// target in the file is used); the pairs of one sample are consecutive rows, in the order (horizon, start time).
//
// Files (PDEBench layout, x before y before z):
//   data.field     the evolving channel, a dataset [sample, t, x, (y), (C)]: input at snapshot k, target at
//                  k + data.file_stride·τ. Default "data" (ours); PDEBench's are e.g. "tensor" [N, T, X],
//                  "density", "Vx" [N, T, X, Y].
//   data.channels  extra per-point inputs of the model (transformer kind), each a dataset that is time-dependent
//                  [sample, t, x, (y), (C)] (taken at the input snapshot) or static [sample, x, (y), (C)] (the same
//                  for every snapshot of a sample: "kappa", "source", "boundary", PDEBench's "nu").
//   A trailing component axis of size 1 may be present or absent; one of size C > 1 is indexed as "name[k]".
//   Coordinates: grid/x, grid/y, grid/t (ours) or x-coordinate, y-coordinate, t-coordinate (PDEBench; a
//   t-coordinate of T + 1 entries for T snapshots is accepted, its first T used). float32 or float64. The grid is
//   the file's (data.n = 0 takes it; a non-zero data.n must equal it); 2D grids may have nx ≠ ny.
//   Per-sample groups ('0000/data', PDEBench's 2D reaction-diffusion and shallow-water files) are not read.
//
// Physics. A file of `attnphys heat dataset` with constant κ, no sources or boundary data and one boundary type
// has "solver physics": its box length, κ, boundary type and base horizon Δt = data.file_stride·(t[1] − t[0])
// replace data.length, data.kappa, data.bc and data.horizon_ftcs_steps, and the evaluation's solver-based parts
// (rollout against the reference solver, ADI timing at equal accuracy, heat-kernel comparison, resolution transfer
// on generated fields) run with that physics. Any other file (a foreign one, or ours with variable κ, sources or
// boundary data) has its physics "from the file": the box comes from the coordinates, the boundary type from
// data.bc (whether the coordinate encoding is periodic), and the evaluation compares only with the file's own
// snapshots (test metrics; a rollout along the file's later snapshots when it holds several), noting what it
// skipped.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnphys/core/options.hpp"
#include "attnphys/core/views.hpp"
#include "attnphys/physics/heat/families.hpp"
#include "attnphys/physics/heat/heat_problem.hpp"
#include "attnphys/physics/heat/nonlinear.hpp"

namespace attnphys::training {

struct HeatFileInfo;

// The dataset of the solved field in the files of `attnphys heat dataset` (data.field's default).
inline constexpr const char* kSolvedField = "data";

// The channels a generated [family] draws per sample (data.channels names them; EnumNames below).
enum class FamilyChannel { Kappa, Source, Boundary };

// The 'bc' attribute of a file of `attnphys heat dataset`: one boundary type, or nullopt for "mixed" (sides of
// different types); any other text is refused as heat::parse_bc_type refuses it.
std::optional<heat::BcType> file_bc_type(const std::string& text);

}  // namespace attnphys::training

namespace attnphys {
template <>
struct EnumNames<training::FamilyChannel> {
  static constexpr EnumName<training::FamilyChannel> values[] = {{training::FamilyChannel::Kappa, "kappa"},
                                                                 {training::FamilyChannel::Source, "source"},
                                                                 {training::FamilyChannel::Boundary, "boundary"}};
};
}  // namespace attnphys

namespace attnphys::training {

struct HeatDataOptions {
  int dim = 2;
  long n = 0;                   // points per axis; 0: the file's grid (data.file), or 32 for generated pairs
  double length = 1.0;          // box [0, length)^dim
  double kappa = 1.0;
  heat::BcType bc = heat::BcType::Periodic;  // periodic | dirichlet | neumann (zero boundary data)
  double horizon_ftcs_steps = 25;  // model horizon Δt in units of the explicit stability limit h²/(2·dim·κ)
  double length_scale = 0.1;    // correlation length of the Gaussian random initial fields
  long n_train = 1024, n_val = 128, n_test = 128;
  long seed = 1;
  long reference_substeps = 16;  // ADI/CN steps per horizon for the reference targets
  std::vector<double> horizons{1.0};  // multiples of the base horizon Δt to train on (must contain 1)
  std::string file;             // HDF5 dataset to read pairs from (empty: generate)
  long file_stride = 1;         // snapshots between input and target: base Δt = file_stride·(t[1] − t[0])
  std::string field = kSolvedField;  // data.file: the evolving channel (see the header comment)
  std::vector<std::string> channels;  // data.file: extra input channels, "name" or "name[k]"
  // Generated pairs of a problem family ([family], the keys of `attnphys heat dataset`): sample i has its own κ(x),
  // source and boundary data (heat::HeatFamily::sample_problem of the data seed), the model sees them as the
  // channels "kappa", "source", "boundary" (data.channels: empty for all the family draws, or a subset), and the
  // reference solver, the rollout, the resolution transfer and the solver timing use each sample's own problem.
  // With data.file the file's samples are the data: resolve_heat_data sets the family to constant and says so in
  // family_note (the run's notes).
  heat::HeatFamilyOptions family;
  std::string family_note;      // not a key: set by resolve_heat_data
  // Nonlinear heat ([nonlinear], the keys of `attnphys heat dataset`): u_t = ∇·(κ(u)∇u) + f with κ(u) the law
  // (replacing data.kappa and any per-sample κ(x)); generated targets then come from the lagged-κ ADI/CN scheme
  // with Picard correction (fd::NonlinearHeatStepper, default options), one stepper per sample, and so does the
  // solver timing. The model must then be nonlinear in u (model.kind = transformer).
  heat::KappaLawOptions law;

  void declare(OptionSet& set, const std::string& section = "data");
  void validate() const;
  double h() const { return length / double(grid_nx()); }
  double horizon() const;       // Δt
  long points() const { return grid_nx() * grid_ny() * grid_nz(); }
  heat::HeatProblem problem(long n_points) const;  // the problem on an n_points-per-axis grid
  // Generated pairs that need a solver per sample: a per-sample [family] (samples differ in more than their
  // initial field) or a nonlinear κ(u) law.
  bool generated_family() const;
  // The family's channels, in the order "kappa", "source", "boundary" (those it draws per sample).
  std::vector<std::string> family_channels() const;
  // Sample `index`'s problem on an n_points-per-axis grid (the base problem when there is no per-sample family).
  heat::HeatProblem sample_problem(long n_points, long index) const;
  // "kappa=lognormal(contrast 10, length 0.15), source=none, boundary=zero" (generated family), the file's
  // 'family' attribute, or "constant" (generated pairs of one problem).
  std::string family_name() const;
  // Rows of HeatPairs per sample (after resolve_heat_data for a file); with steps > 1 (unrolled training) the rows
  // whose trajectory of `steps` horizons lies in the file.
  long pairs_per_sample(long steps = 1) const;

  // Not keys: set by resolve_heat_data.
  long file_nt = 0;             // snapshots per sample in data.file
  long nx = 0, ny = 0, nz = 0;  // the grid (0: n per axis); 1D: ny = 1; 1D/2D: nz = 1
  double length_y = 0;          // box length along y (0: length)
  double length_z = 0;          // box length along z (0: length)
  bool solver_physics = true;   // the reference solver reproduces the data (generated, or a file of our own)
  std::shared_ptr<const HeatFileInfo> info;  // data.file as inspected
  long grid_nx() const { return nx > 0 ? nx : n; }
  long grid_ny() const { return dim == 1 ? 1 : (ny > 0 ? ny : n); }
  long grid_nz() const { return dim < 3 ? 1 : (nz > 0 ? nz : n); }
  double box_y() const { return length_y > 0 ? length_y : length; }
  double box_z() const { return length_z > 0 ? length_z : length; }
  std::vector<double> box() const;  // box length per axis
};

// A channel named in data.field / data.channels: a dataset and, for a trailing axis of C > 1 components, the one
// to read ("velocity[1]").
struct ChannelSpec {
  std::string name;
  long component = -1;  // -1: none given
  std::string text() const;
};
// "name" or "name[k]" (k >= 0); anything else is refused with the expected syntax.
ChannelSpec parse_channel(const std::string& text);

// A channel as found in the file.
struct FileChannel {
  ChannelSpec spec;
  bool time_dependent = false;  // [sample, t, grid...] (else [sample, grid...])
  long components = 1;          // size of the trailing component axis (1 when absent)
  long component = 0;           // the one read
  std::vector<std::uint64_t> shape;
  long values_per_sample() const;  // (t ·) points · components
  bool solved_field() const;       // the solved field of our files (kSolvedField, one component)
};

// What an HDF5 dataset file holds, checked: layout, rank, grid, times, channels and physics.
struct HeatFileInfo {
  std::string path;
  bool attnphys = false;        // written by `attnphys heat dataset`
  bool solver_physics = false;  // see the header comment
  std::string physics_note;     // why the physics is taken from the file (empty with solver physics)
  std::string family;           // the file's 'family' attribute, if any
  int dim = 0;
  long n = 0, nx = 0, ny = 1, nz = 1, samples = 0, nt = 0;
  double h = 0, hy = 0, hz = 0, length = 0, length_y = 0, length_z = 0, kappa = 0;
  double dt = 0;                // snapshot spacing t[1] − t[0]
  bool has_time = false;        // the file has time coordinates (else dt = 1 in snapshot units)
  heat::BcType bc = heat::BcType::Periodic;  // the file's (solver physics) or data.bc
  std::vector<double> x, y, z;  // the coordinates of the grid points along each axis
  FileChannel field;
  std::vector<FileChannel> channels;
};
// Inspects options.file with options.field / channels (dim and bc: data.dim, data.bc where the file has none).
HeatFileInfo inspect_heat_file(const HeatDataOptions& options);

// The options with data.file's physics filled in (see the header comment); checks that the file fits the
// configuration (grid, sample counts, enough snapshots for file_stride·max(horizons)). Without data.file: the
// options with n = 32 when it was 0 (and data.field / data.channels refused: generated pairs have neither).
HeatDataOptions resolve_heat_data(const HeatDataOptions& options);
// The same without the check of data.n_train + n_val + n_test against the file's samples (callers that split the
// samples themselves: the Python API).
HeatDataOptions resolve_heat_file(const HeatDataOptions& options);

// A set of pairs on the device: inputs and targets [count, points] (row-major fields, x fastest, then y, then z), coordinates
// [points, dim] of the grid points (physical units); tau [count]: each pair's horizon in base horizons; extra
// [count, points, C]: the extra input channels (data.channels) of each pair's input, raw (empty when C = 0).
// Trajectories for unrolled training (train.unroll = K > 1): later [count, K − 1, points] holds row r's field
// after 2, ..., K of its horizons (targets is the one after 1); empty for one-step pairs. The extra channels are
// those of the input, held fixed along the trajectory.
struct HeatPairs {
  long count = 0, points = 0, n = 0;  // n: points along x
  long nx = 0, ny = 1, nz = 1;
  int dim = 0;
  View2<double> inputs, targets;
  View2<double> coords;
  View1<double> tau;
  View3<double> extra;
  View3<double> later;
  long channels() const { return long(extra.extent(2)); }
  long steps() const { return 1 + long(later.extent(1)); }  // targets per row (K)
};

// The pairs of samples [first, first + count) on an n-per-axis grid: from data.file when it is set (options
// resolved by resolve_heat_data; n_points must then be options.n), else generated (generate_heat_pairs).
// count·pairs_per_sample(steps) rows. steps = K > 1: trajectories of K horizons (HeatPairs::later).
HeatPairs make_heat_pairs(const HeatDataOptions& options, long first, long count, long n_points, long steps = 1);
// Generated pairs whatever data.file says (n = options.n for training; other values for resolution transfer: the
// same physical fields, sampled on the finer grid), one per sample and entry of data.horizons; steps > 1: the
// reference solver advances each target steps − 1 more times by the row's horizon for HeatPairs::later (the
// first `steps = 1` rows are bit for bit those of steps = 1).
HeatPairs generate_heat_pairs(const HeatDataOptions& options, long first, long count, long n_points, long steps = 1);
// Pairs read from data.file (options resolved by resolve_heat_data), in slabs of samples. steps = K > 1: every start
// snapshot k with its K targets k + j·file_stride·τ (j = 1..K) in the file, time-dependent channels refused (they
// would be held fixed along the trajectory); the file must hold K·file_stride·max(horizons) + 1 snapshots.
HeatPairs read_heat_pairs(const HeatDataOptions& options, long first, long count, long steps = 1);

// Random initial fields of samples [first, first + count) on an n-per-axis grid: [count, points].
View2<double> make_initial_fields(const HeatDataOptions& options, long first, long count, long n_points);

// Advances fields [count, points] by `horizons` model horizons with the reference solver, in place.
void advance_reference(const HeatDataOptions& options, const View2<double>& fields, long n_points, double horizons,
                       long substeps_per_horizon);
// The problems of samples sample_of[r] on an n-per-axis grid (HeatDataOptions::sample_problem).
std::vector<heat::HeatProblem> sample_problems(const HeatDataOptions& options, long n_points,
                                               const std::vector<long>& sample_of);
// The same for rows of different problems: row r is advanced with problems[r] (one stepper per row, whose set-up
// is part of the call). Without a generated family, every row has the base problem and one batched stepper is used.
void advance_reference(const HeatDataOptions& options, const View2<double>& fields, long n_points, double horizons,
                       long substeps_per_horizon, const std::vector<heat::HeatProblem>& problems);

// Grid point coordinates [points, dim] on an n-per-axis grid of the options' problem.
View2<double> grid_coordinates(const HeatDataOptions& options, long n_points);
// Coordinates of the training grid: the file's (data.file) or the generated grid of options.n.
View2<double> grid_coordinates(const HeatDataOptions& options);

// Per-axis periods of the harmonic coordinate encoding: the box length on a periodic box; twice it otherwise, so
// that the two ends of a non-periodic box are not encoded as neighbours.
std::vector<double> encoding_lengths(const HeatDataOptions& options);

}  // namespace attnphys::training
