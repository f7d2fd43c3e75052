#include "runtime/dist/mesh.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "runtime/dist/error.h"

namespace weft::dist {
namespace {

bool IsBase(Axis a) { return a == Axis::kRing || a == Axis::kUlysses || a == Axis::kTp || a == Axis::kCfg; }

void CheckOrder(const std::array<Axis, kNumBaseAxes>& order) {
  bool seen[kNumBaseAxes] = {false, false, false, false};
  for (Axis a : order) {
    if (!IsBase(a) || seen[static_cast<int>(a)]) {
      throw DistError("mesh order must name each of ring, ulysses, tp, cfg exactly once");
    }
    seen[static_cast<int>(a)] = true;
  }
}

int& BaseCoord(Mesh::Coords& c, Axis a) {
  switch (a) {
    case Axis::kRing: return c.ring;
    case Axis::kUlysses: return c.ulysses;
    case Axis::kCfg: return c.cfg;
    default: return c.tp;
  }
}

int BaseCoord(const Mesh::Coords& c, Axis a) {
  switch (a) {
    case Axis::kRing: return c.ring;
    case Axis::kUlysses: return c.ulysses;
    case Axis::kCfg: return c.cfg;
    default: return c.tp;
  }
}

}  // namespace

const char* AxisName(Axis axis) {
  switch (axis) {
    case Axis::kRing: return "ring";
    case Axis::kUlysses: return "ulysses";
    case Axis::kTp: return "tp";
    case Axis::kCfg: return "cfg";
    case Axis::kCp: return "cp";
    case Axis::kWorld: return "world";
    case Axis::kWeights: return "weights";
  }
  return "?";
}

int MeshShape::Size(Axis axis) const {
  switch (axis) {
    case Axis::kRing: return ring;
    case Axis::kUlysses: return ulysses;
    case Axis::kTp: return tp;
    case Axis::kCfg: return cfg;
    case Axis::kCp: return ring * ulysses;
    case Axis::kWorld: return WorldSize();
    case Axis::kWeights: return (weights_over_cp ? ring * ulysses : 1) * (weights_over_cfg ? cfg : 1);
  }
  return 1;
}

std::string MeshShape::ToString() const {
  std::string s = "ring=" + std::to_string(ring) + ",ulysses=" + std::to_string(ulysses) +
                  ",tp=" + std::to_string(tp);
  if (cfg > 1) s += ",cfg=" + std::to_string(cfg);
  if (order != kDefaultOrder) {
    // cfg outermost (where it is by default): the three axes, as meshes without cfg print.
    const size_t first = order[0] == Axis::kCfg ? 1 : 0;
    s += ",order=";
    for (size_t i = first; i < order.size(); ++i) s += std::string(i > first ? ":" : "") + AxisName(order[i]);
  }
  return s;
}

Mesh::Mesh(const MeshShape& shape, int world_size) : shape_(shape), world_size_(world_size) {
  if (shape.ring < 1 || shape.ulysses < 1 || shape.tp < 1 || shape.cfg < 1) {
    throw DistError("mesh " + shape.ToString() + ": every degree must be >= 1");
  }
  CheckOrder(shape.order);
  if (shape.WorldSize() != world_size) {
    throw DistError("mesh " + shape.ToString() + " has " + std::to_string(shape.WorldSize()) +
                    " ranks (ring*ulysses*tp*cfg) but the world has " + std::to_string(world_size));
  }
}

int Mesh::Stride(Axis base_axis) const {
  int stride = 1;
  for (int i = kNumBaseAxes - 1; i >= 0; --i) {
    if (shape_.order[i] == base_axis) return stride;
    stride *= shape_.Size(shape_.order[i]);
  }
  return stride;
}

Mesh::Coords Mesh::CoordsOf(int rank) const {
  Coords c;
  for (Axis a : kDefaultOrder) BaseCoord(c, a) = (rank / Stride(a)) % shape_.Size(a);
  return c;
}

int Mesh::RankOf(const Coords& coords) const {
  int rank = 0;
  for (Axis a : kDefaultOrder) rank += BaseCoord(coords, a) * Stride(a);
  return rank;
}

int Mesh::AxisRank(int rank, Axis axis) const {
  Coords c = CoordsOf(rank);
  switch (axis) {
    case Axis::kCp: return c.ring * shape_.ulysses + c.ulysses;
    case Axis::kWorld: return rank;
    case Axis::kWeights: {
      const int cp = shape_.weights_over_cp ? shape_.ring * shape_.ulysses : 1;
      return (shape_.weights_over_cfg ? c.cfg : 0) * cp + (shape_.weights_over_cp ? c.ring * shape_.ulysses + c.ulysses : 0);
    }
    default: return BaseCoord(c, axis);
  }
}

std::vector<int> Mesh::GroupRanks(int rank, Axis axis) const {
  std::vector<int> ranks;
  Coords c = CoordsOf(rank);
  switch (axis) {
    case Axis::kWorld:
      for (int r = 0; r < world_size_; ++r) ranks.push_back(r);
      break;
    case Axis::kCp:
      for (int i = 0; i < shape_.ring * shape_.ulysses; ++i) {
        Coords d = c;
        d.ring = i / shape_.ulysses;
        d.ulysses = i % shape_.ulysses;
        ranks.push_back(RankOf(d));
      }
      break;
    case Axis::kWeights: {
      const int cp = shape_.weights_over_cp ? shape_.ring * shape_.ulysses : 1;
      const int cfg = shape_.weights_over_cfg ? shape_.cfg : 1;
      for (int i = 0; i < cfg * cp; ++i) {
        Coords d = c;
        if (shape_.weights_over_cfg) d.cfg = i / cp;
        if (shape_.weights_over_cp) {
          d.ring = (i % cp) / shape_.ulysses;
          d.ulysses = (i % cp) % shape_.ulysses;
        }
        ranks.push_back(RankOf(d));
      }
      break;
    }
    default:
      for (int i = 0; i < shape_.Size(axis); ++i) {
        Coords d = c;
        BaseCoord(d, axis) = i;
        ranks.push_back(RankOf(d));
      }
      break;
  }
  return ranks;
}

std::vector<std::vector<int>> Mesh::Groups(Axis axis) const {
  std::vector<std::vector<int>> groups;
  std::vector<bool> placed(world_size_, false);
  for (int r = 0; r < world_size_; ++r) {
    if (placed[r]) continue;
    groups.push_back(GroupRanks(r, axis));
    for (int m : groups.back()) placed[m] = true;
  }
  return groups;
}

int Mesh::GroupIndex(int rank, Axis axis) const {
  std::vector<std::vector<int>> groups = Groups(axis);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (std::find(groups[i].begin(), groups[i].end(), rank) != groups[i].end()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace weft::dist
