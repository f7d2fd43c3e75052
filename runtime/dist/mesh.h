#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace weft::dist {

// Mesh axes. kRing, kUlysses, kTp and kCfg are the four base axes (any may have size 1; kCfg
// holds guidance branches, issue 26). kCp is the flattened context-parallel group (ring x
// ulysses, at equal tp and cfg coordinates); kWorld is every rank. kWeights is the group a block's
// parameters are sliced over (MeshShape::weights_over_*: the cp group, the cfg axis, or both),
// with a process group of its own so that its gathers can run on a thread beside the others.
enum class Axis { kRing, kUlysses, kTp, kCfg, kCp, kWorld, kWeights };
inline constexpr int kNumAxes = 7;
inline constexpr std::array<Axis, kNumAxes> kAllAxes = {Axis::kRing, Axis::kUlysses, Axis::kTp,     Axis::kCfg,
                                                       Axis::kCp,   Axis::kWorld,   Axis::kWeights};
inline constexpr int kNumBaseAxes = 4;
inline constexpr std::array<Axis, kNumBaseAxes> kDefaultOrder = {Axis::kCfg, Axis::kTp, Axis::kRing, Axis::kUlysses};

// "ring", "ulysses", "tp", "cfg", "cp", "world", "weights".
const char* AxisName(Axis axis);

// The shape of a device mesh: a degree per base axis and the order in which the axes are
// laid over global ranks, outermost first. The innermost axis varies fastest: with the
// default order {cfg, tp, ring, ulysses}, Ulysses groups are contiguous ranks, e.g. ring=2 x
// ulysses=2 gives ulysses groups {0,1},{2,3} and ring groups {0,2},{1,3}; cfg=2 x ulysses=2
// gives cfg groups {0,2},{1,3}: each guidance branch runs on a contiguous half of the world.
// (Text is parsed by the compiler's one mesh parser, compiler/plan/mesh_spec.h.)
struct MeshShape {
  int ring = 1;
  int ulysses = 1;
  int tp = 1;
  int cfg = 1;
  std::array<Axis, kNumBaseAxes> order = kDefaultOrder;
  // What kWeights spans: the cp group and/or the cfg axis (neither: every rank alone).
  bool weights_over_cp = false;
  bool weights_over_cfg = false;

  // Degree of an axis: base axes as stored, kCp = ring * ulysses, kWorld = the product of all,
  // kWeights = the sizes of what it spans.
  int Size(Axis axis) const;
  int WorldSize() const { return ring * ulysses * tp * cfg; }
  // "ring=2,ulysses=2,tp=1", then ",cfg=2" when there is a cfg axis, then ",order=..." when
  // the order is not the default (the three axes when cfg is outermost, else all four).
  std::string ToString() const;
};

// Pure rank arithmetic of a mesh over `world_size` ranks. No processes, no torch.
class Mesh {
 public:
  // Throws DistError when a degree is < 1, the order is not a permutation of the four base
  // axes, or shape.WorldSize() != world_size (message shows both numbers).
  Mesh(const MeshShape& shape, int world_size);

  const MeshShape& shape() const { return shape_; }
  int world_size() const { return world_size_; }
  int Size(Axis axis) const { return shape_.Size(axis); }

  struct Coords {
    int ring = 0;
    int ulysses = 0;
    int tp = 0;
    int cfg = 0;
    bool operator==(const Coords& o) const {
      return ring == o.ring && ulysses == o.ulysses && tp == o.tp && cfg == o.cfg;
    }
  };
  // Coordinates of a global rank, and back. Precondition: 0 <= rank < world_size.
  Coords CoordsOf(int rank) const;
  int RankOf(const Coords& coords) const;

  // A rank's index within its group on `axis`: its coordinate on a base axis;
  // ring_coord * ulysses + ulysses_coord on kCp (ring-major, so CP rank = sequence chunk
  // index in USP); the global rank on kWorld; cfg_coord * (what it spans of cp) + cp rank on
  // kWeights.
  int AxisRank(int rank, Axis axis) const;
  // Global ranks of the group on `axis` that contains `rank`, ordered by AxisRank.
  std::vector<int> GroupRanks(int rank, Axis axis) const;
  // Every group on `axis`, each ordered by AxisRank, groups sorted by their first rank.
  // The groups partition the world.
  std::vector<std::vector<int>> Groups(Axis axis) const;
  // Index of `rank`'s group in Groups(axis).
  int GroupIndex(int rank, Axis axis) const;

 private:
  int Stride(Axis base_axis) const;
  MeshShape shape_;
  int world_size_;
};

}  // namespace weft::dist
