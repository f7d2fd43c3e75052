#include "runtime/dist/mesh.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "runtime/dist/error.h"

namespace weft::dist {
namespace {

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(Trim(s.substr(start, pos == std::string_view::npos ? pos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

bool IsBase(Axis a) { return a == Axis::kRing || a == Axis::kUlysses || a == Axis::kTp; }

void CheckOrder(const std::array<Axis, 3>& order) {
  bool seen[3] = {false, false, false};
  for (Axis a : order) {
    if (!IsBase(a) || seen[static_cast<int>(a)]) {
      throw DistError("mesh order must name each of ring, ulysses, tp exactly once");
    }
    seen[static_cast<int>(a)] = true;
  }
}

int BaseCoord(const Mesh::Coords& c, Axis a) {
  switch (a) {
    case Axis::kRing: return c.ring;
    case Axis::kUlysses: return c.ulysses;
    default: return c.tp;
  }
}

void SetBaseCoord(Mesh::Coords& c, Axis a, int v) {
  switch (a) {
    case Axis::kRing: c.ring = v; break;
    case Axis::kUlysses: c.ulysses = v; break;
    default: c.tp = v; break;
  }
}

}  // namespace

const char* AxisName(Axis axis) {
  switch (axis) {
    case Axis::kRing: return "ring";
    case Axis::kUlysses: return "ulysses";
    case Axis::kTp: return "tp";
    case Axis::kCp: return "cp";
    case Axis::kWorld: return "world";
  }
  return "?";
}

int MeshShape::Size(Axis axis) const {
  switch (axis) {
    case Axis::kRing: return ring;
    case Axis::kUlysses: return ulysses;
    case Axis::kTp: return tp;
    case Axis::kCp: return ring * ulysses;
    case Axis::kWorld: return WorldSize();
  }
  return 1;
}

std::string MeshShape::ToString() const {
  std::string s = "ring=" + std::to_string(ring) + ",ulysses=" + std::to_string(ulysses) +
                  ",tp=" + std::to_string(tp);
  const std::array<Axis, 3> kDefault = {Axis::kTp, Axis::kRing, Axis::kUlysses};
  if (order != kDefault) {
    s += std::string(",order=") + AxisName(order[0]) + ":" + AxisName(order[1]) + ":" +
         AxisName(order[2]);
  }
  return s;
}

std::array<Axis, 3> ParseMeshOrder(std::string_view spec) {
  char sep = spec.find(':') != std::string_view::npos ? ':' : ',';
  std::vector<std::string> names = Split(spec, sep);
  if (names.size() != 3) {
    throw DistError("mesh order `" + std::string(spec) +
                    "` must name the three axes ring, ulysses, tp, outermost first");
  }
  std::array<Axis, 3> order{};
  for (size_t i = 0; i < 3; ++i) {
    if (names[i] == "ring") order[i] = Axis::kRing;
    else if (names[i] == "ulysses") order[i] = Axis::kUlysses;
    else if (names[i] == "tp") order[i] = Axis::kTp;
    else throw DistError("unknown mesh axis `" + names[i] + "` in order `" + std::string(spec) +
                         "` (axes: ring, ulysses, tp)");
  }
  CheckOrder(order);
  return order;
}

MeshShape ParseMeshShape(std::string_view spec) {
  MeshShape shape;
  bool seen_ring = false, seen_ulysses = false, seen_tp = false, seen_order = false;
  if (Trim(spec).empty()) return shape;
  for (const std::string& item : Split(spec, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw DistError("mesh entry `" + item + "` in `" + std::string(spec) +
                      "` is not key=value (e.g. ring=2,ulysses=2,tp=1)");
    }
    std::string key = Trim(item.substr(0, eq));
    std::string value = Trim(item.substr(eq + 1));
    if (key == "order") {
      if (seen_order) throw DistError("mesh key `order` given twice in `" + std::string(spec) + "`");
      seen_order = true;
      shape.order = ParseMeshOrder(value);
      continue;
    }
    int* slot = nullptr;
    bool* seen = nullptr;
    if (key == "ring") { slot = &shape.ring; seen = &seen_ring; }
    else if (key == "ulysses") { slot = &shape.ulysses; seen = &seen_ulysses; }
    else if (key == "tp") { slot = &shape.tp; seen = &seen_tp; }
    else throw DistError("unknown mesh axis `" + key + "` in `" + std::string(spec) +
                         "` (axes: ring, ulysses, tp; and order)");
    if (*seen) throw DistError("mesh axis `" + key + "` given twice in `" + std::string(spec) + "`");
    *seen = true;
    bool ok = !value.empty() && value.size() <= 6 &&
              std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    int v = ok ? std::stoi(value) : 0;
    if (!ok || v < 1) {
      throw DistError("mesh axis `" + key + "` has degree `" + value +
                      "`; expected a positive integer");
    }
    *slot = v;
  }
  return shape;
}

Mesh::Mesh(const MeshShape& shape, int world_size) : shape_(shape), world_size_(world_size) {
  if (shape.ring < 1 || shape.ulysses < 1 || shape.tp < 1) {
    throw DistError("mesh " + shape.ToString() + ": every degree must be >= 1");
  }
  CheckOrder(shape.order);
  if (shape.WorldSize() != world_size) {
    throw DistError("mesh " + shape.ToString() + " has " + std::to_string(shape.WorldSize()) +
                    " ranks (ring*ulysses*tp) but the world has " + std::to_string(world_size));
  }
}

int Mesh::Stride(Axis base_axis) const {
  int stride = 1;
  for (int i = 2; i >= 0; --i) {
    if (shape_.order[i] == base_axis) return stride;
    stride *= shape_.Size(shape_.order[i]);
  }
  return stride;
}

Mesh::Coords Mesh::CoordsOf(int rank) const {
  Coords c;
  for (Axis a : {Axis::kRing, Axis::kUlysses, Axis::kTp}) {
    SetBaseCoord(c, a, (rank / Stride(a)) % shape_.Size(a));
  }
  return c;
}

int Mesh::RankOf(const Coords& coords) const {
  int rank = 0;
  for (Axis a : {Axis::kRing, Axis::kUlysses, Axis::kTp}) rank += BaseCoord(coords, a) * Stride(a);
  return rank;
}

int Mesh::AxisRank(int rank, Axis axis) const {
  Coords c = CoordsOf(rank);
  switch (axis) {
    case Axis::kCp: return c.ring * shape_.ulysses + c.ulysses;
    case Axis::kWorld: return rank;
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
    default:
      for (int i = 0; i < shape_.Size(axis); ++i) {
        Coords d = c;
        SetBaseCoord(d, axis, i);
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
